"""Streamlit glue shared by the lecture pages: cached step-by-step tensors, demonstrations and small formatters.

The computations live in models.lecture.steps / models.lecture.troubleshoot; here they are only cached per selection, so that
clicking through the steps, or switching language, never recomputes them.
"""

from __future__ import annotations

import streamlit as st

from models import Encoder, EncoderOutput
from models.lecture import steps as steps_mod
from models.lecture import troubleshoot

from . import state


def selection() -> tuple[str, str, str, str, str, str]:
    """Return what the current EncoderOutput depends on: (model, device, dtype, text, text_b, mask)."""
    return (
        state.get("model"),
        state.get("device"),
        state.get("dtype"),
        (state.get("text") or "").strip(),
        (state.get("text_b") or "").strip(),
        state.get("mask"),
    )


@st.cache_data(show_spinner=False, max_entries=64)
def head_steps(
    key: tuple, layer: int, head: int, query: int, _enc: Encoder, _out: EncoderOutput
) -> steps_mod.HeadSteps:
    """Return the step-by-step tensors of one head for one query (key: `selection()` of _out)."""
    return steps_mod.head_steps(_enc, _out, layer, head, query)


@st.cache_data(show_spinner=False, max_entries=32)
def one_vs_many(key: tuple, layer: int, _enc: Encoder, _out: EncoderOutput) -> steps_mod.OneVsMany:
    """Return the layer as its heads and as one head of width d_model (key: `selection()` of _out)."""
    return steps_mod.one_vs_many(_enc, _out, layer)


@st.cache_data(show_spinner=False, max_entries=8)
def wrong_mask(key: tuple, _enc: Encoder) -> troubleshoot.WrongMaskDemo:
    """Return the model run with the right causal mask and with a transposed one, for key's text."""
    _, _, _, text, text_b, _ = key
    return troubleshoot.wrong_mask(_enc, text, text_b or None)


def shape(dims: tuple[int, ...]) -> str:
    """Return a shape as PyTorch prints a tuple: (1, 12, 16, 64)."""
    return "(" + ", ".join(str(d) for d in dims) + ")"


def num(x: float, digits: int = 3) -> str:
    """Return a number with `digits` significant digits, in plain or scientific notation as fits."""
    if x != x:  # NaN
        return "NaN"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if 1e-3 <= abs(x) < 1e5 else f"{x:.{max(1, digits - 1)}e}"
