"""The app's wiring, through Streamlit's AppTest (no browser, no JavaScript): pages run without exceptions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120  # the first run loads the model


def app(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def plotly_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_default_view_shows_every_head():
    at = app()
    assert not at.exception
    specs = plotly_specs(at)
    assert specs, "no chart on the default page"
    overview = specs[0]["data"][0]  # the explore page opens on the all-heads mosaic, one PNG image
    assert overview["type"] == "image" and overview["source"].startswith("data:image/png;base64,")
    assert not at.error


def test_empty_text_gives_a_prompt_not_an_error():
    at = app()
    at.sidebar.text_area(key="text").set_value("   ").run()
    assert not at.exception and not at.error
    assert any("Type a sentence" in i.value for i in at.info)


def test_query_parameters_restore_the_view():
    at = app(text="Hello there, general.", layer="3", head="5", lang="zh")
    assert not at.exception
    assert at.sidebar.text_area(key="text").value == "Hello there, general."
    assert at.slider(key="layer").value == 3 and at.slider(key="head").value == 5
    assert at.title[0].value == "探索注意力"


def test_view_is_written_to_the_url():
    at = app()
    at.slider(key="head").set_value(7).run()
    assert at.query_params.get("head") in ("7", ["7"])


def test_unknown_model_shows_the_reason_and_the_app_keeps_working():
    at = app(model="no-such-model-xyz")
    assert not at.exception
    assert at.error and "no-such-model-xyz" in at.error[0].value
    at.sidebar.selectbox(key="model_choice").set_value("minilm").run()
    assert not at.exception and not at.error
    assert plotly_specs(at)


@pytest.mark.parametrize("example", ["pair", "chinese"])
def test_examples(example, minilm):
    """An example fills the text (and, for the pair, the second sentence) and the page encodes exactly that."""
    from ui.state import EXAMPLES

    at = app()
    at.sidebar.selectbox(key="example").set_value(example).run()
    assert not at.exception
    text, text_b = EXAMPLES[example]
    assert at.session_state["text"] == text and (at.session_state["text_b"] or None) == (text_b or None)
    n = minilm.encode(text, text_b or None).seq
    assert any(f"· {n} tokens ·" in str(c.value) for c in at.caption), [c.value for c in at.caption][:3]
    if example == "chinese":
        assert any("[UNK]" in w.value for w in at.warning)


def test_chinese_survives_reruns():
    """Translated selectbox labels must not be recomputed in English between runs (AppTest does that)."""
    at = app(lang="zh")
    at.sidebar.text_area(key="text").set_value("The cat sat on the mat.").run()
    at.sidebar.selectbox(key="mask_kind").set_value("causal").run()
    assert not at.exception
    assert at.session_state["mask"] == "causal"


def test_sidebar_takes_a_composed_mask():
    """The sidebar's mask picker speaks the same grammar as --mask and --expect; a bad one says why."""
    at = app(mask="causal+window:2")
    assert at.sidebar.selectbox(key="mask_kind").value == "composed"
    assert at.session_state["mask"] == "causal+window:2" and not at.exception and not at.error
    at.sidebar.text_input(key="mask_custom").set_value("causal + chunk:4").run()
    assert at.session_state["mask"] == "causal+chunk:4" and not at.exception
    # A predicate over q_idx and kv_idx, as FlexAttention's mask_mod (the restricted expression language).
    at.sidebar.text_input(key="mask_custom").set_value("(kv_idx <= q_idx)  &  (q_idx - kv_idx < 4)").run()
    assert at.session_state["mask"] == "(kv_idx <= q_idx) & (q_idx - kv_idx < 4)"
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.sidebar.text_input(key="mask_custom").set_value("kv_idx < seq").run()
    assert at.session_state["mask"] == "bidirectional" and any("seq" in e.value for e in at.sidebar.error)
    at.sidebar.text_input(key="mask_custom").set_value("causal+windw:2").run()
    assert at.session_state["mask"] == "bidirectional" and any("windw" in e.value for e in at.sidebar.error)
    at.sidebar.selectbox(key="mask_kind").set_value("chunk").run()
    assert at.session_state["mask"] == "chunk:4" and not at.exception
