"""Figures for aggregates over heads and layers: one row of a map as bars over the key tokens."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .heatmap import token_labels, token_ticks
from .lines import LINE_RGB


def token_bars(
    values: np.ndarray,
    tokens: Sequence[str],
    positions: Sequence[int] | None = None,
    title: str = "",
    value_label: str = "weight",
    width_hint: int = 900,
) -> go.Figure:
    """Return a bar per token (x = position, labelled with the token) of a (k_pos,) vector, e.g. a rollout row.

    width_hint: the figure's width in pixels where it is shown; labels are sized, turned and thinned to fit it.
    """
    v = np.asarray(values, dtype=np.float32)
    toks = list(tokens)
    if v.shape != (len(toks),):
        raise ValueError(f"{v.shape[0] if v.ndim else 0} values for {len(toks)} tokens")
    pos = list(positions) if positions is not None else list(range(len(toks)))
    ticks = token_ticks(toks, max(width_hint - 80, 80), across=True)
    r, g, b = LINE_RGB
    fig = go.Figure(
        go.Bar(
            x=np.arange(len(toks)),
            y=v,
            customdata=token_labels(toks, pos),
            marker_color=f"rgb({r},{g},{b})",
            hovertemplate=f"%{{customdata}}<br>{value_label} %{{y:.4f}}<extra></extra>",
            name=value_label,
        )
    )
    fig.update_layout(
        title=dict(text=title, y=0.97, yanchor="top") if title else None,
        xaxis=dict(ticks.axis(), automargin=True),
        yaxis=dict(title=value_label, rangemode="tozero", automargin=True),
        height=320,
        margin=dict(l=10, r=10, t=50 if title else 10, b=10),
        plot_bgcolor="white",
        bargap=0.15,
    )
    return fig
