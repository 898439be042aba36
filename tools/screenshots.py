"""Screenshots of every app page in English and 中文, taken from the running app: `python tools/screenshots.py`.

Starts `streamlit run app.py` on 127.0.0.1 (lens_testing/browser.py), opens each page of SHOTS on its model in
Debian's headless Chromium, waits until the page is drawn and Streamlit has stopped, and fails when the page shows
an error (an exception, an error box, a script or console error). Writes docs/img/NAME-LANG.png: the pictures
README and the documentation embed. The browser test tests/browser/test_screenshots.py runs the same shots in CI
(into artifacts/, so a clean clone stays clean).

One command takes every page in the app's navigation (and the sections docs show on their own: the Why here?
panel, presentation mode):

    nice python tools/screenshots.py            # every shot, both languages, into docs/img (about 10 minutes)
    python tools/screenshots.py --only heads    # some of them

Each written picture is recorded in docs/img/shots.json (picture -> the page's url_path, the day, the commit);
tests/docs/test_screenshots_listed.py fails when a page in app.py's navigation has no recorded picture in
docs/img that the docs show. A new page is one more Shot below; the docs embed docs/img/NAME-en.png and
NAME-zh.png. Pictures that need a long setup of their own come from their own scripts
(tools/compare_screenshots.py, tools/lab_screenshots.py); `made()` lists every PNG the scripts write.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lens_testing.browser import app_server, browser, watch_errors  # noqa: E402
from tools.shots import LOAD_MS, RUNNING, commit, record, shrink, wait_idle  # noqa: E402, F401 (the shots' shared pieces)
from ui.i18n import translate  # noqa: E402

OUT = ROOT / "docs" / "img"
LANGS = ("en", "zh")
VIEWPORT = {"width": 1280, "height": 800}
# Models the shots run on, by role: all bundled, so the script needs no network.
MODELS = {"encoder": "minilm", "decoder": "smollm2"}
TEXT = "The animal didn't cross the street because it was too tired."
ERRORS = "[data-testid=stException], [data-testid=stAlertContentError]"


@dataclass(frozen=True)
class Shot:
    """One page as the docs show it: its URL path, the model it runs on, and what to wait for or press."""

    name: str  # docs/img/NAME-LANG.png
    path: str  # the page's url_path in app.py ("" = Explore)
    model: str = "encoder"  # a key of MODELS
    params: dict[str, str] = field(default_factory=dict)  # more of the URL (view, layer, head, …)
    ready: str = ".js-plotly-plot"  # a selector that shows the page's content is drawn
    tab: str | None = None  # the locale key of a tab to open first (a section the page keeps in a tab)
    clicks: tuple[str, ...] = ()  # locale keys of buttons to press, in order, before the screenshot
    expect_error: str | None = None  # the locale key of an error box the page shows by design (a FAIL verdict)
    scroll_to: str | None = None  # the locale key of a heading to bring to the top (a section further down)
    viewport: tuple[int, int] | None = None  # (width, height) when not VIEWPORT (a projector)
    ci: bool = True  # False: left out of the browser test's every-page run (slow, or another browser test opens it)

    @property
    def page(self) -> str:
        """Return the url_path of the navigation page this shot shows."""
        return self.path or "explore"


HEAD = {"view": "head", "layer": "2", "head": "3"}
SHOTS = [
    Shot("explore", "", ready=".js-plotly-plot image"),
    Shot("explore-head", "", params=HEAD),
    Shot("why-here", "", "decoder", {"view": "head", "layer": "6", "head": "4"}, scroll_to="why.title", ci=False),
    # explore-head's page on SmolLM2, scrolled: the worked example of docs/why-here.md (explain --layer 6 --head 4)
    Shot("compare", "compare", ci=False),  # tests/browser/test_compare_browser.py opens it
    Shot("heads", "heads"),
    Shot("corpus", "corpus", ready="[data-testid=stTextArea]", clicks=("corpus.example",)),
    Shot("masks", "masks"),
    Shot("inside-head", "inside_head"),
    Shot("present", "inside_head", params={"present": "1", "step": "4"}, viewport=(1280, 720), ci=False),
    Shot("memory", "memory"),
    Shot("generation", "generation", model="decoder"),
    Shot("troubleshooting", "troubleshooting"),
    Shot("train-page", "train", ready=".st-key-train_start button", ci=False),  # test_train_browser.py runs it
    Shot("long-lab", "long_lab", model="decoder", ready="[data-testid=stForm]"),
]


def made() -> set[str]:
    """Return the name of every PNG the screenshot scripts write into docs/img (this one and the others)."""
    from tools import compare_screenshots, lab_screenshots

    names = {f"{s.name}-{lang}.png" for s in SHOTS for lang in LANGS}
    names |= {f"{s.name}-{lang}.png" for s in lab_screenshots.shots() for lang in s.langs}
    return names | {f"{s.name}-{lang}.png" for s in compare_screenshots.shots() for lang in s.langs}


def url_of(base: str, shot: Shot, lang: str) -> str:
    query = {"model": MODELS[shot.model], "text": TEXT, **shot.params, "lang": lang}
    return f"{base}/{shot.path}?{urlencode(query)}"


def take(page, base: str, shot: Shot, lang: str, out: Path) -> Path:
    """Open one shot, check it shows no error, and write out/NAME-LANG.png; raise AssertionError on an error."""
    errors = watch_errors(page)
    page.goto(url_of(base, shot, lang))
    page.locator("[data-testid=stMain]").wait_for(timeout=LOAD_MS)
    wait_idle(page)
    if shot.tab:
        page.get_by_role("tab", name=translate(lang, shot.tab)).first.click(timeout=LOAD_MS)
        wait_idle(page)
    for key in shot.clicks:
        page.get_by_role("button", name=translate(lang, key)).first.click(timeout=LOAD_MS)
        wait_idle(page)
    page.locator(f"{shot.ready}, {ERRORS}").first.wait_for(timeout=LOAD_MS)
    wait_idle(page)
    if shot.scroll_to:  # the section's heading at the top of the window
        page.get_by_text(translate(lang, shot.scroll_to), exact=True).first.evaluate(
            "e => e.scrollIntoView({block: 'start'})"
        )
        wait_idle(page)
    page.wait_for_timeout(800)  # plotly's last frame
    # Visible error boxes only: a lecture page may keep a demonstration's FAIL verdict (an error box by design)
    # inside a closed expander, and one a Shot expects is named in `expect_error`.
    shown = [e.inner_text().strip() for e in page.locator(ERRORS).all() if e.is_visible()]
    if shot.expect_error:
        expected = translate(lang, shot.expect_error)
        shown = [t for t in shown if expected[:40] not in t]
    assert page.locator("[data-testid=stException]").count() == 0, f"{shot.name} ({lang}) shows a traceback"
    assert not shown, f"{shot.name} ({lang}) shows an error: {shown[0][:300]}"
    assert not [e for e in errors if "WebSocket" not in e], f"{shot.name} ({lang}): {errors[:3]}"
    path = out / f"{shot.name}-{lang}.png"
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    shrink(path)
    return path


def run(
    out: Path, shots: list[Shot] | None = None, langs: tuple[str, ...] = LANGS, base: str | None = None
) -> list[Path]:
    """Take every shot in every language with one app server (`base`, else one started here) and one browser;
    return the files written (and record them in docs/img/shots.json when `out` is docs/img)."""
    written, code = {}, commit()  # the code the server is started from
    server = contextlib.nullcontext(base) if base else app_server(timeout=180)
    with server as base, browser() as b:
        for shot in shots or SHOTS:
            for lang in langs:
                size = dict(zip(("width", "height"), shot.viewport, strict=True)) if shot.viewport else VIEWPORT
                page = b.new_page(viewport=size)
                t0 = time.monotonic()
                try:
                    path = take(page, base, shot, lang, out)
                finally:
                    page.close()
                written[path] = shot.page
                record({path: shot.page}, code)  # as it goes: a run cut short keeps what it took
                print(f"{path.name}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    return list(written)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs (default: docs/img)")
    ap.add_argument("--only", nargs="*", help="shot names (default: all)")
    args = ap.parse_args()
    by_name = {s.name: s for s in SHOTS}
    shots = [by_name[n] for n in args.only if n in by_name] if args.only else SHOTS  # in the order asked
    for path in run(args.out, shots):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
