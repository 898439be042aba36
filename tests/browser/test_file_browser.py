"""Attention from a file in the real app (headless Chromium): upload, see the overview, open a head; a
cross-attention file (7 query × 11 key tokens) with the right axes; and a notebook figure's HTML drawing offline,
with and without require.js on the page. Every request stays on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest

from lens import show
from lens_testing.browser import ARTIFACTS, full_screenshot, have_browser
from tests.core.test_attention_file import REF, TOKENS, softmax_maps

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 120_000
LOCAL = ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:", "file://")
Q_TOKENS = [f"q{i}" for i in range(7)]
K_TOKENS = [f"k{j}" for j in range(11)]


def _watch(page) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    remote: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(LOCAL) else None)
    return errors, remote


def _ticks(page, axis: str) -> list[str]:
    """Tick labels of the first plot that has any on this axis (the head heatmap; the line view has none)."""
    return page.evaluate(
        """(axis) => {
            for (const plot of document.querySelectorAll('.js-plotly-plot')) {
                const t = [...plot.querySelectorAll('.' + axis + 'tick text')].map(e => e.textContent);
                if (t.length) return t;
            }
            return [];
        }""",
        axis,
    )


def test_upload_a_file_see_the_overview_and_a_head_then_cross_attention(app_url, chromium, tmp_path):
    mine = tmp_path / "mine.npz"
    np.savez(mine, attentions=REF, tokens=np.array(TOKENS))
    cross = tmp_path / "cross.npz"
    np.savez(cross, attentions=softmax_maps(2, 4, 7, 11), q_tokens=np.array(Q_TOKENS), k_tokens=np.array(K_TOKENS))

    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors, remote = _watch(page)
    page.goto(app_url)
    page.locator("[data-testid=stSidebar] label", has_text="Attention file").first.click()
    page.wait_for_function("() => document.body.innerText.includes('Upload an attention file')", timeout=LOAD_MS)
    page.locator("[data-testid=stSidebar] input[type=file]").set_input_files(str(mine))
    page.wait_for_function("() => document.body.innerText.includes('mine.npz: 2 layers × 3 heads')", timeout=LOAD_MS)
    img = page.locator(".js-plotly-plot image").first
    img.wait_for(timeout=LOAD_MS)
    page.wait_for_timeout(500)
    full_screenshot(page, ARTIFACTS / "file-overview.png")
    page.set_viewport_size({"width": 1400, "height": 900})

    # Click the tile of layer 1, head 2 (2 layers × 3 heads): the head view opens on the file's tokens. The
    # overview reaches below a 900-pixel window (a click there lands nowhere): scroll it into view first.
    img.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    b = img.bounding_box()
    assert b["y"] >= 0 and b["y"] + b["height"] <= 900, f"the overview does not fit the window: {b}"
    page.mouse.click(b["x"] + (2 + 0.5) / 3 * b["width"], b["y"] + (1 + 0.5) / 2 * b["height"])
    page.wait_for_function("() => document.body.innerText.includes('Layer 1 · head 2')", timeout=LOAD_MS)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick text')].some(t => t.textContent === 'cat')",
        timeout=LOAD_MS,
    )
    assert _ticks(page, "x") == TOKENS and _ticks(page, "y") == TOKENS
    full_screenshot(page, ARTIFACTS / "file-head.png")
    page.set_viewport_size({"width": 1400, "height": 900})

    # Another file, cross-attention: rows are the 7 queries, columns the 11 keys.
    page.locator("[data-testid=stSidebar] input[type=file]").set_input_files(str(cross))
    page.wait_for_function(
        "() => document.body.innerText.includes('7 query tokens (rows) × 11 key tokens (columns)')", timeout=LOAD_MS
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick text')].some(t => t.textContent === 'k10')",
        timeout=LOAD_MS,
    )
    assert _ticks(page, "y") == Q_TOKENS
    assert _ticks(page, "x") == K_TOKENS
    page.wait_for_timeout(500)
    full_screenshot(page, ARTIFACTS / "file-cross.png")
    assert not [e for e in errors if "favicon" not in e], errors
    assert not remote, remote
    page.close()


@pytest.mark.parametrize("requirejs", [False, True])
def test_a_notebook_figure_draws_offline(chromium, tmp_path, requirejs, monkeypatch):
    """What a notebook shows from `show(...)`'s text/html: plotly.js inlined, drawn with the network off. With
    require.js on the page (classic Notebook), plotly.js's UMD wrapper must still set window.Plotly."""
    from viz import notebook

    monkeypatch.setattr(notebook, "PAGE", notebook._Page())  # a fresh page: its first figure brings plotly.js
    fig = show(softmax_maps(2, 3, 7, 11), Q_TOKENS, view="head", layer=1, head=2, k_tokens=K_TOKENS)
    amd = "<script>window.define = function () {}; window.define.amd = true;</script>" if requirejs else ""
    fragment = fig._repr_mimebundle_()["text/html"]
    path = tmp_path / "cell.html"
    path.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'>{amd}</head><body>{fragment}{fragment}</body></html>"
    )
    context = chromium.new_context(offline=True)
    page = context.new_page()
    errors, remote = _watch(page)
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2", timeout=LOAD_MS)
    assert _ticks(page, "x") == K_TOKENS and _ticks(page, "y") == Q_TOKENS
    assert not errors, errors
    assert not remote, remote
    context.close()
