"""The layer, head and query pickers every page shares (keys "layer", "head", "query": one choice across pages)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from .state import t


def clamp(n_layers: int, n_heads: int, seq: int | None = None) -> None:
    """Bring the shared layer, head (and query) selections inside this model and text before widgets are drawn;
    a value the link asked for that does not exist here is said in a notice (docs/settings.md)."""
    limits = {"layer": n_layers, "head": n_heads} | ({"query": seq} if seq is not None else {})
    for key, n in limits.items():
        asked = int(st.session_state.get(key, 0))
        if asked > n - 1:
            st.session_state[key] = n - 1
            if st.query_params.get(key) == str(asked):  # from the link, not a value this session left behind
                st.info(t("common.clamped", what=t(f"common.{key}_word"), asked=asked, high=n - 1))


def default_query(causal: bool, seq: int) -> int:
    """Return the query a page opens on: an encoder's first token (its [CLS] reads everything); a causal model's
    last, the one that sees the whole text (its first token sees only itself: a row of one 1.0)."""
    return max(0, seq - 1) if causal else 0


def auto_query(causal: bool, seq: int) -> None:
    """Until the visitor picks a query token (or a link names one), follow the model's default query."""
    if "query_auto" not in st.session_state:
        st.session_state["query_auto"] = "query" not in st.query_params
    if st.session_state["query_auto"]:
        st.session_state["query"] = default_query(causal, seq)


def _query_chosen() -> None:
    st.session_state["query_auto"] = False


def layer_head(layer_at: Any, head_at: Any, n_layers: int, n_heads: int) -> tuple[int, int]:
    """Draw the layer and head sliders into two containers (columns, a popover...); return (layer, head)."""
    clamp(n_layers, n_heads)
    return _pick(layer_at, "layer", n_layers), _pick(head_at, "head", n_heads)


def _pick(where: Any, key: str, n: int) -> int:
    """A slider over 0…n−1; with one choice (a one-layer or one-head model) a caption: a slider needs two."""
    if n <= 1:
        st.session_state[key] = 0
        where.caption(t(f"common.only_{key}"))
        return 0
    return int(where.slider(t(f"common.{key}"), 0, n - 1, key=key))


def query(where: Any, tokens: Sequence[str]) -> int:
    """Draw the query-position picker into a container; return the chosen position."""
    st.session_state["query"] = min(int(st.session_state.get("query", 0)), len(tokens) - 1)
    return int(
        where.selectbox(
            t("inside.query"),
            list(range(len(tokens))),
            key="query",
            on_change=_query_chosen,
            format_func=lambda j: f"{j}: {tokens[j]}",
            help=t("inside.query_help"),
        )
    )
