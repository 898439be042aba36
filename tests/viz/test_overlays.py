"""Mask overlays: the boundary of a causal mask, leaks flagged only where weight lands on hidden cells."""

from __future__ import annotations

import numpy as np

from viz.heatmap import head_heatmap
from viz.overlays import add_mask_overlay, boundary_segments, leaks


def test_causal_boundary_is_a_staircase():
    n = 4
    keep = np.tril(np.ones((n, n), bool))
    xs, ys = boundary_segments(keep)
    segments = len([x for x in xs if x is None])
    assert segments == 2 * (n - 1)  # one vertical and one horizontal edge per step


def test_leaks_are_the_hidden_cells_with_weight():
    keep = np.tril(np.ones((3, 3), bool))
    w = np.array([[1.0, 0.0, 0.0], [0.5, 0.4, 0.1], [0.2, 0.3, 0.5]])
    assert leaks(keep, w).tolist() == [[1, 2]]
    assert leaks(keep, w, tol=0.2).tolist() == []


def test_overlay_adds_veil_outline_and_markers():
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    keep = np.tril(np.ones((4, 4), bool))
    w = np.full((4, 4), 0.25)
    fig = add_mask_overlay(head_heatmap(w, tokens), keep, w)
    names = [tr.name for tr in fig.data]
    assert names[1:] == ["masked", "mask boundary", "leak"]
    assert len(fig.data[-1].x) == 6  # every hidden cell of a uniform map leaks


def test_full_mask_adds_nothing():
    w = np.full((3, 3), 1 / 3)
    fig = add_mask_overlay(head_heatmap(w, ["a", "b", "c"]), np.ones((3, 3), bool), w)
    assert len(fig.data) == 1
