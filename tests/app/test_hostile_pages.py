"""No page shows Streamlit's error box under what a visitor can do (issue 26): hostile uploads as the sidebar's
attention file, hostile links (query parameters), and the valid one-layer and one-head files of a real user's
single-head model, on every page. Each run is also held to the page guard's record (tests/app/conftest.py): an
unexpected exception the guard caught fails the test as a traceback would.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from lens_testing import hostile_corpus as corpus

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 180
PAGES = ("explore", "heads", "corpus", "masks", "inside_head", "memory", "generation", "troubleshooting")
MAPS_PAGES = ("explore", "heads")  # the pages that need only maps: a file opens there
VIEWS = ("overview", "layer", "head", "aggregate")
VALID = ("one-layer-one-head.npz", "two-layers-one-head.npz", "one-layer-one-head.json", "one-head.npy",
         "one-layer-one-head.safetensors", "two-layers-one-head.pt", "pair.npz", "heads-64x64.npz")  # fmt: skip
REFUSED = ("heads-4096.npz", "json-type-ids-strings.json", "st-no-offsets.safetensors", "st-layer-99999999999.safetensors",
           "json-5000-digit-number.json", "torch-os-system.pt", "random.bin", "npz-bad-crc.npz")  # fmt: skip


def _file(name: str) -> bytes:
    return (corpus.FOLDER / name).read_bytes()


def with_file(name: str, page: str, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.session_state["source"] = "file"
    at.session_state["attn_file"] = {"name": name, "id": f"hostile-{name}", "data": _file(name)}
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    if page != "explore":
        at.switch_page(f"app_pages/{page}.py").run()
    return at


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def no_error_box(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.parametrize("name", VALID)
def test_valid_small_files_open_on_every_view_of_every_maps_page(name):
    for view in VIEWS:
        at = with_file(name, "explore", view=view)
        no_error_box(at)
        assert not at.error, (view, [e.value for e in at.error])
        assert charts(at), (name, view)
    at = with_file(name, "heads")
    no_error_box(at)
    assert not at.error, [e.value for e in at.error]
    assert charts(at), name


def test_a_one_layer_one_head_file_shows_captions_for_the_only_layer_and_head():
    at = with_file("one-layer-one-head.npz", "explore", view="head")
    assert not at.slider  # a slider needs two values: one layer and one head are said, not picked
    captions = [c.value for c in at.caption]
    assert "Layer: 0 (the only one)" in captions and "Head: 0 (the only one)" in captions


def test_4096_heads_open_without_pairwise_work_and_say_which_budget():
    at = with_file("heads-64x64.npz", "heads")
    no_error_box(at)
    said = [i.value.replace("\\", "") for i in at.info]  # markdown-escaped: ATTENTION\_LENS\_…
    assert any("ATTENTION_LENS_PAIR_HEADS allows 1,024 heads" in i for i in said), said
    assert charts(at)  # the labels, statistics and shares still come


def test_a_layer_of_130_heads_is_drawn_in_blocks_of_64():
    data = corpus.npz(attentions=corpus.maps(1, 130, 3, 3), tokens=np.array(["a", "b", "c"]))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.session_state["source"] = "file"
    at.session_state["attn_file"] = {"name": "wide.npz", "id": "hostile-wide", "data": data}
    at.session_state["view"], at.session_state["head"] = "layer", 100
    at.run()
    no_error_box(at)
    (layer,) = charts(at)
    assert len(layer["data"]) == 64 + 1  # heads 64…127 and the mean over all 130
    assert any("Heads 64–127 of 130" in c.value for c in at.caption), [c.value for c in at.caption]


@pytest.mark.parametrize("name", REFUSED)
def test_refused_files_are_our_one_line_message_on_the_maps_pages(name):
    for page in MAPS_PAGES:
        at = with_file(name, page)
        no_error_box(at)
        (err,) = at.error
        assert err.value.startswith(f"{name} could not be shown: {name}"), err.value  # source.file_failed
        assert "Traceback" not in err.value and "\n" not in err.value.strip()


@pytest.mark.parametrize("name", ["heads-4096.npz", "random.bin"])
def test_a_refused_file_leaves_every_page_without_an_error_box(name):
    for page in PAGES:
        no_error_box(with_file(name, page))


HOSTILE_LINK = {
    "layer": "-5",
    "head": "9" * 5000,
    "query": "99999999999",
    "step": "-1",
    "view": "<script>alert(1)</script>",
    "part": "zz",
    "lang": "xx",
    "present": "maybe",
    "mask": "window:" + "9" * 25,
    "device": "cuda:99",
    "dtype": "fp8",
    "text_b": "[link](http://evil.example) " * 3,
}


@pytest.mark.parametrize("page", PAGES)
def test_a_hostile_link_opens_every_page_with_our_messages_only(page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in HOSTILE_LINK.items():
        at.query_params[k] = v
    at.run()
    if page != "explore":
        at.switch_page(f"app_pages/{page}.py").run()
    no_error_box(at)


@pytest.mark.parametrize(
    "query",
    [
        {"model": "/etc", "text": "x"},
        {"model": "random:no-such-shape"},
        {"model": "../../../../etc/passwd"},
        {"text": "a" * 3000, "mask": "causal+window:-1"},
        {"text": "\x00\x01\x02 \ufffd", "text_b": "\u202e"},
        {"mask": "__import__('os').system('x')"},
    ],
)
def test_hostile_links_on_the_explore_page(query):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    no_error_box(at.run())
