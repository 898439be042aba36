"""Helpers to drive the real app in headless Chromium: start `streamlit run app.py`, open a page, screenshot it.

Used by the browser tests and by bench/render.py. Chromium comes from Debian (/usr/bin/chromium); playwright
only drives it (never `playwright install`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
ARTIFACTS = Path(os.environ.get("ARTIFACTS", ROOT / "artifacts"))


def have_browser() -> bool:
    if not Path(CHROMIUM).is_file():
        return False
    try:
        import playwright.sync_api  # noqa: F401 - imported only to learn whether playwright is installed
    except ImportError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def app_server(timeout: float = 90.0, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the app with this venv's own python on 127.0.0.1; yield its base URL; stop it afterwards."""
    with app_process(timeout, extra_env) as (url, _):
        yield url


@contextlib.contextmanager
def app_process(
    timeout: float = 90.0, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Like app_server, and also yield the server's process (its PID is the server's: bench/serve.py reads /proc)."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    log = open(ARTIFACTS_LOG(), "w")  # closed in finally
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        else:
            raise TimeoutError(f"streamlit did not answer /_stcore/health within {timeout} s")
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def ARTIFACTS_LOG() -> Path:  # upper case: reads like a constant at the call site
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / "streamlit.log"


@contextlib.contextmanager
def browser(width: int = 1400, height: int = 900):
    """Yield a playwright Browser on Debian's chromium, headless, with no network beyond loopback."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def full_screenshot(page, path: Path) -> Path:
    """Screenshot the whole app: Streamlit scrolls inside stMain, so grow the viewport to its height first."""
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=stMain]'); return m ? m.scrollHeight : document.body.scrollHeight }"
    )
    width = page.viewport_size["width"] if page.viewport_size else 1400
    page.set_viewport_size({"width": width, "height": min(max(int(height) + 40, 600), 12000)})
    page.wait_for_timeout(300)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


def watch_errors(page) -> list[str]:
    """Collect the page's script errors, console errors and failed requests, except Streamlit's own probes.

    Opened on a page URL, Streamlit's frontend first looks for its server under that path
    (/inside_head/_stcore/health), gets 404 and falls back to the root: not an error of ours.
    """
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "console",
        lambda m: (
            errors.append(m.text) if m.type == "error" and not m.text.startswith("Failed to load resource") else None
        ),
    )
    page.on(
        "response",
        lambda r: (
            errors.append(f"{r.status} {r.url}")
            if r.status >= 400 and "/_stcore/" not in r.url and "favicon" not in r.url
            else None
        ),
    )
    return errors
