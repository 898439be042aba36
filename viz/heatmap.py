"""One (q_pos, k_pos) map as a heatmap: query tokens on rows, key tokens on columns, hover giving both and the weight.

Cells sit at integer positions 0…n−1 (so viz.overlays can draw a mask over them); axes are positions labelled
with tokens, never token categories, because plotly would merge a repeated token into one row. Tick labels are
sized for the pixels an axis gets (`token_ticks`): every token where they fit, else a smaller font, labels turned
on the key axis, then every k-th token; a long token is cut with "…" (hover always has it whole).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go

COLORSCALE = "Blues"
LOG_FLOOR = 1e-4  # weights below this share the lowest colour in log mode
HOVER_TOKENS_MAX = 40_000  # cells; above this, hover shows positions instead of token strings (lighter JSON)
# cells; up to this many a pickable map carries one invisible point per cell (a click picks the cell: plotly's
# selection events skip heatmap traces). 128 × 128: above it the SVG points slow the hover; the caller's selectors stay.
PICK_CELLS_MAX = 16_384
WORDS = {
    "query": "query",
    "key": "key",
    "weight": "weight",
    "log": "log scale",
    "colorbar": "attention weight (0–1)",  # the colour bar's title: what a colour means, and its unit
    "colorbar_log": "attention weight (0–1, log scale)",
    "colorbar_map": "share of the map's largest weight (0–1)",  # each map scaled to its own maximum (viz.layer)
}
LABEL_CHARS = 12  # a tick label longer than this is cut with "…"
TICK_SIZES = (14, 12, 11)  # px: the largest that fits; 11 is the least a projector's back row reads
ANGLE = -60  # key labels turn this far when upright ones would overlap


def short_label(text: str, max_chars: int = LABEL_CHARS) -> str:
    """Return text cut to max_chars characters with "…" at the end when it is longer."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _em(text: str) -> float:
    """Return the width of text in font sizes (an ideograph is about 1, a Latin letter about 0.6)."""
    return sum(1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.6 for ch in text)


@dataclass(frozen=True)
class TokenTicks:
    """The labelled positions of a token axis, their text, the font size and the labels' angle."""

    vals: list[int]
    text: list[str]
    size: int
    angle: int

    def axis(self) -> dict[str, Any]:
        """Return the plotly axis settings that draw these labels."""
        return dict(
            tickmode="array",
            tickvals=self.vals,
            ticktext=self.text,
            tickangle=self.angle,
            tickfont=dict(size=self.size),
        )


def token_ticks(
    tokens: Sequence[str], length_px: float, *, across: bool, sizes: Sequence[int] = TICK_SIZES
) -> TokenTicks:
    """Return the tick labels of a token axis `length_px` pixels long: all of them at the largest font that fits.

    across=True for an axis whose labels stand side by side (keys, on x): upright while they fit, else turned by
    ANGLE. Labels along the axis (queries, on y; turned keys) need about 1.3 font sizes each; when even the
    smallest font does not fit, every k-th token is labelled.
    """
    labels = [short_label(str(tok)) for tok in tokens]
    n = len(labels)
    if n == 0:
        return TokenTicks([], [], sizes[0], 0)
    per = max(length_px, 1.0) / n  # pixels per cell
    widest = max(_em(lab) for lab in labels)
    turned = ANGLE if across else 0
    for size in sizes:
        if across and widest * size + 4 <= per:
            return TokenTicks(list(range(n)), labels, size, 0)
        step_px = 1.3 * size / (math.sin(math.radians(-ANGLE)) if across else 1.0)
        if step_px <= per:
            return TokenTicks(list(range(n)), labels, size, turned)
    if across:  # upright-turned labels need the least room: every token still named before any is left out
        for size in sizes:
            if 1.3 * size <= per:
                return TokenTicks(list(range(n)), labels, size, -90)
    size = sizes[-1]
    step = math.ceil(1.3 * size / (math.sin(math.radians(-ANGLE)) if across else 1.0) / per)
    vals = list(range(0, n, step))
    return TokenTicks(vals, [labels[i] for i in vals], size, turned)


def token_labels(tokens: Sequence[str], positions: Sequence[int]) -> list[str]:
    """Return 'token · position' labels: unique even when a token repeats."""
    return [f"{tok} · {pos}" for tok, pos in zip(tokens, positions, strict=True)]


def _with_raw(labels: list[str], shown: Sequence[str], raw: Sequence[str] | None) -> list[str]:
    """Return labels with ` [raw]` appended where the raw token differs from the shown one."""
    if raw is None or len(raw) != len(shown):
        return labels
    return [lab if r == s else f"{lab} [{r}]" for lab, s, r in zip(labels, shown, raw, strict=True)]


