"""Two runs side by side: Δ maps on a diverging scale centred on 0, the Δ overview of every head, heads ranked.

numpy + tokens in, plotly figures out (no torch, streamlit or models). Δ = B − A: red where run B attends more,
blue where it attends less, white where nothing changed. The hover of a cell names both runs' weights and Δ, so
the three maps of one head read as one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .heatmap import COLORSCALE, WORDS, token_labels
from .overview import Mosaic, downsample_factor, pool_max, render_mosaic

DIVERGING = "RdBu_r"  # −1 blue, 0 white, +1 red
RANKED = "Oranges"
HOVER_CELLS_MAX = 20_000  # per map; above this the hover names positions, not tokens


def _every_kth(n: int, max_ticks: int) -> list[int]:
    """Return the indices to label on an axis of n cells: every k-th one when there are more than max_ticks."""
    return list(range(0, n, max(1, math.ceil(n / max_ticks))))


def pool_signed(maps: np.ndarray, factor: int) -> np.ndarray:
    """Return, per factor × factor block, the value of largest magnitude with its sign: (…, q, k) → (…, ⌈q/f⌉, ⌈k/f⌉).

    A change of −0.4 next to one of +0.1 stays −0.4 when pooled (max pooling alone would keep +0.1).
    """
    a = np.asarray(maps, dtype=np.float32)
    if factor == 1:
        return a
    hi = pool_max(a, factor)
    lo = -pool_max(-a, factor)
    return np.where(hi >= -lo, hi, lo)


def delta_levels(delta: np.ndarray, top: float) -> np.ndarray:
    """Return colour levels in [0, 1] for Δ: 0.5 ± ½·√(|Δ| / top), so small changes stay visible (signed √)."""
    d = np.asarray(delta, dtype=np.float32)
    top = top if top > 0 else 1.0
    return 0.5 + 0.5 * np.sign(d) * np.sqrt(np.clip(np.abs(d) / top, 0.0, 1.0))


def delta_mosaic(
    delta: np.ndarray,
    keep: np.ndarray | None = None,
    max_tile: int = 128,
    min_tile: int = 48,
    gap: int = 2,
    group: int = 1,
) -> tuple[Mosaic, float]:
    """Return (the mosaic of every head's Δ (layers, heads, q_pos, k_pos), the |Δ| at the scale's ends).

    One diverging scale for every tile, centred on 0 and running to the largest |Δ| of all heads; colour ∝ signed
    √(|Δ| / that). Longer maps are pooled keeping each block's largest change with its sign; cells keep hides
    (in both runs) are grey.
    """
    d = np.asarray(delta, dtype=np.float32)
    if d.ndim != 4:
        raise ValueError(f"expected (layers, heads, q_pos, k_pos), got shape {d.shape}")
    L, H, q, k = d.shape
    factor = downsample_factor(q, k, max_tile)
    pooled = pool_signed(d, factor)
    top = float(np.abs(pooled).max()) if pooled.size else 0.0
    levels = delta_levels(pooled, top)
    small_keep = None if keep is None else pool_max(np.asarray(keep, dtype=bool), factor)
    mosaic = render_mosaic(
        levels,
        small_keep,
        max_tile=max_tile,
        min_tile=min_tile,
        gap=gap,
        scale="linear",
        colorscale=DIVERGING,
        group=group,
    )
    return dataclasses.replace(mosaic, factor=factor, n_values=L * H * q * k), top


def _labels(tokens: Sequence[str], positions: Sequence[int], other: Sequence[str] | None) -> list[str]:
    """Return 'token · position' labels; where the other run's token differs, 'a | b · position'."""
    shown = [tok.strip() or tok for tok in tokens]  # byte-level tokens carry their leading space
    if other is None or len(other) != len(tokens):
        return token_labels(shown, positions)
    return [
        f"{a} | {b.strip() or b} · {p}" if raw != b else f"{a} · {p}"
        for a, raw, b, p in zip(shown, tokens, other, positions, strict=True)
    ]


