"""Figures for the Train page: curves over training steps (losses, scores, the §8.3 diagnostics as small
multiples) with the moment a head became an induction head marked.

numpy arrays and lists in, plotly figures out; no torch, no streamlit. Every text comes in as an argument so the
page can pass it in either language; `font_size` scales a figure for a projector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .lecture import SERIES_COLORS, scale_fonts

Series = Mapping[str, tuple[Sequence[float], Sequence[float]]]  # name → (steps, values)
MARK = "#e4572e"


def _colour(i: int) -> str:
    return SERIES_COLORS[i % len(SERIES_COLORS)]


def _clean(values: Sequence[float]) -> list[float | None]:
    """Return values with NaN and ±inf as None (plotly leaves a gap, JSON stays valid)."""
    return [float(v) if v is not None and math.isfinite(float(v)) else None for v in values]


def curves(
    series: Series,
    title: str = "",
    x_title: str = "",
    y_title: str = "",
    hlines: Sequence[tuple[float, str]] = (),
    vlines: Sequence[tuple[float, str]] = (),
    dashed: Sequence[str] = (),
    y_range: tuple[float, float] | None = None,
    font_size: int = 12,
    height: int = 320,
) -> go.Figure:
    """Return lines over steps, one per series; hlines/vlines are (value, label) reference lines."""
    fig = go.Figure()
    for i, (name, (xs, ys)) in enumerate(series.items()):
        fig.add_trace(
            go.Scatter(
                x=list(map(float, xs)),
                y=_clean(ys),
                mode="lines",
                name=name,
                line=dict(color=_colour(i), width=2, dash="dot" if name in dashed else "solid"),
                hovertemplate=f"{name}<br>step %{{x}}: %{{y:.3f}}<extra></extra>",
            )
        )
    for value, label in hlines:
        if math.isfinite(value):
            fig.add_hline(y=value, line=dict(color="grey", dash="dash", width=1), annotation_text=label)
    for value, label in vlines:
        fig.add_vline(x=value, line=dict(color=MARK, width=2), annotation_text=label, annotation_position="top left")
    fig.update_layout(
        title=dict(text=title, font=dict(size=font_size + 2)) if title else None,
        height=height + 6 * font_size,
        margin=dict(l=10, r=10, t=40 + 2 * font_size if title else 20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0),
        hovermode="x unified",
    )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, range=list(y_range) if y_range else None)
    return scale_fonts(fig, font_size)


def small_multiples(
    panels: Sequence[tuple[str, Series]],
    x_title: str = "",
    cols: int = 3,
    log_panels: Sequence[int] = (),
    font_size: int = 12,
) -> go.Figure:
    """Return one small line chart per (title, series) panel; panels listed in log_panels get a log y axis."""
    n = len(panels)
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols) if n else 1
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[title for title, _ in panels],
        horizontal_spacing=0.07,
        vertical_spacing=0.16 / max(1, rows - 1) if rows > 1 else 0.1,
    )
    for p, (_, series) in enumerate(panels):
        r, c = p // cols + 1, p % cols + 1
        for i, (name, (xs, ys)) in enumerate(series.items()):
            fig.add_trace(
                go.Scatter(
                    x=list(map(float, xs)),
                    y=_clean(ys),
                    mode="lines",
                    name=name,
                    legendgroup=f"p{p}",
                    showlegend=False,
                    line=dict(color=_colour(i), width=1.6),
                    hovertemplate=f"{name}<br>step %{{x}}: %{{y:.3g}}<extra></extra>",
                ),
                row=r,
                col=c,
            )
        if p in log_panels:
            fig.update_yaxes(type="log", row=r, col=c)
    fig.update_xaxes(title=x_title, row=rows)
    tile = 190 + 6 * font_size
    fig.update_layout(height=rows * tile + 40, margin=dict(l=10, r=10, t=40 + font_size, b=10), hovermode="closest")
    return scale_fonts(fig, font_size)


def head_series(steps: Sequence[int], values: np.ndarray, name: str = "L{layer}H{head}") -> dict[str, tuple]:
    """Return per-head series from (records, layers, heads) values: name → (steps, values)."""
    v = np.asarray(values, dtype=np.float64)
    _, L, H = v.shape
    return {name.format(layer=layer, head=head): (steps, v[:, layer, head]) for layer in range(L) for head in range(H)}


def layer_series(steps: Sequence[int], values: np.ndarray, name: str = "L{layer}") -> dict[str, tuple]:
    """Return per-layer series from (records, layers) values."""
    v = np.asarray(values, dtype=np.float64)
    return {name.format(layer=layer): (steps, v[:, layer]) for layer in range(v.shape[1])}
