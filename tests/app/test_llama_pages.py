"""The Llama family on every page: a tiny grouped-query model in both languages, the bundled SmolLM2 on the
pages its facts show on, and a long text whose maps come on demand."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.test_decoder_pages import PAGES, leftovers
from tests.app.test_lecture_pages import chart_specs, texts
from ui.i18n import LANGUAGES, translate

ROOT = Path(__file__).resolve().parents[2]


def open_page(page: str, model: str, env: dict[str, str] | None = None, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["model"] = model
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at.switch_page(f"app_pages/{page}.py").run()


@pytest.mark.parametrize("lang", list(LANGUAGES))
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_a_grouped_rotary_model(page, lang):
    at = open_page(page, "random:llama-tiny", lang=lang, text="The cat sat on the mat. The cat sat on the mat.")
    assert not at.exception, at.exception
    planted = translate(lang, "masks.msg.verdict.fail").split("{")[0].strip()
    errors = [e.value for e in at.error if not (page == "troubleshooting" and e.value.startswith(planted))]
    assert not errors, errors
    assert not [s for s in texts(at) if "⟦" in s], "a string key is missing"
    assert not leftovers(at, lang), leftovers(at, lang)
    if page not in ("corpus", "masks"):
        assert chart_specs(at), "no figure"


def test_inside_a_head_shows_rotation_and_shared_keys():
    at = open_page("inside_head", "random:llama-tiny", text="The cat sat on the mat.")
    assert not at.exception and not at.error
    titles = [str(s.value) for s in at.subheader]
    assert any(translate("en", "inside.step.rotate.title") in x for x in titles)
    assert any(translate("en", "inside.step.repeat_kv.title") in x for x in titles)
    assert any("models/llama.py:" in str(c.value) for c in at.caption)


def test_the_overview_groups_heads_by_their_key_value_head_and_leaves_the_sink_out():
    at = open_page("explore", "smollm2", text="The capital of France is Paris. The capital of Italy is Rome.")
    assert not at.exception and not at.error
    shown = "\n".join(texts(at))
    assert translate("en", "explore.overview_groups", group=3, kv_heads=3) in shown
    assert "the attention sink" in shown  # the first token is out of the colour scale by default, and said so
    spec = chart_specs(at)[0]
    kv_marks = [a["text"] for a in spec["layout"].get("annotations", [])]
    assert kv_marks == ["KV 0", "KV 1", "KV 2"]


def test_heads_of_smollm2_name_sinks_and_compare_shared_key_value_heads():
    at = open_page("heads", "smollm2", text="The capital of France is Paris. The capital of Italy is Rome.")
    assert not at.exception and not at.error
    shown = "\n".join(texts(at)) + "\n".join(str(i.value) for i in at.info)
    assert "Grouped-query attention: every 3 query heads" in shown
    assert translate("en", "heads.label.sink") in shown


def test_memory_page_measures_the_grouped_cache():
    at = open_page("memory", "smollm2")
    assert not at.exception and not at.error
    assert at.success and any("Measured:" in str(s.value) for s in at.success)
    shown = "\n".join(texts(at))
    assert "| MQA | 1 |" in shown and "this model" in shown


def test_generation_with_the_chat_template():
    at = open_page("generation", "smollm2")
    assert not at.exception and not at.error
    at.session_state["gen_prompt"] = "What is the capital of France?"
    at.session_state["gen_tokens"] = 6
    at.toggle(key="gen_chat").set_value(True).run()
    assert not at.exception and not at.error
    assert any("chat template" in str(c.value) for c in at.caption)
    assert at.success  # every cached row against the full forward


# The layer and head views under a user's predicate (per head): made a block of rows, a window at a time.
PREDICATE = "(q_idx - kv_idx < 40) | (kv_idx < 3) | ((h == 2) & (kv_idx % 7 == 0))"


@pytest.mark.parametrize("view", ["overview", "layer", "head", "aggregate"])
def test_a_long_text_opens_in_every_explore_view(view, monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")  # maps on demand from ~300 tokens on this model
    text = "The cat sat on the mat and the dog slept by the door. " * 40
    mask = {"mask": PREDICATE} if view in ("layer", "head") else {}
    at = open_page("explore", "random:llama-tiny", text=text, view=view, layer="1", head="2", **mask)
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert any("maps are made on demand" in str(i.value) for i in at.info)
    assert chart_specs(at)
    if mask:  # the link's predicate is the sidebar's custom mask, not refused as unknown
        assert at.session_state["mask"] == PREDICATE and not at.warning


def test_a_long_text_on_the_heads_page(monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    at = open_page("heads", "random:llama-tiny", text="The cat sat on the mat and the dog slept by the door. " * 40)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("mean-pooled" in str(c.value) for c in at.caption)
