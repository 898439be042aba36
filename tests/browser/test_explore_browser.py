"""The real app in headless Chromium: what a person sees. Skips without /usr/bin/chromium and playwright.

Every request the page makes must stay on 127.0.0.1 (the app works offline, in a lecture hall).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from lens_testing.browser import ARTIFACTS, full_screenshot, have_browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 120_000
LOCAL = ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:", "file://")


def _watch(page) -> tuple[list[str], list[str]]:
    """Collect console errors and every request URL that leaves the machine."""
    errors: list[str] = []
    remote: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(LOCAL) else None)
    return errors, remote


# The page coordinates of the centre of the head map's cell (query position, key position): the point of the trace
# "cells" carrying those positions, through plotly's axes (l2p) and the plot's offset on the page; null when absent.
CELL_CENTRE = """([q, k]) => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const i = (gd._fullData || []).findIndex(t => t.name === 'cells');
    if (i < 0) continue;
    const t = gd._fullData[i], n = Array.from(t.customdata).findIndex(c => c[3] === q && c[4] === k);
    if (n < 0) return null;
    gd.scrollIntoView({block: 'center'});
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
    return [box.left + xa._offset + xa.l2p(t.x[n]), box.top + ya._offset + ya.l2p(t.y[n])];
  }
  return null;
}"""


IDLE = "() => !document.querySelector('[data-testid=stStatusWidget]')"  # no run in progress (Streamlit's "Running…")


def _overview_image(page):
    img = page.locator(".js-plotly-plot image").first
    img.wait_for(timeout=LOAD_MS)
    return img


def test_typed_sentence_overview_then_a_clicked_head(app_url, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors, remote = _watch(page)
    page.goto(app_url)
    before = _overview_image(page).get_attribute("href")  # the default sentence's overview
    box = page.get_by_label("Text", exact=True)
    box.fill("The quick brown fox jumps over the lazy dog.")
    box.press("Control+Enter")  # commit the text area
    page.wait_for_function(
        "(old) => { const i = document.querySelector('.js-plotly-plot image'); return i && i.getAttribute('href') !== old }",
        arg=before,
        timeout=LOAD_MS,
    )
    img = _overview_image(page)
    page.wait_for_timeout(500)
    full_screenshot(page, ARTIFACTS / "explore-overview.png")
    page.set_viewport_size({"width": 1400, "height": 900})

    # Click the tile of layer 2, head 3 (the bundled model has 6 layers × 12 heads).
    b = img.bounding_box()
    page.mouse.click(b["x"] + (3 + 0.5) / 12 * b["width"], b["y"] + (2 + 0.5) / 6 * b["height"])
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick text')].some(t => t.textContent === 'fox')",
        timeout=LOAD_MS,
    )
    page.wait_for_function("() => document.body.innerText.includes('Layer 2 · head 3')", timeout=LOAD_MS)
    query = parse_qs(urlsplit(page.url).query)
    assert query.get("layer") == ["2"] and query.get("head") == ["3"] and query.get("view") == ["head"], page.url
    # The line view is drawn too: its query tokens are text in the SVG (left column first). Clicking the query
    # "fox" (its marker sits just right of the text) keeps only that token's lines.
    # The line view is a second chart, drawn after the heatmap: wait for its "fox" on both sides.
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .textpoint text')]"
        ".filter(t => t.textContent.includes('fox')).length >= 2",
        timeout=LOAD_MS,
    )
    fox = page.locator(".js-plotly-plot .textpoint text", has_text="fox")
    t = fox.first.bounding_box()
    page.mouse.click(t["x"] + t["width"] + 6, t["y"] + t["height"] / 2)
    page.wait_for_function("() => document.body.innerText.includes('fox · 4')", timeout=LOAD_MS)
    # A click on the map's cell (query "fox", key "quick") opens "why here" for it: the panel's query selector
    # (the keyboard path) follows the click. The cell's centre comes from plotly's own axes.
    picked = (
        "() => { const v = l => (document.querySelector(`input[aria-label='${l}']`) || {}).value;"
        " return v('Query (row)') === '4: fox' && v('Key (column)') === '2: quick' }"
    )
    for attempt in range(3):  # a click that lands while the focus's rerun redraws the map is lost: click again
        page.wait_for_function(IDLE, timeout=LOAD_MS)
        page.wait_for_timeout(500)
        xy = page.evaluate(CELL_CENTRE, [4, 2])
        assert xy is not None, "no clickable cell (query 4, key 2) on the head's map"
        page.mouse.click(xy[0], xy[1])
        try:
            page.wait_for_function(picked, timeout=LOAD_MS // 3)
            break
        except Exception:
            if attempt == 2:
                raise
    page.wait_for_timeout(500)
    full_screenshot(page, ARTIFACTS / "explore.png")
    assert not [e for e in errors if "favicon" not in e], errors
    assert not remote, remote
    page.close()


def test_shared_link_in_chinese(app_url, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors, remote = _watch(page)
    page.goto(f"{app_url}/?lang=zh&view=head&layer=4&head=7&text=The+cat+sat+on+the+mat.&text_b=It+was+warm.")
    page.wait_for_function("() => document.body.innerText.includes('第 4 层 · 第 7 头')", timeout=LOAD_MS)
    page.wait_for_timeout(800)
    full_screenshot(page, ARTIFACTS / "explore-zh.png")
    assert not [e for e in errors if "favicon" not in e], errors
    assert not remote, remote
    page.close()


def test_exported_html_opens_offline(app_url, chromium, tmp_path):
    page = chromium.new_page(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    page.goto(f"{app_url}/?view=head&layer=1&head=1")
    page.wait_for_function("() => document.body.innerText.includes('Layer 1 · head 1')", timeout=LOAD_MS)
    page.get_by_text("Export and share").click()
    button = page.get_by_role("button", name="This view as HTML")
    button.wait_for(timeout=LOAD_MS)
    page.wait_for_timeout(1000)  # let the expander finish opening before the click
    with page.expect_download(timeout=LOAD_MS) as dl:
        button.click()
    path = tmp_path / "view.html"
    dl.value.save_as(path)
    page.close()
    html = path.read_text(encoding="utf-8")
    assert "<script src=" not in html and "plotly.js (cartesian - minified) v" in html  # plotly.js is inside the file

    # Open the file with every network request refused: it must draw from what it carries.
    context = chromium.new_context(offline=True)
    offline = context.new_page()
    errors, remote = _watch(offline)
    offline.goto(path.as_uri())
    offline.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2", timeout=LOAD_MS
    )
    assert offline.locator(".js-plotly-plot .xtick text", has_text="animal").count() >= 1
    assert "Layer 1 · head 1" in offline.locator("body").inner_text()
    full_screenshot(offline, ARTIFACTS / "explore-export.png")
    assert not errors, errors
    assert not remote, remote
    context.close()
