"""What the screenshot scripts share (tools/screenshots.py, compare_screenshots.py, lab_screenshots.py): waiting for
Streamlit to settle and shrinking a PNG. Its own module, so that screenshots.made() may list the other scripts'
shots without an import cycle between them."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "docs" / "img" / "shots.json"

LOAD_MS = 180_000
RUNNING = "[data-testid=stStatusWidget] [data-testid=stStatusWidgetRunningIcon], [data-testid=stSpinner]"


def wait_idle(page, timeout_ms: int = LOAD_MS) -> None:
    """Wait until Streamlit has stopped running and showed no spinner for two checks 0.5 s apart."""
    deadline = time.time() + timeout_ms / 1000
    quiet = 0
    while quiet < 2:
        if time.time() > deadline:
            raise TimeoutError("the page did not stop running")
        page.wait_for_timeout(500)
        quiet = quiet + 1 if page.locator(RUNNING).count() == 0 else 0


def shrink(path: Path) -> None:
    """Rewrite the PNG with an adaptive 256-colour palette: a third of the bytes, the same picture to the eye."""
    from PIL import Image

    with Image.open(path) as img:
        small = img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


APP_CODE = ("app.py", "app_pages", "ui", "viz", "models")  # what a picture shows; not docs/, tools/ or tests/


def commit() -> str:
    """Return the commit the app runs from (short), with "+changes" when its code had uncommitted edits."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *APP_CODE], cwd=ROOT, capture_output=True
        )
    except OSError:
        return "unknown"
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "") if head.returncode == 0 else "unknown"


def record(pictures: dict[Path, str], taken_from: str | None = None, manifest: Path = MANIFEST) -> None:
    """Add written pictures to the manifest: picture file -> the app page (its url_path) it shows, the day and the
    commit it was taken from (`taken_from`: read when the app started; else now). tests/docs/test_screenshots_listed.py holds every page in app.py's navigation to a
    picture listed here, present in docs/img and shown by the docs. Pictures written elsewhere are not recorded."""
    pictures = {p: page for p, page in pictures.items() if p.parent.resolve() == manifest.parent.resolve()}
    if not pictures:
        return
    data = json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else {"pictures": {}}
    taken, code = datetime.now(UTC).strftime("%Y-%m-%d"), taken_from or commit()
    for path, page in pictures.items():
        data["pictures"][path.name] = {"page": page, "taken": taken, "commit": code}
    data["pictures"] = dict(sorted(data["pictures"].items()))
    manifest.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
