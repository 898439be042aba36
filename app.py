"""Attention Lens: look inside multi-head attention. `streamlit run app.py`

This file wires the shared sidebar and the pages together; it computes nothing itself.
"""

# Imported once, here, before any session's page can draw (issue 41): plotly looks pandas and PIL.Image up in
# sys.modules without importing them, so a first import still running in another session handed it a half-made
# module ("partially initialized module 'pandas' has no attribute 'Series'"). A session reaching these lines while
# another imports them waits for the import to finish. tests/app/test_sessions_at_once.py starts 8 sessions at once.
import pandas  # noqa: F401
import PIL.Image  # noqa: F401
import streamlit as st

from ui import debug, guard, preload, presentation, runtime, sidebar, state
from ui.state import t

preload.preload()  # every page's imports, by the first session alone: see ui/preload.py

st.set_page_config(page_title="Attention Lens", page_icon="🔍", layout="wide")
debug.script_run()
runtime.settle_once("the app's imports")  # see ui/runtime.py: the collection after each run skips them
state.init()

PAGES = [
    st.Page("app_pages/explore.py", title=t("nav.explore"), icon=":material/search:", url_path="explore", default=True),
    st.Page("app_pages/compare.py", title=t("nav.compare"), icon=":material/compare:", url_path="compare"),
    st.Page("app_pages/heads.py", title=t("nav.heads"), icon=":material/hub:", url_path="heads"),
    st.Page("app_pages/corpus.py", title=t("nav.corpus"), icon=":material/library_books:", url_path="corpus"),
    st.Page("app_pages/masks.py", title=t("nav.masks"), icon=":material/visibility_off:", url_path="masks"),
    st.Page(
        "app_pages/inside_head.py", title=t("nav.inside_head"), icon=":material/calculate:", url_path="inside_head"
    ),
    st.Page("app_pages/memory.py", title=t("nav.memory"), icon=":material/memory:", url_path="memory"),
    st.Page("app_pages/generation.py", title=t("nav.generation"), icon=":material/edit_note:", url_path="generation"),
    st.Page(
        "app_pages/troubleshooting.py",
        title=t("nav.troubleshooting"),
        icon=":material/build:",
        url_path="troubleshooting",
    ),
    st.Page("app_pages/train.py", title=t("nav.train"), icon=":material/model_training:", url_path="train"),
    st.Page("app_pages/long_lab.py", title=t("nav.long_lab"), icon=":material/straighten:", url_path="long_lab"),
]
# Presentation mode moves the page list from the (hidden) sidebar to the top bar.
page = st.navigation(PAGES, position="top" if presentation.active() else "sidebar")
guard.run(
    lambda: sidebar.render(page.url_path), "the sidebar"
)  # a visitor's input never ends in a traceback (ui/guard.py)
presentation.apply()
guard.run(page.run, page.url_path or "explore")
debug.script_done()
