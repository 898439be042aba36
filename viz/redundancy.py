"""Redundancy between heads: the clustered all-pairs matrix, the 2-D map of heads, near-duplicate pairs side by side.

numpy arrays and strings in, plotly figures out; every word shown comes from the caller (already translated).
Heads are numbered layer-major (index = layer · heads + head) and named like "L3H5".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from .heatmap import token_ticks

FONT = dict(size=15)  # readable from the back of a lecture hall
# Colour of a head's layer wherever heads are points or labels: Viridis without its last, pale-yellow
# stretch, which vanishes on white (and on a washed-out projector).
LAYER_SCALE = [[i / 8, c] for i, c in enumerate(sample_colorscale("Viridis", [0.82 * i / 8 for i in range(9)]))]


def layer_colours(n_layers: int) -> list[str]:
    """Return one colour per layer from LAYER_SCALE (dark purple = first, green = last)."""
    return sample_colorscale(LAYER_SCALE, [i / max(n_layers - 1, 1) for i in range(n_layers)])


def redundancy_heatmap(
    matrix: np.ndarray,
    order: Sequence[int],
    names: Sequence[str],
    n_heads: int,
    title: str,
    value_name: str,
    similarity: bool,
    zmax: float | None = None,
) -> go.Figure:
    """Return the (N, N) matrix as a heatmap with rows and columns in cluster order.

    similarity: True for cosine/CKA (1 = alike), False for a divergence (0 = alike); either way darker means
    more alike. zmax: top of the colour scale (default: 1 for similarities, the 99th percentile of the
    off-diagonal values for a divergence, so that near-duplicates stand out). Tick labels are coloured by
    layer, at a readable size: beyond what fits, every k-th head is named (hover names every one).
    """
    m = np.asarray(matrix, dtype=float)
    idx = np.asarray(order, dtype=int)
    m = m[np.ix_(idx, idx)]
    labels = [names[i] for i in idx]
    colours = layer_colours(len(names) // n_heads)
    ticktext = [f"<span style='color:{colours[i // n_heads]}'>{names[i]}</span>" for i in idx]
    N = len(idx)
    if zmax is None:
        off = m[~np.eye(N, dtype=bool)] if N > 1 else np.array([1.0])
        zmax = 1.0 if similarity else float(np.nanpercentile(off, 99)) if np.isfinite(off).any() else 1.0
    text = np.array(labels, dtype=object)
    custom = np.stack(np.broadcast_arrays(text[:, None], text[None, :]), -1)
    fig = go.Figure(
        go.Heatmap(
            z=m,
            x=list(range(N)),
            y=list(range(N)),
            customdata=custom,
            colorscale="Blues" if similarity else "Blues_r",
            zmin=0.0,
            zmax=zmax,
            hovertemplate="%{customdata[0]} · %{customdata[1]}<br>" + value_name + " %{z:.4f}<extra></extra>",
            colorbar=dict(title=dict(text=value_name, side="right")),
        )
    )
    height = int(min(950, max(520, 12 * N + 160)))
    # As many head names as the plot's side holds at a readable size (every k-th beyond); hover names them all.
    ticks = token_ticks(labels, height - 200, across=False, sizes=(13, 12, 11))
    axis = dict(
        tickmode="array",
        tickvals=ticks.vals,
        ticktext=[ticktext[i] for i in ticks.vals],
        tickfont=dict(size=ticks.size),
        showgrid=False,
        zeroline=False,
    )
    fig.update_layout(
        title=dict(text=title, font=dict(size=17)),
        xaxis=dict(axis, tickangle=-90),
        yaxis=dict(axis, autorange="reversed"),
        height=height,
        margin=dict(l=10, r=10, t=60, b=10),
        font=FONT,
    )
    return fig


def head_map(
    coords: np.ndarray,
    names: Sequence[str],
    n_heads: int,
    labels: Sequence[str],
    label_names: dict[str, str],
    title: str,
    layer_title: str,
) -> go.Figure:
    """Return the 2-D map of heads (MDS coordinates): colour = layer, marker = pattern label."""
    xy = np.asarray(coords, dtype=float)
    layers = np.arange(len(names)) // n_heads
    n_layers = int(layers.max()) + 1 if len(layers) else 1
    symbols = ["circle", "diamond", "square", "triangle-up", "triangle-down", "cross", "star", "circle-open"]
    fig = go.Figure()
    for k, label in enumerate(label_names):
        sel = [i for i, lab in enumerate(labels) if lab == label]
        if not sel:
            continue
        fig.add_trace(
            go.Scatter(
                x=xy[sel, 0],
                y=xy[sel, 1],
                mode="markers",
                name=label_names[label],
                marker=dict(
                    size=13,
                    symbol=symbols[k % len(symbols)],
                    color=layers[sel],
                    colorscale=LAYER_SCALE,
                    cmin=0,
                    cmax=max(n_layers - 1, 1),
                    line=dict(width=1, color="#333"),
                    colorbar=dict(title=dict(text=layer_title), dtick=1, x=1.02) if not fig.data else None,
                    showscale=not fig.data,
                ),
                text=[names[i] for i in sel],
                hovertemplate="%{text}<extra>" + label_names[label] + "</extra>",
            )
        )
    fig.update_layout(
        title=dict(text=title, font=dict(size=17)),
        xaxis=dict(showticklabels=False, zeroline=False, title=None),
        yaxis=dict(showticklabels=False, zeroline=False, title=None, scaleanchor="x"),
        legend=dict(orientation="h", y=-0.05, x=0, font=dict(size=14)),
        height=620,
        margin=dict(l=10, r=10, t=60, b=10),
        font=FONT,
    )
    return fig


def pair_maps(
    pairs: Sequence[tuple[np.ndarray, np.ndarray, str, str, str]],
    tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    bar_title: str = "attention weight (0–1)",
    width_hint: int = 880,
) -> go.Figure:
    """Return small attention maps of near-duplicate heads side by side, one pair per row.

    pairs: (map of head a, map of head b, name a, name b, what the pair has in common) for each pair; maps
    are (q_pos, k_pos): rows over `tokens`, columns over `key_tokens` (cross-attention) or `tokens` again.
    Each row is headed "a ≈ b · <what they share>"; both maps of a row share one colour range, whose colour bar
    (titled bar_title) stands at the row's right. Token labels are sized for a figure width_hint pixels wide.
    """
    rows = max(len(pairs), 1)
    titles = [f"<b>{name}</b>" for _, _, na, nb, _ in pairs for name in (na, nb)]
    keys = list(tokens if key_tokens is None else key_tokens)
    n = max(len(tokens), len(keys))
    row_px = 230 + 7 * min(n, 40)
    fig = make_subplots(
        rows=rows,
        cols=2,
        subplot_titles=titles,
        horizontal_spacing=0.1,
        vertical_spacing=min(0.3, 110 / (rows * row_px)),
    )
    map_px = 0.38 * width_hint  # one of the two maps of a row, less the spacing, labels and colour bar
    x_ticks = token_ticks(keys, map_px, across=True)
    y_ticks = token_ticks(list(tokens), min(map_px, row_px - 120), across=False)
    size = min(x_ticks.size, y_ticks.size)
    custom = np.stack(
        np.broadcast_arrays(np.array(tokens, dtype=object)[:, None], np.array(keys, dtype=object)[None, :]), -1
    )
    for r, (a, b, na, nb, what) in enumerate(pairs, start=1):
        zmax = float(max(np.max(a), np.max(b))) if np.size(a) else 1.0
        for c, w in enumerate((a, b), start=1):
            fig.add_trace(
                go.Heatmap(
                    z=w,
                    colorscale="Blues",
                    zmin=0,
                    zmax=zmax,
                    showscale=c == 2,
                    customdata=custom,
                    hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>",
                ),
                row=r,
                col=c,
            )
            fig.update_xaxes(x_ticks.axis(), tickfont=dict(size=size), automargin=True, row=r, col=c)
            fig.update_yaxes(
                y_ticks.axis(), tickfont=dict(size=size), autorange="reversed", automargin=True, row=r, col=c
            )
        left = fig.layout.annotations[2 * (r - 1)]  # head a's title: the pair's line goes ~28 px above it
        fig.add_annotation(
            text=f"{na} ≈ {nb} · {what}",
            x=0.5,
            xref="paper",
            xanchor="center",
            y=left.y + 28 / (rows * row_px),
            yref="paper",
            yanchor="bottom",
            showarrow=False,
            font=dict(size=16, color="#222"),
        )
    fig.update_annotations(font_size=15)
    fig.update_layout(height=60 + rows * row_px, margin=dict(l=10, r=10, t=70, b=10), font=FONT)
    for r in range(1, len(pairs) + 1):  # each row's colour bar beside its own two maps
        lo, hi = fig.layout[f"yaxis{2 * r}"].domain
        trace = next(tr for tr in fig.data if tr.showscale and tr.yaxis == f"y{2 * r}")
        trace.update(colorbar=dict(y=(lo + hi) / 2, len=hi - lo, title=dict(text=bar_title, side="right")))
    return fig


def near_duplicate_bars(counts: np.ndarray, n_heads: int, title: str, layer_title: str, count_title: str) -> go.Figure:
    """Return bars: per layer, how many of its heads have a near-duplicate."""
    counts = np.asarray(counts, dtype=int)
    L = len(counts)
    fig = go.Figure(
        go.Bar(
            x=list(range(L)),
            y=counts,
            marker_color=layer_colours(L),
            text=[f"{c} / {n_heads}" for c in counts],
            textposition="outside",
            hovertemplate=layer_title + " %{x}: %{y}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=title, font=dict(size=17)),
        xaxis=dict(title=layer_title, dtick=1),
        yaxis=dict(title=count_title, range=[0, n_heads + 1.5], dtick=max(1, n_heads // 6)),
        height=360,
        margin=dict(l=10, r=10, t=60, b=10),
        font=FONT,
    )
    return fig
