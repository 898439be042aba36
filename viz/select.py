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
        """Return (…, rows, cols) of (…, q_pos, k_pos) maps: a read-only view when rows and columns are runs of
        consecutive positions (every part, a window, a single sentence without [CLS] and [SEP]), else a copy.

        The maps are usually a shared cached result: at 512 tokens on BERT-base, a copy by fancy indexing of all
        144 maps took ~0.1 s on every script run, for views that only read them.
        """
        a = np.asarray(maps)
        rows, cols = _run(self.rows), _run(self.cols)
        if rows is None or cols is None:
            return a[..., self.rows[:, None], self.cols[None, :]]
        view = a[..., rows, cols]
        view.flags.writeable = False  # the maps are shared: a view must not become a way to change them
        return view

    @property
    def empty(self) -> bool:
        return not len(self.rows) or not len(self.cols)


def _run(positions: np.ndarray) -> slice | None:
    """Return positions as a slice when they are consecutive and increasing (a, a+1, …, b−1), else None."""
    n = len(positions)
    if n == 0:
        return None
    first, last = int(positions[0]), int(positions[-1])
    if last - first + 1 != n or (n > 1 and not (np.diff(positions) == 1).all()):
        return None
    return slice(first, last + 1)


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
