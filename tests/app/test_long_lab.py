"""The Long-context lab page (and the Generation page's cache spec) through AppTest on random:llama-tiny."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.clicks import click, decode, spec
from tests.app.test_lecture_pages import chart_specs, texts
from ui.i18n import LANGUAGES, translate

ROOT = Path(__file__).resolve().parents[2]
MODEL = "random:llama-tiny"


def open_page(page: str, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params["model"] = query.pop("model", MODEL)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at.switch_page(f"app_pages/{page}.py").run()


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_the_lab_runs_its_three_sections(lang):
    at = open_page("long_lab", lang=lang, text="The cat sat on the mat.")
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert not [s for s in texts(at) if "⟦" in s], "a string key is missing"
    at.text_input[0].set_value("64,96")
    at.text_input[1].set_value("0,1")
    at.button[0].click().run()  # the needle grid's submit button
    assert not at.exception and not at.error, [e.value for e in at.error]
    if lang == "en":  # a click on a head of the retrieval overview opens it (the list is the keyboard path)
        heads = decode(spec(at, "lab_heads_chart")["data"][-1]["customdata"])
        index = next(i for i, c in enumerate(heads.tolist()) if c[:2] == [1, 2])
        at = click(at, "lab_heads_chart", len(spec(at, "lab_heads_chart")["data"]) - 1, index)
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert at.selectbox(key="lab_head").value == "1.2"
        titles = [((c.get("layout") or {}).get("title") or {}).get("text", "") for c in chart_specs(at)]
        assert any(x.startswith("Layer 1, head 2 at the first answer step") for x in titles), titles
    at.number_input[0].set_value(160)
    at.number_input[1].set_value(16)
    at.button[1].click().run()  # read the text three ways
    assert not at.exception and not at.error, [e.value for e in at.error]
    shown = "\n".join(texts(at))
    assert translate(lang, "longlab.sink.title") in shown
    # needle grid, retrieval heads, the answer-step row, loss curves, sink shares, the sink pair
    assert len(chart_specs(at)) >= 6
    table = at.table[0].value
    caches = table[translate(lang, "longlab.loss.col_cache")].tolist()
    assert caches == ["full", "window:16", "sink:4+window:16"]


def test_the_lab_refuses_a_grid_over_budget_in_one_line(monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_NEEDLE_CASES", "2")
    at = open_page("long_lab")
    at.text_input[0].set_value("64,96")
    at.text_input[1].set_value("0,1")
    at.button[0].click().run()
    assert not at.exception
    assert len(at.error) == 1 and "ATTENTION_LENS_NEEDLE_CASES" in at.error[0].value


def test_the_lab_asks_for_a_decoder():
    at = open_page("long_lab", model="minilm")
    assert not at.exception and not at.error
    assert any("encoder" in i.value for i in at.info)


def test_generation_page_with_a_bounded_cache():
    at = open_page("generation")
    at.text_input(key="gen_cache").set_value("sink:2+window:4").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("steps checked" in s.value for s in at.success)
    assert any("sink:2+window:4" in s for s in texts(at))
    at.text_input(key="gen_cache").set_value("window:zero").run()
    assert not at.exception and len(at.error) == 1
