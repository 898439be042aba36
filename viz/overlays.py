"""Mask overlays for any heatmap of a (q_pos, k_pos) map: hidden cells greyed, the boundary outlined, leaks flagged."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

MASKED_GREY = "rgba(110, 110, 110, 0.55)"
BOUNDARY = "#222222"
LEAK = "#d62728"  # weight that lands where the mask forbids it


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """Return (start, end) index pairs, end inclusive, of the runs of True in a 1-D bool array."""
    padded = np.concatenate([[False], flags, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return list(zip(edges[0::2].tolist(), (edges[1::2] - 1).tolist(), strict=True))


def boundary_segments(keep: np.ndarray) -> tuple[list[float | None], list[float | None]]:
    """Return x, y polyline coordinates (None-separated) of every cell edge between kept and hidden cells.

    Cell (i, j) spans x ∈ [j − ½, j + ½] and y ∈ [i − ½, i + ½]: row i is query i, column j is key j. Collinear
    neighbouring edges are merged into one segment, so that a 512-token padding mask draws 512 lines, not 262,144.
    """
    keep = np.asarray(keep, dtype=bool)
    xs: list[float | None] = []
    ys: list[float | None] = []
    # Vertical edges: between columns j-1 and j, over the rows where the value changes.
    for j in range(1, keep.shape[1]):
        for a, b in _runs(keep[:, j] != keep[:, j - 1]):
            xs += [j - 0.5, j - 0.5, None]
            ys += [a - 0.5, b + 0.5, None]
    # Horizontal edges: between rows i-1 and i.
    for i in range(1, keep.shape[0]):
        for a, b in _runs(keep[i, :] != keep[i - 1, :]):
            xs += [a - 0.5, b + 0.5, None]
            ys += [i - 0.5, i - 0.5, None]
    return xs, ys


def leaks(keep: np.ndarray, weights: np.ndarray, tol: float = 0.0) -> np.ndarray:
    """Return (n, 2) [query, key] positions where the map puts more than tol weight on a hidden cell."""
    keep = np.asarray(keep, dtype=bool)
    w = np.asarray(weights, dtype=np.float64)
    if keep.shape != w.shape:
        raise ValueError(f"mask is {keep.shape} but the attention map is {w.shape}")
    return np.argwhere(~keep & (w > tol))


def marker_size(n: int) -> int:
    """Return a marker size in px that fits a cell of an n-token heatmap (head_heatmap gives cells ~18 px)."""
    return int(max(4, min(10, 400 // max(n, 1))))


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
                z=veil,
                x=np.arange(keep.shape[1]),
                y=np.arange(keep.shape[0]),
                colorscale=[[0, MASKED_GREY], [1, MASKED_GREY]],
                showscale=False,
                hoverinfo="skip",
                name="masked",
            ),
            **where,
        )
        xs, ys = boundary_segments(keep)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line=dict(color=BOUNDARY, width=2),
                hoverinfo="skip",
                showlegend=False,
                name="mask boundary",
            ),
            **where,
        )
    if weights is not None:
        bad = leaks(keep, weights, tol)
        if len(bad):
            w = np.asarray(weights)[bad[:, 0], bad[:, 1]]
            fig.add_trace(
                go.Scatter(
                    x=bad[:, 1],
                    y=bad[:, 0],
                    mode="markers",
                    marker=dict(
                        symbol="x", color=LEAK, size=marker_size(max(keep.shape)), line=dict(width=1, color="white")
                    ),
                    customdata=w,
                    hovertemplate="leak: query %{y}, key %{x}, weight %{customdata:.4f}<extra></extra>",
                    showlegend=False,
                    name="leak",
                ),
                **where,
            )
    return fig


# ---- the mask itself against what it should be -------------------------------------------------------

AGREEMENT = ("visible", "hidden", "leak", "over", "free_visible", "free_hidden")
AGREEMENT_COLORS = {
    "visible": "#4c78a8",  # may attend, and should
    "hidden": "#dcdcdc",  # masked, and should be
    "leak": LEAK,  # visible, but should be masked
    "over": "#f0a202",  # masked, but should be visible
    "free_visible": "#c9d7ea",  # not judged (a padded query row), visible
    "free_hidden": "#f4f4f4",  # not judged, masked
}


def agreement(keep: np.ndarray, expected: np.ndarray, judged: np.ndarray | None = None) -> np.ndarray:
    """Return (q_pos, k_pos) int codes into AGREEMENT: 0 visible, 1 hidden, 2 leak, 3 over-masked, and for cells
    outside `judged` (padded query rows) 4 visible, 5 hidden."""
    keep = np.asarray(keep, dtype=bool)
    expected = np.asarray(expected, dtype=bool)
    if keep.shape != expected.shape:
        raise ValueError(f"mask is {keep.shape} but the expected mask is {expected.shape}")
    codes = np.select([keep & expected, ~keep & ~expected, keep & ~expected], [0, 1, 2], default=3)
    if judged is not None:
        codes = np.where(np.asarray(judged, dtype=bool), codes, np.where(keep, 4, 5))
    return codes


def mask_agreement(
    keep: np.ndarray,
    expected: np.ndarray,
    tokens: list[str],
    judged: np.ndarray | None = None,
    labels: dict[str, str] | None = None,
    title: str = "",
) -> go.Figure:
    """Return a heatmap of a (q_pos, k_pos) mask against the expected one: each cell visible, hidden, leak or over.

    labels: the legend's words per AGREEMENT key (the page passes them translated); only the kinds present are listed.
    """
    codes = agreement(keep, expected, judged)
    labels = {k: labels.get(k, k) if labels else k for k in AGREEMENT}
    present = [k for i, k in enumerate(AGREEMENT) if (codes == i).any()]
    colors = [AGREEMENT_COLORS[k] for k in AGREEMENT]
    scale = []
    for i, c in enumerate(colors):  # a stepped colorscale: one flat band per kind, z = its index
        scale += [[i / len(colors), c], [(i + 1) / len(colors), c]]
    q_tok = list(tokens)
    n = len(q_tok)
    # Per-cell words in the hover, up to 128 tokens (at 512 they would add megabytes to the page).
    names = np.array([labels[k] for k in AGREEMENT], dtype=object)
    text = names[codes] if n <= 128 else None
    custom = np.stack(
        np.broadcast_arrays(np.array(q_tok, dtype=object)[:, None], np.array(q_tok, dtype=object)[None, :]), -1
    )
    fig = go.Figure(
        go.Heatmap(
            z=codes,
            x=np.arange(n),
            y=np.arange(n),
            zmin=-0.5,
            zmax=len(colors) - 0.5,
            colorscale=scale,
            text=text,
            customdata=custom,
            xgap=1,
            ygap=1,
            showscale=False,
            hovertemplate="query %{y}: %{customdata[0]}<br>key %{x}: %{customdata[1]}"
            + ("<br>%{text}" if text is not None else "")
            + "<extra></extra>",
        )
    )
    for k in present:  # a legend entry per kind present (a colorbar cannot label categories readably)
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=labels[k],
                showlegend=True,
                marker=dict(symbol="square", size=14, color=AGREEMENT_COLORS[k], line=dict(width=1, color="#888888")),
            )
        )
    fig.update_layout(
        title=dict(text=title, y=0.99, yanchor="top"),
        xaxis=dict(
            tickmode="array",
            tickvals=list(range(n)),
            ticktext=q_tok,
            side="top",
            tickangle=-60,
            title="key",
            range=[-0.5, n - 0.5],
        ),
        yaxis=dict(tickmode="array", tickvals=list(range(n)), ticktext=q_tok, autorange="reversed", title="query"),
        legend=dict(orientation="h", yanchor="top", y=-0.02, xanchor="left", x=0),
        height=min(900, 220 + 18 * n) + 30 * ((len(present) + 1) // 2),
        margin=dict(l=10, r=10, t=150 if title else 90, b=10),
        plot_bgcolor="white",
    )
    return fig
