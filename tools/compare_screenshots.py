"""Screenshots for docs/compare.md, from the running app on SmolLM2: `python tools/compare_screenshots.py`.

Starts `streamlit run app.py` on 127.0.0.1 (lens_testing/browser.py), opens each shot in Debian's headless
Chromium, waits until Streamlit has stopped, fails when the page shows an error, and writes docs/img/NAME-LANG.png:

- compare-untrained: trained `smollm2` against `random:smollm2` on one text, the most changed head open;
- compare-pair: the minimal pair "The keys to the cabinet are / is" on `smollm2`;
- weighted: Explore's value-weighted lens on the head whose first-token sink shrinks the most.

Which heads are open comes from bench/results/compare.json (`python bench/compare.py`), so the pictures show the
heads the docs' figures name. The browser test tests/browser/test_compare_browser.py checks the same pages on a
tiny model in CI (into artifacts/).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lens_testing.browser import app_server, browser, full_screenshot, watch_errors  # noqa: E402
from tools.shots import record, shrink, wait_idle  # noqa: E402
from ui.i18n import translate  # noqa: E402

OUT = ROOT / "docs" / "img"
RESULTS = ROOT / "bench" / "results" / "compare.json"
LOAD_MS = 600_000
PAIR = ("The keys to the cabinet are", "The keys to the cabinet is")
ERRORS = "[data-testid=stException], [data-testid=stAlertContentError]"


@dataclass(frozen=True)
class Shot:
    name: str  # docs/img/NAME-LANG.png
    path: str  # the page's url_path ("" = Explore)
    params: dict[str, str] = field(default_factory=dict)
    langs: tuple[str, ...] = ("en",)
    until: str = ""  # a locale key: the picture ends where the heading with this text starts ("" = whole page)


def _head(facts: dict, key: str, default: tuple[int, int]) -> dict[str, str]:
    try:
        top = facts[key]["top"][0] if key != "most_shrunk" else facts[key]
        return {"layer": str(top["layer"]), "head": str(top["head"])}
    except (KeyError, IndexError, TypeError):
        return {"layer": str(default[0]), "head": str(default[1])}


def shots() -> list[Shot]:
    facts = {}
    if RESULTS.is_file():
        facts = json.loads(RESULTS.read_text(encoding="utf-8")).get("figures", {}).get("smollm2", {})
    base = {"model": "smollm2", "text": PAIR[0]}
    return [
        Shot(
            "compare-untrained",
            "compare",
            {**base, "against_model": "random:smollm2", **_head(facts, "trained_vs_random", (23, 2))},
            until="compare.labels_title",
        ),
        Shot(
            "compare-pair",
            "compare",
            {**base, "against_text": PAIR[1], **_head(facts, "minimal_pair", (5, 8))},
            langs=("en", "zh"),
            until="compare.labels_title",
        ),
        Shot("weighted", "", {**base, "view": "head", "weighted": "true", **_head(facts, "most_shrunk", (23, 0))}),
    ]


def crop(path: Path, bottom: int) -> None:
    """Cut the picture off at `bottom` pixels (what follows repeats what the docs show elsewhere)."""
    from PIL import Image

    with Image.open(path) as img:
        cut = img.crop((0, 0, img.width, min(img.height, max(bottom, 200))))
    cut.save(path)


def take(page, base: str, shot: Shot, lang: str, out: Path) -> Path:
    errors = watch_errors(page)
    page.goto(f"{base}/{shot.path}?{urlencode({**shot.params, 'lang': lang})}")
    page.locator("[data-testid=stMain]").wait_for(timeout=LOAD_MS)
    page.locator(f".js-plotly-plot, {ERRORS}").first.wait_for(timeout=LOAD_MS)
    wait_idle(page, LOAD_MS)
    page.wait_for_timeout(1000)  # plotly's last frame
    shown = [t.strip() for t in page.locator(ERRORS).all_inner_texts()]
    assert not shown, f"{shot.name} ({lang}) shows an error: {shown[0][:300]}"
    assert not [e for e in errors if "WebSocket" not in e], f"{shot.name} ({lang}): {errors[:3]}"
    path = full_screenshot(page, out / f"{shot.name}-{lang}.png")
    if shot.until:
        box = page.get_by_text(translate(lang, shot.until), exact=True).first.bounding_box()
        if box is not None:
            crop(path, int(box["y"]) - 8)
    shrink(path)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs (default: docs/img)")
    ap.add_argument("--only", nargs="*", help="shot names (default: all)")
    args = ap.parse_args()
    todo = [s for s in shots() if not args.only or s.name in args.only]
    with app_server(timeout=300) as base, browser() as b:
        for shot in todo:
            for lang in shot.langs:
                page = b.new_page(viewport={"width": 1280, "height": 800})
                try:
                    path = take(page, base, shot, lang, args.out)
                finally:
                    page.close()
                record({path: shot.path or "explore"})
                print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
