"""Every page with a decoder (random:gpt2-tiny) in headless Chromium: it renders, with no console error and no
BERT leftovers; the generation page steps through the cache. Screenshots in artifacts/. Skips without Chromium.
"""

from __future__ import annotations

import pytest

from lens_testing.browser import ARTIFACTS, have_browser, watch_errors

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 120_000
QUERY = "model=random%3Agpt2-tiny&text=The+cat+sat+on+the+mat.+The+cat+sat+on+the+mat."


@pytest.mark.parametrize(
    "path,marker",
    [
        ("", "lower-triangular"),  # Explore is the default page, at the root
        ("heads", "induction"),
        ("masks", "Mask"),
        ("inside_head", "models/gpt2.py"),
        ("memory", "Memory"),
        ("troubleshooting", "Troubleshooting"),
        ("corpus", "Corpus"),
    ],
)
def test_page_renders_a_decoder(app_url, chromium, path, marker):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors = watch_errors(page)
    page.goto(f"{app_url}/{path}?{QUERY}")
    page.get_by_text(marker, exact=False).first.wait_for(timeout=LOAD_MS)
    page.wait_for_timeout(1500)
    assert page.get_by_text("Traceback").count() == 0
    body = page.inner_text("section.main") if page.locator("section.main").count() else page.inner_text("body")
    assert "[CLS]" not in body or "decoder" in body  # only our notes that a decoder has none
    page.screenshot(path=str(ARTIFACTS / f"decoder_{path or 'explore'}.png"))
    assert not [e for e in errors if "WebSocket" not in e], errors
    page.close()


def test_generation_steps_through_the_cache(app_url, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors = watch_errors(page)
    page.goto(f"{app_url}/generation?{QUERY}")
    page.get_by_text("steps checked", exact=False).first.wait_for(timeout=LOAD_MS)
    page.wait_for_selector(".js-plotly-plot", timeout=LOAD_MS)
    assert page.get_by_text("Cache after this step", exact=False).count() >= 1
    page.screenshot(path=str(ARTIFACTS / "decoder_generation.png"))
    page.goto(f"{app_url}/generation?{QUERY}&present=1&lang=zh")
    page.get_by_text("第 1 步", exact=False).first.wait_for(timeout=LOAD_MS)
    page.wait_for_selector(".js-plotly-plot", timeout=LOAD_MS)  # the run is over: the shortcut is bound
    page.wait_for_timeout(500)
    page.keyboard.press("ArrowRight")
    page.get_by_text("第 2 步", exact=False).first.wait_for(timeout=LOAD_MS)
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTIFACTS / "decoder_generation_present_zh.png"))
    assert not [e for e in errors if "WebSocket" not in e], errors
    page.close()
