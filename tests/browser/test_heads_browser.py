"""The Heads and Corpus pages in headless Chromium, in English and Chinese: what a person (or a projector) sees.

Screenshots go to artifacts/heads_<lang>.png and artifacts/corpus_<lang>.png. Skips without /usr/bin/chromium.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from lens_testing.browser import ARTIFACTS, full_screenshot, have_browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

LOAD_MS = 240_000
TEXT = "The keys to the cabinet that the old man built are on the table."
WORDS = {
    "en": {
        "heads": "Heads",
        "corpus": "Corpus",
        "title": "Heads: patterns, redundancy, importance",
        "box": "Sentences, one per line",
        "run": "Analyse 4 sentences",
        "published": "BERT-base",
    },
    "zh": {
        "heads": "注意力头",
        "corpus": "语料",
        "title": "注意力头：模式、冗余与重要性",
        "box": "句子，每行一句",
        "run": "分析 4 个句子",
        "published": "BERT-base",
    },
}
CORPUS = (
    "The cat sat on the mat.\nA dog barked at the postman, who ignored it.\nShort one.\nFirst half.\tSecond half, here."
)


def _open(chromium, app_url, lang: str, page_name: str):
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{app_url}/?text={quote(TEXT)}&lang={lang}")
    # Let the first run reach st.navigation before switching page (else Streamlit runs the page file alone).
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 1", timeout=LOAD_MS)
    page.locator(f"[data-testid=stSidebarNav] a[href$='/{page_name}']").click()  # by URL: 注意力头 ⊂ 注意力头内部
    return page, errors


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_heads_page(app_url, chromium, lang):
    page, errors = _open(chromium, app_url, lang, "heads")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 8", timeout=LOAD_MS)
    page.get_by_text(WORDS[lang]["title"]).wait_for()
    # the label grid names the bundled model's previous-token head (layer 0, head 2)
    grid = page.locator(".js-plotly-plot").first
    assert ("前词" if lang == "zh" else "prev") in grid.inner_text()
    # the redundancy heatmap's tick labels are head names in cluster order
    assert page.locator(".js-plotly-plot .ytick text", has_text="L0H2").count() >= 1
    page.wait_for_timeout(1500)
    full_screenshot(page, ARTIFACTS / f"heads_{lang}.png")
    assert not [e for e in errors if "favicon" not in e and "_stcore" not in e], errors
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_corpus_page(app_url, chromium, lang):
    page, errors = _open(chromium, app_url, lang, "corpus")
    box = page.get_by_label(WORDS[lang]["box"])
    box.wait_for(timeout=LOAD_MS)
    box.fill(CORPUS)
    box.press("Control+Enter")
    page.locator("button", has_text=WORDS[lang]["run"]).click(timeout=60_000)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 6", timeout=LOAD_MS)
    page.get_by_text(WORDS[lang]["published"]).first.wait_for()  # says there are no published values for MiniLM
    page.wait_for_timeout(1500)
    full_screenshot(page, ARTIFACTS / f"corpus_{lang}.png")
    assert not [e for e in errors if "favicon" not in e and "_stcore" not in e], errors
    page.close()
