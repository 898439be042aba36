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


def phase_figure(
    steps: Sequence[int],
    losses: Series,
    score: Sequence[float],
    phase: Mapping[str, float] | None,
    labels: Mapping[str, str],
    threshold: float = 0.5,
    font_size: int = 12,
    height: int = 420,
) -> go.Figure:
    """Return the phase change as Olsson et al. (2022) draw it: the losses above, the best induction score below,
    on one shared step axis, with the window shaded and the loss bump and the score jump marked in both panels.

    phase: {"start", "end", "bump", "jump"} steps (models.training.trainer.phase_change) or None (nothing marked).
    labels: "loss", "score", "score_name", "bump", "jump", "window", "x" (texts in the page's language).
    """
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=[labels["loss"], labels["score"]]
    )
    for i, (name, (xs, ys)) in enumerate(losses.items()):
        fig.add_trace(
            go.Scatter(
                x=list(map(float, xs)),
                y=_clean(ys),
                mode="lines",
                name=name,
                line=dict(color=_colour(i), width=2),
                hovertemplate=f"{name}<br>step %{{x}}: %{{y:.3f}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    fig.add_trace(
        go.Scatter(
            x=list(map(float, steps)),
            y=_clean(score),
            mode="lines",
            name=labels["score_name"],
            line=dict(color=MARK, width=2),
            hovertemplate=f"{labels['score_name']}<br>step %{{x}}: %{{y:.2f}}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    fig.add_hline(y=threshold, line=dict(color="grey", dash="dash", width=1), row=2, col=1)
    if phase:
        for row in (1, 2):
            fig.add_vrect(
                x0=phase["start"], x1=phase["end"], fillcolor=MARK, opacity=0.10, line_width=0, row=row, col=1
            )
            fig.add_vline(x=phase["bump"], line=dict(color="#444", dash="dot", width=2), row=row, col=1)
            fig.add_vline(x=phase["jump"], line=dict(color=MARK, width=2), row=row, col=1)
        fig.add_annotation(x=phase["bump"], y=1.0, yref="y domain", text=labels["bump"], showarrow=False,
                           xanchor="right", yanchor="bottom", row=1, col=1)  # fmt: skip
        fig.add_annotation(x=phase["jump"], y=1.0, yref="y2 domain", text=labels["jump"], showarrow=False,
                           xanchor="left", yanchor="bottom", row=2, col=1)  # fmt: skip
    fig.update_yaxes(range=[0, 1], row=2, col=1)
    fig.update_xaxes(title=labels["x"], row=2, col=1)
    fig.update_layout(
        height=height + 8 * font_size,
        margin=dict(l=10, r=10, t=40 + 2 * font_size, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.04, xanchor="right", x=1.0),
        hovermode="x unified",
    )
    return scale_fonts(fig, font_size)


def spread_series(runs: Mapping[str, Sequence[tuple[Sequence[int], Sequence[float]]]]) -> dict[str, tuple]:
    """Return, per group of runs (e.g. one head count over seeds), its median, lowest and highest value at each step
    the runs share: name → (steps, median, low, high). Steps past the shortest run of a group are left out."""
    out = {}
    for name, group in runs.items():
        n = min(len(xs) for xs, _ in group) if group else 0
        if not n:
            continue
        values = np.array([[np.nan if v is None else float(v) for v in ys[:n]] for _, ys in group], dtype=np.float64)
        with np.errstate(all="ignore"):
            out[name] = (
                list(group[0][0][:n]),
                np.nanmedian(values, axis=0),
                np.nanmin(values, axis=0),
                np.nanmax(values, axis=0),
            )
    return out


def spread_figure(
    spread: Mapping[str, tuple],
    title: str = "",
    x_title: str = "",
    y_title: str = "",
    hlines: Sequence[tuple[float, str]] = (),
    y_range: tuple[float, float] | None = None,
    font_size: int = 12,
    height: int = 320,
) -> go.Figure:
    """Return one line (the median) and one shaded band (lowest to highest) per group from spread_series."""
    fig = go.Figure()
    for i, (name, (xs, mid, low, high)) in enumerate(spread.items()):
        colour = _colour(i)
        x = list(map(float, xs))
        fig.add_trace(go.Scatter(x=x, y=_clean(high), mode="lines", line=dict(width=0, color=colour),
                                 showlegend=False, hoverinfo="skip", legendgroup=name))  # fmt: skip
        fig.add_trace(go.Scatter(x=x, y=_clean(low), mode="lines", line=dict(width=0, color=colour), fill="tonexty",
                                 opacity=0.2, showlegend=False, hoverinfo="skip", legendgroup=name))  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=x,
                y=_clean(mid),
                mode="lines",
                name=name,
                legendgroup=name,
                line=dict(color=colour, width=2),
                hovertemplate=f"{name}<br>step %{{x}}: %{{y:.3f}}<extra></extra>",
            )
        )
    for value, label in hlines:
        if math.isfinite(value):
            fig.add_hline(y=value, line=dict(color="grey", dash="dash", width=1), annotation_text=label)
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
