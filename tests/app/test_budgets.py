"""The app's share of the budgets: the byte-bounded result cache, heavy slots, escaped messages, the model list,
clamped link values, long texts out of the URL (AppTest with the bundled model)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from ui import results
from ui.safe import md

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def app(env: dict[str, str] | None = None, monkeypatch=None, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


# ---- the cache --------------------------------------------------------------------------------------------


def test_nbytes_counts_tensors_once_and_arrays():
    t = torch.zeros(1000, dtype=torch.float32)
    assert results.nbytes(t) == 4000
    assert results.nbytes((t, t[:10], t.view(10, 100))) - results.nbytes(t) < 500  # views share one storage
    assert results.nbytes({"a": np.zeros(250, dtype=np.float64)}) >= 2000


def test_nbytes_weighs_a_figure_by_its_data_and_layout():
    import plotly.graph_objects as go

    uri = "data:image/png;base64," + "A" * 100_000
    fig = go.Figure([go.Image(source=uri), go.Scatter(x=[1.0] * 5000, y=list(range(5000)))], layout=dict(title="t"))
    size = results.nbytes((fig, 0.5))
    assert size >= len(uri) + 5000 * 32  # the image's URI and the points' numbers
    assert size < 2 * len(uri) + 2 * 64 * 5000  # not its validators, callbacks and parent links


def test_long_text_is_asked_once_and_follows_the_dense_budget(monkeypatch):
    from ui import cache
    from ui.state import Selection

    sel = Selection("minilm", "cpu", "fp32", "word " * 100, "", "")  # 102 tokens: 2.9 MB of maps
    calls = []
    real = cache.Encoder.fits_dense
    monkeypatch.setattr(cache.Encoder, "fits_dense", lambda self, *a: calls.append(a) or real(self, *a))
    assert not cache.long_text(sel) and not cache.long_text(sel)
    assert len(calls) <= 1  # the text is tokenised once, not per asking
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    assert cache.long_text(sel)  # a smaller budget is a new answer, not the remembered one


def test_cache_evicts_least_recently_used_by_bytes():
    cache = results.ByteCache(lambda: 10_000)
    for k in "abc":
        cache.get(k, lambda: np.zeros(400, dtype=np.float64))  # 3,200 bytes each
    cache.get("a", lambda: pytest.fail("a is cached"))  # a is now the most recent
    cache.get("d", lambda: np.zeros(400, dtype=np.float64))
    assert cache.total <= 10_000
    assert cache.evictions == 1
    calls = []
    cache.get("b", lambda: calls.append(1) or np.zeros(1))  # b was the least recently used: evicted
    cache.get("a", lambda: pytest.fail("a survived"))
    assert calls == [1]


def test_a_result_larger_than_the_budget_is_returned_not_kept():
    cache = results.ByteCache(lambda: 1000)
    out = cache.get("big", lambda: np.zeros(10_000))
    assert out.shape == (10_000,) and len(cache) == 0 and cache.total == 0


def test_errors_are_not_cached_and_same_key_computes_once():
    cache = results.ByteCache(lambda: 1 << 20)
    with pytest.raises(ValueError):
        cache.get("k", lambda: (_ for _ in ()).throw(ValueError("boom")))
    runs = []

    def slow():
        runs.append(1)
        time.sleep(0.3)
        return np.ones(3)

    threads = [threading.Thread(target=cache.get, args=("k", slow)) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert runs == [1]


def test_cache_budget_follows_the_setting(monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_CACHE_MB", "1")
    cache = results.ByteCache(lambda: results.settings.current().cache_bytes)
    for i in range(5):
        cache.get(i, lambda: np.zeros(400_000 // 8 * 2))  # 800 kB each
    assert cache.total <= 1 << 20 and len(cache) == 1


# ---- escaping ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    ["[Session expired](http://evil.example/login)", "![p](http://evil.example/p.png)", "<img src=x>", ":red[big]"],
)
def test_md_leaves_no_markdown_syntax(raw):
    out = md(raw)
    unescaped = re.sub(r"\\.", "", out)  # drop every escaped character: what is left is read as markdown
    assert not re.search(r"[\[\]<>!]", unescaped) and "http://" not in out
    assert out.replace("\\", "").replace("\u200b", "") == raw  # only escapes and zero-width spaces added


# ---- the app ----------------------------------------------------------------------------------------------


def test_model_list_refuses_links_with_one_message(monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_MODELS", "minilm")
    seen = set()
    for spec in ("/etc", "/no/such/folder", "~", "/proc/self", "random:tiny"):
        at = app(model=spec)
        assert not at.exception
        seen.add(tuple(e.value for e in at.error))
        assert at.sidebar.selectbox(key="model_choice").options == ["all-MiniLM-L6-v2 (bundled, offline)"]
    assert seen == {("This server offers only the models its operator listed: minilm. Pick one in the sidebar.",)}


def test_link_markdown_is_escaped():
    at = app(model="[Session expired](http://evil.example/login)")
    assert not at.exception
    value = at.error[0].value
    assert "\\[Session expired\\](http:\u200b//" in value  # [ ] escaped, the bare URL broken: no link


def test_window_past_the_range_is_clamped_with_a_notice():
    at = app(mask="window:600")
    assert not at.exception
    assert any("window:511" in w.value for w in at.warning)
    assert at.sidebar.number_input(key="mask_window").value == 511


def test_long_text_stays_out_of_the_url():
    long = "word " * 1000
    at = app(text=long)
    assert not at.exception
    assert len(at.query_params.get("text", [""])[0]) <= 2000
    assert any("first 2,000 characters" in c.value for c in at.sidebar.caption)


def test_text_over_budget_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_MAX_TEXT_CHARS", "100")
    at = app(text="word " * 100)
    assert not at.exception
    assert any("budget ATTENTION_LENS_MAX_TEXT_CHARS allows 100" in e.value.replace("\\", "") for e in at.error)


def test_shared_server_without_a_list_turns_custom_models_off(monkeypatch):
    """Listening beyond loopback with no ATTENTION_LENS_MODELS: presets only, and the sidebar says why."""
    from models import settings

    monkeypatch.delenv("ATTENTION_LENS_MODELS", raising=False)
    monkeypatch.setattr(settings, "is_loopback", lambda address: False)
    at = app(model="/etc")
    assert not at.exception
    assert not any(o.startswith("Other") for o in at.sidebar.selectbox(key="model_choice").options)
    assert any("ATTENTION_LENS_MODELS" in c.value for c in at.sidebar.caption)
    assert [e.value for e in at.error] == [
        "Custom models are off on this shared server: pick a model from the sidebar's list."
    ]
