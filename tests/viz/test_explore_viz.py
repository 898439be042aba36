"""The explorer's figures and aggregates, without Streamlit: mosaic, heatmap, lines, layer grid, pairs, rollout, exports."""

from __future__ import annotations

import base64
import io
import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from models.analysis.rollout import attention_rollout, mean_heads
from viz.export import figure_config, json_text, npz_bytes, standalone_html
from viz.heatmap import HOVER_TOKENS_MAX, LOG_FLOOR, add_segment_lines, head_heatmap
from viz.layer import layer_figure
from viz.lines import line_segments, lines_figure
from viz.overview import GAP_INDEX, LEVELS, MASKED_INDEX, overview_figure, pool_max, render_mosaic
from viz.select import Part, narrow, part_of, renormalise

WORDS = "the model looks at every token and weighs how much each other token matters here . " * 60


def random_attn(layers: int, heads: int, seq: int, seed: int = 0) -> np.ndarray:
    g = np.random.default_rng(seed)
    scores = g.normal(size=(layers, heads, seq, seq)) * 3
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def text_of(tokenizer, n_tokens: int) -> str:
    ids = tokenizer(WORDS, add_special_tokens=False)["input_ids"][: n_tokens - 2]
    return tokenizer.decode(ids)


def png_indices(png: bytes) -> np.ndarray:
    img = Image.open(io.BytesIO(png))
    assert img.mode == "P"
    return np.asarray(img)


# ---- rollout ----------------------------------------------------------------------------------------


def test_rollout_by_hand():
    # Two layers, two heads, two tokens. Layer 1's heads average to [[1, 0], [.5, .5]]; layer 2's to [[0, 1], [1, 0]].
    a1 = np.array([[[1, 0], [1, 0]], [[1, 0], [0, 1]]], dtype=np.float32)
    a2 = np.array([[[0, 1], [1, 0]], [[0, 1], [1, 0]]], dtype=np.float32)
    r = attention_rollout(np.stack([a1, a2])).numpy()
    hat1 = np.array([[1.0, 0.0], [0.25, 0.75]])  # 0.5·Ā + 0.5·I
    hat2 = np.array([[0.5, 0.5], [0.5, 0.5]])
    np.testing.assert_allclose(r[0], hat1, atol=1e-7)
    np.testing.assert_allclose(r[1], hat2 @ hat1, atol=1e-7)
    np.testing.assert_allclose(r[1], [[0.625, 0.375], [0.625, 0.375]], atol=1e-7)


def test_rollout_rows_sum_to_one_on_real_attention(minilm):
    out = minilm.encode("The animal didn't cross the street because it was too tired.")
    r = attention_rollout(out.attentions)
    assert r.shape == (6, out.seq, out.seq) and r.dtype == torch.float32
    np.testing.assert_allclose(r.sum(-1).numpy(), 1.0, atol=1e-5)
    assert (r >= 0).all()
    # Rollout is not the plain product of the attention maps: the residual half keeps the diagonal heavier.
    plain = out.attentions.mean(1)[1] @ out.attentions.mean(1)[0]
    assert not torch.allclose(r[1], plain, atol=1e-3)


def test_rollout_renormalises_rows_that_do_not_sum_to_one():
    attn = np.full((1, 1, 3, 3), 0.2, dtype=np.float32)  # rows sum to 0.6 (e.g. columns hidden by a view)
    r = attention_rollout(attn).numpy()
    np.testing.assert_allclose(r.sum(-1), 1.0, atol=1e-6)


def test_mean_heads_and_bad_shapes():
    attn = random_attn(2, 3, 5)
    np.testing.assert_allclose(mean_heads(attn).numpy(), attn.mean(1), atol=1e-7)
    with pytest.raises(ValueError, match="layers, heads, seq, seq"):
        attention_rollout(np.zeros((3, 4, 4)))


# ---- overview mosaic ----------------------------------------------------------------------------------


