"""The Train page through AppTest: both languages, a short run to its end (curves, maps, the saved folder), Stop,
presentation mode, a bad setting. Runs are tiny (tens of steps); the recipe itself is the bench's business."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui import training
from ui.i18n import LANGUAGES, translate

ROOT = Path(__file__).resolve().parents[2]
PAGE = "app_pages/train.py"


@pytest.fixture(autouse=True)
def _no_job_left():
    """A job still training when the test ends is stopped and joined (a daemon thread inside torch at exit aborts)."""
    yield
    training.stop_all()


def open_page(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at.switch_page(PAGE).run()


def texts(at: AppTest) -> list[str]:
    out = []
    for kind in ("title", "markdown", "caption", "success", "warning", "info", "error"):
        out += [str(el.value) for el in at.get(kind)]
    return out


def small(at: AppTest, steps: int = 40) -> None:
    at.number_input(key="train_steps").set_value(steps)
    at.selectbox(key="train_d_model").set_value(32)


def wait_done(at: AppTest, timeout: float = 240) -> training.Job:
    job = training.get(at.session_state["train_job"])
    assert job is not None
    deadline = time.monotonic() + timeout
    while job.active and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not job.active, f"the job is still {job.state} after {timeout} s"
    at.run()
    at.run()  # the run after the job ends shows the final page (buttons back, the saved folder)
    return job


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_page_runs_in_both_languages(lang):
    at = open_page(lang=lang)
    assert not at.exception, at.exception
    assert at.title[0].value == translate(lang, "train.title")
    assert not [s for s in texts(at) if "⟦" in s], "a string key is missing"
    assert not at.error
    if lang == "zh":
        prose = [s for s in at.get("markdown") if len(str(s.value)) > 40]
        assert prose and all(re.search(r"[\u4e00-\u9fff]", str(p.value)) for p in prose)


def test_a_short_run_draws_curves_maps_and_saves_a_folder():
    at = open_page()
    small(at)
    at.button(key="train_start").click().run()
    assert not at.exception, at.exception
    job = wait_done(at)
    assert job.state == "done", job.error
    assert not at.exception, at.exception
    assert len(job.records[0]) >= 2
    charts = {el.proto.id: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    assert len(charts) >= 4, "loss, scores, mosaic, head map, diagnostics"
    titles = [c.get("layout", {}).get("title", {}).get("text", "") for c in charts.values()]
    assert translate("en", "train.loss_title") in titles
    folder = Path(job.folder)
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    # Markdown escapes the folder's specials (mkdtemp's suffix may hold "_"); the command under it is verbatim.
    assert any(job.folder in s.replace("\\", "") for s in texts(at)), "the page names the saved folder"
    assert any(job.folder in str(c.value) for c in at.get("code")), "and gives the command that opens it"
    assert not at.button(key="train_start").disabled
    # 40 steps end on the plateau: the verdict says so, with the copy's loss and the advice.
    verdict = [str(w.value) for w in at.warning if "No induction head" in str(w.value)]
    assert verdict and "Advice" in verdict[0] and "step budget" in verdict[0]


def test_stop_ends_a_run_early():
    at = open_page()
    at.number_input(key="train_steps").set_value(20_000)
    at.button(key="train_start").click().run()
    job = training.get(at.session_state["train_job"])
    deadline = time.monotonic() + 60
    while not job.records[0] and time.monotonic() < deadline:
        time.sleep(0.2)
    at.run()
    assert not at.button(key="train_stop").disabled
    at.button(key="train_stop").click().run()
    job = wait_done(at, timeout=60)
    assert job.state == "stopped"
    assert job.results and job.results[0].steps_done < 20_000
    assert job.results[0].stop_reason == "stopped"


def test_bad_text_says_why_and_starts_nothing():
    at = open_page()
    at.radio(key="train_task").set_value("text").run()
    at.text_area(key="train_text").set_value("too short").run()
    at.button(key="train_start").click().run()
    assert not at.exception
    assert "train_job" not in at.session_state
    assert any("at least" in e.value for e in at.error)


def test_presentation_mode_puts_settings_in_a_popover():
    at = open_page(present="1")
    assert not at.exception, at.exception
    assert not at.title, "presentation mode drops the page title"
    assert at.button(key="train_start")


@pytest.mark.long
def test_compare_head_counts_runs_every_count_over_three_seeds():
    at = open_page()
    small(at, steps=20)
    at.number_input(key="train_seed").set_value(5)
    at.button(key="train_compare_heads").click().run()
    assert not at.exception, at.exception
    job = wait_done(at, timeout=600)
    assert job.state == "done", job.error
    got = sorted((c.heads, c.seed) for c in job.configs)
    assert got == [(h, s) for h in (1, 2, 4, 8) for s in (5, 6, 7)]
    assert all(c.steps == 20 for c in job.configs)
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert len(table) == 4, "one row per head count, its seeds inside"
    charts = {el.proto.id: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    bands = [sum(tr.get("fill") == "tonexty" for tr in c["data"]) for c in charts.values()]
    assert sorted(b for b in bands if b) == [4, 4], "the copy's loss and the score: a spread band per head count"
