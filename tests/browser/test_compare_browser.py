"""The Compare page and the Explore lenses in headless Chromium: one hover names A, B and Δ; a click opens a head.

Screenshots go to artifacts/compare.png and artifacts/explore-weighted.png (the docs' SmolLM2 pictures come from
tools/compare_screenshots.py). Skips without /usr/bin/chromium and playwright.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlsplit

import pytest

from lens_testing.browser import ARTIFACTS, full_screenshot, have_browser, watch_errors

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 240_000
MODEL = "random:llama-tiny"  # 2 layers × 4 heads: the page's wiring, quickly
PAIR = ("The keys to the cabinet is", "The keys to the cabinet was")
LOCAL = ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:", "file://")


def _plot(page, title: str):
    """Return the plotly chart whose text holds `title` (its main title or a subplot title)."""
    return page.locator(".js-plotly-plot", has_text=title).first


def test_compare_minimal_pair_one_hover_and_a_click(app_url, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors = watch_errors(page)
    remote: list[str] = []
    page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(LOCAL) else None)
    query = f"model={quote(MODEL)}&text={quote(PAIR[0])}&against_text={quote(PAIR[1])}&layer=1&head=2"
    page.goto(f"{app_url}/compare?{query}")
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot').length >= 5 && document.body.innerText.includes('Δ = B − A')",
        timeout=LOAD_MS,
    )
    page.wait_for_timeout(800)

    # Hover the Δ map (the third subplot of the head's figure): the label names both runs and their difference.
    head = _plot(page, "Δ = B − A")
    head.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    box = head.locator(".heatmaplayer image").nth(2).bounding_box()  # the Δ map's cells
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.mouse.move(box["x"] + box["width"] * 0.97, box["y"] + box["height"] * 0.97, steps=5)  # the changed row
    label = head.locator(".hoverlayer .hovertext").first
    label.wait_for(timeout=10_000)
    text = ""
    for _ in range(50):  # the label follows the mouse a frame or two later: read it until it names the last row
        text = (label.text_content() or "").replace("\xa0", " ")
        if "is | was" in text:
            break
        page.mouse.move(box["x"] + box["width"] * 0.97, box["y"] + box["height"] * 0.97)
        page.wait_for_timeout(100)
    assert "A " in text and "B " in text and "Δ " in text, text
    assert "is | was" in text, text

    # Click head 1 of layer 0 in the ranking grid: the page opens it, and the link says so.
    chart = _plot(page, "click one to open it")
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    g = chart.locator(".nsewdrag").first.bounding_box()
    assert g is not None
    page.mouse.click(g["x"] + (1 + 0.5) / 4 * g["width"], g["y"] + (0 + 0.5) / 2 * g["height"])
    page.wait_for_function("() => document.body.innerText.includes('Layer 0 · head 1: A, B and Δ')", timeout=LOAD_MS)
    q = parse_qs(urlsplit(page.url).query)
    # layer 0 is the default, so the link leaves it out
    assert q.get("layer") is None and q.get("head") == ["1"] and q.get("against_text") == [PAIR[1]], page.url
    full_screenshot(page, ARTIFACTS / "compare.png")
    assert not remote, remote[:3]
    assert not [e for e in errors if "WebSocket" not in e], errors[:3]


def test_explore_value_weighted_lens_side_by_side(app_url, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors = watch_errors(page)
    page.goto(f"{app_url}/?model={quote(MODEL)}&text={quote(PAIR[0])}&view=head&weighted=true&words=true")
    page.wait_for_function(
        "() => document.body.innerText.includes('raw attention and value-weighted, side by side')", timeout=LOAD_MS
    )
    page.get_by_text("of what the head passes on").first.wait_for(timeout=LOAD_MS)
    page.wait_for_timeout(800)
    assert page.get_by_label("Value-weighted", exact=True).is_checked()
    full_screenshot(page, ARTIFACTS / "explore-weighted.png")
    assert not [e for e in errors if "WebSocket" not in e], errors[:3]
