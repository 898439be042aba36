"""Explore → One head → "why here": the panel shows the numbers `python -m models explain` prints, in both
languages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.analysis.ablate import bootstrap
from models.cli import main
from tests.app.clicks import click, spec
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


def test_a_click_on_a_cell_of_the_map_explains_that_cell(capsys):
    """The map's invisible cell points carry (query, key); a click on one sets the panel's cell (the selectors stay
    as the keyboard path) and the panel shows the CLI's numbers for it."""
    at = open_page("explore", "random:llama-tiny", text=TEXT, view="head", layer="1", head="3")
    assert not at.exception and not at.error
    data = spec(at, "head_heatmap")["data"]
    trace = next(i for i, d in enumerate(data) if d.get("name") == "cells")
    index = next(i for i, c in enumerate(data[trace]["customdata"]) if c[3:] == [9, 2])
    at = click(at, "head_heatmap", trace, index)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="why_query").value == 9 and at.selectbox(key="why_key").value == 2
    doc = _cli(capsys, 9, 2)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("en", "why.score")] == f"{doc['score']:.4f}"
    assert any(translate("en", "why.click_hint") in c.value for c in at.caption)


def test_the_heads_table_gains_ablate_columns_with_the_cli_numbers(capsys):
    """The main table's ablate columns, once asked, hold for each head what `ablate --heads L.H --json` prints."""
    at = open_page("heads", "random:llama-tiny", text=TEXT)
    assert not at.exception and not at.error
    at.button(key="heads_ablate_column_button").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    col = {k: translate("en", f"heads.col.ablate_{k}") for k in ("kl", "low", "high", "last", "logit")}
    df = next(d.value for d in at.dataframe if translate("en", "heads.col.label") in d.value.columns)  # the main table
    assert len(df) == 2 * 4 and set(col.values()) <= set(df.columns)  # heads only: KV groups stay in their table
    for layer, head in ((1, 2), (0, 3)):
        argv = ["ablate", "--model", "random:llama-tiny", "--text", TEXT, "--heads", f"{layer}.{head}", "--json"]
        assert main(argv) == 0
        doc = json.loads(capsys.readouterr().out)
        row = df[df[translate("en", "heads.col.head_name")] == f"L{layer}H{head}"].iloc[0]
        assert row[col["last"]] == pytest.approx(doc["kl"], rel=1e-5, abs=1e-9)
        assert row[col["logit"]] == pytest.approx(doc["logit_diff"], rel=1e-5, abs=1e-7)
        assert row[col["kl"]] == pytest.approx(np.mean(doc["per_position_kl"]), rel=1e-5, abs=1e-9)
        low, high = bootstrap(np.asarray(doc["per_position_kl"], dtype=np.float64))  # the interval over positions
        assert (row[col["low"]], row[col["high"]]) == pytest.approx((low, high), rel=1e-4, abs=1e-9)
        assert row[col["low"]] <= row[col["kl"]] <= row[col["high"]]
