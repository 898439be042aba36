"""Streamlit glue shared by the lecture pages: cached step-by-step tensors, demonstrations and small formatters.

The computations live in models.lecture.steps / models.lecture.troubleshoot; here they are only cached per selection, so that
clicking through the steps, or switching language, never recomputes them.
"""

from __future__ import annotations

from models import Encoder, EncoderOutput
from models.lecture import memory, troubleshoot
from models.lecture import steps as steps_mod

from . import debug, results
from .state import Selection, t


@debug.counted("head_steps", results.cached)
def head_steps(
    key: Selection, layer: int, head: int, query: int, _enc: Encoder, _out: EncoderOutput
) -> steps_mod.HeadSteps:
    """Return the step-by-step tensors of one head for one query (key: the selection _out was encoded for)."""
    return steps_mod.head_steps(_enc, _out, layer, head, query)


@debug.counted("one_vs_many", results.cached)
def one_vs_many(key: Selection, layer: int, _enc: Encoder, _out: EncoderOutput) -> steps_mod.OneVsMany:
    """Return the layer as its heads and as one head of width d_model (key: the selection _out was encoded for)."""
    return steps_mod.one_vs_many(_enc, _out, layer)


@debug.counted("wrong_mask", results.cached)
def wrong_mask(key: Selection, _enc: Encoder) -> troubleshoot.WrongMaskDemo:
    """Return the model run with the right causal mask and with a transposed one, for key's text."""
    return troubleshoot.wrong_mask(_enc, key.text, key.text_b or None)


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


def peak(n: int | None) -> str:
    """Return a measured peak as the pages print it: its size, or what a missing or zero measurement means.

    Zero is not "0 B": the step allocated within memory the process already held (peak-RSS counters move in whole
    pages, and only above their earlier high-water mark), so its growth was below what can be measured there.
    """
    if n is None:
        return t("gen.no_peak")
    if n <= 0:
        return t("memory.peak_below")
    return memory.fmt_bytes(n)
