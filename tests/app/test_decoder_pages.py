"""Every page with a decoder (random:gpt2-tiny) through AppTest: runs, in both languages, with no BERT leftovers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.test_explore import decode
from tests.app.test_lecture_pages import chart_specs, texts
from ui.i18n import LANGUAGES, translate

ROOT = Path(__file__).resolve().parents[2]
MODEL = "random:gpt2-tiny"
PAGES = ("explore", "heads", "corpus", "masks", "inside_head", "memory", "troubleshooting", "generation")
BERT_ONLY = re.compile(r"\[CLS\]|\[SEP\]|token type|sentence B|句子 B")


def open_page(page: str, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["model"] = MODEL
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at.switch_page(f"app_pages/{page}.py").run()


def leftovers(at: AppTest, lang: str) -> list[str]:
    """Texts that name BERT's specials, except the notes that say a decoder has none of them."""
    notes = {
        translate(lang, k)
        for k in ("heads.labels.decoder_note", "explore.decoder_note", "sidebar.decoder_note", "heads.labels.rules")
    }
    shown = texts(at) + [w.label for w in at.get("toggle")] + [w.label for w in at.get("checkbox")]
    return [s for s in shown if BERT_ONLY.search(s) and s not in notes]


@pytest.mark.parametrize("lang", list(LANGUAGES))
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_a_decoder(page, lang):
    at = open_page(page, lang=lang, text="The cat sat on the mat. The cat sat on the mat.")
    assert not at.exception, at.exception
    planted = translate(lang, "masks.msg.verdict.fail").split("{")[0].strip()
    errors = [e.value for e in at.error if not (page == "troubleshooting" and e.value.startswith(planted))]
    assert not errors, errors
    assert not [s for s in texts(at) if "⟦" in s], "a string key is missing"
    assert not leftovers(at, lang), leftovers(at, lang)
    # No second sentence for a decoder: the sidebar says so instead of offering the field.
    assert not [w for w in at.sidebar.text_area if w.key == "text_b"]
    if page not in ("corpus", "masks"):
        assert chart_specs(at), "no figure"


def test_head_view_of_a_decoder_offers_no_cls_sep_toggle():
    at = open_page("explore", view="head", layer="1", head="0")
    assert not at.exception and not at.error
    toggles = [w.key for w in at.toggle]
    assert "log_colour" in toggles and "hide_special" not in toggles and "renormalise" not in toggles


def test_heads_page_labels_a_decoders_heads():
    at = open_page("heads", text="The cat sat on the mat. The cat sat on the mat.")
    shown = "\n".join(texts(at))
    assert translate("en", "heads.label.induction") in shown  # the rules table names the decoder's labels
    assert translate("en", "heads.label.sink").split(" (")[0] in shown
    assert "next-token loss" in shown  # importance through the tied LM head


def test_generation_page_checks_the_cache_and_steps():
    at = open_page("generation")
    assert not at.exception
    assert any("steps checked" in s.value for s in at.success), [s.value for s in at.success]
    facts = [s for s in texts(at) if "Cache after this step" in s]
    assert facts and "(1, 4, " in facts[0]  # (batch, heads, seq, d_k)
    at.slider(key="gen_step").set_value(3).run()
    assert not at.exception
    assert any("Only the newest token" in s for s in texts(at))


def test_generation_page_in_presentation_mode_and_chinese():
    at = open_page("generation", present="1", lang="zh")
    assert not at.exception and not at.error
    assert any("步" in str(m.value) for m in at.markdown)
    at.button(key="step_next_top").click().run()
    assert not at.exception


def test_generation_page_with_an_encoder_says_what_to_pick():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180).run()
    at.switch_page("app_pages/generation.py").run()
    assert not at.exception
    assert any("random:gpt2-tiny" in i.value for i in at.info)


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_generation_says_why_it_stopped_in_the_pages_language(lang):
    """A prompt 4 positions short of the model's end: the stop notice is the page's own, in its language."""
    from models import load_model

    dec = load_model(MODEL, device="cpu")
    limit = dec.config.max_positions
    prompt = " ".join(["cat"] * 2000)
    ids = dec.tokenizer(prompt, add_special_tokens=False)["input_ids"][: limit - 4]
    prompt = dec.tokenizer.decode(ids)
    assert len(dec.tokenizer(prompt, add_special_tokens=False)["input_ids"]) == limit - 4
    at = open_page("generation", lang=lang)
    at.text_area(key="gen_prompt").set_value(prompt).run()
    at.number_input(key="gen_tokens").set_value(10).run()
    assert not at.exception and not at.error
    want = translate(lang, "gen.stop_positions", done=4, asked=10, limit=limit)
    assert [w.value for w in at.warning] == [want]


def test_a_causal_models_rollout_opens_on_its_last_token_even_after_an_encoder():
    """Issue 25: the first token of a causal model reads only itself (one 100 % bar); the last has read everything."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["view"] = "aggregate"
    at.run()  # the bundled encoder first: its rollout row starts at [CLS]
    assert at.selectbox(key="rollout_row").value == 0
    at.sidebar.selectbox(key="model_choice").set_value(MODEL).run()
    assert not at.exception and not at.error
    n = len(at.selectbox(key="rollout_row_causal").options)
    assert n > 5 and at.selectbox(key="rollout_row_causal").value == n - 1
    bars = next(s for s in chart_specs(at) if s["data"][0]["type"] == "bar")
    shares = decode(bars["data"][0]["y"])
    assert len(shares) == n and (shares > 0.01).sum() > 1  # not the first token's single 100 % bar
    # the sidebar's mask names the model's own causal mask, not BERT's bidirectional one
    assert at.sidebar.selectbox(key="mask_kind").value == "built_in"
    assert translate("en", "sidebar.mask_kind.bidirectional_decoder") in at.sidebar.selectbox(key="mask_kind").options