def map_axes(
    weights: np.ndarray,
    tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    q_pos: Sequence[int] | None = None,
    k_pos: Sequence[int] | None = None,
) -> tuple[np.ndarray, list[str], list[str], list[int], list[int]]:
    """Return a (q_pos, k_pos) map as float32 with its query/key tokens and positions, checked to fit together."""
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 2:
        raise ValueError(f"expected a (q_pos, k_pos) map, got shape {w.shape}")
    q_tok = list(tokens)
    k_tok = list(key_tokens) if key_tokens is not None else q_tok
    if w.shape != (len(q_tok), len(k_tok)):
        raise ValueError(f"map is {w.shape} but there are {len(q_tok)} query and {len(k_tok)} key tokens")
    nq, nk = w.shape
    qp = list(q_pos) if q_pos is not None else list(range(nq))
    kp = list(k_pos) if k_pos is not None else list(range(nk))
    if len(qp) != nq or len(kp) != nk:
        raise ValueError(f"{len(qp)} query and {len(kp)} key positions for a {w.shape} map")
    return w, q_tok, k_tok, qp, kp


def head_heatmap(
    weights: np.ndarray,
    tokens: Sequence[str],
    title: str = "",
    key_tokens: Sequence[str] | None = None,
    hover: str | None = None,
    *,
    q_pos: Sequence[int] | None = None,
    k_pos: Sequence[int] | None = None,
    log: bool = False,
    zmax: float | None = None,
    words: Mapping[str, str] | None = None,
    height: int | None = None,
    raw_tokens: Sequence[str] | None = None,
    raw_key_tokens: Sequence[str] | None = None,
    width_hint: int = 640,
    pickable: bool = False,
) -> go.Figure:
    """Return a heatmap of one (q_pos, k_pos) map, token labels on both axes and a colour bar with its unit.

    raw_tokens / raw_key_tokens: the tokenizer's own strings (e.g. byte-level BPE `Ġthe`) when `tokens` are
    readable forms of them; hover then shows the raw token beside the readable one where they differ.

    q_pos / k_pos are the rows' and columns' positions in the full input (when the map is a window or has
    [CLS]/[SEP] removed); hover shows them with the tokens. log colours log10(weight) (floored at 1e-4) and
    labels the colour bar in weights. customdata per cell is (query label, key label, weight text) — or, above
    HOVER_TOKENS_MAX cells, (query position, key position, weight) as numbers. width_hint: the figure's width in
    pixels where it will be shown, to size the key labels (`token_ticks`); words["colorbar"] titles the bar.

    pickable (and at most PICK_CELLS_MAX cells): a second trace "cells", one invisible point per cell, carries the
    hover (the same customdata, plus the cell's query and key positions as customdata[3] and [4]) so that a click
    selects that point (`cell_of`); the heatmap itself then has no hover. The axes keep the cells' own range.
    """
    w, q_tok, k_tok, qp, kp = map_axes(weights, tokens, key_tokens, q_pos, k_pos)
    nq, nk = w.shape
    wd = {**WORDS, **(words or {})}

    if w.size <= HOVER_TOKENS_MAX:
        qs = np.array(_with_raw(token_labels(q_tok, qp), q_tok, raw_tokens), dtype=object)
        ks = np.array(
            _with_raw(token_labels(k_tok, kp), k_tok, raw_key_tokens if raw_key_tokens is not None else raw_tokens),
            dtype=object,
        )
        custom = np.empty((nq, nk, 3), dtype=object)
        custom[..., 0] = qs[:, None]
        custom[..., 1] = ks[None, :]
        custom[..., 2] = np.vectorize(lambda v: f"{v:.4f}", otypes=[object])(w) if w.size else w
        default_hover = f"{wd['query']} %{{customdata[0]}}<br>{wd['key']} %{{customdata[1]}}<br>{wd['weight']} %{{customdata[2]}}<extra></extra>"
    else:
        custom = np.stack(
            np.broadcast_arrays(np.asarray(qp, np.float32)[:, None], np.asarray(kp, np.float32)[None, :], w), -1
        )
        default_hover = f"{wd['query']} %{{customdata[0]}}<br>{wd['key']} %{{customdata[1]}}<br>{wd['weight']} %{{customdata[2]:.4f}}<extra></extra>"

    top = float(zmax) if zmax is not None else (float(w.max()) if w.size else 1.0)
    top = top if top > 0 else 1.0
    if log:
        z = np.log10(np.clip(w, LOG_FLOOR, None))
        lo, hi = math.log10(LOG_FLOOR), math.log10(max(top, LOG_FLOOR * 10))
        ticks = list(range(int(lo), int(math.floor(hi)) + 1))
        colorbar: dict[str, Any] = dict(
            title=dict(text=wd["colorbar_log"], side="right"), tickvals=ticks, ticktext=[f"{10.0**t:g}" for t in ticks]
        )
    else:
        z, lo, hi = w, 0.0, top
        colorbar = dict(title=dict(text=wd["colorbar"], side="right"))
    colorbar["thickness"] = 14  # px: the map, not its legend, gets a narrow column's width
    pick = pickable and 0 < w.size <= PICK_CELLS_MAX
    heat = go.Heatmap(
        z=z,
        x=np.arange(nk),
        y=np.arange(nq),
        colorscale=COLORSCALE,
        zmin=lo,
        zmax=hi,
        colorbar=colorbar,
        name="attention",
        **(dict(hoverinfo="skip") if pick else dict(customdata=custom, hovertemplate=hover or default_hover)),
    )
    fig = go.Figure(heat if not pick else [heat, _cell_points(custom, qp, kp, hover or default_hover)])
    n = max(nq, nk)
    fig_height = height or min(900, 240 + 18 * n)
    # The plot area: the figure less the query labels and the colour bar across, the title and key labels down.
    xt = token_ticks(k_tok, max(width_hint - 170, 80), across=True)
    yt = token_ticks(q_tok, max(fig_height - (150 if title else 110) - 80, 60), across=False)
    size = min(xt.size, yt.size)  # one font for both axes
    fig.update_layout(
        title=dict(text=title, y=0.99, yanchor="top") if title else None,
        xaxis=dict(
            xt.axis(),
            tickfont=dict(size=size),
            side="top",
            title=wd["key"],
            showgrid=False,
            zeroline=False,
            automargin=True,
        ),
        yaxis=dict(
            yt.axis(),
            tickfont=dict(size=size),
            autorange="reversed",
            title=wd["query"],
            showgrid=False,
            zeroline=False,
            automargin=True,
        ),
        height=fig_height,
        margin=dict(l=10, r=10, t=150 if title else 110, b=10),
        plot_bgcolor="white",
    )
    if pick:  # the nearest cell answers anywhere on the map; the invisible points do not widen the axes
        fig.update_layout(hovermode="closest", hoverdistance=-1)
        fig.update_xaxes(range=[-0.5, nk - 0.5], autorange=False)
        fig.update_yaxes(range=[nq - 0.5, -0.5], autorange=False)
    return fig


