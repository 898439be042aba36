"""Per-head figures: the grid of pattern labels, [CLS]/[SEP]/punctuation shares per layer (as Clark et al.'s
figure 2), importance bars, the effect of removing heads, and importance against redundancy.

numpy arrays and strings in, plotly figures out; every word shown comes from the caller (already translated).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .redundancy import FONT, LAYER_SCALE, layer_colours

# Light, colour-blind-safe fills (black text stays readable on all of them).
LABEL_COLOURS = {
    "prev": "#74add1",
    "next": "#abd9e9",
    "cls": "#fdae61",
    "sep": "#f46d43",
    "punct": "#f1b6da",
    "block": "#a6dba0",
    "broad": "#fee08b",
    "heterogeneous": "#e8e8e8",
    "sink": "#fdae61",  # a causal model's attention sink: the place [CLS] holds in an encoder
    "induction": "#66c2a5",
}


def label_grid(
    labels: np.ndarray,
    label_names: dict[str, str],
    short_names: dict[str, str],
    hover: np.ndarray,
    title: str,
    layer_title: str,
    head_title: str,
) -> go.Figure:
    """Return a layers × heads grid coloured by pattern label, each cell naming its label.

    labels: (layers, heads) of keys of LABEL_COLOURS; label_names / short_names: key → shown text;
    hover: (layers, heads) of str with the head's statistics.
    """
    keys = list(LABEL_COLOURS)
    L, H = labels.shape
    z = np.vectorize(keys.index)(labels).astype(float)
    K = len(keys)
    scale = []
    for i, k in enumerate(keys):  # a stepwise scale: value i → colour of label i
        scale += [[i / K, LABEL_COLOURS[k]], [(i + 1) / K, LABEL_COLOURS[k]]]
    text = np.vectorize(lambda k: short_names[k])(labels)
    fig = go.Figure(
        go.Heatmap(
            z=z + 0.5,
            zmin=0,
            zmax=K,
            colorscale=scale,
            showscale=False,
            x=list(range(H)),
            y=list(range(L)),
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=13, color="#111"),
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            xgap=2,
            ygap=2,
        )
    )
    for k in keys:  # a legend: one invisible marker per label
        if k in set(labels.ravel()):
            shown = label_names[k] if short_names[k] == label_names[k] else f"{short_names[k]} = {label_names[k]}"
            fig.add_trace(
                go.Scatter(
                    x=[None],
                    y=[None],
                    mode="markers",
                    name=shown,
                    marker=dict(size=14, symbol="square", color=LABEL_COLOURS[k], line=dict(width=1, color="#999")),
                )
            )
    fig.update_layout(
        title=dict(text=title, font=dict(size=17)) if title else None,
        xaxis=dict(title=head_title, dtick=1, side="top", showgrid=False, zeroline=False),
        yaxis=dict(title=layer_title, dtick=1, autorange="reversed", showgrid=False, zeroline=False),
        legend=dict(orientation="h", y=-0.02, x=0, yanchor="top", font=dict(size=14)),
        plot_bgcolor="white",
        height=(170 if title else 130) + 44 * L,
        margin=dict(l=10, r=10, t=90 if title else 50, b=10),
        font=FONT,
    )
    return fig


def shares_by_layer(
    shares: dict[str, np.ndarray],
    titles: dict[str, str],
    layer_title: str,
    share_title: str,
    mean_name: str,
    head_name: str,
    bands: dict[str, tuple[float, float, str]] | None = None,
    lines: dict[str, float] | None = None,
) -> go.Figure:
    """Return one panel per key class ([CLS], [SEP], punctuation): every head's share as a dot, the layer mean as a line.

    shares: name → (layers, heads) fractions; shown in %. bands: name → (first layer, last layer, text) to
    shade (published findings); lines: name → share for a dashed reference line.
    """
    names = list(shares)
    fig = make_subplots(
        rows=1, cols=len(names), subplot_titles=[titles[n] for n in names], shared_yaxes=True, horizontal_spacing=0.04
    )
    for c, name in enumerate(names, start=1):
        s = 100 * np.asarray(shares[name], dtype=float)
        L, H = s.shape
        jitter = (np.arange(H) - (H - 1) / 2) / max(H, 1) * 0.5  # spread the dots of a layer a little
        x = (np.arange(L)[:, None] + jitter[None, :]).ravel()
        hover = [f"L{layer}H{head}" for layer in range(L) for head in range(H)]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=s.ravel(),
                mode="markers",
                name=head_name,
                showlegend=c == 1,
                text=hover,
                marker=dict(size=7, color=np.repeat(np.arange(L), H), colorscale=LAYER_SCALE, opacity=0.75),
                hovertemplate="%{text}: %{y:.1f} %<extra></extra>",
            ),
            row=1,
            col=c,
        )
        fig.add_trace(
            go.Scatter(
                x=list(range(L)),
                y=np.nanmean(s, axis=1),
                mode="lines+markers",
                name=mean_name,
                showlegend=c == 1,
                line=dict(color="#222", width=3),
                marker=dict(size=8),
                hovertemplate=layer_title + " %{x}: %{y:.1f} %<extra></extra>",
            ),
            row=1,
            col=c,
        )
        # Shapes after the traces: plotly leaves shapes out of a subplot that has no trace yet.
        if bands and name in bands:
            lo, hi, text = bands[name]
            fig.add_vrect(
                x0=lo - 0.5, x1=hi + 0.5, fillcolor="#f46d43", opacity=0.15, line_width=0, layer="below", row=1, col=c
            )
            fig.add_annotation(
                x=(lo + hi) / 2, y=103, text=text, showarrow=False, font=dict(size=13, color="#b2182b"), row=1, col=c
            )
        if lines and name in lines:
            fig.add_hline(y=100 * lines[name], line=dict(dash="dash", color="#b2182b"), row=1, col=c)
        fig.update_xaxes(title=layer_title, dtick=1, range=[-0.6, L - 0.4], row=1, col=c)
    fig.update_yaxes(title=share_title, range=[0, 108], row=1, col=1)
    fig.update_annotations(font=dict(size=15))
    fig.update_layout(
        height=440, margin=dict(l=10, r=10, t=60, b=10), font=FONT, legend=dict(orientation="h", y=-0.2, x=0)
    )
    return fig


def importance_bars(scores: np.ndarray, title: str, layer_title: str, value_title: str) -> go.Figure:
    """Return importance per head (layers, heads) as bars in layer-major order, coloured by layer."""
    s = np.asarray(scores, dtype=float)
    L, H = s.shape
    colours = layer_colours(L)
    names = [f"L{layer}H{head}" for layer in range(L) for head in range(H)]
    fig = go.Figure(
        go.Bar(
            x=list(range(L * H)),
            y=s.ravel(),
            marker_color=[colours[i // H] for i in range(L * H)],
            text=names,
            hovertemplate="%{text}: %{y:.2f}<extra></extra>",
        )
    )
    fig.update_traces(textposition="none")
    fig.update_layout(
        title=dict(text=title, font=dict(size=17)),
        xaxis=dict(
            title=layer_title,
            tickmode="array",
            tickvals=[layer * H + (H - 1) / 2 for layer in range(L)],
            ticktext=[str(layer) for layer in range(L)],
            showgrid=False,
        ),
        yaxis=dict(title=value_title, range=[0, 1.05]),
        bargap=0.15,
        height=380,
        margin=dict(l=10, r=10, t=60, b=10),
        font=FONT,
    )
    return fig


def removal_curve(
    ks: Sequence[int],
    least_first: Sequence[float],
    most_first: Sequence[float],
    total: int,
    title: str,
    x_title: str,
    y_title: str,
    least_name: str,
    most_name: str,
) -> go.Figure:
    """Return the measure after removing k heads, least important first and most important first."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=list(ks),
            y=list(least_first),
            mode="lines+markers",
            name=least_name,
            line=dict(width=3, color="#2166ac"),
            marker=dict(size=8),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=list(ks),
            y=list(most_first),
            mode="lines+markers",
            name=most_name,
            line=dict(width=3, color="#b2182b", dash="dash"),
            marker=dict(size=8),
        )
    )
    fig.update_layout(
        title=dict(text=title, font=dict(size=17)),
        xaxis=dict(title=x_title, range=[-0.5, total + 0.5]),
        yaxis=dict(title=y_title, rangemode="tozero"),
        legend=dict(orientation="h", y=-0.25, x=0),
        height=400,
        margin=dict(l=10, r=10, t=60, b=10),
        font=FONT,
    )
    return fig


def importance_vs_redundancy(
    importance: np.ndarray,
    nearest_js: np.ndarray,
    names: Sequence[str],
    n_heads: int,
    title: str,
    x_title: str,
    y_title: str,
    layer_title: str,
) -> go.Figure:
    """Return a scatter: x = divergence from the head's nearest other head, y = importance; colour = layer."""
    imp = np.asarray(importance, dtype=float).ravel()
    near = np.asarray(nearest_js, dtype=float).ravel()
    layers = np.arange(len(imp)) // n_heads
    fig = go.Figure(
        go.Scatter(
            x=near,
            y=imp,
            mode="markers",
            text=list(names),
            marker=dict(
                size=11,
                color=layers,
                colorscale=LAYER_SCALE,
                line=dict(width=1, color="#333"),
                colorbar=dict(title=dict(text=layer_title), dtick=1),
            ),
            hovertemplate="%{text}<br>" + x_title + " %{x:.3f}<br>" + y_title + " %{y:.2f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=title, font=dict(size=17)),
        xaxis=dict(title=x_title, rangemode="tozero"),
        yaxis=dict(title=y_title, range=[-0.05, 1.05]),
        height=440,
        margin=dict(l=10, r=10, t=60, b=10),
        font=FONT,
    )
    return fig
