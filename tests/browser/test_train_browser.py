"""The Train page in headless Chromium: press Train, the step count moves every second while it trains, and the
curves, the heads' mosaic and the diagnostics are drawn when it ends. Screenshot: artifacts/train_en.png."""

from __future__ import annotations

import re
import time

import pytest

from lens_testing.browser import ARTIFACTS, full_screenshot, have_browser, watch_errors

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 120_000
STEP = re.compile(r"step (\d+) of (\d+)")


@pytest.mark.long
def test_train_page_updates_live_and_draws_the_run(app_url, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    errors = watch_errors(page)
    page.goto(f"{app_url}/train")
    page.get_by_text("Train a transformer", exact=False).first.wait_for(timeout=LOAD_MS)
    steps = page.get_by_label("Steps")
    steps.fill("400")
    steps.press("Enter")
    page.wait_for_timeout(1500)
    # By its key: a button with an icon is named "play_arrow Train" (the icon is a ligature's text).
    page.locator(".st-key-train_start button").click()
    page.get_by_text(STEP).first.wait_for(timeout=LOAD_MS)

    # While it trains, the page redraws by itself: the step it shows moves on from one second to the next.
    # (Up to 30 s: the first records of a run wait for its first evaluation, slow on a busy machine.)
    seen = []
    for _ in range(25):
        time.sleep(1.2)
        text = page.get_by_text(STEP).first.inner_text() if page.get_by_text(STEP).count() else ""
        m = STEP.search(text)
        if m:
            seen.append(int(m.group(1)))
        if page.get_by_text("Done:", exact=False).count() or (len(seen) >= 2 and seen[-1] > seen[0]):
            break
    assert len(seen) >= 2 and seen == sorted(seen) and seen[-1] > seen[0], seen

    page.get_by_text("Done:", exact=False).first.wait_for(timeout=10 * LOAD_MS)
    page.wait_for_timeout(2000)
    assert page.locator(".js-plotly-plot").count() >= 4
    assert page.get_by_text("real checkpoint", exact=False).count() == 1
    assert page.get_by_text("Traceback").count() == 0
    full_screenshot(page, ARTIFACTS / "train_en.png")
    assert not [e for e in errors if "WebSocket" not in e], errors
    page.close()
