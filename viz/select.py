"""Which rows (queries) and columns (keys) a view shows: sentence-pair parts, hidden [CLS]/[SEP], token windows.

Selections are arrays of positions in the full input, so every figure can label cells with their true position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PARTS = ("all", "aa", "ab", "ba", "bb")  # queries of the first sentence letter → keys of the second
SPECIALS = frozenset({"[CLS]", "[SEP]"})


@dataclass(frozen=True)
class Part:
    """Rows (queries) and columns (keys) kept by a selection: positions in the full input."""

    rows: np.ndarray
    cols: np.ndarray

    def cut(self, maps: np.ndarray) -> np.ndarray:
        """Return (…, rows, cols) of (…, q_pos, k_pos) maps."""
        return np.asarray(maps)[..., self.rows[:, None], self.cols[None, :]]

    @property
    def empty(self) -> bool:
        return not len(self.rows) or not len(self.cols)


def part_of(segments: Sequence[int], part: str = "all") -> Part:
    """Return the rows and columns of a sentence-pair filter.

    segments: per token 0 (sentence A, with [CLS] and its [SEP]) or 1 (sentence B and the last [SEP]).
    part: 'all', 'aa' (A → A), 'ab' (queries in A, keys in B), 'ba' or 'bb'. A single sentence has no B, so
    every part other than 'all' falls back to 'all'.
    """
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}: use one of {', '.join(PARTS)}")
    seg = np.asarray(segments)
    everything = np.arange(len(seg))
    if part == "all" or not (seg == 1).any():
        return Part(everything, everything)
    side = {"a": np.flatnonzero(seg == 0), "b": np.flatnonzero(seg == 1)}
    return Part(side[part[0]], side[part[1]])


def narrow(
    part: Part,
    tokens: Sequence[str],
    hide_special: bool = False,
    window: tuple[int, int] | None = None,
    key_tokens: Sequence[str] | None = None,
) -> Part:
    """Return the part without [CLS]/[SEP] rows and columns (hide_special) and inside positions [lo, hi) (window).

    key_tokens name the columns when they are another sequence than the rows (cross-attention).
    """
    rows, cols = part.rows, part.cols
    keys = tokens if key_tokens is None else key_tokens
    if hide_special:
        rows = np.array([i for i in rows if tokens[i] not in SPECIALS], dtype=int)
        cols = np.array([j for j in cols if keys[j] not in SPECIALS], dtype=int)
    if window is not None:
        lo, hi = window
        rows = rows[(rows >= lo) & (rows < hi)]
        cols = cols[(cols >= lo) & (cols < hi)]
    return Part(np.asarray(rows, dtype=int), np.asarray(cols, dtype=int))


def renormalise(weights: np.ndarray) -> np.ndarray:
    """Return the map with each row rescaled to sum to 1 (rows that are all zero stay zero)."""
    w = np.asarray(weights, dtype=np.float32)
    sums = w.sum(axis=-1, keepdims=True)
    return np.divide(w, sums, out=np.zeros_like(w), where=sums > 0)
