"""What the screenshot scripts share (tools/screenshots.py, compare_screenshots.py, lab_screenshots.py): waiting for
Streamlit to settle and shrinking a PNG. Its own module, so that screenshots.made() may list the other scripts'
shots without an import cycle between them."""

from __future__ import annotations

import time
from pathlib import Path

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
