"""Token-to-token lines for one head (bertviz's head view, drawn by plotly): queries on the left, keys on the right.

Plotly, not bertviz's D3: it works offline (Streamlit ships plotly.js), exports PNG/SVG from the same menu as
every other figure, and stays light: lines below min_weight are not drawn, and lines are grouped into a few
opacity bands, one trace per band, instead of one SVG element per weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from .heatmap import WORDS, map_axes, token_labels

LINE_RGB = (8, 81, 156)  # the dark end of the Blues scale used by the heatmaps
BANDS = (0.01, 0.05, 0.1, 0.2, 0.35, 0.6, 1.0001)  # weight bands; each band is one trace of one opacity
ROW_PX = 22


def line_segments(
    weights: np.ndarray, min_weight: float = 0.01, focus: int | None = None, x0: float = 0.0, x1: float = 1.0
) -> list[tuple[float, float, list[float | None], list[float | None]]]:
    """Return (band_low, band_high, xs, ys) per non-empty weight band: None-separated segments query i → key j.

    Only weights ≥ min_weight are drawn; with focus, only the lines of query row `focus`.
    """
    w = np.asarray(weights, dtype=np.float32)
    rows = np.arange(w.shape[0]) if focus is None else np.array([focus])
    out = []
    for lo, hi in zip(BANDS[:-1], BANDS[1:], strict=True):
        lo_ = max(lo, min_weight)
        if lo_ >= hi:
            continue
        sub = w[rows]
        qi, kj = np.nonzero((sub >= lo_) & (sub < hi))
        if not len(qi):
            continue
        qi = rows[qi]
        xs: list[float | None] = []
        ys: list[float | None] = []
        for i, j in zip(qi.tolist(), kj.tolist(), strict=True):
            xs += [x0, x1, None]
            ys += [i, j, None]
        out.append((lo, hi, xs, ys))
    return out


def lines_figure(
    weights: np.ndarray,
    tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    q_pos: Sequence[int] | None = None,
    k_pos: Sequence[int] | None = None,
    focus: int | None = None,
    min_weight: float = 0.01,
    title: str = "",
    words: Mapping[str, str] | None = None,
    top_k: int = 3,
) -> go.Figure:
    """Return the line view of one (q_pos, k_pos) map: a line from query i to key j for every weight ≥ min_weight.

    A line's opacity and width grow with its weight (bands in BANDS). focus (a row index) keeps only that query's
    lines and shades the keys by their weight. The query markers carry customdata = row index, so a click on a
    query token can set the focus; their hover lists the query's top_k keys.
    """
    w, q_tok, k_tok, qp, kp = map_axes(weights, tokens, key_tokens, q_pos, k_pos)
    nq, nk = w.shape
    wd = {**WORDS, **(words or {})}
    if focus is not None and not 0 <= focus < nq:
        focus = None

    n = max(nq, nk)
    row_px = ROW_PX if n <= 32 else max(11, round(ROW_PX * 32 / n))  # long windows: denser rows, same height
    font, dot = (14, 9) if row_px >= 18 else (11, 6)
    fig = go.Figure()
    r, g, b = LINE_RGB
    for lo, hi, xs, ys in line_segments(w, min_weight, focus, 0.0, 1.0):
        mid = min(1.0, (lo + min(hi, 1.0)) / 2)
        alpha = 0.15 + 0.85 * mid**0.7
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line=dict(color=f"rgba({r},{g},{b},{alpha:.2f})", width=1 + 5 * mid),
                hoverinfo="skip",
                showlegend=False,
                name=f"{wd['weight']} {lo:g}–{min(hi, 1.0):g}",
            )
        )

    q_labels, k_labels = token_labels(q_tok, qp), token_labels(k_tok, kp)
    tops = []
    for i in range(nq):
        order = np.argsort(-w[i])[:top_k]
        tops.append("<br>".join(f"→ {k_tok[j]} · {kp[j]}: {w[i, j]:.3f}" for j in order))
    q_colour = ["#e4572e" if i == focus else f"rgb({r},{g},{b})" for i in range(nq)]
    fig.add_trace(
        go.Scatter(
            x=[0.0] * nq,
            y=list(range(nq)),
            mode="markers+text",
            text=q_tok,
            textposition="middle left",
            customdata=[[i, q_labels[i], tops[i]] for i in range(nq)],
            marker=dict(size=dot, color=q_colour),
            hovertemplate=f"{wd['query']} %{{customdata[1]}}<br>%{{customdata[2]}}<extra></extra>",
            showlegend=False,
            name=wd["query"],
            textfont=dict(size=font),
        )
    )
    if focus is not None:
        shade = np.clip(w[focus] / max(float(w[focus].max()), 1e-9), 0, 1)
        k_colour = [f"rgba({r},{g},{b},{0.15 + 0.85 * s:.2f})" for s in shade]
        k_hover = [f"{wd['weight']} {v:.4f}" for v in w[focus]]
    else:
        k_colour = [f"rgb({r},{g},{b})"] * nk
        k_hover = [""] * nk
    fig.add_trace(
        go.Scatter(
            x=[1.0] * nk,
            y=list(range(nk)),
            mode="markers+text",
            text=k_tok,
            textposition="middle right",
            customdata=[[j, k_labels[j], k_hover[j]] for j in range(nk)],
            marker=dict(size=dot, color=k_colour),
            hovertemplate=f"{wd['key']} %{{customdata[1]}}<br>%{{customdata[2]}}<extra></extra>",
            showlegend=False,
            name=wd["key"],
            textfont=dict(size=font),
        )
    )
    fig.update_layout(
        title=dict(text=title, y=0.99, yanchor="top") if title else None,
        xaxis=dict(range=[-0.75, 1.75], visible=False, fixedrange=True),
        yaxis=dict(range=[n - 0.5, -0.5], visible=False, fixedrange=True),
        height=120 + row_px * n,
        margin=dict(l=10, r=10, t=60 if title else 20, b=10),
        annotations=[
            dict(x=0.0, y=-0.5, text=f"<b>{wd['query']}</b>", showarrow=False, yanchor="bottom", xanchor="right"),
            dict(x=1.0, y=-0.5, text=f"<b>{wd['key']}</b>", showarrow=False, yanchor="bottom", xanchor="left"),
        ],
        plot_bgcolor="white",
        hovermode="closest",
        dragmode=False,
    )
    return fig
