"""The lecture pages through AppTest, in both languages: wiring, numbers on the page, presentation mode."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.i18n import LANGUAGES, translate

ROOT = Path(__file__).resolve().parents[2]
PAGES = {
    "inside": "app_pages/inside_head.py",
    "memory": "app_pages/memory.py",
    "trouble": "app_pages/troubleshooting.py",
}
TITLES = {"inside": "inside.title", "memory": "memory.title", "trouble": "trouble.title"}


def open_page(page: str, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at.switch_page(PAGES[page]).run()


def texts(at: AppTest) -> list[str]:
    """Every text the page shows (markdown, captions, code, alerts, titles)."""
    out = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "code", "success", "warning", "info", "error"):
        out += [str(el.value) for el in at.get(kind)]
    out += [f"{m.label} {m.value}" for m in at.get("metric")]
    return out


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


@pytest.mark.parametrize("lang", list(LANGUAGES))
@pytest.mark.parametrize("page", list(PAGES))
def test_page_runs_in_both_languages(page, lang):
    at = open_page(page, lang=lang)
    assert not at.exception, at.exception
    # The troubleshooting page shows the mask checker's FAIL verdict on its planted mask: that one is content.
    planted = translate(lang, "masks.msg.verdict.fail").split("{")[0].strip() if page == "trouble" else None
    errors = [e.value for e in at.error if not (planted and e.value.startswith(planted))]
    assert not errors, errors
    if page == "trouble":
        assert len(at.error) == 1, "the checker's verdict on the planted transposed mask is missing"
    assert at.title[0].value == translate(lang, TITLES[page])
    shown = texts(at)
    assert not [s for s in shown if "⟦" in s], "a string key is missing"
    assert chart_specs(at), "no figure"
    if lang == "zh":  # the page's prose is Chinese, not English left behind
        prose = [s for s in at.get("markdown") if len(str(s.value)) > 40]
        assert prose and all(re.search(r"[\u4e00-\u9fff]", str(p.value)) for p in prose)


@pytest.mark.parametrize("page", list(PAGES))
def test_language_switch_on_every_page(page):
    """The sidebar's language radio, then a switch back while on the page.

    AppTest only keeps the sidebar's elements from the first run of a session, so the second switch sets the
    radio's session value, which is what the radio does.
    """
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.sidebar.radio(key="lang").set_value("zh")
    at.switch_page(PAGES[page]).run()
    assert not at.exception
    assert at.title[0].value == translate("zh", TITLES[page])
    assert at.query_params.get("lang") in ("zh", ["zh"])
    at.session_state["lang"] = "en"
    at.run()
    assert not at.exception
    assert at.title[0].value == translate("en", TITLES[page])
    assert "lang" not in at.query_params  # back to the default


def test_inside_a_head_shows_every_step_with_its_shape_and_reproduces_the_encoder():
    at = open_page("inside")
    shown = "\n".join(texts(at))
    # MiniLM, 16 tokens: Q/K/V of all heads are (1, 12, 16, 32), the scores (1, 12, 16, 16).
    for shape in ("(1, 16, 384)", "(1, 16, 12, 32)", "(1, 12, 16, 32)", "(1, 12, 16, 16)"):
        assert f"`{shape}`" in shown, shape
    # The lines shown are the model's own, read from the running source.
    assert "torch.softmax(scores, dim=-1, dtype=torch.float32" in shown and ".contiguous().view(B, T, -1)" in shown
    assert len(at.subheader) == 12  # 11 steps + one head vs many
    check = at.success[0].value
    numbers = [float(x) for x in re.findall(r"\d\.\d+e-\d+|\b0\b", check)]
    assert len(numbers) == 4 and max(numbers) <= 1e-5, check
    assert "591,360" in shown  # 4·384² + 4·384 parameters, both ways


def test_inside_a_head_follows_layer_head_and_query():
    at = open_page("inside")
    at.slider(key="layer").set_value(4).run()
    at.slider(key="head").set_value(7).run()
    at.selectbox(key="query").set_value(5).run()
    assert not at.exception
    assert at.query_params.get("query") in ("5", ["5"]) and at.query_params.get("layer") in ("4", ["4"])
    titles = [s.get("layout", {}).get("title", {}).get("text", "") for s in chart_specs(at)]
    assert any("Layer 4, head 7" in x for x in titles)


def test_inside_a_head_with_a_causal_mask_explains_the_hidden_keys():
    at = open_page("inside", mask="causal", query="3")
    assert not at.exception
    shown = "\n".join(texts(at))
    assert "12 of the 16 keys are hidden" in shown


def test_presentation_mode_steps_through_with_previous_and_next():
    at = open_page("inside", present="1", lang="zh")
    assert not at.exception and not at.error
    assert at.session_state["present"] is True
    assert not at.title  # the slide's step bar replaces the page title
    n = 13
    assert any(f"第 1 步，共 {n} 步" in m.value for m in at.markdown)
    assert at.button(key="step_prev_top").disabled
    at.button(key="step_next_top").click().run()
    at.button(key="step_next_bottom").click().run()
    assert any(f"第 3 步，共 {n} 步" in m.value for m in at.markdown)
    assert at.query_params.get("step") in ("2", ["2"])
    assert "`(1, 16, 12, 32)`" in "\n".join(texts(at))  # step 3: view into heads
    at.button(key="step_prev_bottom").click().run()
    assert any(f"第 2 步，共 {n} 步" in m.value for m in at.markdown)
    # Large fonts and no sidebar come from CSS injected into the page.
    css = "\n".join(m.value for m in at.markdown if "<style>" in m.value)
    assert '[data-testid="stSidebar"]' in css and "font-size" in css


def test_presentation_mode_last_steps_and_exit():
    at = open_page("inside", present="1", step="99")  # a stale link: clamped to the last step
    assert not at.exception
    assert any("Step 13 of 13" in m.value for m in at.markdown)
    assert at.button(key="step_next_top").disabled
    assert "591,360" in "\n".join(texts(at))
    at.button(key="present_lang").click().run()  # the language button of the presentation bar
    assert any("第 13 步，共 13 步" in m.value for m in at.markdown)
    at.button(key="present_exit").click().run()
    assert not at.exception
    assert at.session_state["present"] is False
    assert at.title and "<style>" not in "".join(m.value for m in at.markdown)


def test_presentation_toggle_in_the_sidebar():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.sidebar.toggle(key="present").set_value(True)
    at.switch_page(PAGES["inside"]).run()
    assert not at.exception
    assert at.query_params.get("present") in ("True", ["True"])
    assert any("Step 1 of 13" in m.value for m in at.markdown)


def test_memory_page_shows_the_tutorials_numbers():
    at = open_page("memory")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Score elements"] == "6,291,456"
    assert metrics["Score tensor, fp16"] == "12.6 MB"
    assert metrics["MHA parameters"] == "2,362,368"
    shown = "\n".join(texts(at))
    assert "805 MB ✓" in shown and "12.6 MB ✓" in shown and "✗" not in shown
    at.number_input(key="mem_seq").set_value(4096).run()
    assert {m.label: m.value for m in at.metric}["Score tensor, fp16"] == "805 MB"


def test_memory_page_bad_sizes_give_a_message():
    at = open_page("memory")
    at.number_input(key="mem_heads").set_value(7).run()  # 768 is not a multiple of 7
    assert not at.exception
    assert at.error and "multiple" in at.error[0].value


def test_memory_page_measures_our_encoder():
    at = open_page("memory", lang="zh")
    assert len(at.get("plotly_chart")) == 1
    at.button(key="mem_measure").click().run()
    assert not at.exception and not at.error
    specs = chart_specs(at)
    assert len(specs) == 2
    measured = [tr for tr in specs[1]["data"] if tr.get("mode") == "markers"]
    assert measured and len(measured[0]["x"]) == 5
    assert any(
        "VmHWM" in c.value or "/proc/self/statm" in c.value for c in at.caption
    )  # says exactly what was measured


def test_troubleshooting_demonstrations_are_live():
    at = open_page("trouble", mask="causal")
    assert not at.exception
    code = "\n".join(c.value for c in at.code)
    assert "RuntimeError: view size is not compatible" in code
    assert "torch.triu" in code and "torch.tril" in code
    shown = "\n".join(texts(at))
    assert "nan" in shown and "0.0625" in shown  # −inf → NaN, finfo.min → 1/16
    assert at.warning and "Leak" in at.warning[0].value
    assert len(at.expander) == 8  # the tutorial's eight rows


@pytest.mark.parametrize("page", ["inside", "trouble"])
def test_empty_text_and_unknown_model_give_messages(page):
    at = open_page(page, text=" ")
    assert not at.exception and not at.error
    assert at.info and "Type a sentence" in at.info[0].value
    at = open_page(page, model="no-such-model-xyz")
    assert not at.exception
    assert at.error and "no-such-model-xyz" in at.error[0].value


def test_stale_or_broken_url_values_are_clamped():
    at = open_page("inside", layer="40", head="99", query="500", step="abc", present="yes")
    assert not at.exception and not at.error
    assert at.session_state["layer"] == 5 and at.session_state["head"] == 11 and at.session_state["query"] == 15
    assert any("Step 1 of 13" in m.value for m in at.markdown)


def test_inside_a_head_names_the_file_and_line_of_every_step():
    """Each step's caption says where its line lives: the encoder's own file, or the attention core every family
    shares; the whole function is one click away."""
    at = open_page("inside")
    captions = [str(c.value) for c in at.caption if "models/" in str(c.value)]
    assert len(captions) == 11, captions
    assert (
        sum("models/bert.py:" in c for c in captions) >= 5 and sum("models/attention.py:" in c for c in captions) >= 4
    )
    assert any("(it did not run" in c for c in captions)  # one sentence, no mask: the mask line is shown idle
    assert len([e for e in at.expander if "The whole function" in str(e.label)]) == 11
