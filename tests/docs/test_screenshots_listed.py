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


def _nav_pages() -> list[str]:
    """Return the url_path of every page in app.py's navigation."""
    return re.findall(r'url_path="([\w-]+)"', (ROOT / "app.py").read_text(encoding="utf-8"))


def test_every_page_in_the_navigation_has_a_current_picture_in_the_docs():
    """docs/img/shots.json (written by tools/screenshots.py and the other screenshot scripts) names, for each
    picture, the page it shows, the day and the commit; every page in the navigation has one that exists, that a
    script still makes and that a docs page shows. The lead reruns `nice python tools/screenshots.py` after a
    change to a page's look."""
    import json

    from tools.screenshots import made as made_by_scripts

    manifest = json.loads((ROOT / "docs" / "img" / "shots.json").read_text(encoding="utf-8"))["pictures"]
    docs = "\n".join(p.read_text(encoding="utf-8") for p in pages())
    made = made_by_scripts()
    nav = _nav_pages()
    assert len(nav) >= 11 and "explore" in nav and "long_lab" in nav  # the parse found the navigation
    for name, facts in manifest.items():
        assert set(facts) == {"page", "taken", "commit"}, name
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", facts["taken"]) and facts["commit"], name
    current = {
        facts["page"]
        for name, facts in manifest.items()
        if (ROOT / "docs" / "img" / name).is_file() and name in made and f"img/{name}" in docs
    }
    missing = [page for page in nav if page not in current]
    assert not missing, f"pages with no current picture in the docs (run nice python tools/screenshots.py): {missing}"