def test_mosaic_layout_and_size():
    attn = random_attn(6, 12, 20)
    m = render_mosaic(attn, min_tile=1, gap=2)
    idx = png_indices(m.png)
    assert idx.shape == (m.height, m.width) == (6 * 22 - 2, 12 * 22 - 2)
    assert m.factor == 1 and m.upscale == 1 and (m.tile_h, m.tile_w) == (20, 20)
    assert (idx[20:22, :] == GAP_INDEX).all() and (idx[:, 20:22] == GAP_INDEX).all()
    for layer, head in [(0, 0), (3, 7), (5, 11)]:
        assert m.tile_at(*m.tile_center(layer, head)) == (layer, head)


def test_each_tile_is_its_own_map():
    attn = np.zeros((2, 3, 8, 8), dtype=np.float32)
    attn[1, 2, 5, 3] = 0.9  # a single spike in layer 1, head 2
    attn[0, 0] = 0.125  # a uniform head: per map, every cell is the top colour; on the shared √ scale, pale
    m = render_mosaic(attn, min_tile=1, gap=1, scale="map")
    idx = png_indices(m.png)
    tile = idx[1 * 9 : 1 * 9 + 8, 2 * 9 : 2 * 9 + 8]
    assert tile[5, 3] == LEVELS - 1 and (np.delete(tile.ravel(), 5 * 8 + 3) == 0).all()
    assert (idx[:8, :8] == LEVELS - 1).all()
    shared = png_indices(render_mosaic(attn, min_tile=1, gap=1).png)  # default: √weight, 0–1 for every tile
    assert shared[0, 0] == round(math.sqrt(0.125) * (LEVELS - 1))
    assert shared[9 + 5, 18 + 3] == round(math.sqrt(0.9) * (LEVELS - 1))
    with pytest.raises(ValueError, match="unknown scale"):
        render_mosaic(attn, scale="cube")  # "log" is one now (the sink-friendly scale)


