"""Labels that do not overlap: where a figure's texts land at a given width, read from the figure object itself.

A projector slide (or a narrow column) gives a figure fewer pixels than it was drawn for, and plotly does not thin
tick labels it was told to show (tickmode "array"), nor move a bar's text, a subplot's title or a legend out of
another text's way. `overlaps(fig, width)` estimates, from the figure's own layout (height, margins, domains, tick
values and texts, font sizes), which texts would collide at `width` pixels; `fit(fig, width)` changes the figure
until none do: a smaller font down to MIN_FONT, then every k-th tick label, a bar's value text only where it fits
its bar (hover keeps it), a subplot title shrunk to its tile, room above the plot for a legend under the title.

The geometry is an estimate (text widths from `em`, plotly's automargins approximated), on the safe side: a check
in tests/viz/test_lecture_layout.py, not a screenshot comparison.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from .heatmap import _em

MIN_FONT = 11  # px: the least a projector's back row reads (viz.heatmap.TICK_SIZES)
LINE = 1.25  # a text line's height, in font sizes
COLORBAR_PX = 90  # a colour bar with its ticks and title, across
DEFAULT_MARGIN = dict(l=80, r=80, t=100, b=80)


@dataclass(frozen=True)
class Axis:
    """One axis as laid out: its name in the layout, its letter, its length in pixels and the cells along it."""

    name: str  # "xaxis", "yaxis2", …
    letter: str  # "x" or "y"
    length_px: float
    cells: int  # categories or heatmap cells along the axis (0: a numeric axis plotly ticks itself)


def _font(font, default: float) -> float:
    return float(font.size) if font is not None and font.size is not None else default


def _base_font(fig: go.Figure) -> float:
    return _font(fig.layout.font, 12.0)


def _margin(fig: go.Figure) -> dict[str, float]:
    m = fig.layout.margin
    return {k: float(getattr(m, k)) if getattr(m, k) is not None else v for k, v in DEFAULT_MARGIN.items()}


def _height(fig: go.Figure) -> float:
    return float(fig.layout.height or 450)


def _axes(fig: go.Figure) -> list[tuple[str, go.layout.XAxis | go.layout.YAxis]]:
    names = [k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))]
    return [(k, fig.layout[k]) for k in sorted(names)] or [("xaxis", fig.layout.xaxis), ("yaxis", fig.layout.yaxis)]


def _tick_texts(axis) -> list[str]:
    return [str(x) for x in (axis.ticktext or ())]


def _tick_size(fig: go.Figure, axis) -> float:
    return _font(axis.tickfont, _base_font(fig))


def _extent(letter: str, texts: Sequence[str], size: float, angle: float) -> float:
    """Return the pixels a tick label needs along its axis (upright words across x; a line's height otherwise)."""
    if letter == "x" and not angle:
        return max((_em(t) for t in texts), default=0.0) * size + 4
    turned = abs(math.sin(math.radians(angle))) if letter == "x" else 1.0
    return LINE * size / max(turned, 0.2)


def _depth(letter: str, texts: Sequence[str], size: float, angle: float) -> float:
    """Return the pixels tick labels take across their axis (what automargin takes from the plot)."""
    widest = max((_em(t) for t in texts), default=2.0) * size
    if letter == "y":
        return widest + 6
    return widest * abs(math.sin(math.radians(angle or 0))) + LINE * size + 4


def _cells(fig: go.Figure, name: str, letter: str) -> int:
    """Return the categories or heatmap cells along an axis, from the traces drawn on it (0 when numeric)."""
    ref = letter + name[5:]  # "xaxis2" -> "x2"
    n = 0
    for trace in fig.data:
        if (getattr(trace, f"{letter}axis", None) or letter) != ref:
            continue
        if trace.type == "heatmap" and trace.z is not None:
            z = trace.z
            rows = len(z)
            n = max(n, rows if letter == "y" else (len(z[0]) if rows else 0))
        elif trace.type == "bar" and letter == "x" and trace.x is not None:
            n = max(n, len(trace.x))
    return n


def _plot_box(fig: go.Figure, width: float) -> tuple[float, float]:
    """Return the plot area's (width, height) in pixels: the figure less its margins, colour bar, tick labels."""
    m = _margin(fig)
    across = width - m["l"] - m["r"]
    if any(t.type == "heatmap" and t.showscale is not False for t in fig.data):
        across -= COLORBAR_PX
    down = _height(fig) - m["t"] - m["b"]
    for name, axis in _axes(fig):
        letter = name[0]
        if axis.showticklabels is False or axis.visible is False:
            continue
        texts = _tick_texts(axis)
        if not texts:
            continue
        depth = _depth(letter, texts, _tick_size(fig, axis), float(axis.tickangle or 0))
        title = LINE * _font(axis.title.font, _base_font(fig)) if axis.title.text else 0.0
        if letter == "y":
            domain = axis.domain or (0, 1)
            if domain[0] <= 0.01:  # the first column's labels push the plot right
                across -= max(0.0, depth + title - m["l"])
        else:
            spare = m["t"] if axis.side == "top" else m["b"]
            down -= max(0.0, depth + title - spare) if (axis.domain or (0, 1))[0] <= 0.01 or axis.side == "top" else 0
    return max(across, 40.0), max(down, 40.0)


def _layout_axes(fig: go.Figure, width: float) -> list[Axis]:
    across, down = _plot_box(fig, width)
    out = []
    for name, axis in _axes(fig):
        letter = name[0]
        lo, hi = axis.domain or (0, 1)
        out.append(Axis(name, letter, (across if letter == "x" else down) * (hi - lo), _cells(fig, name, letter)))
    return out


def _tick_clashes(fig: go.Figure, ax: Axis) -> list[str]:
    axis = fig.layout[ax.name]
    texts, vals = _tick_texts(axis), list(axis.tickvals or ())
    if axis.showticklabels is False or not texts or ax.cells == 0:
        return []
    if len(vals) != len(texts):
        vals = list(range(len(texts)))
    per = ax.length_px / ax.cells
    size, angle = _tick_size(fig, axis), float(axis.tickangle or 0)
    out = []
    for a in range(1, len(texts)):
        need = _extent(ax.letter, [texts[a - 1], texts[a]], size, angle)
        if ax.letter == "x" and not angle:
            need = (_em(texts[a - 1]) + _em(texts[a])) / 2 * size + 4
        if (float(vals[a]) - float(vals[a - 1])) * per < need:
            out.append(f"{ax.name} tick labels {texts[a - 1]!r} and {texts[a]!r} overlap")
            break
    return out


def _bar_clashes(fig: go.Figure, axes: dict[str, Axis]) -> list[str]:
    """Bar values too wide for their bars. plotly shrinks a value to its bar's width rather than overlap the
    next one, so the clash is a value shrunk below what a room reads (MIN_FONT - 2 px)."""
    bars = [t for t in fig.data if t.type == "bar" and t.text is not None and t.textposition != "none"]
    groups = max(1, len(bars)) if fig.layout.barmode == "group" else 1
    out = []
    for trace in bars:
        ax = axes.get("xaxis" + (trace.xaxis or "x")[1:])
        if ax is None or not ax.cells:
            continue
        slot = ax.length_px / ax.cells / groups
        size = _font(trace.textfont, _base_font(fig))
        widest = max((_em(str(t)) for t in trace.text), default=0.0)
        shrunk = min(size, (slot - 2) / widest) if widest else size
        if shrunk < MIN_FONT - 2:
            out.append(f"bar texts of {trace.name or 'the bars'} shrink to {shrunk:.0f} px in {slot:.0f} px bars")
    return out


def _title_clashes(fig: go.Figure, width: float, axes: dict[str, Axis]) -> list[str]:
    """Subplot titles wider than their tile; a title and a legend above the plot sharing too little room."""
    out = []
    across, _ = _plot_box(fig, width)
    for ann in fig.layout.annotations or ():
        if ann.xref != "paper" or ann.yref != "paper" or not ann.text:
            continue
        tiles = [ax for ax in axes.values() if ax.letter == "x" and ax.cells]
        if len(tiles) < 2:
            continue
        tile = min(ax.length_px for ax in tiles)
        need = _em(str(ann.text)) * _font(ann.font, _base_font(fig))
        if need > tile:
            out.append(f"subplot title {ann.text!r} ({need:.0f} px) is wider than its {tile:.0f} px tile")
    legend = fig.layout.legend
    title = fig.layout.title.text if fig.layout.title else None
    shown = [t for t in fig.data if t.showlegend is not False and t.name]
    if title and len(shown) > 1 and legend.orientation == "h" and (legend.y or 0) >= 1:
        size = _font(legend.font, _base_font(fig))
        entries = sum(_em(t.name) * size + 40 for t in shown)
        rows = math.ceil(entries / max(across, 1))
        need = LINE * _font(fig.layout.title.font, _base_font(fig)) + 10 + rows * LINE * size + 8
        if _margin(fig)["t"] < need:
            out.append(f"the title and the legend above the plot need {need:.0f} px, the top margin is smaller")
    return out


def overlaps(fig: go.Figure, width: float) -> list[str]:
    """Return the texts that would overlap when `fig` is drawn `width` pixels wide (empty when none)."""
    axes = {ax.name: ax for ax in _layout_axes(fig, width)}
    out = []
    for ax in axes.values():
        out += _tick_clashes(fig, ax)
    return out + _bar_clashes(fig, axes) + _title_clashes(fig, width, axes)


def _thin(fig: go.Figure, ax: Axis) -> None:
    """Shrink an axis's tick labels, then keep every k-th, until neighbours no longer overlap."""
    axis = fig.layout[ax.name]
    if axis.showticklabels is False or ax.cells == 0:
        return
    if not _tick_texts(axis):  # plotly ticks a numeric or category axis itself, and thins what would overlap
        return
    texts, vals = _tick_texts(axis), list(axis.tickvals or range(len(axis.ticktext)))
    size = _tick_size(fig, axis)
    while _tick_clashes(fig, ax) and size > MIN_FONT:
        size -= 1
        axis.update(tickfont=dict(size=size))
    step = 1
    while _tick_clashes(fig, ax) and step < len(texts):
        step += 1
        axis.update(tickvals=vals[::step], ticktext=texts[::step])


def fit(fig: go.Figure, width: float) -> go.Figure:
    """Return fig changed so that `overlaps(fig, width)` is empty; the figure's height is kept."""
    for ax in _layout_axes(fig, width):
        _thin(fig, ax)
    axes = {ax.name: ax for ax in _layout_axes(fig, width)}
    for ax in axes.values():  # the labels' new sizes changed the plot area: once more
        _thin(fig, ax)
    for msg in _bar_clashes(fig, axes):
        for trace in fig.data:
            if trace.type == "bar" and (trace.name or "the bars") in msg:
                trace.update(textposition="none")  # hover keeps the value
    across, _ = _plot_box(fig, width)
    tiles = [ax.length_px for ax in axes.values() if ax.letter == "x" and ax.cells]
    if len(tiles) > 1:
        for ann in fig.layout.annotations or ():
            if ann.xref == "paper" and ann.yref == "paper" and ann.text:
                size = _font(ann.font, _base_font(fig))
                while size > MIN_FONT - 2 and _em(str(ann.text)) * size > min(tiles):
                    size -= 1
                ann.update(font=dict(size=size))
    title = fig.layout.title.text if fig.layout.title else None
    legend = fig.layout.legend
    shown = [t for t in fig.data if t.showlegend is not False and t.name]
    if title and len(shown) > 1 and legend.orientation == "h" and (legend.y or 0) >= 1:
        size = _font(legend.font, _base_font(fig))
        rows = math.ceil(sum(_em(t.name) * size + 40 for t in shown) / max(across, 1))
        title_px = LINE * _font(fig.layout.title.font, _base_font(fig)) + 10
        need = title_px + rows * LINE * size + 8
        m = _margin(fig)
        fig.update_layout(
            margin=dict(t=max(m["t"], need)),
            title=dict(y=1, yref="container", yanchor="top", pad=dict(t=6)),
            legend=dict(y=1, yanchor="bottom"),
        )
    return fig
