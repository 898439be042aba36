"""The Long-context lab's figures: numpy in, plotly out, the arithmetic they do themselves checked."""

from __future__ import annotations

import numpy as np

from viz.long_lab import loss_curves, needle_grid, retrieval_heads, sink_pair, smooth, without_sink


def test_without_sink_zeroes_the_sink_and_renormalises_rows():
    a = np.array([[1.0, 0, 0], [0.6, 0.4, 0], [0.5, 0.25, 0.25]])
    b = without_sink(a, 1)
    assert (b[:, 0] == 0).all()
    assert b[0].sum() == 0  # the first row had only the sink: nothing left to show
    assert np.allclose(b[1:].sum(-1), 1) and np.allclose(b[2], [0, 0.5, 0.5])


def test_smooth_is_a_running_mean():
    x = np.arange(10, dtype=float)
    s = smooth(x, 4)
    assert s[0] == 0 and s[1] == 0.5 and s[3] == 1.5 and s[9] == np.mean(x[6:10])
    assert np.array_equal(smooth(x, 1), x)


def test_figures_build():
    found = np.array([[1.0, 0.0], [np.nan, 1.0]])
    labels = {"found": "found", "missed": "missed", "x": "depth", "y": "context", "title": "t"}
    fig = needle_grid(found, [256, 512], [0.0, 1.0], labels)
    assert fig.data[0].text.tolist() == [["found", "missed"], ["", "found"]]
    scores = np.array([[0.0, 0.3], [0.05, 0.9]])
    fig = retrieval_heads(scores, 0.1, {"score": "s", "layer": "l", "head": "h", "marked": "m", "title": "t"})
    assert list(fig.data[1].x) == [1, 1] and list(fig.data[1].y) == [0, 1]  # the two heads above 0.1 ringed
    fig = loss_curves(
        {"full": np.ones(50), "window:8": np.full(50, 2.0)},
        {"full": 2**20, "window:8": 2**18},
        {"loss_title": "a", "bytes_title": "b", "x": "x", "y": "y", "bytes_y": "MiB"},
        width=8,
    )
    assert [tr.type for tr in fig.data] == ["scatter", "bar", "scatter", "bar"] and fig.data[1].y[0] == 1.0
    attn = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    fig = sink_pair(attn, 1, list("abcd"), {"original": "o", "masked": "m", "title": "t"})
    assert len(fig.data) == 2
