"""Shared mode in headless Chromium: a server whose operator set ATTENTION_LENS_MODELS, visited through links.

The sidebar offers exactly the listed models; links asking for anything else (an existing folder, a missing one, a
markdown link) read the same, render no link or image, and make no request beyond 127.0.0.1.
"""

from __future__ import annotations

import urllib.parse

import pytest

from lens_testing.browser import ARTIFACTS, app_server, full_screenshot, have_browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 120_000
LOCAL = ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:", "file://")
ALLOWED = "minilm,random:tiny"


@pytest.fixture(scope="module")
def shared_url():
    with app_server(extra_env={"ATTENTION_LENS_MODELS": ALLOWED}) as url:
        yield url


def _open(chromium, url: str):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    remote: list[str] = []
    page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(LOCAL) else None)
    page.goto(url)
    page.locator("[data-testid=stSidebar]").wait_for(timeout=LOAD_MS)
    page.locator("[data-testid=stAlertContentError], .js-plotly-plot image").first.wait_for(timeout=LOAD_MS)
    return page, remote


def _alert_text(page) -> list[str]:
    return [t.strip() for t in page.locator("[data-testid=stAlertContentError]").all_inner_texts()]


def test_sidebar_offers_exactly_the_list(shared_url, chromium):
    page, remote = _open(chromium, shared_url)
    page.locator(".js-plotly-plot image").first.wait_for(timeout=LOAD_MS)  # minilm, the first listed, loads
    page.get_by_role("combobox", name="Model").click()
    page.get_by_role("option").first.wait_for(timeout=LOAD_MS)
    options = [o.strip() for o in page.get_by_role("option").all_inner_texts()]
    assert options == ["all-MiniLM-L6-v2 (bundled, offline)", "random: tiny (untrained)"], options
    assert not remote
    page.close()


def test_refused_links_read_the_same_for_existing_and_missing_folders(shared_url, chromium):
    texts = []
    for spec in ("/etc", "/no/such/folder", "/proc/self", "~"):
        page, remote = _open(chromium, f"{shared_url}/?model={urllib.parse.quote(spec)}")
        texts.append(_alert_text(page))
        assert not remote
        page.close()
    assert texts[0] and all(t == texts[0] for t in texts), texts
    assert "minilm, random:tiny" in texts[0][0]
    for word in ("/etc", "config.json", "root", "exist"):
        assert word not in texts[0][0]


def test_markdown_in_a_link_renders_as_text(shared_url, chromium):
    evil = "[Session expired](http://evil.example/login) ![p](http://evil.example/p.png)"
    page, remote = _open(chromium, f"{shared_url}/?mask={urllib.parse.quote(evil)}")
    page.locator("[data-testid=stAlertContentWarning]").first.wait_for(timeout=LOAD_MS)
    full_screenshot(page, ARTIFACTS / "shared-escaped-link.png")
    hrefs = [a.get_attribute("href") for a in page.locator("a[href*='evil.example']").all()]
    assert not hrefs, hrefs
    assert page.locator("img[src*='evil.example']").count() == 0
    shown = page.locator("[data-testid=stAlertContentWarning]").first.inner_text().replace("\u200b", "")
    assert evil in shown  # the visitor's text, shown as text
    assert not remote
    page.close()