def paired_heatmaps(
    maps: Sequence[np.ndarray],
    titles: Sequence[str],
    names: Sequence[str],
    tokens: Sequence[str],
    *,
    key_tokens: Sequence[str] | None = None,
    other_tokens: Sequence[str] | None = None,
    q_pos: Sequence[int] | None = None,
    k_pos: Sequence[int] | None = None,
    delta: int | None = None,
    words: Mapping[str, str] | None = None,
    title: str = "",
    height: int | None = None,
    max_ticks: int = 40,
) -> go.Figure:
    """Return one figure of (q_pos, k_pos) maps side by side, one subplot each, hover giving every map's value.

    maps: two or three maps of the same shape (run A, run B, and their Δ at index `delta`; or raw and
    value-weighted attention). names: each map's short name in the hover ("A", "B", "Δ"). The maps other than Δ
    share one colour range (0 to their largest value), so their colours compare; Δ gets a diverging scale
    centred on 0, symmetric to its largest |value|. other_tokens: run B's tokens, shown beside A's where they
    differ (a minimal pair).
    """
    ms = [np.asarray(m, dtype=np.float32) for m in maps]
    if not ms or any(m.shape != ms[0].shape or m.ndim != 2 for m in ms):
        raise ValueError(f"expected maps of one (q_pos, k_pos) shape, got {[m.shape for m in ms]}")
    if not (len(titles) == len(names) == len(ms)):
        raise ValueError(f"{len(ms)} maps, {len(titles)} titles and {len(names)} names")
    nq, nk = ms[0].shape
    q_tok = list(tokens)
    k_tok = list(key_tokens) if key_tokens is not None else q_tok
    if (len(q_tok), len(k_tok)) != (nq, nk):
        raise ValueError(f"maps are {ms[0].shape} but there are {len(q_tok)} query and {len(k_tok)} key tokens")
    qp = list(q_pos) if q_pos is not None else list(range(nq))
    kp = list(k_pos) if k_pos is not None else list(range(nk))
    wd = {**WORDS, **(words or {})}
    q_lab = _labels(q_tok, qp, other_tokens)
    k_lab = _labels(k_tok, kp, other_tokens if key_tokens is None else None)

    shared = [m for i, m in enumerate(ms) if i != delta]
    top = max((float(m.max()) for m in shared if m.size), default=1.0) or 1.0
    d_top = float(np.abs(ms[delta]).max()) if delta is not None and ms[delta].size else 1.0
    d_top = d_top or 1.0

    if nq * nk <= HOVER_CELLS_MAX:
        custom = np.empty((nq, nk, 2 + len(ms)), dtype=object)
        custom[..., 0] = np.asarray(q_lab, dtype=object)[:, None]
        custom[..., 1] = np.asarray(k_lab, dtype=object)[None, :]
        for i, m in enumerate(ms):
            fmt = "{:+.4f}" if i == delta else "{:.4f}"
            custom[..., 2 + i] = np.vectorize(fmt.format, otypes=[object])(m)
        values = " · ".join(f"{n} %{{customdata[{2 + i}]}}" for i, n in enumerate(names))
        hover = f"{wd['query']} %{{customdata[0]}}<br>{wd['key']} %{{customdata[1]}}<br>{values}<extra></extra>"
    else:
        custom = np.stack(np.broadcast_arrays(*(m for m in ms)), -1)
        values = " · ".join(f"{n} %{{customdata[{i}]:.4f}}" for i, n in enumerate(names))
        hover = f"{wd['query']} %{{y}}<br>{wd['key']} %{{x}}<br>{values}<extra></extra>"

    fig = make_subplots(rows=1, cols=len(ms), subplot_titles=list(titles), horizontal_spacing=0.06)
    for i, m in enumerate(ms):
        is_delta = i == delta
        bar_x = (i + 1) / len(ms) - 0.01
        fig.add_trace(
            go.Heatmap(
                z=m,
                x=np.arange(nk),
                y=np.arange(nq),
                customdata=custom,
                colorscale=DIVERGING if is_delta else COLORSCALE,
                zmin=-d_top if is_delta else 0.0,
                zmax=d_top if is_delta else top,
                zmid=0.0 if is_delta else None,
                hovertemplate=hover,
                name=names[i],
                showscale=is_delta or i == len(ms) - 1 or (delta is not None and i == len(ms) - 2),
                colorbar=dict(x=bar_x, len=0.8, thickness=10, title=dict(text=names[i], side="top")),
            ),
            row=1,
            col=i + 1,
        )
    xt, yt = _every_kth(nk, max_ticks), _every_kth(nq, max_ticks)
    short_q = [lab.rsplit(" · ", 1)[0] for lab in q_lab]
    short_k = [lab.rsplit(" · ", 1)[0] for lab in k_lab]
    tick = 12 if max(len(xt), len(yt)) <= 24 else 10
    for i in range(len(ms)):
        fig.update_xaxes(
            tickmode="array",
            tickvals=xt,
            ticktext=[short_k[j] for j in xt],
            side="top",
            tickangle=-60,
            showgrid=False,
            zeroline=False,
            tickfont=dict(size=tick),
            row=1,
            col=i + 1,
        )
        fig.update_yaxes(
            tickmode="array",
            tickvals=yt,
            ticktext=[short_q[j] for j in yt] if i == 0 else [""] * len(yt),
            autorange="reversed",
            showgrid=False,
            zeroline=False,
            tickfont=dict(size=tick),
            scaleanchor=f"x{'' if i == 0 else i + 1}",
            row=1,
            col=i + 1,
        )
    ticks_px = int(10 + 5.5 * min(14, max((len(t) for t in short_k), default=4)))  # the slanted key labels
    for ann in fig.layout.annotations:  # subplot titles above the key tokens
        ann.update(yshift=ticks_px)
    top = ticks_px + (70 if title else 40)
    fig.update_layout(
        title=dict(text=title, y=0.99, yanchor="top") if title else None,
        # Square maps side by side across a page's main column (~750 px): each about 650 / len(maps) px tall.
        height=height or int(top + 30 + 650 / len(ms)),
        margin=dict(l=10, r=10, t=top, b=10),
        plot_bgcolor="white",
    )
    return fig


