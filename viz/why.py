"""Why here: one attention score's exact parts as bars (numpy in, plotly out; the numbers come from
models.analysis.explain).

- `frequency_bars`: one bar per rotary frequency pair, x = the pair's wavelength in tokens (2π/θ), so the fast
  pairs sit left and the slow ones right — the RoPE decay on the real model;
- `pair_bars`: the largest query-part × key-part cells, as shares of the score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

POS, NEG = "#2a6fdb", "#e4572e"  # a part that raises the score, one that lowers it

WORDS = {
    "pair": "pair",
    "wavelength": "wavelength (tokens)",
    "contribution": "contribution to the score",
    "share": "share of the score",
    "query_side": "query side",
    "key_side": "key side",
}


def _words(words: Mapping[str, str] | None) -> dict[str, str]:
    return {**WORDS, **(words or {})}


def frequency_bars(
    by_frequency: np.ndarray, frequencies: np.ndarray, title: str = "", words: Mapping[str, str] | None = None
) -> go.Figure:
    """Return a bar per rotary pair: its term of the score (sum = the score), over the pair's wavelength (log x)."""
    v = np.asarray(by_frequency, dtype=np.float64)
    theta = np.asarray(frequencies, dtype=np.float64)
    if v.shape != theta.shape or v.ndim != 1:
        raise ValueError(f"{v.shape} terms for {theta.shape} frequencies")
    w = _words(words)
    wavelength = 2 * np.pi / np.maximum(theta, 1e-30)
    fig = go.Figure(
        go.Bar(
            x=wavelength,
            y=v,
            customdata=np.arange(len(v)),
            marker_color=[POS if x >= 0 else NEG for x in v],
            hovertemplate=f"{w['pair']} %{{customdata}}<br>{w['wavelength']} %{{x:.3g}}<br>"
            f"{w['contribution']} %{{y:+.4f}}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=title, y=0.97, yanchor="top") if title else None,
        xaxis=dict(title=w["wavelength"], type="log", automargin=True),
        yaxis=dict(title=w["contribution"], zeroline=True, automargin=True),
        height=300,
        margin=dict(l=10, r=10, t=50 if title else 10, b=10),
        plot_bgcolor="white",
        bargap=0.1,
    )
    return fig


def pair_bars(
    top: Sequence[tuple[str, str, float]], score: float, title: str = "", words: Mapping[str, str] | None = None
) -> go.Figure:
    """Return horizontal bars of the largest component-pair cells (query part × key part) as shares of the score."""
    w = _words(words)
    labels = [f"{a} × {b}" for a, b, _ in top]
    values = np.array([v for _, _, v in top], dtype=np.float64)
    shares = values / score * 100 if score else np.zeros_like(values)
    fig = go.Figure(
        go.Bar(
            y=labels[::-1],
            x=shares[::-1],
            orientation="h",
            customdata=np.stack([values[::-1]], axis=-1) if len(values) else None,
            marker_color=[POS if x >= 0 else NEG for x in values[::-1]],
            hovertemplate=f"%{{y}}<br>{w['share']} %{{x:.1f}} %<br>%{{customdata[0]:+.4f}}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=title, y=0.97, yanchor="top") if title else None,
        xaxis=dict(title=f"{w['share']} (%)", zeroline=True, automargin=True),
        yaxis=dict(title=f"{w['query_side']} × {w['key_side']}", automargin=True),
        height=max(220, 28 * len(labels) + 80),
        margin=dict(l=10, r=10, t=50 if title else 10, b=10),
        plot_bgcolor="white",
    )
    return fig
