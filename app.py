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
    st.Page("pages/masks.py", title=t("nav.masks"), icon=":material/visibility_off:", url_path="masks"),
]
page = st.navigation(PAGES)
sidebar.render()
page.run()
