"""The sidebar's selections: in st.session_state, mirrored in the URL's query parameters so a link reopens a view.

Only UI selections live here (strings and ints), never tensors. Each key is set only if missing, first from the
URL, then from DEFAULTS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlsplit, urlunsplit

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from viz.select import PARTS

from .i18n import DEFAULT_LANGUAGE, LANGUAGES, translate

EXAMPLES: dict[str, tuple[str, str]] = {
    # key → (text, text_b); labels are in the locale files under sidebar.example.<key>
    "coreference": ("The animal didn't cross the street because it was too tired.", ""),
    "syntax": ("The keys to the cabinet that the old man built are on the table.", ""),
    "pair": ("The cat sat on the mat.", "It was warm there, so it fell asleep."),
    "chinese": ("小明把书递给小红，因为她明天要考试。", ""),
}


@dataclass(frozen=True)
class UrlKey:
    """One shareable selection: its default, the values a link may set (None: any of the default's type), its page."""

    default: Any
    allowed: tuple | None = None
    page: str | None = None  # None: the sidebar's, read on every page; else only the named page reads and writes it


# The one registry of URL keys: the sidebar's selections and each page's own. A link reopens exactly these.
URL: dict[str, UrlKey] = {
    "model": UrlKey("minilm"),
    "device": UrlKey("auto"),
    "dtype": UrlKey("fp32"),
    "text": UrlKey(EXAMPLES["coreference"][0]),
    "text_b": UrlKey(""),
    "mask": UrlKey("bidirectional"),
    "lang": UrlKey(DEFAULT_LANGUAGE, tuple(LANGUAGES)),
    "layer": UrlKey(0),
    "head": UrlKey(0),
    "query": UrlKey(0),  # query position in "Inside a head"
    "step": UrlKey(0),  # the step shown in presentation mode
    "present": UrlKey(False),  # presentation mode: sidebar hidden, large fonts, one step per screen
    "view": UrlKey("overview", ("overview", "layer", "head", "aggregate"), page="explore"),
    "part": UrlKey("all", PARTS, page="explore"),
    "weighted": UrlKey(False, page="explore"),  # the value-weighted lens (ui/lenses.py)
    "words": UrlKey(False, page="explore"),  # the words lens
    # Compare: run B is the sidebar's run A with these changed ("" = the same as A).
    "against_model": UrlKey("", page="compare"),
    "against_text": UrlKey("", page="compare"),
    "against_mask": UrlKey("", page="compare"),
    "compare_weighted": UrlKey(False, page="compare"),  # compare value-weighted maps instead of raw attention
}
DEFAULTS: dict[str, Any] = {k: u.default for k, u in URL.items()}
# Long texts stay out of the URL: a link holds their first characters (the sidebar says so).
URL_TEXT_CHARS = 2000


def _parse(raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        if len(raw.strip()) > 9:  # no layer, head or position has ten digits; int() of 5,000 digits would raise
            return default
        try:
            return max(0, int(raw))
        except ValueError:
            return default
    return raw


def _keys(page: str | None) -> list[str]:
    return [k for k, u in URL.items() if u.page == page]


def init(page: str | None = None) -> None:
    """Fill missing selections (the sidebar's, or one page's) from the URL, then defaults; keep widget values.

    Call with no page once per run before the sidebar, and with a page's name before that page draws its widgets.
    """
    params = st.query_params
    for key in _keys(page):
        spec = URL[key]
        if key not in st.session_state:
            raw = params.get(key)
            st.session_state[key] = spec.default if raw is None else _parse(raw, spec.default)
        # Re-saving a widget-bound key stops Streamlit from dropping it when its page is not shown.
        st.session_state[key] = st.session_state[key]
        if spec.allowed is not None and st.session_state[key] not in spec.allowed:
            st.session_state[key] = spec.default


def sync_url(page: str | None = None, hidden: tuple[str, ...] = ()) -> None:
    """Write the selections (the sidebar's, or one page's) that differ from their defaults into the URL, drop the rest.

    `hidden` names keys that do not apply to the current view: they leave the URL as if they were at their default.
    """
    keys = _keys(page)
    wanted = {
        k: str(st.session_state[k])[: URL_TEXT_CHARS if k in ("text", "text_b", "against_text") else None]
        for k in keys
        if k not in hidden and st.session_state.get(k, DEFAULTS[k]) != DEFAULTS[k]
    }
    current = {k: st.query_params.get(k) for k in keys if k in st.query_params}
    if wanted != current:
        for k in keys:
            if k in st.query_params and k not in wanted:
                del st.query_params[k]
        st.query_params.update(wanted)


def share_url() -> str:
    """Return the link that reopens this view: the app's address with the current query parameters."""
    params = {k: st.query_params.get(k) for k in st.query_params}
    try:
        base = st.context.url or ""
    except Exception:  # noqa: BLE001 - no browser context (AppTest, bare mode)
        base = ""
    query = urlencode(params)
    if not base:
        return f"?{query}" if query else "?"
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, ""))


class Selection(NamedTuple):
    """What a result depends on: the sidebar's model, device, dtype, text, pair text and mask.

    The one key the caches take (a tuple of strings: Streamlit hashes it in microseconds, never the arrays).
    """

    model: str
    device: str
    dtype: str
    text: str
    text_b: str
    mask: str

    def model_only(self) -> Selection:
        """Return the selection with no text and no mask: the key of what depends on the model alone."""
        return self._replace(text="", text_b="", mask="")

    def without_text(self) -> Selection:
        """Return the selection with no text (model and mask): the key of analyses over other texts."""
        return self._replace(text="", text_b="")


def selection() -> Selection:
    """Return the current sidebar selection (texts stripped)."""
    return Selection(
        get("model"),
        get("device"),
        get("dtype"),
        (get("text") or "").strip(),
        (get("text_b") or "").strip(),
        get("mask"),
    )


def get(key: str) -> Any:
    return st.session_state.get(key, DEFAULTS.get(key))


def t(key: str, **values: Any) -> str:
    """Return the string for key in the current language.

    Outside a script run (AppTest formats a selectbox's options after the run, through its format_func) there is
    no session to read: the language of the last run in this process is used, not silently English.
    """
    global _last_lang
    if get_script_run_ctx() is not None:
        _last_lang = st.session_state.get("lang", DEFAULT_LANGUAGE)
    return translate(_last_lang, key, **values)


_last_lang = DEFAULT_LANGUAGE
