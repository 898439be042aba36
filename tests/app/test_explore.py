"""The explore page through Streamlit's AppTest (no browser): every view, pairs, long and empty input, shareable URLs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from ui.i18n import translate

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 180
PAIR = ("The cat sat on the mat.", "It was warm there, so it fell asleep.")
LONG = " ".join(["The model looks at every token and weighs how much each other token matters here."] * 40)


def app(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = str(v)
    return at.run()


def by_title(at: AppTest) -> dict[str, dict]:
    found = {}
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        title = ((spec.get("layout") or {}).get("title") or {}).get("text", "")
        found[title] = spec
    return found


def decode(arr) -> np.ndarray:
    """Plotly 7 may encode arrays as {'dtype', 'bdata', 'shape'}."""
    if isinstance(arr, dict) and "bdata" in arr:
        import base64

        shape = tuple(int(s) for s in str(arr.get("shape", "")).split(",") if s.strip()) or None
        a = np.frombuffer(base64.b64decode(arr["bdata"]), dtype=np.dtype(arr["dtype"]))
        return a.reshape(shape) if shape else a
    return np.asarray(arr)


def head_spec(at: AppTest) -> dict:
    specs = by_title(at)
    heads = [s for title, s in specs.items() if title.startswith("Layer ") and "·" in title]
    assert heads, f"no head heatmap among {list(specs)}"
    return heads[0]


def test_sentence_every_view_runs_with_real_attention(minilm):
    at = app()
    assert not at.exception and not at.error
    overview = at.get("plotly_chart")[0]
    spec = json.loads(overview.proto.spec)
    assert [tr["type"] for tr in spec["data"]] == ["image", "scatter"]
    assert len(spec["data"][1]["x"]) == 6 * 12  # one clickable point per head of the bundled model
    assert any("bytes per attention value" in c.value for c in at.caption)

    at.segmented_control(key="view").set_value("layer").run()
    assert not at.exception
    heat = [tr for tr in json.loads(at.get("plotly_chart")[0].proto.spec)["data"] if tr["type"] == "heatmap"]
    assert len(heat) == 13  # 12 heads and their mean

    at.slider(key="layer").set_value(2).run()
    at.slider(key="head").set_value(3).run()
    at.segmented_control(key="view").set_value("head").run()
    assert not at.exception
    spec = head_spec(at)
    assert spec["layout"]["title"]["text"] == "Layer 2 · head 3"
    z = decode(spec["data"][0]["z"])
    # The map shown is the encoder's own attention for that layer and head.
    truth = minilm.encode("The animal didn't cross the street because it was too tired.").attentions[2, 3].numpy()
    np.testing.assert_allclose(z, truth, atol=1e-6)
    titles = by_title(at)
    assert "Token to token" in titles

    at.segmented_control(key="view").set_value("aggregate").run()
    assert not at.exception
    titles = list(by_title(at))
    # The view never moves the visitor's layer (issue 40); rollout through every layer is one click (issue 25)
    assert at.slider(key="layer").value == 2 and any(t.startswith("Rollout up to layer 2") for t in titles)
    at.button(key="rollout_to_last").click().run()
    assert at.slider(key="layer").value == 5 and any(t.startswith("Rollout up to layer 5") for t in by_title(at))
    at.slider(key="layer").set_value(2).run()
    titles = list(by_title(at))
    assert any(t.startswith("Rollout up to layer 2") for t in titles)
    assert any(t.startswith("Layer 2: mean over heads") for t in titles)
    assert len(at.get("download_button")) == 3  # NPZ, JSON, HTML


def test_hide_special_tokens_and_renormalise():
    at = app(view="head", layer="1", head="0")
    at.toggle(key="hide_special").set_value(True).run()
    spec = head_spec(at)
    assert "[CLS]" not in spec["layout"]["yaxis"]["ticktext"] and "[SEP]" not in spec["layout"]["xaxis"]["ticktext"]
    raw = decode(spec["data"][0]["z"])
    assert (raw.sum(1) < 1 - 1e-3).any()  # the model's own weights: the hidden columns' share is missing
    assert any("sum to less than 1" in c.value for c in at.caption)
    at.toggle(key="renormalise").set_value(True).run()
    z = decode(head_spec(at)["data"][0]["z"])
    np.testing.assert_allclose(z.sum(1), 1.0, atol=1e-5)
    assert any("renormalised" in c.value for c in at.caption)
    at.toggle(key="log_colour").set_value(True).run()
    assert not at.exception
    assert "log scale" in head_spec(at)["data"][0]["colorbar"]["title"]["text"]


def test_sentence_pair_filters():
    at = app(text=PAIR[0], text_b=PAIR[1], view="head", part="ab")
    assert not at.exception and not at.error
    assert at.selectbox(key="part").value == "ab"
    spec = head_spec(at)
    rows, cols = spec["layout"]["yaxis"]["ticktext"], spec["layout"]["xaxis"]["ticktext"]
    assert rows[0] == "[CLS]" and rows[-1] == "[SEP]" and "cat" in rows and "warm" not in rows
    assert cols[0] == "it" and "warm" in cols and "cat" not in cols
    for part in ("aa", "ba", "bb", "all"):
        at.selectbox(key="part").set_value(part).run()
        assert not at.exception
    at.segmented_control(key="view").set_value("overview").run()
    assert not at.exception
    at.selectbox(key="part").set_value("bb").run()
    assert not at.exception
    assert at.query_params.get("part") in ("bb", ["bb"])
    at.sidebar.text_area(key="text_b").set_value("").run()  # no longer a pair: the filter leaves the link
    assert not at.exception and "part" not in at.query_params


def test_512_token_text_is_truncated_with_a_notice_and_stays_light():
    at = app(text=LONG)
    assert not at.exception
    assert any("truncated to 512 tokens" in w.value for w in at.warning)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(at.get("plotly_chart")[0].proto.spec) < 1_500_000  # 72 heads × 512² values as one PNG
    assert spec["data"][0]["type"] == "image"
    assert any("block of 4 × 4 tokens" in c.value for c in at.caption)
    at.segmented_control(key="view").set_value("head").run()
    assert not at.exception
    assert at.slider(key="window").value == (0, 64)
    assert len(decode(head_spec(at)["data"][0]["z"])) == 64
    at.slider(key="window").set_value((100, 140)).run()
    spec = head_spec(at)
    assert decode(spec["data"][0]["z"]).shape == (40, 40)
    cells = next(d for d in spec["data"] if d.get("name") == "cells")  # a click picks a cell: it carries the hover
    assert cells["customdata"][0][0].endswith("· 100")  # hover names the true position
    assert cells["customdata"][41][3:] == [101, 101]  # …and the cell's positions, for "why here"
    for view in ("layer", "aggregate"):
        at.segmented_control(key="view").set_value(view).run()
        assert not at.exception


@pytest.mark.parametrize("view", ["overview", "head"])
def test_empty_text_gives_a_prompt(view):
    at = app(view=view)
    at.sidebar.text_area(key="text").set_value("").run()
    assert not at.exception and not at.error
    assert any("Type a sentence" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_query_parameters_restore_the_view():
    at = app(model="random:tiny", text="Shared links open the same view.", layer="1", head="2", view="head", lang="en")
    assert not at.exception and not at.error
    assert at.sidebar.selectbox(key="model_choice").value == "random:tiny"
    assert at.sidebar.text_area(key="text").value == "Shared links open the same view."
    assert at.slider(key="layer").value == 1 and at.slider(key="head").value == 2
    assert at.segmented_control(key="view").value == "head"
    assert head_spec(at)["layout"]["title"]["text"] == "Layer 1 · head 2"
    assert "random:tiny" in at.caption[0].value and "2 layers × 4 heads" in at.caption[0].value


def test_view_and_selection_are_written_to_the_url():
    at = app()
    at.segmented_control(key="view").set_value("layer").run()
    at.slider(key="layer").set_value(4).run()
    assert at.query_params.get("view") in ("layer", ["layer"])
    assert at.query_params.get("layer") in ("4", ["4"])
    code = [c.value for c in at.code]
    assert any("view=layer" in c and "layer=4" in c for c in code), code  # the share link
    at.segmented_control(key="view").set_value("overview").run()
    assert "view" not in at.query_params  # the default view keeps links short


def test_out_of_range_selections_from_a_link_are_clamped():
    at = app(model="random:tiny", layer="9", head="30", view="nonsense", part="zz")
    assert not at.exception
    assert at.slider(key="layer").value == 1 and at.slider(key="head").value == 3
    assert at.segmented_control(key="view").value == "overview"


def test_masked_attention_is_outlined_in_layer_and_head_views():
    at = app(mask="causal", view="head")
    assert not at.exception
    names = [tr.get("name") for tr in head_spec(at)["data"]]
    assert "masked" in names and "mask boundary" in names
    at.segmented_control(key="view").set_value("layer").run()
    names = [tr.get("name") for tr in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert names.count("masked") == 13


def test_image_format_reaches_every_figure():
    at = app(view="head")
    at.radio(key="img_format").set_value("svg").run()
    assert not at.exception
    for el in at.get("plotly_chart"):
        config = json.loads(el.proto.config) if el.proto.config else {}
        assert config.get("toImageButtonOptions", {}).get("format") == "svg", config


def test_bert_base_folder_at_512_tokens(bert_base_dir):
    """BERT-base shape (12 × 12 heads) from a folder, at the model's limit: the overview stays one light image."""
    at = app(model=str(bert_base_dir), text=LONG)
    assert not at.exception and not at.error
    el = at.get("plotly_chart")[0]
    spec = json.loads(el.proto.spec)
    assert len(spec["data"][1]["x"]) == 144
    assert len(el.proto.spec) < 0.2 * 144 * 512 * 512  # ≪ one byte per value: pooled 4 × 4, palette PNG
    for view in ("layer", "head", "aggregate"):
        at.segmented_control(key="view").set_value(view).run()
        assert not at.exception


