"""Presentation mode: for a projector. The sidebar is hidden, fonts are large, pages are in a bar at the top,
and "Inside a head" shows one step per screen with previous/next buttons.

Switched by the sidebar toggle or the URL (`?present=1`); left through the "Exit" button it puts on every page.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from . import state
from .i18n import LANGUAGES
from .state import t

FIGURE_FONT = {False: 12, True: 19}  # plotly text size, normal / presentation

# Streamlit sizes its text in rem: a larger root font scales text, widgets and spacing together. The page list
# moves to the header (st.navigation position="top"); the language and exit buttons float at its right end.
CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stMainMenu"], [data-testid="stAppDeployButton"], [data-testid="stDecoration"] { display: none !important; }
html { font-size: 20px; }
[data-testid="stMainBlockContainer"] { max-width: 100%; padding: 3.7rem 1.2rem 0.5rem 1.2rem; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.55rem; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
[data-testid="stMarkdownContainer"] td, [data-testid="stMarkdownContainer"] th { font-size: 1.15rem; line-height: 1.4; }
[data-testid="stCaptionContainer"] p { font-size: 0.95rem; }
h1 { font-size: 2rem !important; padding-top: 0 !important; }
h2, h3 { font-size: 1.5rem !important; padding: 0.2rem 0 !important; }
[data-testid="stCode"] pre, [data-testid="stCode"] code { font-size: 0.85rem !important; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p { font-size: 2rem !important; }
[data-testid="stNumberInput"] input, [data-testid="stTextInput"] input, [data-baseweb="select"] div { font-size: 1.1rem !important; }
.st-key-present_bar { position: fixed; top: 0.55rem; right: 1rem; z-index: 1000001; width: auto !important; }
</style>
"""


def active() -> bool:
    """Return whether presentation mode is on."""
    return bool(state.get("present"))


def figure_font() -> int:
    """Return the font size figures should use now."""
    return FIGURE_FONT[active()]


def sidebar_toggle() -> None:
    """Draw the sidebar's presentation toggle (bound to the URL-synced `present`)."""
    st.toggle(t("present.toggle"), key="present", help=t("present.toggle_help"))


def _exit() -> None:
    st.session_state["present"] = False


def _switch_language() -> None:
    langs = list(LANGUAGES)
    st.session_state["lang"] = langs[(langs.index(state.get("lang")) + 1) % len(langs)]


def apply() -> None:
    """In presentation mode: large fonts, no sidebar, and a language switch and an exit button on every page."""
    if not active():
        return
    st.markdown(CSS, unsafe_allow_html=True)
    langs = list(LANGUAGES)
    other = langs[(langs.index(state.get("lang")) + 1) % len(langs)]
    with st.container(key="present_bar", horizontal=True, width="content"):
        st.button(LANGUAGES[other], key="present_lang", on_click=_switch_language, help=t("present.language_help"))
        st.button(t("present.exit"), key="present_exit", on_click=_exit, icon=":material/close:")


def _go(delta: int, n: int) -> None:
    st.session_state["step"] = min(max(int(state.get("step")) + delta, 0), n - 1)


def current_step(n: int) -> int:
    """Return the step to show, 0-based, clamped to n steps (the text may have changed since the URL was made)."""
    step = min(max(int(state.get("step")), 0), n - 1)
    st.session_state["step"] = step
    return step


def step_controls(
    titles: list[str], where: str = "top", settings: str = "", note: tuple[str, str] | None = None
) -> tuple[int, Any]:
    """Draw ◀ · step k of n: title · settings · ▶ (top) or ◀ previous · progress · next ▶ (bottom).

    note: (a one-line caption under the bottom progress bar, the longer text its tooltip shows).
    Return the step to show and, for the top row, a popover labelled `settings` for the page's widgets.
    Keys: ←/→ on the top buttons, PageUp/PageDown (what presentation clickers send) on the bottom ones.
    """
    n = len(titles)
    step = current_step(n)
    popover = None
    if where == "top":
        prev_col, title_col, set_col, next_col = st.columns([0.7, 8.4, 2.6, 0.7], vertical_alignment="center")
        title_col.markdown(f"### {t('present.step_of', k=step + 1, n=n)} · {titles[step]}")
        popover = set_col.popover(settings or t("present.settings"), icon=":material/tune:", width="stretch")
        labels, keys = ("", ""), ("Left", "Right")
    else:
        prev_col, title_col, next_col = st.columns([2.8, 7, 2.8], vertical_alignment="center")
        title_col.progress((step + 1) / n)
        if note:
            title_col.caption(note[0], help=note[1])
        labels, keys = (t("present.prev"), t("present.next")), ("PageUp", "PageDown")
    prev_col.button(
        labels[0],
        key=f"step_prev_{where}",
        on_click=_go,
        args=(-1, n),
        disabled=step == 0,
        icon=":material/arrow_back:",
        width="stretch",
        shortcut=keys[0],
        help=t("present.prev"),
    )
    next_col.button(
        labels[1],
        key=f"step_next_{where}",
        on_click=_go,
        args=(1, n),
        disabled=step == n - 1,
        icon=":material/arrow_forward:",
        width="stretch",
        shortcut=keys[1],
        help=t("present.next"),
    )
    return step, popover
