"""Figures for the lecture pages: vectors as strips, small matrices, bars over tokens, head grids, memory curves.

numpy arrays and token lists in, plotly figures out; no torch, no streamlit. Every text on a figure comes in as
an argument, so the pages can pass it in either language. `font_size` scales the figure for a projector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .heatmap import head_heatmap, token_ticks
from .overlays import add_mask_overlay

DIVERGING = "RdBu_r"  # negative blue, positive red, 0 white: Q, K, V and scores have a sign
WEIGHTS = "Blues"  # attention weights: 0..1
HIGHLIGHT = "#ff7f0e"
HIDDEN = "rgba(150, 150, 150, 0.6)"
SERIES_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def scale_fonts(fig: go.Figure, font_size: int) -> go.Figure:
    """Return fig with every text at font_size: ticks, axis titles, legend, colorbars, subplot titles.

    Set one by one, because a template (Streamlit's theme) may fix tick and legend sizes itself.
    """
    fig.update_layout(
        font=dict(size=font_size), legend=dict(font=dict(size=font_size)), hoverlabel=dict(font=dict(size=font_size))
    )
    fig.update_xaxes(tickfont=dict(size=font_size), title_font=dict(size=font_size))
    fig.update_yaxes(tickfont=dict(size=font_size), title_font=dict(size=font_size))
    for trace in fig.data:
        if trace.type == "heatmap" and trace.showscale is not False:
            trace.update(colorbar=dict(tickfont=dict(size=font_size), title=dict(font=dict(size=font_size))))
    fig.update_annotations(font_size=font_size)
    return fig


def title_colour_bars(fig: go.Figure, title: str) -> go.Figure:
    """Return fig with `title` on every colour bar that has none yet (what a colour means, and its unit)."""
    for trace in fig.data:
        if trace.type == "heatmap" and trace.showscale is not False and not (trace.colorbar.title.text or ""):
            trace.update(colorbar=dict(title=dict(text=title, side="right")))
    return fig


def _layout(fig: go.Figure, title: str, font_size: int, height: int) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, font=dict(size=font_size + 2)) if title else None,
        height=height,
        margin=dict(l=10, r=10, t=40 + 2 * font_size if title else 10, b=10),
    )
    return scale_fonts(fig, font_size)


def _symmetric_range(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def vector_strip(
    values: np.ndarray,
    title: str = "",
    highlight: tuple[int, int] | None = None,
    groups: int | None = None,
    font_size: int = 12,
    hover_label: str = "dim",
) -> go.Figure:
    """Return a (1, n) heatmap of a vector, coloured by sign; highlight=(start, stop) outlines a slice.

    groups: draw a thin line every n / groups entries (the heads inside a concatenated d_model vector).
    """
    v = np.asarray(values, dtype=np.float32).reshape(1, -1)
    n = v.shape[1]
    r = _symmetric_range(v)
    fig = go.Figure(
        go.Heatmap(
            z=v,
            x=np.arange(n),
            y=[0],
            colorscale=DIVERGING,
            zmin=-r,
            zmax=r,
            showscale=True,
            colorbar=dict(thickness=12, len=1.0),
            hovertemplate=f"{hover_label} %{{x}}: %{{z:.4f}}<extra></extra>",
        )
    )
    if groups and groups > 1 and n % groups == 0:  # one layout update: add_vline per line costs ~0.1 s each
        w = n // groups
        lines = [
            dict(
                type="line", x0=g * w - 0.5, x1=g * w - 0.5, y0=0, y1=1, yref="paper", line=dict(color="#555", width=1)
            )
            for g in range(1, groups)
        ]
        fig.update_layout(shapes=lines)
    if highlight is not None:
        a, b = highlight
        fig.add_shape(type="rect", x0=a - 0.5, x1=b - 0.5, y0=-0.5, y1=0.5, line=dict(color=HIGHLIGHT, width=4))
    fig.update_yaxes(visible=False)
    fig.update_xaxes(showgrid=False)
    return _layout(fig, title, font_size, 110 + 3 * font_size + (30 if title else 0))


def matrix_heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    title: str = "",
    highlight_row: int | None = None,
    x_title: str = "",
    font_size: int = 12,
    weights: bool = False,
    height: int | None = None,
    show_rows: bool = True,
    show_scale: bool = True,
    numbered: bool = True,
) -> go.Figure:
    """Return a heatmap of a (rows, cols) matrix with labelled rows; highlight_row outlines one row.

    weights=True colours 0..1 (attention); otherwise by sign around 0 (projections, vectors).
    show_rows / show_scale: drop the row labels or the colour bar (matrices side by side share them).
    numbered: label rows "i: label" (token positions); False for rows that are not positions.
    """
    m = np.asarray(matrix, dtype=np.float32)
    rows, cols = m.shape
    if len(row_labels) != rows:
        raise ValueError(f"matrix has {rows} rows but there are {len(row_labels)} row labels")
    labels = [f"{i}: {tok}" for i, tok in enumerate(row_labels)] if numbered else [str(r) for r in row_labels]
    if weights:
        scale = dict(colorscale=WEIGHTS, zmin=0.0, zmax=float(np.nanmax(m)) if m.size else 1.0)
    else:
        r = _symmetric_range(m)
        scale = dict(colorscale=DIVERGING, zmin=-r, zmax=r)
    fig = go.Figure(
        go.Heatmap(
            z=m,
            x=np.arange(cols),
            y=np.arange(rows),
            customdata=np.repeat(np.array(labels, dtype=object)[:, None], cols, 1),
            hovertemplate="%{customdata} · %{x}: %{z:.4f}<extra></extra>",
            colorbar=dict(thickness=12),
            showscale=show_scale,
            **scale,
        )
    )
    if highlight_row is not None:
        fig.add_shape(
            type="rect",
            x0=-0.5,
            x1=cols - 0.5,
            y0=highlight_row - 0.5,
            y1=highlight_row + 0.5,
            line=dict(color=HIGHLIGHT, width=4),
        )
    fig.update_yaxes(
        tickmode="array", tickvals=list(range(rows)), ticktext=labels, autorange="reversed", showticklabels=show_rows
    )
    fig.update_xaxes(title=x_title, showgrid=False)
    return _layout(fig, title, font_size, height or min(900, 90 + (14 + font_size) * rows + (30 if title else 0)))


def token_bars(
    values: np.ndarray,
    tokens: Sequence[str],
    title: str = "",
    hidden: np.ndarray | None = None,
    hidden_label: str = "masked",
    highlight: int | None = None,
    y_title: str = "",
    font_size: int = 12,
    value_format: str = ".3f",
) -> go.Figure:
    """Return bars of one value per key token; hidden keys (bool mask, True = hidden) are drawn grey at 0."""
    v = np.asarray(values, dtype=np.float64)
    n = len(tokens)
    if v.shape != (n,):
        raise ValueError(f"{v.shape[0] if v.ndim else 0} values for {n} tokens")
    hid = np.zeros(n, bool) if hidden is None else np.asarray(hidden, bool)
    shown = np.where(hid, 0.0, v)
    colors = [HIDDEN if h else (HIGHLIGHT if i == highlight else SERIES_COLORS[0]) for i, h in enumerate(hid)]
    text = [hidden_label if h else format(x, value_format) for x, h in zip(v, hid, strict=True)]
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=shown,
            marker_color=colors,
            text=text,
            textposition="outside" if n <= 24 else "none",  # an empty texttemplate would still show `text`
            cliponaxis=False,
            textfont=dict(size=max(9, font_size - 4)),
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    )
    # A hidden key's bar is 0 high: its whole column is grey, as hidden is in every view.
    grey = dict(type="rect", yref="paper", y0=0, y1=1, fillcolor=HIDDEN, opacity=0.35, line_width=0, layer="below")
    fig.update_layout(shapes=[dict(grey, x0=i - 0.5, x1=i + 0.5) for i in np.flatnonzero(hid)])
    fig.update_xaxes(tickangle=-50, type="category")
    fig.update_yaxes(title=y_title, zeroline=True)
    return _layout(fig, title, font_size, 300 + 8 * font_size)


def line_chart(
    x: np.ndarray,
    y: np.ndarray,
    title: str = "",
    x_title: str = "",
    y_title: str = "",
    font_size: int = 12,
) -> go.Figure:
    """Return one line with markers: y against x (e.g. q·k against the distance between the positions)."""
    fig = go.Figure(
        go.Scatter(
            x=np.asarray(x).tolist(),
            y=np.asarray(y, dtype=np.float64).tolist(),
            mode="lines+markers",
            line=dict(color=SERIES_COLORS[0]),
            hovertemplate=f"{x_title} %{{x}}: %{{y:.3f}}<extra></extra>",
        )
    )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, zeroline=True)
    return _layout(fig, title, font_size, 300 + 8 * font_size)


def compare_bars(
    series: Mapping[str, np.ndarray],
    labels: Sequence[str],
    title: str = "",
    y_title: str = "",
    font_size: int = 12,
    y_range: tuple[float, float] | None = None,
) -> go.Figure:
    """Return grouped bars: one group per label, one bar per named series (e.g. with and without √d_k)."""
    fig = go.Figure()
    for (name, vals), color in zip(series.items(), SERIES_COLORS, strict=False):
        v = np.asarray(vals, dtype=np.float64)
        if v.shape != (len(labels),):
            raise ValueError(f"series {name!r} has {v.shape} values for {len(labels)} labels")
        fig.add_trace(
            go.Bar(
                name=name,
                x=list(labels),
                y=v,
                marker_color=color,
                hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>",
            )
        )
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0))
    fig.update_xaxes(type="category", tickangle=-50 if len(labels) > 12 else 0)
    fig.update_yaxes(title=y_title, range=list(y_range) if y_range else None)
    return _layout(fig, title, font_size, 320 + 8 * font_size)


def heads_grid(
    maps: np.ndarray,
    head_titles: Sequence[str],
    title: str = "",
    cols: int = 6,
    font_size: int = 12,
    tokens: Sequence[str] | None = None,
    bar_title: str = "",
    width_hint: int = 520,
) -> go.Figure:
    """Return small multiples of (heads, q_pos, k_pos) maps, one tile per head, on a shared 0..1 scale.

    tokens label the queries of the first column and the keys of each column's lowest tile, as many as fit a tile
    of the figure `width_hint` pixels wide; bar_title names the colour bar (what a colour means, its unit).
    """
    m = np.asarray(maps, dtype=np.float32)
    h = m.shape[0]
    cols = min(cols, h)
    rows = math.ceil(h / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=list(head_titles),
        horizontal_spacing=0.02,
        vertical_spacing=0.12 / max(1, rows - 1) if rows > 1 else 0.05,
    )
    for i in range(h):
        fig.add_trace(
            go.Heatmap(
                z=m[i],
                colorscale=WEIGHTS,
                zmin=0,
                zmax=1,
                showscale=i == 0,
                colorbar=dict(thickness=10, title=dict(text=bar_title, side="right")),
                hovertemplate="q %{y}, k %{x}: %{z:.3f}<extra></extra>",
            ),
            row=i // cols + 1,
            col=i % cols + 1,
        )
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    fig.update_annotations(font_size=font_size)
    tile = 150 + 4 * font_size
    fig = _layout(fig, title, font_size, rows * tile + 60)
    if tokens is not None and len(tokens) == m.shape[-1] == m.shape[-2]:
        tile_px = 0.8 * width_hint / cols
        size = max(9, min(font_size, 12))
        x_ticks = token_ticks(tokens, tile_px, across=True, sizes=(size, 9))
        y_ticks = token_ticks(tokens, tile_px, across=False, sizes=(size, 9))
        for i in range(h):
            suffix = "" if i == 0 else str(i + 1)
            if i % cols == 0:
                fig.layout[f"yaxis{suffix}"].update(y_ticks.axis(), showticklabels=True, automargin=True)
            if i + cols >= h:
                fig.layout[f"xaxis{suffix}"].update(x_ticks.axis(), showticklabels=True, automargin=True)
    return fig


def memory_chart(
    seqs: Sequence[int],
    lines: Mapping[str, Sequence[float]],
    measured: Mapping[str, tuple[Sequence[int], Sequence[float]]] | None = None,
    marks: Sequence[tuple[int, float, str]] = (),
    title: str = "",
    x_title: str = "seq",
    y_title: str = "bytes",
    font_size: int = 12,
) -> go.Figure:
    """Return memory (bytes, log scale) against sequence length (log scale): formula lines, measured points, marks."""
    fig = go.Figure()
    for (name, ys), color in zip(lines.items(), SERIES_COLORS, strict=False):
        fig.add_trace(
            go.Scatter(
                x=list(seqs),
                y=list(ys),
                name=name,
                mode="lines",
                line=dict(color=color, width=3),
                hovertemplate="seq %{x}: %{y:.3s}B<extra>" + name + "</extra>",
            )
        )
    for name, (xs, ys) in (measured or {}).items():
        fig.add_trace(
            go.Scatter(
                x=list(xs),
                y=list(ys),
                name=name,
                mode="markers",
                marker=dict(size=12 + font_size // 3, symbol="circle", color="black"),
                hovertemplate="seq %{x}: %{y:.3s}B<extra>" + name + "</extra>",
            )
        )
    for x, y, label in marks:
        fig.add_trace(
            go.Scatter(
                x=[x],
                y=[y],
                mode="markers+text",
                text=[label],
                textposition="top left",
                marker=dict(size=14, symbol="star", color=HIGHLIGHT),
                showlegend=False,
                hovertemplate=f"{label}<extra></extra>",
            )
        )
    fig.update_xaxes(type="log", title=x_title)
    fig.update_yaxes(type="log", title=y_title, exponentformat="SI", ticksuffix="B")
    fig.update_layout(legend=dict(orientation="h", y=-0.25, yanchor="top", x=0))
    return _layout(fig, title, font_size, 420 + 12 * font_size)


def attention_map(
    weights: np.ndarray,
    tokens: Sequence[str],
    title: str = "",
    axis_titles: tuple[str, str, str] = ("key", "query", "weight"),
    hover: str | None = None,
    highlight_row: int | None = None,
    keep: np.ndarray | None = None,
    font_size: int = 12,
    height: int | None = None,
    width_hint: int = 640,
) -> go.Figure:
    """Return viz.heatmap's (q_pos, k_pos) map with translated axis titles, an outlined row and the mask overlay.

    axis_titles: (keys, queries, colour bar); keep: the (q_pos, k_pos) mask to veil (hidden cells) and check
    (red ✕ where weight lands on a hidden cell), drawn only when it hides something. width_hint: the figure's
    width where it is shown, in pixels (token labels are sized to it).
    """
    fig = head_heatmap(weights, tokens, title=title, hover=hover or None, width_hint=width_hint)
    fig.update_layout(xaxis_title=axis_titles[0], yaxis_title=axis_titles[1])
    fig.update_traces(colorbar_title_text=axis_titles[2], selector=dict(type="heatmap"))
    if highlight_row is not None:
        fig.add_shape(
            type="rect",
            x0=-0.5,
            x1=len(tokens) - 0.5,
            y0=highlight_row - 0.5,
            y1=highlight_row + 0.5,
            line=dict(color=HIGHLIGHT, width=4),
        )
    if keep is not None and not np.asarray(keep, bool).all():
        add_mask_overlay(fig, keep, weights)
    if height:
        fig.update_layout(height=height)
    # Title, axis title and slanted tick labels all sit on top: give them room at large fonts.
    fig.update_layout(title_font_size=font_size + 2, margin_t=(110 if title else 60) + 3 * font_size)
    ticks = (fig.layout.xaxis.tickfont.size, fig.layout.yaxis.tickfont.size)  # token_ticks sized them to fit
    scale_fonts(fig, font_size)
    fig.update_xaxes(tickfont_size=ticks[0])
    fig.update_yaxes(tickfont_size=ticks[1])
    return fig


def cache_growth(
    seqs: Sequence[int],
    cache_bytes: Sequence[float],
    formula_bytes: Sequence[float],
    peaks: Sequence[float | None],
    names: Mapping[str, str],
    current: int | None = None,
    title: str = "",
    font_size: int = 12,
) -> go.Figure:
    """Return the KV cache's bytes (counted from its tensors) and the formula's, against cached positions, with
    each step's measured peak as points; `current` marks one step. names: labels for 'cache', 'formula', 'peak',
    'x' and 'y'."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=list(seqs),
            y=list(formula_bytes),
            name=names["formula"],
            mode="lines",
            line=dict(color="#999", dash="dash"),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=list(seqs),
            y=list(cache_bytes),
            name=names["cache"],
            mode="lines+markers",
            line=dict(color=SERIES_COLORS[0]),
        )
    )
    measured = [(s, p) for s, p in zip(seqs, peaks, strict=True) if p is not None and p > 0]
    if measured:
        fig.add_trace(
            go.Scatter(
                x=[s for s, _ in measured],
                y=[p for _, p in measured],
                name=names["peak"],
                mode="markers",
                marker=dict(color=SERIES_COLORS[1], symbol="diamond", size=8),
            )
        )
    if current is not None and 0 <= current < len(seqs):
        fig.add_vline(x=seqs[current], line=dict(color=HIGHLIGHT, width=2))
    fig.update_xaxes(title=names["x"])
    fig.update_yaxes(title=names["y"], type="log")
    return _layout(fig, title, font_size, 300 + 8 * font_size)