@pytest.mark.parametrize(("lang", "bar"), [("en", "attention weight (0–1)"), ("zh", "注意力权重（0–1）")])
def test_one_layer_has_token_labels_and_a_colour_bar_with_its_unit(lang, bar):
    """Issue 25: One layer names its tokens (queries down the first column, keys under each column) and says what
    a colour means; scaled to each map's own maximum (the overview's choice), the bar says so."""
    at = app(view="layer", layer="1", lang=lang)
    assert not at.exception and not at.error
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    heat = [tr for tr in spec["data"] if tr["type"] == "heatmap"]
    scales = [tr for tr in heat if tr.get("showscale", True)]
    assert len(scales) == 1 and scales[0]["colorbar"]["title"]["text"] == bar
    layout = spec["layout"]
    labelled_y = [k for k, v in layout.items() if k.startswith("yaxis") and v.get("showticklabels")]
    labelled_x = [k for k, v in layout.items() if k.startswith("xaxis") and v.get("showticklabels")]
    # 13 maps of 16 tokens in 3 columns (issue 40: few enough per row that every token is labelled): 5 rows.
    assert len(labelled_y) == 5 and len(labelled_x) == 3
    assert all(len(layout[k]["ticktext"]) == 16 for k in labelled_x + labelled_y), "a token left unlabelled"
    assert "animal" in layout["yaxis"]["ticktext"] and "animal" in layout[labelled_x[0]]["ticktext"]
    at.radio(key="overview_scale").set_value("map").run()  # the overview's scale choice, shared
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = [tr for tr in spec["data"] if tr["type"] == "heatmap" and tr.get("showscale", True)]
    assert bars[0]["colorbar"]["title"]["text"] == translate(lang, "explore.colorbar_map")


def test_a_rerun_reuses_the_overview_figure_and_any_change_builds_it_again(monkeypatch):
    """Issue 35: nothing is built twice for one (model, text, mask, view): a rerun that changes none of them reuses
    the overview figure from the byte-bounded cache; a new text, mask or colour scale builds it again."""
    import viz.overview as ov
    from ui import results

    results.CACHE.clear()
    built = []
    real = ov.overview_figure
    monkeypatch.setattr(ov, "overview_figure", lambda *a, **k: built.append(1) or real(*a, **k))
    at = app(text="A text only this test uses.")
    assert not at.exception and len(built) == 1
    at.run()  # nothing changed
    assert len(built) == 1
    at.sidebar.text_area(key="text").set_value("Another text only this test uses.").run()
    assert len(built) == 2
    at.sidebar.selectbox(key="mask_kind").set_value("causal").run()
    assert len(built) == 3 and not at.exception
    at.run()
    assert len(built) == 3
    results.CACHE.clear()
