"""Mask overlays for any heatmap of a (q_pos, k_pos) map: hidden cells greyed, the boundary outlined, leaks flagged."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

MASKED_GREY = "rgba(110, 110, 110, 0.55)"
BOUNDARY = "#222222"
LEAK = "#d62728"  # weight that lands where the mask forbids it


def boundary_segments(keep: np.ndarray) -> tuple[list[float | None], list[float | None]]:
    """Return x, y polyline coordinates (None-separated) of every cell edge between kept and hidden cells.

    Cell (i, j) spans x ∈ [j − ½, j + ½] and y ∈ [i − ½, i + ½]: row i is query i, column j is key j.
    """
    keep = np.asarray(keep, dtype=bool)
    xs: list[float | None] = []
    ys: list[float | None] = []
    # Vertical edges: between columns j-1 and j where the value changes within row i.
    rows, cols = np.nonzero(keep[:, 1:] != keep[:, :-1])
    for i, j in zip(rows.tolist(), (cols + 1).tolist(), strict=True):
        xs += [j - 0.5, j - 0.5, None]
        ys += [i - 0.5, i + 0.5, None]
    # Horizontal edges: between rows i-1 and i.
    rows, cols = np.nonzero(keep[1:, :] != keep[:-1, :])
    for i, j in zip((rows + 1).tolist(), cols.tolist(), strict=True):
        xs += [j - 0.5, j + 0.5, None]
        ys += [i - 0.5, i - 0.5, None]
    return xs, ys


def leaks(keep: np.ndarray, weights: np.ndarray, tol: float = 0.0) -> np.ndarray:
    """Return (n, 2) [query, key] positions where the map puts more than tol weight on a hidden cell."""
    keep = np.asarray(keep, dtype=bool)
    w = np.asarray(weights, dtype=np.float64)
    if keep.shape != w.shape:
        raise ValueError(f"mask is {keep.shape} but the attention map is {w.shape}")
    return np.argwhere(~keep & (w > tol))


def add_mask_overlay(
    fig: go.Figure,
    keep: np.ndarray,
    weights: np.ndarray | None = None,
    tol: float = 0.0,
    row: int | None = None,
    col: int | None = None,
) -> go.Figure:
    """Draw a keep-mask (True = may attend) over a heatmap whose cells sit at integer positions.

    Hidden cells get a grey veil, the boundary between kept and hidden cells a dark outline, and, when the map's
    weights are given, every hidden cell holding more than tol weight a red ✕ with the weight on hover.
    """
    keep = np.asarray(keep, dtype=bool)
    if keep.ndim != 2:
        raise ValueError(f"expected a (q_pos, k_pos) mask, got shape {keep.shape}")
    where = dict(row=row, col=col) if row is not None else {}
    if (~keep).any():
        veil = np.where(keep, np.nan, 1.0)
        fig.add_trace(
            go.Heatmap(
                z=veil, x=np.arange(keep.shape[1]), y=np.arange(keep.shape[0]),
                colorscale=[[0, MASKED_GREY], [1, MASKED_GREY]], showscale=False, hoverinfo="skip",
                name="masked",
            ),
            **where,
        )
        xs, ys = boundary_segments(keep)
        fig.add_trace(
            go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=BOUNDARY, width=2), hoverinfo="skip",
                       showlegend=False, name="mask boundary"),
            **where,
        )
    if weights is not None:
        bad = leaks(keep, weights, tol)
        if len(bad):
            w = np.asarray(weights)[bad[:, 0], bad[:, 1]]
            fig.add_trace(
                go.Scatter(
                    x=bad[:, 1], y=bad[:, 0], mode="markers",
                    marker=dict(symbol="x", color=LEAK, size=10, line=dict(width=1, color="white")),
                    customdata=w, hovertemplate="leak: query %{y}, key %{x}, weight %{customdata:.4f}<extra></extra>",
                    showlegend=False, name="leak",
                ),
                **where,
            )
    return fig
