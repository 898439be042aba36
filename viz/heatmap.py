"""One (q_pos, k_pos) map as a heatmap: query tokens on rows, key tokens on columns, hover giving both and the weight.

Cells sit at integer positions 0…n−1 (so viz.overlays can draw a mask over them); axes are positions labelled
with tokens, never token categories, because plotly would merge a repeated token into one row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

COLORSCALE = "Blues"
LOG_FLOOR = 1e-4  # weights below this share the lowest colour in log mode
HOVER_TOKENS_MAX = 40_000  # cells; above this, hover shows positions instead of token strings (lighter JSON)
WORDS = {"query": "query", "key": "key", "weight": "weight", "log": "log scale"}


def token_labels(tokens: Sequence[str], positions: Sequence[int]) -> list[str]:
    """Return 'token · position' labels: unique even when a token repeats."""
    return [f"{tok} · {pos}" for tok, pos in zip(tokens, positions, strict=True)]


def _with_raw(labels: list[str], shown: Sequence[str], raw: Sequence[str] | None) -> list[str]:
    """Return labels with ` [raw]` appended where the raw token differs from the shown one."""
    if raw is None or len(raw) != len(shown):
        return labels
    return [lab if r == s else f"{lab} [{r}]" for lab, s, r in zip(labels, shown, raw, strict=True)]


def thin_ticks(n: int, max_ticks: int = 60) -> list[int]:
    """Return the indices to label on an axis of n cells, every k-th one when there are more than max_ticks."""
    step = max(1, math.ceil(n / max_ticks))
    return list(range(0, n, step))


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
    max_ticks: int = 60,
    height: int | None = None,
    raw_tokens: Sequence[str] | None = None,
    raw_key_tokens: Sequence[str] | None = None,
) -> go.Figure:
    """Return a heatmap of one (q_pos, k_pos) map.

    raw_tokens / raw_key_tokens: the tokenizer's own strings (e.g. byte-level BPE `Ġthe`) when `tokens` are
    readable forms of them; hover then shows the raw token beside the readable one where they differ.

    q_pos / k_pos are the rows' and columns' positions in the full input (when the map is a window or has
    [CLS]/[SEP] removed); hover shows them with the tokens. log colours log10(weight) (floored at 1e-4) and
    labels the colour bar in weights. customdata per cell is (query label, key label, weight text) — or, above
    HOVER_TOKENS_MAX cells, (query position, key position, weight) as numbers.
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
        colorbar = dict(title=f"{wd['weight']} ({wd['log']})", tickvals=ticks, ticktext=[f"{10.0**t:g}" for t in ticks])
    else:
        z, lo, hi = w, 0.0, top
        colorbar = dict(title=wd["weight"])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=np.arange(nk),
            y=np.arange(nq),
            customdata=custom,
            colorscale=COLORSCALE,
            zmin=lo,
            zmax=hi,
            hovertemplate=hover or default_hover,
            colorbar=colorbar,
            name="attention",
        )
    )
    xt, yt = thin_ticks(nk, max_ticks), thin_ticks(nq, max_ticks)
    n = max(nq, nk)
    tick_size = (
        14 if max(len(xt), len(yt)) <= 24 else 12 if max(len(xt), len(yt)) <= 40 else 10
    )  # legible on a projector
    fig.update_layout(
        title=dict(text=title, y=0.99, yanchor="top") if title else None,
        xaxis=dict(
            tickmode="array",
            tickvals=xt,
            ticktext=[k_tok[i] for i in xt],
            side="top",
            tickangle=-60,
            title=wd["key"],
            showgrid=False,
            zeroline=False,
            tickfont=dict(size=tick_size),
            automargin=True,
        ),
        yaxis=dict(
            tickmode="array",
            tickvals=yt,
            ticktext=[q_tok[i] for i in yt],
            autorange="reversed",
            title=wd["query"],
            showgrid=False,
            zeroline=False,
            tickfont=dict(size=tick_size),
            automargin=True,
        ),
        height=height or min(900, 240 + 18 * n),
        margin=dict(l=10, r=10, t=150 if title else 110, b=10),
        plot_bgcolor="white",
    )
    return fig


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