def _cell_points(custom: np.ndarray, qp: Sequence[int], kp: Sequence[int], hover: str) -> go.Scatter:
    """Return one invisible square point per cell (row-major), carrying the cell's hover and its positions."""
    nq, nk = custom.shape[:2]
    pos = np.empty((nq, nk, 2), dtype=object)
    pos[..., 0] = np.asarray(qp, dtype=object)[:, None]
    pos[..., 1] = np.asarray(kp, dtype=object)[None, :]
    data = np.concatenate([custom.astype(object), pos], axis=-1).reshape(nq * nk, -1)
    return go.Scatter(
        x=np.tile(np.arange(nk), nq),
        y=np.repeat(np.arange(nq), nk),
        customdata=data,
        mode="markers",
        marker=dict(symbol="square", size=8, opacity=0.0, color="black"),
        hovertemplate=hover,
        showlegend=False,
        name="cells",
    )


def cell_of(points: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """Return the (query, key) positions of the first clicked cell among plotly selection points, else None.

    points: a pickable head_heatmap's selection (Streamlit's `event.selection.points`); a point of another trace,
    or one without the two positions, is passed over.
    """
    for p in points:
        data = p.get("customdata")
        if isinstance(data, list | tuple) and len(data) >= 5:
            try:
                return int(data[3]), int(data[4])
            except (TypeError, ValueError):
                continue
    return None


def add_segment_lines(
    fig: go.Figure, q_segments: Sequence[int], k_segments: Sequence[int], color: str = "#e4572e"
) -> go.Figure:
    """Draw a dashed line between sentence A and B on each axis of a heatmap whose cells sit at 0…n−1."""
    for i in range(1, len(k_segments)):
        if k_segments[i] != k_segments[i - 1]:
            fig.add_vline(x=i - 0.5, line=dict(color=color, width=2, dash="dash"))
    for i in range(1, len(q_segments)):
        if q_segments[i] != q_segments[i - 1]:
            fig.add_hline(y=i - 0.5, line=dict(color=color, width=2, dash="dash"))
    return fig
