"""All heads of one layer side by side, plus their mean, as small heatmaps with hover (plotly subplots)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .heatmap import COLORSCALE, WORDS
from .overlays import add_mask_overlay
from .overview import downsample_factor, pool_max

MAX_CELLS = 96  # per axis: longer maps are max-pooled so 13 maps at 512 tokens stay light


def layer_figure(
    maps: np.ndarray,
    titles: Sequence[str],
    *,
    q_pos: Sequence[int] | None = None,
    k_pos: Sequence[int] | None = None,
    keep: np.ndarray | None = None,
    cols: int = 5,
    max_cells: int = MAX_CELLS,
    words: Mapping[str, str] | None = None,
    width_hint: int = 1000,
) -> tuple[go.Figure, int]:
    """Return (figure, factor): one heatmap per map of (n_maps, q_pos, k_pos), titled, in a grid of `cols`.

    Each map has its own colour range (0 to its maximum). Maps longer than max_cells are max-pooled by `factor`
    tokens per cell; hover then shows the block's first positions. keep (q_pos, k_pos) draws the mask overlay
    on every map (pooled the same way: a block is hidden only if all its pairs are).
    """
    m = np.asarray(maps, dtype=np.float32)
    if m.ndim != 3:
        raise ValueError(f"expected (maps, q_pos, k_pos), got shape {m.shape}")
    n_maps, nq, nk = m.shape
    if len(titles) != n_maps:
        raise ValueError(f"{len(titles)} titles for {n_maps} maps")
    wd = {**WORDS, **(words or {})}
    qp = np.asarray(q_pos if q_pos is not None else range(nq))
    kp = np.asarray(k_pos if k_pos is not None else range(nk))
    factor = downsample_factor(nq, nk, max_cells)
    pooled = pool_max(m, factor)
    qb, kb = pooled.shape[-2:]
    q_start = qp[::factor][:qb]
    k_start = kp[::factor][:kb]
    custom = np.stack(np.broadcast_arrays(q_start[:, None].astype(np.float32), k_start[None, :].astype(np.float32)), -1)
    hidden_keep = None
    if keep is not None:
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (nq, nk):
            raise ValueError(f"mask is {keep.shape} but the maps are ({nq}, {nk})")
        if not keep.all():
            hidden_keep = pool_max(keep, factor)

    cols = max(1, min(cols, n_maps))
    rows = math.ceil(n_maps / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=list(titles),
        horizontal_spacing=0.02,
        vertical_spacing=min(0.06, 0.5 / (rows - 1)) if rows > 1 else 0.0,  # plotly refuses more than 1/(rows−1)
    )
    hover = (
        f"{wd['query']} %{{customdata[0]}}<br>{wd['key']} %{{customdata[1]}}<br>{wd['weight']} %{{z:.4f}}"
        "<extra>%{fullData.name}</extra>"
    )
    for i in range(n_maps):
        r, c = divmod(i, cols)
        top = float(pooled[i].max()) or 1.0
        fig.add_trace(
            go.Heatmap(
                z=pooled[i],
                x=np.arange(kb),
                y=np.arange(qb),
                customdata=custom,
                colorscale=COLORSCALE,
                zmin=0.0,
                zmax=top,
                showscale=False,
                hovertemplate=hover,
                name=titles[i],
            ),
            row=r + 1,
            col=c + 1,
        )
        if hidden_keep is not None:
            add_mask_overlay(fig, hidden_keep, pooled[i], row=r + 1, col=c + 1)
    fig.update_xaxes(showticklabels=False, ticks="", showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(
        showticklabels=False, ticks="", showgrid=False, zeroline=False, autorange="reversed", constrain="domain"
    )
    for i in range(n_maps):  # square cells: each subplot's y axis follows its own x axis
        suffix = "" if i == 0 else str(i + 1)
        fig.layout[f"yaxis{suffix}"].scaleanchor = f"x{suffix}"
    cell = width_hint / cols
    fig.update_layout(
        height=int(60 + rows * cell * 1.05), margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white", showlegend=False
    )
    return fig, factor
