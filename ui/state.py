"""The sidebar's selections: in st.session_state, mirrored in the URL's query parameters so a link reopens a view.

Only UI selections live here (strings and ints), never tensors. Each key is set only if missing, first from the
URL, then from DEFAULTS.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from .i18n import DEFAULT_LANGUAGE, LANGUAGES

EXAMPLES: dict[str, tuple[str, str]] = {
    # key → (text, text_b); labels are in the locale files under sidebar.example.<key>
    "coreference": ("The animal didn't cross the street because it was too tired.", ""),
    "syntax": ("The keys to the cabinet that the old man built are on the table.", ""),
    "pair": ("The cat sat on the mat.", "It was warm there, so it fell asleep."),
    "chinese": ("小明把书递给小红，因为她明天要考试。", ""),
}

DEFAULTS: dict[str, Any] = {
    "model": "minilm",
    "device": "auto",
    "dtype": "fp32",
    "text": EXAMPLES["coreference"][0],
    "text_b": "",
    "mask": "bidirectional",
    "lang": DEFAULT_LANGUAGE,
    "layer": 0,
    "head": 0,
    "query": 0,  # query position in "Inside a head"
    "step": 0,  # the step shown in presentation mode
    "present": False,  # presentation mode: sidebar hidden, large fonts, one step per screen
}
URL_KEYS = tuple(DEFAULTS)  # every selection is shareable


def _parse(raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        try:
            return max(0, int(raw))
        except ValueError:
            return default
    return raw


def init() -> None:
    """Fill missing selections from the URL, then defaults; keep page widgets' values across page switches."""
    params = st.query_params
    for key, default in DEFAULTS.items():
        if key not in st.session_state:
            raw = params.get(key)
            st.session_state[key] = default if raw is None else _parse(raw, default)
        else:
            # Re-saving a widget-bound key stops Streamlit from dropping it when its page is not shown.
            st.session_state[key] = st.session_state[key]
    if st.session_state["lang"] not in LANGUAGES:
        st.session_state["lang"] = DEFAULT_LANGUAGE


def sync_url() -> None:
    """Write the selections that differ from the defaults into the URL (and drop the rest)."""
    wanted = {k: str(st.session_state[k]) for k in URL_KEYS if st.session_state.get(k, DEFAULTS[k]) != DEFAULTS[k]}
    current = {k: st.query_params.get(k) for k in URL_KEYS if k in st.query_params}
    if wanted != current:
        for k in URL_KEYS:
            if k in st.query_params and k not in wanted:
                del st.query_params[k]
        st.query_params.update(wanted)


def get(key: str) -> Any:
    return st.session_state.get(key, DEFAULTS.get(key))


def t(key: str, **values: Any) -> str:
    """Return the string for key in the current language.

    Outside a script run (AppTest formats a selectbox's options after the run, through its format_func) there is
    no session to read: the language of the last run in this process is used, not silently English.
    """
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    from .i18n import translate

    global _last_lang
    if get_script_run_ctx() is not None:
        _last_lang = st.session_state.get("lang", DEFAULT_LANGUAGE)
    return translate(_last_lang, key, **values)


_last_lang = DEFAULT_LANGUAGE