def test_long_inputs_are_max_pooled_to_the_tile_size():
    attn = np.zeros((1, 1, 512, 512), dtype=np.float32)
    attn[0, 0, 301, 302] = 1.0  # one thin feature must survive pooling
    m = render_mosaic(attn, max_tile=128)
    assert m.factor == 4 and (m.tile_h, m.tile_w) == (128, 128)
    idx = png_indices(m.png)
    assert idx[301 // 4, 302 // 4] == LEVELS - 1
    pooled = pool_max(np.arange(25, dtype=np.float32).reshape(5, 5), 2)  # 5 is not a multiple of 2: padded
    np.testing.assert_array_equal(pooled, [[6, 8, 9], [16, 18, 19], [21, 23, 24]])
    assert pool_max(np.eye(4, dtype=bool), 2).dtype == bool


def test_short_inputs_are_enlarged_by_whole_pixels():
    m = render_mosaic(random_attn(1, 2, 5), min_tile=48)
    assert m.upscale == 10 and m.tile_w == 50
    idx = png_indices(m.png)
    assert (idx[:10, :10] == idx[0, 0]).all()  # one token pair is a 10 × 10 block


def test_hidden_cells_are_grey():
    attn = random_attn(1, 1, 6)
    keep = np.tril(np.ones((6, 6), dtype=bool))
    idx = png_indices(render_mosaic(attn * keep, keep, min_tile=1).png)
    assert (idx[np.triu_indices(6, 1)] == MASKED_INDEX).all()
    assert (idx[np.tril_indices(6)] != MASKED_INDEX).all()


@pytest.mark.parametrize("n_tokens", [128, 512])
def test_about_one_byte_per_attention_value_reaches_the_browser(minilm, n_tokens):
    out = minilm.encode(text_of(minilm.tokenizer, n_tokens))
    assert out.seq == n_tokens
    m = render_mosaic(out.attentions.numpy())
    fig = overview_figure(m, selected=(2, 3))
    payload = len(fig.to_json())
    values = 6 * 12 * n_tokens**2
    assert m.bytes_per_value <= 1.0, m.bytes_per_value
    assert m.uri_bytes == len(m.data_uri)  # counted without making the URI, as Explore's note does on every rerun
    # The figure is the image (plotly's JSON writes each "/" of the base64 as \u002f, +8 %) and a few kB of layout.
    assert payload <= 1.15 * len(m.data_uri) + 20_000
    assert payload / values <= 1.0
    if n_tokens == 512:
        assert m.factor == 4 and payload < 1_500_000


def test_overview_figure_is_one_image_and_a_clickable_point_per_head():
    m = render_mosaic(random_attn(6, 12, 16))
    fig = overview_figure(m, selected=(2, 3), layer_prefix="L", head_prefix="H")
    kinds = [tr.type for tr in fig.data]
    assert kinds == ["image", "scatter"]
    points = fig.data[1]
    assert len(points.x) == 72 and list(points.customdata[2 * 12 + 3]) == [2, 3]
    assert list(fig.layout.xaxis.ticktext[:2]) == ["H0", "H1"] and list(fig.layout.yaxis.ticktext[-1:]) == ["L5"]
    assert fig.layout.hoverdistance == -1  # the nearest tile answers anywhere on the image
    assert len(fig.layout.shapes) == 1  # the selected head is outlined
    assert [tr["type"] for tr in json.loads(fig.to_json())["data"]] == ["image", "scatter"]


@pytest.mark.parametrize("group", [1, 2])
def test_overview_figure_is_byte_for_byte_what_plotly_validates(group):
    """overview_figure skips plotly's validation (~2.5 ms a new text): its JSON must be what the same traces and
    layout give through the validating constructors, key order included, and later changes are validated again."""
    import plotly.graph_objects as go

    m = render_mosaic(random_attn(4, 8, 20), group=group)
    for kw in (
        {},
        {"selected": (1, 5), "title": "Every head", "extra": [[h, "7"] for _ in range(4) for h in range(8)]},
    ):
        fig = overview_figure(m, hover="L %{customdata[0]}<extra></extra>", **kw)
        d = fig.to_dict()
        image, points = ({k: v for k, v in tr.items() if k != "type"} for tr in d["data"])
        layout = {k: v for k, v in d["layout"].items() if k != "template"}
        validated = go.Figure([go.Image(**image), go.Scatter(**points)], layout=layout)
        assert fig.to_json() == validated.to_json()
        for f in (fig, validated):
            f.update_layout(title={"text": "Layer 3", "y": 0.995}, margin={"t": 70})
            f.add_shape(type="rect", x0=0, x1=3, y0=0, y1=2)
        assert fig.to_json() == validated.to_json()
        with pytest.raises(ValueError):
            fig.update_layout(height="tall")
        with pytest.raises(ValueError):
            fig.data[1].update(mode="dots")


@pytest.mark.parametrize("level, strategy, fast", [(1, 3, False), (9, 0, False), (1, 3, True)])
def test_palette_png_decodes_to_its_indices_and_colours(level, strategy, fast):
    from viz.overview import palette_png

    rng = np.random.default_rng(3)
    index = rng.integers(0, 5, size=(37, 53), dtype=np.uint8)
    index[:, 10:20] = 4  # a run, as the gaps between tiles are
    palette = bytes([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 200, 150, 100])
    img = Image.open(io.BytesIO(palette_png(index[:, 1:-1], palette, level=level, strategy=strategy, fast=fast)))
    assert img.size == (51, 37)
    assert np.array_equal(png_indices(palette_png(index, palette, level, strategy, fast)), index)
    rgb = np.asarray(Image.open(io.BytesIO(palette_png(index, palette, level, strategy, fast))).convert("RGB"))
    assert np.array_equal(rgb, np.frombuffer(palette, dtype=np.uint8).reshape(-1, 3)[index])


def test_mosaic_deflates_with_isal_when_installed_and_zlib_otherwise(minilm, monkeypatch):
    # isal is in requirements.txt: the per-text mosaic uses it; without it (monkeypatched away) zlib draws the
    # same pixels. Real maps, 120 tokens: ISA-L's bytes stay within 1.3× of zlib level 1's (bench/NOTES.md).
    import viz.overview as overview

    assert overview.isal_zlib is not None
    maps = minilm.encode(text_of(minilm.tokenizer, 120)).attentions.numpy()
    fast = render_mosaic(maps)
    monkeypatch.setattr(overview, "isal_zlib", None)
    plain = render_mosaic(maps)
    assert fast.png != plain.png  # two different deflaters wrote them
    assert np.array_equal(png_indices(fast.png), png_indices(plain.png))
    assert Image.open(io.BytesIO(fast.png)).getpalette() == Image.open(io.BytesIO(plain.png)).getpalette()
    assert len(fast.png) <= 1.3 * len(plain.png)
    assert fast.bytes_per_value <= 1.0


def test_mosaic_rejects_bad_shapes():
    with pytest.raises(ValueError, match="layers, heads"):
        render_mosaic(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="mask is"):
        render_mosaic(random_attn(1, 1, 4), np.ones((3, 3), dtype=bool))


# ---- head heatmap -------------------------------------------------------------------------------------


def test_repeated_tokens_keep_their_own_rows():
    tokens = ["[CLS]", "the", "cat", "the", "[SEP]"]
    w = random_attn(1, 1, 5)[0, 0]
    fig = head_heatmap(w, tokens, title="t")
    heat = fig.data[0]
    assert list(heat.y) == [0, 1, 2, 3, 4]  # positions, not categories: the two "the" stay apart
    assert list(fig.layout.yaxis.ticktext) == tokens
    assert heat.customdata[3][1][0] == "the · 3" and heat.customdata[1][3][1] == "the · 3"
    assert heat.customdata[1][2][2] == f"{w[1, 2]:.4f}"


def test_heatmap_positions_log_colour_and_words():
    w = np.array([[0.5, 0.5, 0.0], [0.001, 0.009, 0.99]], dtype=np.float32)
    fig = head_heatmap(
        w,
        ["a", "b"],
        key_tokens=["x", "y", "z"],
        q_pos=[4, 7],
        k_pos=[1, 2, 9],
        log=True,
        words={"query": "查询", "key": "键", "weight": "权重"},
    )
    heat = fig.data[0]
    np.testing.assert_allclose(np.asarray(heat.z), np.log10(np.clip(w, LOG_FLOOR, None)), atol=1e-6)
    assert heat.customdata[1][2][0] == "b · 7" and heat.customdata[1][2][1] == "z · 9"
    assert heat.customdata[1][0][2] == "0.0010"  # hover shows the weight, not its log
    assert "0.0001" in list(heat.colorbar.ticktext) and "查询" in heat.hovertemplate
    assert fig.layout.xaxis.title.text == "键"


def test_big_heatmaps_hover_with_numbers_not_strings():
    n = int(math.isqrt(HOVER_TOKENS_MAX)) + 1
    w = random_attn(1, 1, n)[0, 0]
    fig = head_heatmap(w, [f"t{i}" for i in range(n)])
    assert np.asarray(fig.data[0].customdata).dtype == np.float32
    assert len(fig.layout.xaxis.tickvals) <= 60  # thinned labels


def test_sentence_boundary_is_drawn_on_both_axes():
    fig = head_heatmap(random_attn(1, 1, 5)[0, 0], list("abcde"))
    add_segment_lines(fig, [0, 0, 0, 1, 1], [0, 0, 0, 1, 1])
    lines = [(sh.x0, sh.y0) for sh in fig.layout.shapes]
    assert len(lines) == 2 and lines[0][0] == 2.5 and lines[1][1] == 2.5
    single = head_heatmap(random_attn(1, 1, 3)[0, 0], list("abc"))
    assert not add_segment_lines(single, [0, 0, 0], [0, 0, 0]).layout.shapes


def test_heatmap_shape_errors():
    with pytest.raises(ValueError, match="query and"):
        head_heatmap(np.zeros((2, 2)), ["a"])


# ---- pairs, hiding, windows ---------------------------------------------------------------------------


def test_cut_is_a_read_only_view_for_runs_and_a_copy_otherwise():
    rng = np.random.default_rng(0)
    maps = rng.random((2, 3, 7, 7)).astype(np.float32)
    cases = [
        (np.arange(7), np.arange(7)),  # everything
        (np.arange(2, 5), np.arange(0, 3)),  # a part or a window
        (np.array([1, 2, 4]), np.arange(7)),  # [SEP] in the middle hidden: not a run
        (np.arange(7), np.array([0, 6])),
        (np.array([3]), np.array([5])),
        (np.array([2, 1]), np.arange(2)),  # decreasing: not a run
    ]
    for rows, cols in cases:
        got = Part(rows, cols).cut(maps)
        np.testing.assert_array_equal(got, maps[..., rows[:, None], cols[None, :]])
        consecutive = all(len(i) and (np.diff(i) == 1).all() for i in (rows, cols))
        assert np.shares_memory(got, maps) == consecutive
        if consecutive:
            assert not got.flags.writeable  # shared cached maps cannot be changed through it
            with pytest.raises(ValueError):
                got[..., 0, 0] = 1.0
    assert maps.flags.writeable  # the maps themselves are untouched
    empty = Part(np.array([], dtype=int), np.arange(3)).cut(maps)
    assert empty.shape == (2, 3, 0, 3)


def test_pair_filters():
    tokens = ["[CLS]", "a1", "a2", "[SEP]", "b1", "[SEP]"]
    segments = [0, 0, 0, 0, 1, 1]
    attn = np.arange(36, dtype=np.float32).reshape(6, 6)
    ab = part_of(segments, "ab")
    assert list(ab.rows) == [0, 1, 2, 3] and list(ab.cols) == [4, 5]
    np.testing.assert_array_equal(ab.cut(attn), attn[:4, 4:])
    ba = part_of(segments, "ba")
    np.testing.assert_array_equal(ba.cut(attn), attn[4:, :4])
    assert part_of(segments, "bb").cut(attn).shape == (2, 2)
    assert part_of([0, 0, 0], "ab").cut(np.zeros((3, 3))).shape == (3, 3)  # no B: everything
    hidden = narrow(part_of(segments, "aa"), tokens, hide_special=True)
    assert list(hidden.rows) == [1, 2] and list(hidden.cols) == [1, 2]
    windowed = narrow(part_of(segments), tokens, window=(2, 5))
    assert list(windowed.rows) == [2, 3, 4]
    assert narrow(part_of(segments, "bb"), tokens, window=(0, 3)).empty
    with pytest.raises(ValueError, match="unknown part"):
        part_of(segments, "ac")


def test_renormalise():
    w = np.array([[0.2, 0.2], [0.0, 0.0]], dtype=np.float32)
    np.testing.assert_allclose(renormalise(w), [[0.5, 0.5], [0.0, 0.0]])


# ---- lines and layer grid -----------------------------------------------------------------------------


def test_line_segments_follow_the_weights():
    w = np.array([[0.7, 0.3, 0.0], [0.005, 0.5, 0.495]], dtype=np.float32)
    bands = line_segments(w, min_weight=0.01)
    pairs = sorted((ys[i], ys[i + 1]) for _, _, _, ys in bands for i in range(0, len(ys), 3))
    assert pairs == [(0, 0), (0, 1), (1, 1), (1, 2)]  # 0.0 and 0.005 are below min_weight
    focus = line_segments(w, min_weight=0.01, focus=1)
    assert sorted(ys[i] for _, _, _, ys in focus for i in range(0, len(ys), 3)) == [1, 1]


def test_lines_figure_is_light_and_clickable():
    n = 64
    w = random_attn(1, 1, n)[0, 0]
    fig = lines_figure(w, [f"t{i}" for i in range(n)], focus=None)
    assert len(fig.data) <= 8  # a handful of band traces and the two token columns, not n² shapes
    queries = fig.data[-2]
    assert queries.customdata[5][0] == 5 and queries.text[5] == "t5"
    focused = lines_figure(w, [f"t{i}" for i in range(n)], focus=5)
    drawn = sum(len(tr.x) // 3 for tr in focused.data[:-2])
    assert drawn == int((w[5] >= 0.01).sum())


def test_layer_figure_has_every_head_and_the_mean():
    attn = random_attn(1, 12, 20)[0]
    maps = np.concatenate([attn, attn.mean(0, keepdims=True)])
    titles = [f"H{h}" for h in range(12)] + ["mean"]
    fig, factor = layer_figure(maps, titles)
    heat = [tr for tr in fig.data if tr.type == "heatmap"]
    assert len(heat) == 13 and factor == 1
    keep = np.tril(np.ones((20, 20), dtype=bool))
    masked, _ = layer_figure(maps * keep, titles, keep=keep)
    assert sum(tr.name == "masked" for tr in masked.data) == 13


def test_layer_figure_pools_long_inputs():
    maps = random_attn(1, 3, 512)[0]
    fig, factor = layer_figure(maps, ["a", "b", "c"], max_cells=96)
    assert factor == 6 and np.asarray(fig.data[0].z).shape == (86, 86)
    assert np.asarray(fig.data[0].customdata)[1, 2].tolist() == [6, 12]  # first positions of the block


# ---- labels and colour bars on every heatmap (issue 25) ---------------------------------------------------


def _labelled(axis) -> list[str]:
    return list(axis.ticktext) if axis.showticklabels is not False and axis.ticktext else []


def test_layer_figure_has_token_labels_and_one_colour_bar_in_weights():
    attn = random_attn(1, 12, 8)[0]
    maps = np.concatenate([attn, attn.mean(0, keepdims=True)])
    tokens = [f"w{i}" for i in range(8)]
    fig, _ = layer_figure(maps, [f"H{h}" for h in range(12)] + ["mean"], tokens=tokens)
    heat = [tr for tr in fig.data if tr.type == "heatmap"]
    bars = [tr for tr in heat if tr.showscale]
    assert len(bars) == 1 and "attention weight (0–1)" in bars[0].colorbar.title.text
    assert all(tr.zmin == 0 and tr.zmax == 1 for tr in heat)  # one scale: colours compare across heads
    np.testing.assert_allclose(np.asarray(heat[4].z), maps[4], atol=1e-6)  # z is the weight itself
    # queries label the first column (maps 0, 5, 10), keys the lowest map of each column (8, 9, 10, 11, 12)
    ys = [i for i in range(13) if _labelled(fig.layout[f"yaxis{'' if i == 0 else i + 1}"])]
    xs = [i for i in range(13) if _labelled(fig.layout[f"xaxis{'' if i == 0 else i + 1}"])]
    assert ys == [0, 5, 10] and xs == [8, 9, 10, 11, 12]
    assert _labelled(fig.layout.yaxis) == tokens and _labelled(fig.layout.xaxis9) == tokens
    assert "w3 · 3" in np.asarray(heat[0].customdata)[3, 5].tolist()  # hover names the tokens
    own, _ = layer_figure(maps, [f"H{h}" for h in range(12)] + ["mean"], tokens=tokens, scale="map")
    top = [tr for tr in own.data if tr.type == "heatmap"]
    assert "largest weight" in next(tr for tr in top if tr.showscale).colorbar.title.text
    assert all(float(np.max(tr.z)) == pytest.approx(1.0) for tr in top)
    np.testing.assert_allclose(np.asarray(top[4].customdata)[..., 2].astype(float), maps[4], atol=1e-6)
    logged, _ = layer_figure(maps, [f"H{h}" for h in range(12)] + ["mean"], tokens=tokens, scale="log")
    heat = [tr for tr in logged.data if tr.type == "heatmap"]
    assert "log scale" in heat[0].colorbar.title.text and list(heat[0].colorbar.ticktext)[-1] == "1"
    np.testing.assert_allclose(np.asarray(heat[2].z), np.log10(np.clip(maps[2], 1e-4, None)), atol=1e-5)


def test_crowded_token_axes_are_thinned_and_turned_and_cut():
    from viz.heatmap import token_ticks

    few = token_ticks(["a", "b", "c"], 600, across=True)
    assert few.text == ["a", "b", "c"] and few.angle == 0 and few.size == 14
    words = [f"token{i}" for i in range(42)]
    crowded = token_ticks(words, 330, across=True)  # 42 keys in the head view's plot area at 1280 px
    assert crowded.angle == -60 and crowded.size == 11
    assert 10 <= len(crowded.vals) < 42 and crowded.vals == list(range(0, 42, crowded.vals[1]))
    assert token_ticks(["a" * 30], 600, across=False).text == ["a" * 11 + "…"]
    fig = head_heatmap(random_attn(1, 1, 42)[0, 0], ["x" * 20] + words[1:], width_hint=520)
    assert fig.layout.xaxis.tickangle == -60 and len(fig.layout.xaxis.tickvals) < 42
    assert fig.layout.xaxis.ticktext[0] == "x" * 11 + "…"
    assert "x" * 20 in np.asarray(fig.data[0].customdata)[0, 0, 0]  # hover has the whole token
    assert "attention weight (0–1)" == fig.data[0].colorbar.title.text


# ---- exports ------------------------------------------------------------------------------------------


def test_npz_has_no_pickled_objects():
    data = npz_bytes({"tokens": np.array(["[CLS]", "猫", "[SEP]"]), "attentions": random_attn(1, 2, 3)})
    loaded = np.load(io.BytesIO(data), allow_pickle=False)
    assert loaded["tokens"].tolist() == ["[CLS]", "猫", "[SEP]"] and loaded["attentions"].shape == (1, 2, 3, 3)
    with pytest.raises(TypeError, match="pickle"):
        npz_bytes({"bad": np.array([{"a": 1}], dtype=object)})


def test_json_round_trip():
    attn = random_attn(1, 1, 3)
    doc = json.loads(json_text({"tokens": ["a", "b", "c"], "attentions": attn, "n": np.int64(3)}))
    np.testing.assert_allclose(doc["attentions"], attn, atol=1e-6)
    assert doc["n"] == 3


def test_standalone_html_inlines_plotly_and_every_figure():
    m = render_mosaic(random_attn(2, 2, 6))
    figs = [("overview", overview_figure(m)), ("head", head_heatmap(random_attn(1, 1, 4)[0, 0], list("abcd")))]
    page = standalone_html(
        "Explore <attention>", figs, facts=[("Text", "a < b")], lang="zh", config=figure_config("svg", "x")
    )
    assert page.startswith("<!DOCTYPE html>") and '<html lang="zh">' in page
    assert "Explore &lt;attention&gt;" in page and "a &lt; b" in page
    assert "plotly.js (cartesian - minified) v" in page and len(page) > 1_000_000  # plotly.js itself is inside
    assert "<script src=" not in page and 'src="http' not in page
    assert page.count("Plotly.newPlot") == 2
    assert '"format": "svg"' in page or '"format":"svg"' in page
    assert base64.b64encode(m.png).decode()[:40] in page


def test_non_cartesian_figures_get_the_full_plotly_bundle():
    import plotly.graph_objects as go

    from viz.export import plotly_bundle

    name, js = plotly_bundle([go.Figure(go.Heatmap(z=[[1]])), go.Figure(go.Bar(y=[1]))])
    assert "cartesian" in name and len(js) < 2_500_000
    name, js = plotly_bundle([go.Figure(go.Scatter3d(x=[1], y=[1], z=[1]))])
    assert "cartesian" not in name and len(js) > 3_000_000


def test_figure_config_formats():
    assert figure_config("svg")["toImageButtonOptions"]["format"] == "svg"
    assert figure_config("png", scale=3)["toImageButtonOptions"]["scale"] == 3
    with pytest.raises(ValueError):
        figure_config("gif")
