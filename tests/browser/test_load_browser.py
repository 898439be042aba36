"""A class at once, bounded: 8 sessions on one 127.0.0.1 server paste different ~400-word texts together; every one
ends with its overview (no exception, no error), served together by the model's batching worker (ui.batching)
rather than swapping, and shows its own text's token count (a session handed another's rows would show another's:
the texts' lengths differ).
Memory figures for the same run: `python bench/hostile.py --only load`; the whole class of sixteen, timed, with the
server's CPU: `python bench/many.py`. Eight here, not sixteen: every session renders its page twice on CI's two
cores, and eight at once already queue on the one batching worker."""

from __future__ import annotations

import random

import pytest

from lens_testing.browser import have_browser
from models import bundled_model_dir
from models.loading import load_tokenizer

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]

SESSIONS = 8
WORDS = "heads look at tokens while the class reads a long paragraph about rivers and cities in spring".split()
DONE = ".js-plotly-plot image, [data-testid=stAlertContentError], [data-testid=stException]"


@pytest.mark.long
def test_a_class_pastes_long_texts_at_once(app_url, chromium):
    rng = random.Random(0)
    context = chromium.new_context(viewport={"width": 1200, "height": 800})
    pages = []
    try:
        for _ in range(SESSIONS):
            page = context.new_page()
            page.goto(app_url)
            page.locator(".js-plotly-plot image").first.wait_for(timeout=300_000)
            pages.append(page)
        befores = [p.locator(".js-plotly-plot image").first.get_attribute("href") for p in pages]
        tok = load_tokenizer(bundled_model_dir())
        texts, counts = [], []
        for _ in range(SESSIONS):  # each text a token count of its own
            words = [rng.choice(WORDS) for _ in range(400)]
            while len(tok(" ".join(words) + ".")["input_ids"]) in counts:
                words.pop()
            texts.append(" ".join(words) + ".")
            counts.append(len(tok(texts[-1])["input_ids"]))
        for page, text in zip(pages, texts, strict=True):
            page.get_by_label("Text", exact=True).fill(text)
        for page in pages:
            page.get_by_label("Text", exact=True).press("Control+Enter")
        for page, before, count in zip(pages, befores, counts, strict=True):
            page.wait_for_function(
                "(old) => { const i = document.querySelector('.js-plotly-plot image');"
                " return (i && i.getAttribute('href') !== old)"
                " || document.querySelector('[data-testid=stException], [data-testid=stAlertContentError]') }",
                arg=before,
                timeout=600_000,
            )
            assert page.locator("[data-testid=stException]").count() == 0
            assert page.locator("[data-testid=stAlertContentError]").count() == 0
            page.get_by_text(f"· {count} tokens ·").first.wait_for(timeout=60_000)  # its own text's, not another's
    finally:
        context.close()
