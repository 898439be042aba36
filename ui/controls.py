"""The layer, head and query pickers every page shares (keys "layer", "head", "query": one choice across pages)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from .state import t


def clamp(n_layers: int, n_heads: int, seq: int | None = None) -> None:
    """Bring the shared layer, head (and query) selections inside this model and text before widgets are drawn."""
    st.session_state["layer"] = min(int(st.session_state.get("layer", 0)), n_layers - 1)
    st.session_state["head"] = min(int(st.session_state.get("head", 0)), n_heads - 1)
    if seq is not None:
        st.session_state["query"] = min(int(st.session_state.get("query", 0)), seq - 1)


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
            format_func=lambda j: f"{j}: {tokens[j]}",
            help=t("inside.query_help"),
        )
    )
