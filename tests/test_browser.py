"""The real app in headless Chromium: what a person sees. Skips without /usr/bin/chromium and playwright."""

from __future__ import annotations

import pytest

from tests.browser import ARTIFACTS, app_server, browser, full_screenshot, have_browser

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright")]

LOAD_MS = 120_000


@pytest.fixture(scope="module")
def app_url():
    with app_server() as url:
        yield url


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


def _errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def test_typed_sentence_shows_its_attention(app_url, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors = _errors(page)
    page.goto(app_url)
    box = page.get_by_label("Text", exact=True)
    box.wait_for(timeout=LOAD_MS)
    box.fill("The quick brown fox jumps over the lazy dog.")
    box.press("Control+Enter")  # commit the text area
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick text')].some(t => t.textContent === 'fox')",
        timeout=LOAD_MS,
    )
    full_screenshot(page, ARTIFACTS / "explore.png")
    assert not [e for e in errors if "favicon" not in e], errors
    page.close()
