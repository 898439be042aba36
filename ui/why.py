"""Explore → One head: the "why here" panel — one cell's score split into exact parts (models.analysis.explain,
the same function as `python -m models explain`), drawn by viz.why.

The query and the key are picked by a click on a cell of the head's map (app_pages/explore.py sets QUERY_KEY and
KEY_KEY from the clicked point) or with the selectors below it, the keyboard path (the last token, and the key it
weighs most, until a person picks); the result is cached per selection, layer, head and cell in ui.results.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

from models import AttnVizError
from models.analysis.explain import Explanation, explain
from viz.export import figure_config
from viz.why import frequency_bars, pair_bars

from . import cache, debug, results
from .safe import md
from .state import Selection, selection, t

SENTENCES = 5  # top component pairs written out in words
QUERY_KEY, KEY_KEY = "why_query", "why_key"  # session state of the picked cell (a click on the map sets both)


@debug.counted("why", results.cached)
def explanation(sel: Selection, layer: int, head: int, query: int, key: int) -> Explanation:
    """Return the explanation of one cell of the selection's text (the page's model, text, pair and mask)."""
    enc = cache.model(sel)
    text_b = sel.text_b or None if enc.capabilities.pairs else None
    return explain(enc, sel.text, layer, head, query, key, text_b=text_b, mask=sel.mask)


def _chart(fig: Any, key: str, filename: str) -> None:
    """Show a figure with the page's image-download format, as every Explore figure."""
    fmt = st.session_state.get("img_format", "png")
    st.plotly_chart(fig, key=key, width="stretch", config=figure_config(fmt, filename))


def _words() -> dict[str, str]:
    return {k: t(f"why.axis.{k}") for k in ("pair", "wavelength", "contribution", "share", "query_side", "key_side")}


def _pick(where: Any, label: str, key: str, tokens: list[str], default: int) -> int:
    n = len(tokens)
    if not isinstance(st.session_state.get(key), int) or not 0 <= st.session_state[key] < n:
        st.session_state[key] = default
    return int(where.selectbox(label, list(range(n)), key=key, format_func=lambda i: f"{i}: {tokens[i]}"))


def panel(
    tokens: list[str],
    weights: np.ndarray,
    layer: int,
    head: int,
    query: int | None = None,
    title: str | None = None,
    clickable: bool = False,
) -> list:
    """Draw the panel for one head; weights (q_pos, k_pos) is the map shown (for the default key). Return figures.

    query: fixed by the caller (Inside a head's query), else picked here; title: the panel's heading; clickable: the
    map above picks the cell on a click (the panel says so).
    """
    if title is None:
        st.subheader(t("why.title"))
    else:  # inside another page's sequence (Inside a head): a heading that does not count among its steps
        st.markdown(f"#### {md(title)}")
    st.caption(t("why.intro") + (" " + t("why.click_hint") if clickable else ""))
    a, b = st.columns(2)
    if query is None:
        query = _pick(a, t("why.query"), QUERY_KEY, tokens, len(tokens) - 1)
    else:
        a.caption(t("why.query_fixed", i=query, token=md(tokens[query])))
    row = np.asarray(weights[query]) if query < len(weights) else np.zeros(len(tokens))
    key = _pick(b, t("why.key"), KEY_KEY, tokens, int(row.argmax()) if row.size else 0)
    try:
        with st.spinner(t("why.computing")):
            e = explanation(selection(), layer, head, query, key)
    except AttnVizError as err:
        st.error(t("why.failed", reason=md(err)))
        return []
    cols = st.columns(3)
    cols[0].metric(t("why.score"), f"{e.score:.4f}")
    cols[1].metric(t("why.weight"), "—" if e.weight is None else f"{e.weight:.4f}")
    cols[2].metric(t("why.scale"), f"{e.scale:.4g}")
    st.caption(
        t("why.score_note", q=md(e.tokens[e.query]), k=md(e.tokens[e.key]))
        + (" " + t("why.kv_note", kv=e.kv_head) if cache.model(selection()).capabilities.grouped else "")
        + ("" if e.visible else " " + t("why.hidden"))
    )
    figures = []
    if e.by_frequency is not None and e.frequencies is not None:
        title = t("why.frequency_title")
        fig = frequency_bars(e.by_frequency, e.frequencies, title=title, words=_words())
        _chart(fig, "why_frequency", f"why-frequency-L{layer}-H{head}-{query}-{key}")
        st.caption(t("why.frequency_note"))
        figures.append((title, fig))
    else:
        st.caption(t("why.no_rotary"))
    if e.refused:
        st.info(t("why.refused", reason=md(e.refused)))
        return figures
    lines = [
        "- " + t("why.pair_sentence", q=md(qa), k=md(kb), pct=f"{100 * e.share(v):.0f}", value=f"{v:+.4f}")
        for qa, kb, v in e.top[:SENTENCES]
    ]
    st.markdown("\n".join(lines))
    title = t("why.pairs_title")
    fig = pair_bars(e.top, e.score, title=title, words=_words())
    _chart(fig, "why_pairs", f"why-pairs-L{layer}-H{head}-{query}-{key}")
    st.caption(t("why.pairs_note", n=len(e.components)))
    figures.append((title, fig))
    return figures
