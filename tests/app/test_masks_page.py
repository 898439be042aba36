"""The Masks page through AppTest (wiring, no JavaScript), its strings, its examples, and its figures."""

from __future__ import annotations

import json
import string
import tomllib
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from models.analysis.mask_checker import EXAMPLES, MESSAGES, check_mask, example_expect
from ui.i18n import LOCALES, strings
from viz.heatmap import head_heatmap
from viz.overlays import AGREEMENT, add_mask_overlay, agreement, boundary_segments, mask_agreement

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "The animal didn't cross the street because it was too tired."


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_checker_messages_are_translated_with_the_same_placeholders():
    with open(LOCALES / "en" / "masks.toml", "rb") as f:
        assert "msg" not in tomllib.load(f)["masks"]  # the English lives once, in models.analysis.mask_checker.MESSAGES
    en = {k.removeprefix("masks.msg."): v for k, v in strings("en").items() if k.startswith("masks.msg.")}
    assert en == MESSAGES  # the page's English is the CLI's English, word for word
    zh = strings("zh")
    for code, text in MESSAGES.items():
        assert _fields(zh[f"masks.msg.{code}"]) == _fields(text), code
        assert zh[f"masks.msg.{code}"] != text, f"{code} is not translated"


def test_every_example_has_a_label_and_a_lesson():
    for lang in ("en", "zh"):
        s = strings(lang)
        for key in EXAMPLES:
            assert s[f"masks.example.{key}"] and s[f"masks.lesson.{key}"]
    assert set(strings("en")).issuperset(f"masks.agree.{k}" for k in AGREEMENT)


# Each new mask kind's classic bug and the diagnosis it must get.
NEW_KIND_BUGS = {
    "bug_window_off_by_one": "diag.off_by_one",
    "bug_chunk_boundary": "diag.chunk_shifted",
    "bug_docs_neighbour": "diag.off_by_one",
    "bug_padding_side": "diag.padding_wrong_side",
    "bug_predicate_window": "diag.off_by_one",
}


@pytest.mark.parametrize("key", list(EXAMPLES))
def test_examples_get_the_verdict_they_teach(minilm, key):
    expr, convention, _, passes = EXAMPLES[key]
    expect = example_expect(key, minilm.encode(SENTENCE).seq)
    texts = [SENTENCE, "Too tired."] if "padding" in expect else [SENTENCE]
    report = check_mask(minilm, texts, expr, convention, expect)
    assert report.ok == passes, report.text()
    if key in NEW_KIND_BUGS:
        assert [d.code for d in report.diagnosis] == [NEW_KIND_BUGS[key]], report.text()
    if not passes:
        assert (
            report.diagnosis or report.finding("convention").status == "fail" or report.finding("rows").status == "fail"
        )


# ---- figures ----------------------------------------------------------------------------------------


def test_agreement_codes():
    keep = np.array([[1, 1], [0, 1]], bool)
    expected = np.array([[1, 0], [1, 1]], bool)
    assert agreement(keep, expected).tolist() == [[0, 2], [3, 0]]
    judged = np.array([[True, True], [False, False]])
    assert agreement(keep, expected, judged).tolist() == [[0, 2], [5, 4]]


def test_mask_agreement_figure_lists_only_the_kinds_present():
    n = 5
    expected = np.tril(np.ones((n, n), bool))
    fig = mask_agreement(expected, expected, list("abcde"), labels={"visible": "V", "hidden": "H"})
    assert [tr.name for tr in fig.data[1:]] == ["V", "H"]
    leaky = expected.copy()
    leaky[0, 1] = True
    fig = mask_agreement(leaky, expected, list("abcde"))
    assert "leak" in [tr.name for tr in fig.data[1:]]
    assert fig.data[0].z[0][1] == AGREEMENT.index("leak")


def test_boundary_merges_collinear_edges():
    keep = np.ones((512, 512), bool)
    keep[:, 500:] = False  # a padding mask: one vertical line, not 512 segments
    xs, _ = boundary_segments(keep)
    assert xs.count(None) == 1
    fig = add_mask_overlay(
        head_heatmap(np.full((4, 4), 0.25), list("abcd")), np.tril(np.ones((4, 4), bool)), np.full((4, 4), 0.25)
    )
    assert fig.data[-1].marker.size == 10


# ---- the page ---------------------------------------------------------------------------------------


def _app(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at.switch_page("app_pages/masks.py").run()


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_page_default_example_passes_and_draws_both_figures():
    at = _app()
    assert not at.exception and not at.error
    assert at.success and at.success[0].value.startswith("PASS")
    charts = _charts(at)
    assert len(charts) == 2
    attention, grid = charts
    names = [tr.get("name") for tr in attention["data"]]
    assert "masked" in names and "leak" not in names  # the veil, and no weight where causal forbids it
    assert grid["data"][0]["type"] == "heatmap"


def test_page_catches_a_planted_bug_and_flags_the_leaking_weight():
    at = _app()
    at.selectbox(key="mc_example").set_value("bug_next").run()
    assert not at.exception
    assert at.error and at.error[0].value.startswith("FAIL")
    assert any("off by one" in m.value for m in at.markdown)
    attention = _charts(at)[0]
    leak = next(tr for tr in attention["data"] if tr.get("name") == "leak")
    assert leak["x"] and leak["y"]  # a ✕ on every next-token cell that gets weight
    assert at.selectbox(key="mc_convention").disabled  # an example fixes its convention


def test_page_padding_example_makes_a_batch():
    at = _app()
    at.selectbox(key="mc_example").set_value("bug_padding_queries").run()
    assert not at.exception
    assert at.text_area(key="mc_batch").value
    assert at.selectbox(key="mc_item").value == 1  # the padded sentence is shown first
    assert at.error and any("wrong axis" in m.value for m in at.markdown)


def test_page_expression_wrong_shape_and_refused_code():
    at = _app()
    at.radio(key="mc_source").set_value("expression").run()
    at.text_input(key="mc_expr").set_value("torch.ones(3, 3)").run()
    assert not at.exception
    assert at.error and "(3, 3)" in at.error[0].value and "(1, 12, 16, 16)" in at.error[0].value
    at.text_input(key="mc_expr").set_value("__import__('os').system('echo hi')").run()
    assert at.error and "not allowed" in at.error[0].value
    at.text_input(key="mc_expr").set_value("torch.triu(torch.ones(seq, seq), diagonal=1)").run()
    at.selectbox(key="mc_convention").set_value("drop").run()
    assert not at.error and at.success


def test_page_in_chinese():
    # One run only: AppTest formats a translated selectbox outside the session on a rerun, in English.
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["lang"] = "zh"
    at.switch_page("app_pages/masks.py").run()
    assert not at.exception
    assert at.title[0].value == "检查注意力掩码"
    assert at.success and at.success[0].value.startswith("通过")
    assert len(at.get("plotly_chart")) == 2


def test_chinese_page_survives_a_second_run():
    """Translated selectbox labels must still match on the next run (AppTest formats options after the run)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["lang"] = "zh"
    at.run()
    at.switch_page("app_pages/masks.py").run()
    at.selectbox(key="mc_example").set_value(list(EXAMPLES)[1]).run()
    at.radio(key="mc_source").set_value("expression").run()
    at.selectbox(key="mc_convention").set_value("drop").run()
    assert not at.exception
    assert at.session_state["mc_convention"] == "drop"
