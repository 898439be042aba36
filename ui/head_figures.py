"""The figures of Inside a head's steps, on the page and on a projector slide, with labels that fit their width.

The page (app_pages/inside_head.py) draws what `step_figures` and `one_vs_many_figures` return; the layout test
(tests/viz/test_lecture_layout.py) builds the same figures for every family and checks, from the figure objects,
that no labels overlap at the widths a slide gives them (viz.fit).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from models.lecture.steps import HeadSteps, OneVsMany
from viz.fit import fit
from viz.lecture import (
    attention_map,
    compare_bars,
    heads_grid,
    line_chart,
    matrix_heatmap,
    title_colour_bars,
    token_bars,
    vector_strip,
)

from .state import t

# Widths in pixels the figures are fitted to. A slide is fitted to the narrowest projector we support (1024×768;
# at 1280×720 it is wider, so what fits at 1024 fits there); the page to a laptop's main column.
PROJECTOR_WIDTH = 1024
SLIDE_CONTENT = PROJECTOR_WIDTH - 48  # less the slide's side padding
SLIDE_COLUMNS = (5, 6)  # a slide's text and figure columns
PAGE_WIDTH = 1000
GAP = 16  # px between Streamlit columns (at a slide's larger root font, a little more)
SLIDE_HEIGHT = 300  # px of figures on a slide by default: with the text, the title and the buttons, fits 1280×720
SIDE_BY_SIDE = ("transpose", "softmax")  # steps whose figures sit in a row (on a slide; transpose on the page too)


def column_widths(total: float, parts: int) -> float:
    """Return the width of each of `parts` equal columns in `total` pixels."""
    return (total - (parts - 1) * GAP) / parts


def figure_column(slide: bool) -> float:
    """Return the width of the column a step's figures are drawn in."""
    if not slide:
        return PAGE_WIDTH
    text, figs = SLIDE_COLUMNS
    return (SLIDE_CONTENT - GAP) * figs / (text + figs)


def axis_titles() -> tuple[str, str, str]:
    return t("inside.fig.key"), t("inside.fig.query"), t("inside.fig.weight")


def labels(s: HeadSteps) -> list[str]:
    return [f"{i}: {tok}" for i, tok in enumerate(s.tokens)]


