"""The Compare page and the Explore page's lenses through AppTest: real numbers in the figures, links, bad input."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from models import load_model
from models.analysis.norms import value_weighted
from models.analysis.words import word_groups

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
TINY = "random:llama-tiny"
PAIR = ("The keys to the cabinet is", "The keys to the cabinet was")


def page(path: str | None, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = str(v)
    if path is not None:
        at.switch_page(path)
    return at.run()


def specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def z_of(trace: dict) -> np.ndarray:
    z = trace["z"]
    if isinstance(z, dict) and "bdata" in z:  # plotly 6+: typed arrays
        shape = tuple(int(s) for s in str(z.get("shape", "")).split(",") if s.strip()) or None
        a = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        return a.reshape(shape) if shape else a
    return np.asarray(z, dtype=float)


@pytest.fixture(scope="module")
def tiny():
    return load_model(TINY, device="cpu")


def test_minimal_pair_shows_a_b_and_their_difference(tiny):
    at = page("app_pages/compare.py", model=TINY, text=PAIR[0], against_text=PAIR[1], layer=1, head=2)
    assert not at.exception and not at.error
    assert any("differ at 8" in i.value for i in at.info)
    head = [s for s in specs(at) if [tr["type"] for tr in s["data"]] == ["heatmap"] * 3]
    assert len(head) == 1, [[tr["type"] for tr in s["data"]] for s in specs(at)]
    a, b, d = (z_of(tr) for tr in head[0]["data"])
    want_a = tiny.encode(PAIR[0]).attentions[1, 2].numpy()
    want_b = tiny.encode(PAIR[1]).attentions[1, 2].numpy()
    np.testing.assert_allclose(a, want_a, atol=1e-6)
    np.testing.assert_allclose(b, want_b, atol=1e-6)
    np.testing.assert_allclose(d, want_b - want_a, atol=1e-6)
    assert np.abs(d[:-1]).max() < 1e-6  # causal: only the last row can change
    assert head[0]["data"][2]["zmid"] == 0
    # The ranked table holds the most changed heads first, and the link keeps run B.
    df = at.dataframe[0].value
    assert list(df["JS distance"]) == sorted(df["JS distance"], reverse=True)
    assert at.query_params["against_text"] == [PAIR[1]] or at.query_params["against_text"] == PAIR[1]


def test_same_shape_untrained_and_the_weighted_lens(tiny):
    at = page("app_pages/compare.py", model=TINY, text=PAIR[0], against_mask="window:2", compare_weighted="true")
    assert not at.exception and not at.error
    assert any("the same tokens" in i.value for i in at.info)
    assert any("value-weighted" in c.value for c in at.caption)


def test_different_lengths_and_different_models():
    at = page("app_pages/compare.py", model=TINY, text=PAIR[0], against_text="A much longer text than the other one")
    assert not at.exception and not at.error
    assert any("different lengths" in i.value for i in at.info)
    assert "statistic" in at.dataframe[0].value.columns
    at = page("app_pages/compare.py", model=TINY, text=PAIR[0], against_model="minilm")
    assert not at.exception and not at.error
    assert any("do not correspond" in w.value for w in at.warning)


def test_bad_mask_budget_and_same_run_say_so(monkeypatch):
    at = page("app_pages/compare.py", model=TINY, text=PAIR[0], against_mask="window:")
    assert not at.exception and any("mask" in e.value for e in at.error)
    at = page("app_pages/compare.py", model=TINY, text=PAIR[0])
    assert not at.exception and any("same as run A" in i.value for i in at.info)
    monkeypatch.setenv("ATTENTION_LENS_MAX_DERIVED_VALUES", "50")
    at = page("app_pages/compare.py", model=TINY, text="Another text for the budget", against_mask="causal")
    assert not at.exception and any("DERIVED" in e.value and "budget" in e.value for e in at.error)


def test_explore_value_weighted_lens_draws_the_shares(tiny):
    at = page(None, model=TINY, text=PAIR[0], view="head", layer=1, head=3, weighted="true")
    assert not at.exception and not at.error
    out = tiny.encode(PAIR[0], internals=True)
    shares = value_weighted(tiny, out).shares()[1, 3]
    heat = [s for s in specs(at) if (s["layout"].get("title") or {}).get("text") == "Layer 1 · head 3"]
    np.testing.assert_allclose(z_of(heat[0]["data"][0]), shares, atol=1e-6)
    side = [s for s in specs(at) if [tr["type"] for tr in s["data"]] == ["heatmap", "heatmap"]]
    assert side, "the raw and value-weighted maps side by side"
    np.testing.assert_allclose(z_of(side[0]["data"][0]), out.attentions[1, 3].numpy(), atol=1e-6)
    np.testing.assert_allclose(z_of(side[0]["data"][1]), shares, atol=1e-6)
    assert any("first token" in c.value for c in at.caption)


def test_explore_overview_under_a_lens_is_not_the_raw_one_from_the_cache():
    at = page(None, model=TINY, text=PAIR[1])
    raw = specs(at)[0]["data"][0]["source"]  # the overview's mosaic PNG
    at.toggle(key="weighted").set_value(True).run()
    assert not at.exception and not at.error
    weighted = specs(at)[0]["data"][0]["source"]
    at.toggle(key="words").set_value(True).run()
    assert not at.exception and not at.error
    both = specs(at)[0]["data"][0]["source"]
    assert len({raw, weighted, both}) == 3  # each lens draws its own maps, never a cached mosaic of another
    assert at.query_params["weighted"] in (["True"], "True", ["true"], "true")


def test_explore_words_lens_merges_sub_tokens(minilm):
    text = "Tokenization is unbelievably useful."
    at = page(None, text=text, view="head", layer=2, head=3, words="true")
    assert not at.exception and not at.error
    out = minilm.encode(text)
    words = word_groups(out.tokens, "wordpiece", minilm.tokenizer.all_special_tokens)
    heat = [s for s in specs(at) if (s["layout"].get("title") or {}).get("text") == "Layer 2 · head 3"][0]
    assert heat["layout"]["yaxis"]["ticktext"] == list(words.words)
    np.testing.assert_allclose(z_of(heat["data"][0]), words.merge(out.attentions[2, 3].numpy()), atol=1e-6)
    assert any("merged into" in c.value for c in at.caption)


def test_heads_page_ranks_by_output_norm(minilm):
    text = "word " * 300  # long enough that importance waits for its button (the table comes first)
    at = page("app_pages/heads.py", text=text)
    assert not at.exception and not at.error
    df = at.dataframe[0].value
    out = minilm.encode(text, internals=True)
    np.testing.assert_allclose(
        df["Output norm ‖W_O·context‖"].to_numpy(), value_weighted(minilm, out).output_norm.ravel(), rtol=1e-5
    )