def distance_grid(
    distance: np.ndarray,
    title: str,
    value_label: str,
    layer_label: str = "layer",
    head_label: str = "head",
    hover: np.ndarray | None = None,
    selected: tuple[int, int] | None = None,
) -> go.Figure:
    """Return a layers × heads heatmap of how much each head changed; a click on a cell selects that head.

    distance: (layers, heads); hover: (layers, heads) str, one line per head (default: the value). customdata of
    each cell is [layer, head, hover text].
    """
    dist = np.asarray(distance, dtype=np.float64)
    if dist.ndim != 2:
        raise ValueError(f"expected (layers, heads), got shape {dist.shape}")
    L, H = dist.shape
    text = (
        np.asarray(hover, dtype=object) if hover is not None else np.vectorize("{:.4f}".format, otypes=[object])(dist)
    )
    custom = np.empty((L, H, 3), dtype=object)
    custom[..., 0] = np.arange(L)[:, None]
    custom[..., 1] = np.arange(H)[None, :]
    custom[..., 2] = text
    top = float(np.nanmax(dist)) if np.isfinite(dist).any() else 1.0
    layers, heads = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    fig = go.Figure(
        [
            go.Heatmap(
                z=np.nan_to_num(dist, nan=0.0),
                x=np.arange(H),
                y=np.arange(L),
                colorscale=RANKED,
                zmin=0.0,
                zmax=top if top > 0 else 1.0,
                hoverinfo="skip",
                colorbar=dict(title=dict(text=value_label, side="right"), thickness=12),
                xgap=1,
                ygap=1,
                name="distance",
            ),
            # One invisible point per head: it carries the hover and makes the cell clickable (plotly selects
            # points, not heatmap cells), as the overview's tiles do.
            go.Scatter(
                x=heads.ravel(),
                y=layers.ravel(),
                customdata=custom.reshape(L * H, 3),
                mode="markers",
                marker=dict(size=14, symbol="square", opacity=0.0, color="black"),
                hovertemplate="%{customdata[2]}<extra></extra>",
                showlegend=False,
                name="heads",
            ),
        ]
    )
    shapes = []
    if selected is not None and 0 <= selected[0] < L and 0 <= selected[1] < H:
        la, h = selected
        shapes.append(
            dict(type="rect", x0=h - 0.5, x1=h + 0.5, y0=la - 0.5, y1=la + 0.5, line=dict(color="#1f77b4", width=3))
        )
    step = max(1, math.ceil(L / 32))
    fig.update_layout(
        title=dict(text=title, y=0.98, yanchor="top") if title else None,
        xaxis=dict(title=head_label, tickmode="array", tickvals=list(range(H)), side="top", showgrid=False),
        yaxis=dict(
            title=layer_label, tickmode="array", tickvals=list(range(0, L, step)), autorange="reversed", showgrid=False
        ),
        height=int(min(900, 160 + 18 * L)),
        margin=dict(l=10, r=10, t=90 if title else 50, b=10),
        plot_bgcolor="white",
        shapes=shapes,
        hovermode="closest",
        dragmode=False,
    )
    return fig