def figures(key: str, s: HeadSteps, font: int, width_hint: int = PAGE_WIDTH, slide: bool = False) -> list:
    """Return the figure(s) of one step; vector strips are short, the rest share a slide's height. width_hint: the
    pixels each figure gets across (a map sizes its token labels to it)."""
    tok, i, hd = s.tokens, s.query, s.head
    sl = (s.head_slice.start, s.head_slice.stop)
    if key == "input":
        return [
            matrix_heatmap(
                s.x, tok, t("inside.fig.x", i=i, token=tok[i]), highlight_row=i, x_title="d_model", font_size=font
            )
        ]
    if key == "project":
        return [
            vector_strip(
                s.q_row, t("inside.fig.q_row", token=tok[i], head=hd), highlight=sl, groups=s.n_heads, font_size=font
            )
        ]
    if key == "split":
        rows = [t("inside.fig.head_n", head=h) for h in range(s.n_heads)]
        return [
            matrix_heatmap(
                s.q_row.reshape(s.n_heads, s.d_k),
                rows,
                t("inside.fig.split", token=tok[i]),
                highlight_row=hd,
                x_title="d_k",
                font_size=font,
            )
        ]
    if key == "transpose":
        return [  # side by side: the row labels on Q, the colour bar on V
            matrix_heatmap(
                m,
                tok,
                t(f"inside.fig.{name}", head=hd),
                highlight_row=i if name == "q" else None,
                x_title="d_k",
                font_size=font,
                show_rows=name == "q",
                show_scale=name == "v",
            )
            for name, m in (("q", s.q), ("k", s.k), ("v", s.v))
        ]
    if key == "rotate":
        assert s.q_before is not None and s.distance_dots is not None  # a rotary layer's steps
        turn = line_chart(
            np.arange(len(s.distance_dots)),
            s.distance_dots,
            t("inside.fig.distance", token=tok[i]),
            x_title=t("inside.fig.distance_x"),
            y_title=t("inside.fig.distance_y"),
            font_size=font,
        )
        if slide:  # one screen: before and after as two rows of one matrix, over the distance curve
            rows = [t("inside.fig.turn_before"), t("inside.fig.turn_after")]
            both = np.stack([s.q_before, s.q[i]])
            title = t("inside.fig.q_turn", token=tok[i], head=hd, i=i)
            return [matrix_heatmap(both, rows, title, x_title="d_k", font_size=font, numbered=False), turn]
        return [
            vector_strip(s.q_before, t("inside.fig.q_before", token=tok[i], head=hd), font_size=font),
            vector_strip(s.q[i], t("inside.fig.q_after", token=tok[i], i=i), font_size=font),
            turn,
        ]
    if key == "repeat_kv":
        groups = np.zeros((s.n_heads, s.kv_heads), dtype=np.float32)
        groups[np.arange(s.n_heads), np.arange(s.n_heads) // s.group_size] = 1.0
        return [
            matrix_heatmap(
                groups,
                [t("inside.fig.head_n", head=h) for h in range(s.n_heads)],
                t("inside.fig.groups", kv_heads=s.kv_heads, group=s.group_size),
                highlight_row=hd,
                x_title=t("inside.fig.kv_head"),
                font_size=font,
            ),
            matrix_heatmap(s.k, tok, t("inside.fig.shared_k", kv_head=s.kv_head), x_title="d_k", font_size=font),
        ]
    if key == "dot":
        return [
            token_bars(s.dots, tok, t("inside.fig.dots", token=tok[i]), highlight=i, font_size=font, value_format=".2f")
        ]
    if key == "scale":
        series = {t("inside.fig.with_scale"): s.probs, t("inside.fig.without_scale"): s.probs_unscaled}
        return [
            compare_bars(
                series,
                labels(s),
                t("inside.fig.scale", token=tok[i]),
                y_title=t("inside.fig.weight"),
                font_size=font,
                y_range=(0, 1.05),
            )
        ]
    if key == "mask":
        return [
            token_bars(
                s.scores,
                tok,
                t("inside.fig.masked", token=tok[i]),
                hidden=~s.keep,
                hidden_label=t("inside.fig.hidden_min"),
                font_size=font,
                value_format=".2f",
            )
        ]
    if key == "softmax":
        heat = attention_map(
            s.head_map,
            tok,
            t("inside.fig.map", layer=s.layer, head=hd),
            axis_titles(),
            t("inside.fig.map_hover"),
            highlight_row=i,
            keep=s.keep_map,
            font_size=font,
            width_hint=width_hint,
        )
        return [
            token_bars(
                s.probs, tok, t("inside.fig.probs", token=tok[i]), hidden=~s.keep, hidden_label="0", font_size=font
            ),
            heat,
        ]
    if key == "weighted_sum":
        return [
            matrix_heatmap(s.weighted, tok, t("inside.fig.weighted", head=hd), x_title="d_k", font_size=font),
            vector_strip(s.context, t("inside.fig.context", token=tok[i], d_k=s.d_k), font_size=font),
        ]
    if key == "concat":
        return [
            vector_strip(
                s.merged, t("inside.fig.merged", token=tok[i], head=hd), highlight=sl, groups=s.n_heads, font_size=font
            )
        ]
    if key == "w_o":
        return [
            vector_strip(s.output, t("inside.fig.output", token=tok[i]), font_size=font),
            vector_strip(s.head_share, t("inside.fig.head_share", head=hd), font_size=font),
        ]
    raise KeyError(key)


STRIP_MIN = 120  # px: a vector strip with its title and ticks at a slide's font


def slide_heights(key: str, figs: list, height: int) -> None:
    """Fit a step's figures into `height` px in all: a row gets it all; stacked, a strip gets at most its own
    height and a share, the charts what is left (never less than a strip)."""
    if key in SIDE_BY_SIDE:
        for fig in figs:
            fig.update_layout(height=height)
        return
    strips = [f for f in figs if f.data[0].type == "heatmap" and len(f.data[0].y) == 1]
    charts = [f for f in figs if f not in strips]
    share = height // len(figs)
    for fig in strips:
        fig.update_layout(height=max(STRIP_MIN, min(fig.layout.height, share if charts else height // len(strips))))
    left = height - sum(f.layout.height for f in strips)
    for fig in charts:
        fig.update_layout(height=max(STRIP_MIN, left // len(charts)))


def step_width(key: str, slide: bool) -> tuple[float, bool]:
    """Return the width each of a step's figures is drawn at, and whether they sit in a row."""
    row = key == "transpose" or (slide and key in SIDE_BY_SIDE)
    width = figure_column(slide)
    return (column_widths(width, 3 if key == "transpose" else 2) if row else width), row


def step_figures(
    key: str, s: HeadSteps, font: int, slide: bool, height: int = SLIDE_HEIGHT
) -> tuple[list[go.Figure], bool]:
    """Return a step's figures, sized for the page or a slide `height` px tall, labels fitted to their width,
    and whether they sit in a row."""
    each, row = step_width(key, slide)
    figs = [
        title_colour_bars(fig, t("inside.fig.value"))
        for fig in figures(key, s, font, width_hint=int(each), slide=slide)
    ]
    if slide:
        slide_heights(key, figs, height)
    return [fit(fig, each) for fig in figs], row


def one_vs_many_figures(
    o: OneVsMany, tokens: list[str], font: int, height: int | None = None
) -> tuple[go.Figure, go.Figure, tuple[float, float]]:
    """Return the heads grid and the single wide head's map (a slide passes its `height`), labels fitted to the
    columns they are drawn in (3 : 2 of the page or slide); and those widths."""
    total = SLIDE_CONTENT if height else PAGE_WIDTH
    widths = ((total - GAP) * 3 / 5, (total - GAP) * 2 / 5)
    titles = [t("inside.fig.head_n", head=h) for h in range(o.n_heads)]
    grid = heads_grid(
        o.maps,
        titles,
        t("inside.fig.heads", heads=o.n_heads, d_k=o.d_k),
        font_size=font,
        tokens=tokens,
        bar_title=t("inside.fig.weight"),
        width_hint=int(widths[0]),
    )
    single = attention_map(
        o.single_map,
        tokens,
        t("inside.fig.single", d_model=o.d_model),
        axis_titles(),
        t("inside.fig.map_hover"),
        font_size=font,
        width_hint=int(widths[1]),
        height=height,
    )
    if height:
        grid.update_layout(height=height)
    return fit(grid, widths[0]), fit(single, widths[1]), widths
