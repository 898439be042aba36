"""Every screenshot the docs embed is one tools/screenshots.py makes, and every one it makes is committed, so a new
page is one Shot in the script and its two PNGs (English, 中文) in docs/img/."""

from __future__ import annotations

import re

from tests.docs.blocks import ROOT, pages


def test_embedded_screenshots_are_the_scripts_and_exist():
    from tools.screenshots import made as made_by_scripts

    made = made_by_scripts()
    embedded = set()
    for page in pages():
        for src in re.findall(r"img/([\w.-]+\.png)", page.read_text(encoding="utf-8")):
            embedded.add(src)
    assert embedded <= made, f"embedded but made by no tools/*screenshots.py: {sorted(embedded - made)}"
    committed = {p.name for p in (ROOT / "docs" / "img").glob("*.png")}
    assert made <= committed, f"run python tools/screenshots.py: missing {sorted(made - committed)}"
    assert committed <= made, f"PNGs no shot makes (stale): {sorted(committed - made)}"
