"""One head's attention map as a heatmap: query tokens on rows, key tokens on columns."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

COLORSCALE = "Blues"


def head_heatmap(
    weights: np.ndarray,
    tokens: Sequence[str],
    title: str = "",
    key_tokens: Sequence[str] | None = None,
    hover: str = "query %{y}: %{customdata[0]}<br>key %{x}: %{customdata[1]}<br>weight %{z:.4f}<extra></extra>",
) -> go.Figure:
    """Return a heatmap of one (q_pos, k_pos) map.

    Axes are positions labelled with tokens, not token categories: plotly would merge a repeated token.
    """
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 2:
        raise ValueError(f"expected a (q_pos, k_pos) map, got shape {w.shape}")
    q_tok = list(tokens)
    k_tok = list(key_tokens) if key_tokens is not None else q_tok
    if w.shape != (len(q_tok), len(k_tok)):
        raise ValueError(f"map is {w.shape} but there are {len(q_tok)} query and {len(k_tok)} key tokens")
    custom = np.stack(np.broadcast_arrays(np.array(q_tok, dtype=object)[:, None], np.array(k_tok, dtype=object)[None, :]), -1)
    fig = go.Figure(
        go.Heatmap(
            z=w,
            x=np.arange(len(k_tok)),
            y=np.arange(len(q_tok)),
            customdata=custom,
            colorscale=COLORSCALE,
            zmin=0.0,
            zmax=float(w.max()) if w.size else 1.0,
            hovertemplate=hover,
            colorbar=dict(title="weight"),
        )
    )
    n = max(len(q_tok), len(k_tok))
    fig.update_layout(
        title=dict(text=title, y=0.99, yanchor="top"),
        xaxis=dict(tickmode="array", tickvals=list(range(len(k_tok))), ticktext=k_tok, side="top",
                   tickangle=-60, title="key"),
        yaxis=dict(tickmode="array", tickvals=list(range(len(q_tok))), ticktext=q_tok, autorange="reversed",
                   title="query"),
        height=min(900, 220 + 18 * n),
        margin=dict(l=10, r=10, t=150 if title else 90, b=10),
    )
    return fig
