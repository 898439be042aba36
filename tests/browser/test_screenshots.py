"""The documentation's screenshots are made by tools/screenshots.py from the running app, and every page they show
opens without an error, in English and 中文. Here the shots go to artifacts/screenshots/ (the committed ones in
docs/img/ are refreshed with `python tools/screenshots.py`). Skips without /usr/bin/chromium and playwright."""

from __future__ import annotations

import pytest
from PIL import Image

from lens_testing.browser import ARTIFACTS, have_browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not have_browser(), reason="needs /usr/bin/chromium and playwright"),
]


@pytest.mark.long
@pytest.mark.parametrize("lang", ["en", "zh"])  # one test per language: two workers share the work
def test_every_page_in_both_languages_shows_no_error(lang, app_url):
    from tools.screenshots import LANGS, SHOTS, VIEWPORT, run

    assert lang in LANGS
    out = ARTIFACTS / "screenshots"
    shots = [s for s in SHOTS if s.ci]  # the slow sections (ablation, a projector) have tests of their own
    written = run(
        out, shots, langs=(lang,), base=app_url
    )  # raises AssertionError naming the page and language that shows an error
    assert sorted(p.name for p in written) == sorted(f"{s.name}-{lang}.png" for s in shots)
    for path in written:
        with Image.open(path) as img:
            assert img.size == (VIEWPORT["width"], VIEWPORT["height"]), path
            assert len(img.getcolors(maxcolors=256) or []) > 8, f"{path.name} is blank"
