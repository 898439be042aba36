"""Explore → One head → "why here": the panel shows the numbers `python -m models explain` prints, in both
languages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.cli import main
from tests.app.test_explore import decode
from tests.app.test_llama_pages import open_page
from ui.i18n import translate

TEXT = "The cat sat on the mat. The cat sat on the mat."


def _cli(capsys, query: int, key: int) -> dict:
    argv = ["explain", "--model", "random:llama-tiny", "--text", TEXT, "--layer", "1", "--head", "3"]
    assert main([*argv, "--query", str(query), "--key", str(key), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_panel_shows_the_cli_numbers(lang, capsys):
    at = open_page("explore", "random:llama-tiny", text=TEXT, view="head", layer="1", head="3", lang=lang)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(translate(lang, "why.title") == h.value for h in at.subheader)
    at.selectbox(key="why_query").set_value(9).run()
    at.selectbox(key="why_key").set_value(2).run()
    assert not at.exception and not at.error
    doc = _cli(capsys, 9, 2)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate(lang, "why.score")] == f"{doc['score']:.4f}"
    assert metrics[translate(lang, "why.weight")] == f"{doc['weight']:.4f}"
    specs = {}
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        specs[((spec.get("layout") or {}).get("title") or {}).get("text", "")] = spec
    bars = decode(specs[translate(lang, "why.frequency_title")]["data"][0]["y"])
    np.testing.assert_allclose(bars, doc["by_frequency"], atol=1e-9)
    shares = decode(specs[translate(lang, "why.pairs_title")]["data"][0]["x"])[::-1]  # drawn largest on top
    top = doc["top"]
    np.testing.assert_allclose(shares, [100 * v / doc["score"] for _, _, v in top], rtol=1e-9)
    first = translate(
        lang, "why.pair_sentence", q=top[0][0], k=top[0][1], pct=f"{100 * top[0][2] / doc['score']:.0f}",
        value=f"{top[0][2]:+.4f}",
    )  # fmt: skip
    assert any(first.replace("\\", "") in m.value.replace("\\", "") for m in at.markdown)


def test_a_table_over_budget_is_refused_in_words_and_the_rest_still_shows(monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_EXPLAIN_COMPONENTS", "3")
    at = open_page("explore", "random:llama-tiny", text=TEXT, view="head", layer="1", head="0")
    assert not at.exception and not at.error
    assert any("ATTENTION_LENS_EXPLAIN_COMPONENTS" in i.value.replace("\\", "") for i in at.info)
    assert any(m.label == translate("en", "why.score") for m in at.metric)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_heads_page_ablates_each_head_and_each_key_value_group(lang):
    from models import load_model
    from models.analysis.ablate import sweep

    at = open_page("heads", "random:llama-tiny", text=TEXT, lang=lang)
    assert not at.exception and not at.error
    at.button(key="heads_ablate_button").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    df = next(d.value for d in at.dataframe if translate(lang, "ablate.col.mean") in d.value.columns)
    truth = sweep(load_model("random:llama-tiny", device="cpu"), TEXT)
    assert len(df) == len(truth.names) and "KV 1.1" in set(df[translate(lang, "ablate.col.unit")])
    row = df[df[translate(lang, "ablate.col.unit")] == "1.2"].iloc[0]
    assert row[translate(lang, "ablate.col.mean")] == pytest.approx(truth.mean_kl[truth.names.index("1.2")])


def test_inside_a_head_explains_the_chosen_query(capsys):
    at = open_page("inside_head", "random:llama-tiny", text=TEXT, layer="1", head="3", query="9")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(translate("en", "why.lecture_title") in m.value for m in at.markdown)
    at.selectbox(key="why_key").set_value(2).run()
    doc = _cli(capsys, 9, 2)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("en", "why.score")] == f"{doc['score']:.4f}"
