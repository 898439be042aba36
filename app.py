"""Attention Lens: look inside multi-head attention. `streamlit run app.py`

This file wires the shared sidebar and the pages together; it computes nothing itself.
"""

import streamlit as st

from ui import sidebar, state
from ui.state import t

st.set_page_config(page_title="Attention Lens", page_icon="🔍", layout="wide")
state.init()

PAGES = [
    st.Page("pages/explore.py", title=t("nav.explore"), icon="🔍", url_path="explore", default=True),
    st.Page("pages/heads.py", title=t("nav.heads"), icon="🧩", url_path="heads"),
    st.Page("pages/corpus.py", title=t("nav.corpus"), icon="📚", url_path="corpus"),
]
page = st.navigation(PAGES)
sidebar.render()
page.run()
