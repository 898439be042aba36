"""Screenshots that need a long setup: the Train page after a run, and a 4,096-token text on SmolLM2.

    python tools/lab_screenshots.py                 # every shot below, into docs/img
    python tools/lab_screenshots.py --only train    # one of them

Starts `streamlit run app.py` on 127.0.0.1 (lens_testing/browser.py) and drives Debian's headless Chromium:
- train (en, zh): the Train page after pressing Train with its defaults (the induction recipe), once the run ends;
- long-overview, long-head: docs/METRICS.md's first 16,000 characters (about 4,000 tokens) uploaded as a .txt
  file into the sidebar, on SmolLM2: the pooled overview, then one head's map with its exact window;
- long-band: the same text under the mask `window:32`: the head window draws the sliding window's band.
Fails when a page shows an error. The browser tests check the same pages on small inputs in CI; this script is
run by hand (minutes of CPU), and tools/screenshots.py's `made()` lists its pictures for the docs test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lens_testing.browser import app_server, browser, full_screenshot, watch_errors  # noqa: E402
from tools.shots import record, shrink, wait_idle  # noqa: E402
from ui.i18n import translate  # noqa: E402

OUT = ROOT / "docs" / "img"
LOAD_MS = 900_000
ERRORS = "[data-testid=stException], [data-testid=stAlertContentError]"
LONG_CHARS = 16_000


@dataclass(frozen=True)
class Shot:
    name: str  # docs/img/NAME-LANG.png
    langs: tuple[str, ...] = ("en",)


SHOTS = [Shot("train", ("en", "zh")), Shot("long-overview"), Shot("long-head"), Shot("long-band")]


def shots() -> list[Shot]:
    return list(SHOTS)


def _check(page, errors: list[str], name: str) -> None:
    shown = [t.strip() for t in page.locator(ERRORS).all_inner_texts()]
    assert not shown, f"{name} shows an error: {shown[0][:300]}"
    assert not [e for e in errors if "WebSocket" not in e], f"{name}: {errors[:3]}"


def _save(page, out: Path, name: str) -> Path:
    page.wait_for_timeout(1500)  # plotly's last frame
    path = full_screenshot(page, out / f"{name}.png")
    shrink(path)
    return path


def train(page, base: str, lang: str, out: Path) -> Path:
    errors = watch_errors(page)
    page.goto(f"{base}/train?{urlencode({'lang': lang})}")
    page.locator(".st-key-train_start button").wait_for(timeout=LOAD_MS)
    wait_idle(page, LOAD_MS)
    page.locator(".st-key-train_start button").click()
    # The run ends when the page offers to open the trained folder in Explore.
    page.locator(".st-key-train_open button").wait_for(timeout=LOAD_MS)
    wait_idle(page, LOAD_MS)
    _check(page, errors, f"train ({lang})")
    return _save(page, out, f"train-{lang}")


def _long_text(page, base: str, text_file: Path, query: dict[str, str]) -> list[str]:
    errors = watch_errors(page)
    page.goto(f"{base}/?{urlencode({'model': 'smollm2', 'lang': 'en', **query})}")
    page.locator(".js-plotly-plot").first.wait_for(timeout=LOAD_MS)
    wait_idle(page, LOAD_MS)
    page.locator("[data-testid=stSidebar] input[type=file]").set_input_files(str(text_file))
    time.sleep(2)
    page.locator(".js-plotly-plot").first.wait_for(timeout=LOAD_MS)
    wait_idle(page, LOAD_MS)
    return errors


def _head_view(page) -> None:
    # The view picker is a segmented control: its options are buttons whose text is the view's name.
    page.locator("[data-testid=stButtonGroup] button", has_text=translate("en", "explore.view_head")).first.click()
    time.sleep(1)
    wait_idle(page, LOAD_MS)


def long_shots(page, base: str, names: set[str], out: Path) -> list[Path]:
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        text_file = Path(tmp) / "metrics.txt"
        text_file.write_text((ROOT / "docs" / "METRICS.md").read_text(encoding="utf-8")[:LONG_CHARS], "utf-8")
        if names & {"long-overview", "long-head"}:
            errors = _long_text(page, base, text_file, {})
            _check(page, errors, "long-overview")
            if "long-overview" in names:
                made.append(_save(page, out, "long-overview-en"))
            if "long-head" in names:
                _head_view(page)
                _check(page, errors, "long-head")
                made.append(_save(page, out, "long-head-en"))
        if "long-band" in names:
            errors = _long_text(page, base, text_file, {"mask": "window:32"})
            _head_view(page)
            _check(page, errors, "long-band")
            made.append(_save(page, out, "long-band-en"))
    return made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs (default: docs/img)")
    ap.add_argument("--only", nargs="*", help="shot names (default: all)")
    args = ap.parse_args()
    names = {s.name for s in SHOTS if not args.only or s.name in args.only}
    with app_server(timeout=300) as base, browser() as b:
        paths = []
        if "train" in names:
            for lang in ("en", "zh"):
                page = b.new_page(viewport={"width": 1280, "height": 800})
                try:
                    paths.append(train(page, base, lang, args.out))
                finally:
                    page.close()
        page = b.new_page(viewport={"width": 1280, "height": 800})
        try:
            paths += long_shots(page, base, names, args.out)
        finally:
            page.close()
    record({p: "train" if p.name.startswith("train") else "explore" for p in paths})
    for path in paths:
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
