"""Figures of the Long-context lab: the needle grid, retrieval heads, loss along a text per cache, sink shares.

numpy in, plotly out; every text comes in as an argument (the page passes it in either language).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .lecture import SERIES_COLORS, scale_fonts

FOUND = "#2ca02c"
MISSED = "#d62728"


def needle_grid(
    found: np.ndarray, contexts: Sequence[int], depths: Sequence[float], labels: Mapping[str, str], font_size: int = 14
) -> go.Figure:
    """Return a (contexts × depths) grid: green found, red not found, grey not run (NaN)."""
    text = np.where(np.isnan(found), "", np.where(found > 0.5, labels["found"], labels["missed"]))
    fig = go.Figure(
        go.Heatmap(
            z=found,
            x=[f"{d:g}" for d in depths],
            y=[f"{c:,}" for c in contexts],
            zmin=0,
            zmax=1,
            colorscale=[[0, MISSED], [1, FOUND]],
            showscale=False,
            text=text,
            texttemplate="%{text}",
            hovertemplate=labels["x"] + " %{x}<br>" + labels["y"] + " %{y}<br>%{text}<extra></extra>",
            xgap=2,
            ygap=2,
        )
    )
    fig.update_layout(title=labels["title"], height=120 + 48 * len(contexts), margin=dict(l=60, r=20, t=50, b=50))
    fig.update_xaxes(title=labels["x"], type="category")
    fig.update_yaxes(title=labels["y"], type="category")
    return scale_fonts(fig, font_size)


def retrieval_heads(scores: np.ndarray, threshold: float, labels: Mapping[str, str], font_size: int = 14) -> go.Figure:
    """Return every head's retrieval score (layers × heads) with the heads above `threshold` ringed.

    A last trace "heads" holds one invisible point per head, customdata (layer, head, score), carrying the hover:
    a click selects it (plotly's selection events skip heatmaps), and the page opens that head.
    """
    L, H = scores.shape
    fig = go.Figure(
        go.Heatmap(
            z=scores,
            x=list(range(H)),
            y=list(range(L)),
            zmin=0,
            zmax=max(1e-9, float(scores.max()) if scores.size else 1.0),
            colorscale="Blues",
            colorbar=dict(title=labels["score"]),
            hoverinfo="skip",
        )
    )
    ys, xs = np.nonzero(scores > threshold)
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            marker=dict(symbol="circle-open", size=14, color="#ff7f0e", line=dict(width=2)),
            unselected=dict(marker=dict(opacity=1.0)),  # a clicked head does not dim the rings
            name=labels["marked"],
            hoverinfo="skip",
        )
    )
    layers, heads = np.divmod(np.arange(L * H), H)
    fig.add_trace(
        go.Scatter(
            x=heads,
            y=layers,
            customdata=np.stack([layers, heads, scores.ravel()], axis=-1),
            mode="markers",
            marker=dict(symbol="square", size=10, opacity=0.0, color="black"),
            hovertemplate=labels["layer"]
            + " %{customdata[0]}, "
            + labels["head"]
            + " %{customdata[1]}: %{customdata[2]:.2f}<extra></extra>",
            showlegend=False,
            name="heads",
        )
    )
    fig.update_layout(
        title=labels["title"],
        height=max(260, 18 * L + 120),
        legend=dict(orientation="h", y=-0.15),
        showlegend=True,
        hovermode="closest",
        hoverdistance=-1,  # the nearest head answers anywhere on the map
    )
    fig.update_xaxes(title=labels["head"], dtick=1, range=[-0.5, H - 0.5], autorange=False)
    fig.update_yaxes(title=labels["layer"], range=[L - 0.5, -0.5], autorange=False)
    return scale_fonts(fig, font_size)


def head_of(points: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """Return the (layer, head) of the first clicked point of retrieval_heads' "heads" trace, else None."""
    for p in points:
        data = p.get("customdata")
        if isinstance(data, list | tuple) and len(data) >= 2:
            try:
                return int(data[0]), int(data[1])
            except (TypeError, ValueError):
                continue
    return None


def smooth(values: np.ndarray, width: int) -> np.ndarray:
    """Return the running mean of `values` over `width` (shorter at the start)."""
    if width <= 1 or values.size == 0:
        return values.astype(np.float64)
    c = np.cumsum(np.insert(values.astype(np.float64), 0, 0.0))
    idx = np.arange(1, values.size + 1)
    lo = np.maximum(0, idx - width)
    return (c[idx] - c[lo]) / (idx - lo)


def loss_curves(
    losses: Mapping[str, np.ndarray],
    cache_bytes: Mapping[str, int],
    labels: Mapping[str, str],
    width: int = 32,
    font_size: int = 14,
) -> go.Figure:
    """Return the per-token loss along the text per cache (running mean over `width`), and each cache's bytes."""
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.72, 0.28], subplot_titles=(labels["loss_title"], labels["bytes_title"])
    )
    for i, (name, nll) in enumerate(losses.items()):
        colour = SERIES_COLORS[i % len(SERIES_COLORS)]
        fig.add_trace(
            go.Scatter(
                x=np.arange(1, nll.size + 1),
                y=smooth(nll, width),
                mode="lines",
                name=name,
                line=dict(color=colour),
                legendgroup=name,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=[name],
                y=[cache_bytes[name] / 2**20],
                marker_color=colour,
                showlegend=False,
                legendgroup=name,
                hovertemplate="%{x}: %{y:.2f} MiB<extra></extra>",
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title=labels["x"], row=1, col=1)
    fig.update_yaxes(title=labels["y"], row=1, col=1)
    fig.update_yaxes(title=labels["bytes_y"], row=1, col=2)
    fig.update_layout(height=420, legend=dict(orientation="h", y=-0.2))
    return scale_fonts(fig, font_size)


def sink_shares(shares: np.ndarray, labels: Mapping[str, str], font_size: int = 14) -> go.Figure:
    """Return each head's share of attention on the first token(s), layers × heads, 0 … 1."""
    L, H = shares.shape
    fig = go.Figure(
        go.Heatmap(
            z=shares,
            x=list(range(H)),
            y=list(range(L)),
            zmin=0,
            zmax=1,
            colorscale="Purples",
            colorbar=dict(title=labels["share"]),
            hovertemplate=labels["layer"] + " %{y}, " + labels["head"] + " %{x}: %{z:.0%}<extra></extra>",
        )
    )
    fig.update_layout(title=labels["title"], height=max(260, 18 * L + 120))
    fig.update_xaxes(title=labels["head"], dtick=1)
    fig.update_yaxes(title=labels["layer"], autorange="reversed")
    return scale_fonts(fig, font_size)


def without_sink(attn: np.ndarray, sinks: int) -> np.ndarray:
    """Return the map with the first `sinks` keys set to 0 and each row renormalised (rows with nothing left: 0)."""
    out = attn.astype(np.float64).copy()
    out[:, :sinks] = 0.0
    total = out.sum(axis=-1, keepdims=True)
    return np.divide(out, total, out=np.zeros_like(out), where=total > 0)


def sink_pair(
    attn: np.ndarray, sinks: int, tokens: Sequence[str], labels: Mapping[str, str], font_size: int = 14
) -> go.Figure:
    """Return one head's map beside the same map with the sink masked and every row renormalised."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(labels["original"], labels["masked"]), horizontal_spacing=0.08)
    ticks = [f"{i}:{t}" for i, t in enumerate(tokens)]
    for col, z in ((1, attn), (2, without_sink(attn, sinks))):
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=ticks,
                y=ticks,
                zmin=0,
                zmax=float(z.max()) if z.size else 1.0,
                colorscale="Blues",
                showscale=False,
                hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(autorange="reversed", showticklabels=col == 1, row=1, col=col)
        fig.update_xaxes(showticklabels=False, row=1, col=col)
    fig.update_layout(title=labels["title"], height=460)
    return scale_fonts(fig, font_size)
