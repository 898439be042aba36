"""Inside a head's figures keep their labels apart, on a projector slide and on the page, on every family.

Read from the figure objects (viz.fit.overlaps: tick labels, bar texts, subplot titles, a legend under a title),
at the widths the page draws them (ui.head_figures), for the query the page opens on. No screenshot: cheap.
"""

from __future__ import annotations

import numpy as np
import pytest

from models.lecture.steps import head_steps, one_vs_many
from ui import head_figures
from ui.controls import default_query
from ui.presentation import FIGURE_FONT
from viz.fit import fit, overlaps
from viz.lecture import heads_grid, matrix_heatmap, token_bars

SENTENCE = "The animal didn't cross the street because it was too tired."


def _labelled(fig) -> list[tuple[str, int]]:
    """Return (axis, number of tick labels) for every axis that names its ticks."""
    layout = fig.layout.to_plotly_json()
    return [(k, len(v.get("ticktext") or ())) for k, v in layout.items() if k[1:5] == "axis" and v.get("ticktext")]


@pytest.mark.parametrize("family", ["minilm", "smollm2", "gpt2_tiny"])
def test_no_labels_overlap_on_a_slide_or_the_page(family, request):
    enc = request.getfixturevalue(family)
    out = enc.encode(SENTENCE, internals=True)
    s = head_steps(enc, out, 0, 0, default_query(enc.capabilities.causal, out.seq))
    tokens = list(out.display_tokens or out.tokens)
    clashes = []
    for slide in (True, False) if family == "minilm" else (True,):  # the page's wider figures: one family
        font = FIGURE_FONT[slide]
        for step in s.steps:
            figs, _ = head_figures.step_figures(step.key, s, font, slide)
            width, _ = head_figures.step_width(step.key, slide)
            for j, fig in enumerate(figs):
                clashes += [f"{'slide' if slide else 'page'} {step.key}[{j}]: {c}" for c in overlaps(fig, width)]
                for axis, n in _labelled(fig):  # fitting thins labels; it never leaves an axis unnamed
                    assert n >= 2, f"{step.key}[{j}] {axis} keeps {n} label(s)"
        grid, single, widths = head_figures.one_vs_many_figures(
            one_vs_many(enc, out, 0), tokens, font, head_figures.SLIDE_HEIGHT if slide else None
        )
        clashes += [f"one_vs_many grid: {c}" for c in overlaps(grid, widths[0])]
        clashes += [f"one_vs_many single: {c}" for c in overlaps(single, widths[1])]
    assert not clashes, "\n".join(clashes)


def test_overlaps_sees_crowded_labels_and_fit_parts_them():
    tokens = [f"token{i}" for i in range(16)]
    rows = matrix_heatmap(np.ones((16, 8)), tokens, "title", font_size=19, height=200)  # 16 rows in ~100 px
    assert any("yaxis tick labels" in c for c in overlaps(rows, 500))
    fit(rows, 500)
    assert overlaps(rows, 500) == [] and 2 <= len(rows.layout.yaxis.ticktext) < 16

    bars = token_bars(np.linspace(-9, 9, 16), tokens, "q·k", font_size=19, value_format=".2f")
    assert any("bar texts" in c for c in overlaps(bars, 400))  # "-9.00" in a 400/16 px bar: below 9 px
    assert overlaps(bars, 1400) == []  # wide enough: every value stays written
    assert overlaps(fit(bars, 400), 400) == [] and bars.data[0].textposition == "none"  # hover keeps the values

    grid = heads_grid(np.full((12, 4, 4), 0.25), [f"head {h}" for h in range(12)], "heads", font_size=19)
    assert any("subplot title" in c for c in overlaps(grid, 500))
    assert overlaps(fit(grid, 500), 500) == []


def test_a_hidden_key_is_a_grey_column_in_the_bars():
    hidden = np.array([False, False, True, True])
    fig = token_bars(np.array([1.0, 2.0, 0.0, 0.0]), list("abcd"), hidden=hidden)
    greys = [(s.x0, s.x1) for s in fig.layout.shapes]
    assert greys == [(1.5, 2.5), (2.5, 3.5)]
