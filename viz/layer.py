"""All heads of one layer side by side, plus their mean, as small heatmaps with hover (plotly subplots).

Like the overview, colour follows √weight on one scale shared by every map (heads compare; a colour bar in weights
says what a colour means), log₁₀ weight, or each map's own maximum. Query tokens label the first column, key tokens the lowest
map of each column, sized for the pixels a map gets (viz.heatmap.token_ticks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from .heatmap import COLORSCALE, LOG_FLOOR, WORDS, token_labels, token_ticks
from .overlays import add_mask_overlay
from .overview import SCALES, downsample_factor, pool_max

MAX_CELLS = 96  # per axis: longer maps are max-pooled so 13 maps at 512 tokens stay light
HOVER_CELLS_MAX = 25_000  # cells of all maps together; above this, hover names positions, not tokens (lighter JSON)
SQRT_TICKS = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0)


def sqrt_colorscale(colorscale: str = COLORSCALE, steps: int = 16) -> list[list[float | str]]:
    """Return a colour scale over weights 0…1 whose colour follows √weight (the overview's default scale)."""
    levels = [i / steps for i in range(steps + 1)]
    return [[lv * lv, c] for lv, c in zip(levels, sample_colorscale(colorscale, levels), strict=True)]


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
    tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    scale: str = "sqrt",
) -> tuple[go.Figure, int]:
    """Return (figure, factor): one heatmap per map of (n_maps, q_pos, k_pos), titled, in a grid of `cols`.

    scale "sqrt": one colour scale for all maps, colour ∝ √weight from 0 to 1, with a colour bar in weights;
    "log": log₁₀ weight from LOG_FLOOR to 1, the bar in weights; "map": each map from 0 to its own largest
    weight, the colour bar in shares of that maximum. Maps longer than
    max_cells are max-pooled by `factor` tokens per cell; labels and hover then name each block's first token.
    tokens / key_tokens: the rows' and columns' tokens (positions when omitted). keep (q_pos, k_pos) draws the mask
    overlay on every map (pooled the same way: a block is hidden only if all its pairs are).
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}: use one of {', '.join(SCALES)}")
    m = np.asarray(maps, dtype=np.float32)
    if m.ndim != 3:
        raise ValueError(f"expected (maps, q_pos, k_pos), got shape {m.shape}")
    n_maps, nq, nk = m.shape
    if len(titles) != n_maps:
        raise ValueError(f"{len(titles)} titles for {n_maps} maps")
    wd = {**WORDS, **(words or {})}
    qp = np.asarray(q_pos if q_pos is not None else range(nq))
    kp = np.asarray(k_pos if k_pos is not None else range(nk))
    q_tok = [str(x) for x in (tokens if tokens is not None else qp)]
    k_tok = [str(x) for x in (key_tokens if key_tokens is not None else (tokens if tokens is not None else kp))]
    if len(q_tok) != nq or len(k_tok) != nk:
        raise ValueError(f"{len(q_tok)} query and {len(k_tok)} key tokens for maps of ({nq}, {nk})")
    factor = downsample_factor(nq, nk, max_cells)
    pooled = pool_max(m, factor)
    qb, kb = pooled.shape[-2:]
    q_lab = [q_tok[i] for i in range(0, nq, factor)][:qb]  # a block is named by its first token
    k_lab = [k_tok[j] for j in range(0, nk, factor)][:kb]
    named = tokens is not None and n_maps * qb * kb <= HOVER_CELLS_MAX  # else hover gives positions
    if named:
        qs = np.array(token_labels(q_lab, qp[::factor][:qb].tolist()), dtype=object)
        ks = np.array(token_labels(k_lab, kp[::factor][:kb].tolist()), dtype=object)
        custom = np.stack(np.broadcast_arrays(qs[:, None], ks[None, :]), -1)
    else:
        q_start, k_start = qp[::factor][:qb].astype(np.float32), kp[::factor][:kb].astype(np.float32)
        custom = np.stack(np.broadcast_arrays(q_start[:, None], k_start[None, :]), -1)
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
    value = "%{z:.4f}" if scale == "sqrt" else "%{customdata[2]:.4f}"  # log and map colour another number
    hover = (
        f"{wd['query']} %{{customdata[0]}}<br>{wd['key']} %{{customdata[1]}}<br>{wd['weight']} {value}"
        "<extra>%{fullData.name}</extra>"
    )
    if scale == "sqrt":
        bar = dict(
            thickness=16,
            title=dict(text=wd["colorbar"], side="right"),
            tickvals=list(SQRT_TICKS),
            ticktext=[f"{v:g}" for v in SQRT_TICKS],
        )
        colours: str | list = sqrt_colorscale()
    elif scale == "log":
        decades = list(range(int(math.log10(LOG_FLOOR)), 1))
        bar = dict(
            thickness=16,
            title=dict(text=wd["colorbar_log"], side="right"),
            tickvals=decades,
            ticktext=[f"{10.0**d:g}" for d in decades],
        )
        colours = COLORSCALE
    else:
        bar = dict(thickness=16, title=dict(text=wd["colorbar_map"], side="right"))
        colours = COLORSCALE
    lo = math.log10(LOG_FLOOR) if scale == "log" else 0.0
    for i in range(n_maps):
        r, c = divmod(i, cols)
        z = pooled[i]
        data = custom
        if scale != "sqrt":  # the weight itself goes to hover beside the two token labels
            data = np.concatenate([custom, z[..., None].astype(object if named else np.float32)], -1)
            z = z / (float(z.max()) or 1.0) if scale == "map" else np.log10(np.clip(z, LOG_FLOOR, None))
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=np.arange(kb),
                y=np.arange(qb),
                customdata=data,
                colorscale=colours,
                zmin=lo,
                zmax=0.0 if scale == "log" else 1.0,
                showscale=i == 0,
                colorbar=bar if i == 0 else None,
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
    map_px = 0.85 * width_hint / cols  # one map's side, less the spacing, query labels and colour bar
    x_ticks = token_ticks(k_lab, map_px, across=True)
    y_ticks = token_ticks(q_lab, map_px, across=False)
    size = min(x_ticks.size, y_ticks.size)
    for i in range(n_maps):
        suffix = "" if i == 0 else str(i + 1)
        fig.layout[f"yaxis{suffix}"].scaleanchor = f"x{suffix}"  # square cells: y follows its own x
        r, c = divmod(i, cols)
        if c == 0:  # queries along the first column
            fig.layout[f"yaxis{suffix}"].update(
                y_ticks.axis(), tickfont=dict(size=size), showticklabels=True, automargin=True
            )
        if i + cols >= n_maps:  # keys under the lowest map of each column
            fig.layout[f"xaxis{suffix}"].update(
                x_ticks.axis(), tickfont=dict(size=size), showticklabels=True, automargin=True
            )
    cell = width_hint / cols
    label_room = 12 + size * 5 if x_ticks.angle else 24
    fig.update_layout(
        height=int(60 + rows * cell * 1.05 + label_room),
        margin=dict(l=10, r=10, t=40, b=10),
        plot_bgcolor="white",
        showlegend=False,
    )
    return fig, factor
