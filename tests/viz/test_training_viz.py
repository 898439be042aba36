"""The Train page's figures: the phase change on one step axis with its window and marks, and the spread of a head
count over seeds (median line, lowest-to-highest band)."""

from __future__ import annotations

import numpy as np

from viz.training import phase_figure, spread_figure, spread_series

LABELS = {"loss": "losses", "score": "score", "score_name": "best", "bump": "bump", "jump": "jump", "x": "step"}


def test_phase_figure_shares_the_step_axis_and_marks_bump_and_jump():
    steps = [0, 100, 200, 300, 400]
    fig = phase_figure(
        steps, {"copy": (steps, [4.1, 4.2, 3.0, 1.0, 0.5])}, [0.0, 0.1, 0.4, 0.8, 0.9],
        {"start": 100, "end": 300, "bump": 100, "jump": 300}, LABELS,
    )  # fmt: skip
    assert fig.layout.xaxis.matches == "x2" or fig.layout.xaxis2.matches == "x"  # one shared time axis
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    lines = [s for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1]
    assert len(rects) == 2 and {(r.x0, r.x1) for r in rects} == {(100, 300)}
    assert sorted(s.x0 for s in lines) == [100, 100, 300, 300], "bump and jump marked in both panels"
    assert {a.text for a in fig.layout.annotations} >= {"bump", "jump"}
    bare = phase_figure(steps, {"copy": (steps, [4.0] * 5)}, [0.0] * 5, None, LABELS)
    assert not [s for s in bare.layout.shapes if s.type == "rect"]


def test_spread_is_median_lowest_and_highest_over_seeds():
    runs = {
        "h = 4": [([0, 1, 2], [4.0, 2.0, 1.0]), ([0, 1, 2], [4.0, 3.0, 0.5]), ([0, 1, 2, 3], [4.0, 1.0, 0.7, 0.6])],
        "h = 8": [([0, 1], [4.0, 4.0])],
    }
    got = spread_series(runs)
    steps, mid, low, high = got["h = 4"]
    assert steps == [0, 1, 2], "cut to the shortest run"
    np.testing.assert_allclose(mid, [4.0, 2.0, 0.7])
    np.testing.assert_allclose(low, [4.0, 1.0, 0.5])
    np.testing.assert_allclose(high, [4.0, 3.0, 1.0])
    fig = spread_figure(got, "copy", "step", "nats")
    assert [t.name for t in fig.data if t.showlegend is not False] == ["h = 4", "h = 8"]
    assert sum(t.fill == "tonexty" for t in fig.data) == 2
