"""The Heads and Corpus pages' wiring through AppTest (no browser): they run, show real numbers, handle bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300


def page(path: str, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at.switch_page(path).run()


def specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def titles(at: AppTest) -> list[str]:
    out = []
    for s in specs(at):
        title = s.get("layout", {}).get("title", {})
        out.append(title.get("text", "") if isinstance(title, dict) else str(title))
    return out


def test_heads_page_shows_every_section():
    at = page("app_pages/heads.py")
    assert not at.exception and not at.error
    # one tab per section (issue 25: not one 7,000-pixel scroll), names short enough for one row at 1280 px
    assert [tab.label for tab in at.tabs] == [
        "Labels",
        "Statistics",
        "Redundancy",
        "Near-duplicates",
        "Importance",
        "Layer by layer",
    ]
    t = titles(at)
    grid = specs(at)[0]["data"][0]
    assert grid["type"] == "heatmap" and "prev" in np.array(grid["text"]).ravel().tolist()  # L0H2 of MiniLM
    assert any("Pattern label" in c.value for c in at.caption)
    assert any("in cluster order" in x for x in t)
    assert any("metric MDS" in x for x in t)
    assert any("Importance of every head" in x for x in t)
    assert any("Removing k heads" in x for x in t)
    # the statistics table holds all 72 heads of the bundled model, shares in %
    df = at.dataframe[0].value
    assert len(df) == 72 and df["[CLS] %"].between(0, 100).all()
    assert any("proxy" in m.value for m in at.markdown)  # the bundled model has no MLM head: say so
    # the thresholds are on the page
    assert any("> 50 %" in m.value and "> 0.9" in m.value for m in at.markdown)


def test_heads_page_metric_switch_and_threshold():
    at = page("app_pages/heads.py")
    for metric in ("cosine", "cka", "js"):
        at.radio(key="heads_metric").set_value(metric).run()
        assert not at.exception
    heat = next(s for s in specs(at) if "in cluster order" in str(s["layout"]["title"]))
    assert heat["data"][0]["type"] == "heatmap"
    at.slider(key="heads_threshold").set_value(0.3).run()
    assert not at.exception
    lines = [m.value for m in at.markdown if "have a near-duplicate" in m.value]
    assert lines and "layer 0" in lines[0]


def test_heads_page_empty_text_is_a_prompt():
    at = page("app_pages/heads.py", text="   ")
    assert not at.exception and not at.error
    assert any("Type a sentence" in i.value for i in at.info)


@pytest.mark.long
def test_long_text_importance_waits_for_the_button():
    at = page("app_pages/heads.py", text="word " * 170)  # 172 tokens: more work than the page does unasked (163)
    assert not at.exception
    assert any("press the button" in i.value for i in at.info)
    at.button(key="heads_importance_button").click().run()
    assert not at.exception
    assert any("Importance of every head" in x for x in titles(at))


def test_corpus_page_runs_the_example():
    at = page("app_pages/corpus.py")
    assert not at.exception and any("Paste some sentences" in i.value for i in at.info)
    at.button(key="corpus_example_button").click().run()
    example = at.text_area(key="corpus_text").value.splitlines()
    assert len(example) == 60 and sum("\t" in line for line in example) == 15  # 15 sentence pairs
    at.text_area(key="corpus_text").set_value("\n".join(example[:8])).run()  # a short corpus keeps the test quick
    at.button(key="corpus_run").click().run()
    assert not at.exception and not at.error
    assert at.success and "8 sentences" in at.success[0].value
    assert any("BERT-base" in i.value for i in at.info)  # the bundled model is not BERT-base: no published values
    shares = next(s for s in specs(at) if any(a.get("text") == "to [SEP]" for a in s["layout"].get("annotations", [])))
    assert len([d for d in shares["data"] if d["mode"] == "lines+markers"]) == 3  # a layer-mean line per panel
    at.button(key="corpus_importance_button").click().run()
    assert not at.exception
    assert any("Importance of every head" in x for x in titles(at))
    # the table now has an importance column
    assert "Importance (0–1)" in at.dataframe[0].value.columns


def test_corpus_page_analyses_the_whole_example_with_the_default_budgets(monkeypatch):
    """Issue 25: 60 lines under ATTENTION_LENS_MAX_BATCH = 16 stream batch by batch, nothing refused."""
    monkeypatch.delenv("ATTENTION_LENS_MAX_BATCH", raising=False)
    at = page("app_pages/corpus.py")
    assert not at.get("button") or all(b.key != "corpus_run" for b in at.button)  # no Analyse button yet …
    assert not any("press Analyse" in i.value for i in at.info)  # … so the prompt does not name one
    at.button(key="corpus_example_button").click().run()
    at.button(key="corpus_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.success and "60 sentences" in at.success[0].value


ENGLISH_RUN = re.compile(r"\b[A-Za-z]{2,}(?:[ ,]+[A-Za-z]{2,}){2,}\b")


@pytest.mark.parametrize(("budget", "when"), [("100", "read"), ("400", "run")])
def test_corpus_refusals_are_in_the_pages_language(monkeypatch, budget, when):
    """A corpus over ATTENTION_LENS_MAX_CORPUS_TOKENS is refused in Chinese on the Chinese page, budget named."""
    monkeypatch.setenv("ATTENTION_LENS_MAX_CORPUS_TOKENS", budget)
    at = page("app_pages/corpus.py", lang="zh")
    at.button(key="corpus_example_button").click().run()
    if when == "run":  # 59 lines pass the cheap bound (3 tokens a line); their real tokens do not
        lines = at.text_area(key="corpus_text").value.splitlines()
        at.text_area(key="corpus_text").set_value("\n".join(lines[:-1])).run()  # not a corpus cached by a test
        assert not at.error
        at.button(key="corpus_run").click().run()
    assert not at.exception and len(at.error) == 1
    text = at.error[0].value
    assert "预算" in text and "ATTENTION\\_LENS\\_MAX\\_CORPUS\\_TOKENS" in text and f"{int(budget):,}" in text
    assert ENGLISH_RUN.search(text.replace("\\_", "_")) is None, text


def test_corpus_page_bad_input():
    at = page("app_pages/corpus.py")
    at.text_area(key="corpus_text").set_value("\n \n").run()
    assert not at.exception
    assert any("Paste some sentences" in i.value for i in at.info)


@pytest.fixture(scope="module")
def bert_base_folder(tmp_path_factory):
    from tests.conftest import save_bert_folder

    return save_bert_folder(tmp_path_factory.mktemp("bert-base-app"))


def test_corpus_page_sets_published_values_beside_ours_for_bert_base(bert_base_folder):
    at = page("app_pages/corpus.py", model=str(bert_base_folder))
    at.text_area(key="corpus_text").set_value(
        "The cat sat on the mat.\nA dog barked, loudly.\nFirst part.\tSecond part."
    ).run()
    at.button(key="corpus_run").click().run()
    assert not at.exception and not at.error
    table = at.table[0].value
    assert len(table) == 5
    ours = table.iloc[:, 1].tolist()
    assert ours[0].endswith("%") and float(ours[0].rstrip(" %")) >= 0
    assert "over 50 %" in table.iloc[0, 0] and "3.89" in table.iloc[4, 0]
    assert any("YOUR corpus" in c.value for c in at.caption)
    sep_panel = next(
        s for s in specs(at) if any("Clark" in a.get("text", "") for a in s["layout"].get("annotations", []))
    )
    assert sep_panel["layout"]["shapes"]  # the published band and line are drawn
    assert np.isfinite(float(ours[0].rstrip(" %")))
