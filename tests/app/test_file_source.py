"""An attention file as the sidebar's source, through AppTest (no browser): Explore and Heads from the maps alone,
cross-attention axes, bad files, and pages that need a model saying so. The upload widget itself is driven by
the browser test (AppTest cannot upload); here the file's bytes go where the uploader's callback puts them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import torch
from streamlit.testing.v1 import AppTest

from tests.app.test_explore import decode
from tests.core.test_attention_file import REF, TOKENS, softmax_maps

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 180
Q_TOKENS = [f"q{i}" for i in range(7)]
K_TOKENS = [f"k{j}" for j in range(11)]


def npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


CROSS = softmax_maps(2, 4, 7, 11, seed=3)
CROSS_FILE = npz(attentions=CROSS, q_tokens=np.array(Q_TOKENS), k_tokens=np.array(K_TOKENS))


def with_file(data: bytes, name: str, page: str | None = None, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.session_state["source"] = "file"
    at.session_state["attn_file"] = {"name": name, "id": f"test-{name}-{len(data)}", "data": data}
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    if page:
        at.switch_page(page).run()
    return at


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def title_of(spec: dict) -> str:
    title = spec.get("layout", {}).get("title", {})
    return title.get("text", "") if isinstance(title, dict) else str(title)


def head_chart(at: AppTest) -> dict:
    heads = [s for s in charts(at) if title_of(s).startswith("Layer ") and "·" in title_of(s)]
    assert heads, [title_of(s) for s in charts(at)]
    return heads[0]


def test_a_file_shows_the_overview_and_the_head_view_without_a_model():
    data = npz(attentions=REF, tokens=np.array(TOKENS))
    at = with_file(data, "mine.npz")
    assert not at.exception and not at.error
    overview = charts(at)[0]
    assert [tr["type"] for tr in overview["data"]] == ["image", "scatter"]
    assert len(overview["data"][1]["x"]) == 2 * 3  # one clickable tile per head of the file
    assert any("mine.npz: 2 layers × 3 heads · 5 tokens" in c.value for c in at.caption)
    assert any("Not causal" in c.value for c in at.caption)
    assert not at.text_area  # no text to type: the file brings its maps

    at.session_state["view"] = "head"
    at.session_state["layer"], at.session_state["head"] = 1, 2
    at.run()
    assert not at.exception and not at.error
    spec = head_chart(at)
    assert spec["layout"]["yaxis"]["ticktext"] == TOKENS and spec["layout"]["xaxis"]["ticktext"] == TOKENS
    np.testing.assert_allclose(decode(spec["data"][0]["z"]).reshape(5, 5), REF[1, 2], atol=1e-6)

    for view in ("layer", "aggregate"):
        at.session_state["view"] = view
        at.run()
        assert not at.exception and not at.error, view
    assert any(title_of(s).startswith("Rollout") or "rollout" in title_of(s).lower() for s in charts(at))


def test_cross_attention_file_q7_k11_has_queries_on_rows_and_keys_on_columns():
    at = with_file(CROSS_FILE, "cross.npz", view="head", layer=1, head=3)
    assert not at.exception and not at.error
    assert any("7 query tokens (rows) × 11 key tokens (columns)" in c.value for c in at.caption)
    spec = head_chart(at)
    assert spec["layout"]["yaxis"]["ticktext"] == Q_TOKENS
    assert spec["layout"]["xaxis"]["ticktext"] == K_TOKENS
    lines = [s for s in charts(at) if s is not spec and any(tr.get("type") == "scatter" for tr in s["data"])]
    assert lines, "the line view is drawn beside the heatmap"

    for view, expect_info in (("overview", None), ("layer", None), ("aggregate", "Rollout needs self-attention")):
        at.session_state["view"] = view
        at.run()
        assert not at.exception and not at.error, view
        if expect_info:
            assert any(expect_info in i.value for i in at.info)


def test_hide_cls_sep_is_offered_only_when_the_files_tokens_have_them():
    plain = ["the", "cat", "sat", "on", "mat"]  # a file from a model without [CLS]/[SEP] (GPT-2, T5, …)
    at = with_file(npz(attentions=REF, tokens=np.array(plain)), "plain.npz", view="head", layer=1, head=2)
    assert not at.exception and not at.error
    assert head_chart(at)["layout"]["yaxis"]["ticktext"] == plain
    toggles = [w.key for w in at.toggle]
    assert "log_colour" in toggles
    assert "hide_special" not in toggles and "renormalise" not in toggles  # nothing to hide, nothing to rescale

    at = with_file(npz(attentions=REF, tokens=np.array(TOKENS)), "bert.npz", view="head", layer=1, head=2)
    assert {"hide_special", "renormalise"} <= {w.key for w in at.toggle}
    at.toggle(key="hide_special").set_value(True).run()
    assert not at.exception and not at.error
    assert head_chart(at)["layout"]["yaxis"]["ticktext"] == ["the", "cat", "sat"]


def test_heads_page_works_from_a_file_and_says_importance_needs_a_model():
    at = with_file(CROSS_FILE, "cross.npz", page="app_pages/heads.py")
    assert not at.exception and not at.error
    assert any("Importance needs a model" in i.value for i in at.info)
    assert any("CKA compares the heads' outputs" in c.value for c in at.caption)
    assert len(charts(at)) >= 4  # labels, redundancy heatmap, map of heads, near-duplicates, pairs, shares

    causal = np.tril(np.ones((6, 6), dtype=np.float32))
    causal /= causal.sum(-1, keepdims=True)
    buf = io.BytesIO()
    torch.save(tuple(torch.from_numpy(np.broadcast_to(causal, (1, 2, 6, 6)).copy()) for _ in range(2)), buf)
    at = with_file(buf.getvalue(), "gpt.pt", page="app_pages/heads.py")
    assert not at.exception and not at.error
    assert any("Causal maps" in c.value for c in at.caption)
    assert any("positions are named 0…5" in w.value for w in at.warning)


def test_bad_files_get_our_message_not_a_traceback():
    at = with_file(npz(attentions=REF, tokens=np.array(TOKENS[:3])), "short.npz")
    assert not at.exception
    assert any("short.npz could not be shown" in e.value and "tokens number 3" in e.value for e in at.error)
    at = with_file(b"not an attention file", "notes.txt")
    assert not at.exception and any("not an attention file" in e.value for e in at.error)
    at = with_file(npz(attentions=REF * 0.5, tokens=np.array(TOKENS)), "half.npz")
    assert not at.exception and not at.error
    assert any("30 of 30 rows do not sum to 1" in w.value for w in at.warning)


def test_without_a_file_the_page_asks_for_one():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.session_state["source"] = "file"
    at.run()
    assert not at.exception and not at.error
    assert any("Upload an attention file" in i.value for i in at.info)


def test_pages_that_need_a_model_say_so_and_switch_back(minilm):
    data = npz(attentions=REF, tokens=np.array(TOKENS))
    for path in ("app_pages/masks.py", "app_pages/inside_head.py", "app_pages/corpus.py"):
        at = with_file(data, "mine.npz", page=path)
        assert not at.exception and not at.error, path
        assert any("This page needs a model" in i.value for i in at.info), path
    at.button(key="switch_to_model").click().run()
    assert not at.exception
    assert at.session_state["source"] == "model"
    assert not any("This page needs a model" in i.value for i in at.info)


def test_chinese_strings_for_the_file_source():
    at = with_file(CROSS_FILE, "cross.npz", lang="zh")
    assert not at.exception and not at.error
    assert any("交叉注意力" in c.value for c in at.caption)


def test_a_files_mask_is_drawn_over_the_head_view(tmp_path, minilm):
    from models.cli import main as cli_main

    assert (
        cli_main(["export", "--text", "One two three four.", "--mask", "causal", "--out", str(tmp_path / "c.npz")]) == 0
    )
    at = with_file((tmp_path / "c.npz").read_bytes(), "c.npz", view="head")
    assert not at.exception and not at.error
    assert any("Causal maps" in c.value for c in at.caption)
    spec = head_chart(at)
    veils = [tr for tr in spec["data"] if tr.get("type") == "heatmap"][1:]  # the map, then the mask's grey veil
    assert veils, [tr.get("type") for tr in spec["data"]]
    at = with_file(npz(attentions=REF, tokens=np.array(TOKENS)), "nomask.npz", view="head")
    assert [tr.get("type") for tr in head_chart(at)["data"]].count("heatmap") == 1  # no mask in the file: no veil
