"""Every page of app.py's navigation on an encoder (minilm), a Llama-family decoder (smollm2) and GPT-2
(random:gpt2-tiny): the page runs, speaks only of what the model has (segments, a position table, LayerNorm) and
opens on something worth seeing (issue 40). One AppTest run per page and model, a short text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from models.weights import spec_capabilities
from tests.app.test_explore import decode
from tests.app.test_lecture_pages import texts
from ui.i18n import translate
from ui.state import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
PAGES = re.findall(r'st\.Page\(\s*"app_pages/(\w+)\.py"', (ROOT / "app.py").read_text(encoding="utf-8"))
MODELS = ("minilm", "smollm2", "random:gpt2-tiny")
TEXT = "The cat sat on the mat. The cat"

# What a page may only say of a model that has it. Negations ("no position table") are the model's own facts.
SEGMENTS = re.compile(r"\+ segment|segment (embedding|vector|id)s?\b|token.type", re.I)
POSITION_TABLE = re.compile(r"word \+ position|(?<!no )position (table|embeddings?)\b", re.I)
LAYERNORM = re.compile(r"\bLayerNorm\b")
BERT_SPECIALS = re.compile(r"\[CLS\]|\[SEP\]|BERT is bidirectional")


def open_page(page: str, model: str, **query: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["model"] = model
    at.query_params["text"] = query.pop("text", TEXT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at.switch_page(f"app_pages/{page}.py").run() if page != "explore" else at


def wrong_claims(shown: list[str], model: str) -> list[str]:
    """Return the texts that speak of a capability the model lacks."""
    caps = spec_capabilities(model)
    notes = {translate("en", k) for k in ("explore.decoder_note", "sidebar.decoder_note", "heads.labels.decoder_note")}
    notes |= {translate("en", "heads.labels.rules")}
    bad = []
    for s in shown:
        if s in notes:
            continue
        if not caps.segments and SEGMENTS.search(s):
            bad.append(f"segments: {s[:200]}")
        if not caps.position_table and POSITION_TABLE.search(s):
            bad.append(f"position table: {s[:200]}")
        if caps.norm == "rmsnorm" and LAYERNORM.search(s):
            bad.append(f"LayerNorm: {s[:200]}")
        if caps.causal and BERT_SPECIALS.search(s):
            bad.append(f"BERT: {s[:200]}")
    return bad


HEAVY = {("heads", "smollm2"), ("troubleshooting", "smollm2")}  # about a minute each on 2 busy cores
CASES = [pytest.param(p, m, marks=[pytest.mark.long] if (p, m) in HEAVY else []) for p in PAGES for m in MODELS]


@pytest.mark.parametrize(("page", "model"), CASES)
def test_every_page_speaks_of_the_model_it_shows(page, model):
    at = open_page(page, model)
    assert not at.exception, at.exception
    shown = texts(at) + [w.label for w in at.get("toggle")]
    assert not [s for s in shown if "⟦" in s], "a string key is missing"
    assert not wrong_claims(shown, model), wrong_claims(shown, model)
    if page in ("inside_head", "troubleshooting"):
        # A causal model's first token sees only itself (a row of one 1.0): the page opens where it sees the text.
        seq = len(at.selectbox(key="query").options)
        want = seq - 1 if spec_capabilities(model).causal else 0
        assert at.selectbox(key="query").value == want and seq > 1


@pytest.mark.parametrize("model", ["minilm", "smollm2"])
def test_presentation_mode_speaks_of_the_model_too(model):
    at = open_page("inside_head", model, present="1")
    assert not at.exception and not at.error
    assert not wrong_claims(texts(at), model), wrong_claims(texts(at), model)
    toggles = [w.key for w in at.get("toggle")]
    # Step 7 asks an encoder's lecturer to choose the causal mask: presentation mode offers it.
    assert ("present_causal" in toggles) != spec_capabilities(model).causal


def test_the_causal_mask_can_be_chosen_in_presentation_mode():
    at = open_page("inside_head", "minilm", present="1", step="6")  # 0-based: the mask, an encoder's 7th step
    at.toggle(key="present_causal").set_value(True).run()
    assert not at.exception and not at.error
    assert at.session_state["mask"] == "causal"
    hidden = translate("en", "inside.step.mask.explain_some").split(":")[0]
    assert any(s.startswith(hidden) for s in texts(at))


def test_views_keep_the_layer_and_mean_and_rollout_offers_the_sink():
    at = open_page("explore", "smollm2", layer="3")
    at.segmented_control(key="view").set_value("aggregate").run()
    assert at.slider(key="layer").value == 3  # the view never moves the visitor's layer
    assert "overview_exclude_first" in [w.key for w in at.get("toggle")]
    assert any(translate("en", "explore.rollout_sink_out", share="").split("(")[0] in s for s in texts(at))


def test_one_layer_marks_kv_groups_and_names_every_token():
    at = open_page("explore", "smollm2", view="layer", text=EXAMPLES["coreference"][0])  # 13 tokens
    assert any("KV" in s and "grouped-query" in s for s in texts(at))
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [tr["name"] for tr in spec["data"] if tr["type"] == "heatmap" and tr["name"] != "masked"]
    assert names[:4] == ["H0 · KV 0", "H1 · KV 0", "H2 · KV 0", "H3 · KV 1"]
    n = decode(spec["data"][0]["z"]).shape[-1]
    labelled = [v for k, v in spec["layout"].items() if k[1:5] == "axis" and v.get("showticklabels")]
    assert labelled and all(len(axis["ticktext"]) == n for axis in labelled), "a token left unlabelled"


def test_compare_names_the_models_own_mask():
    at = open_page("compare", "random:gpt2-tiny")
    assert at.text_input(key="against_mask").placeholder == translate("en", "compare.same_mask", mask="causal")


def test_a_link_past_the_last_layer_is_clamped_with_a_notice():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["layer"] = "99"
    at.run()
    assert at.slider(key="layer").value == 5
    assert [i.value for i in at.info if "99" in i.value], "no notice of the clamp"


def test_the_model_box_takes_a_typed_folder():
    """A folder typed into the Model box is taken without picking "Other…" first (the box accepts new options;
    AppTest can only pick listed ones, so the typed value's path is held by the widget's own flag)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    assert at.sidebar.selectbox(key="model_choice").proto.accept_new_options


def test_the_train_page_says_the_sidebars_model_does_not_apply():
    at = open_page("train", "smollm2")
    assert translate("en", "sidebar.not_here") in [i.value for i in at.sidebar.info]
