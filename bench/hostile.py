"""Hostile inputs and a class at once: peak memory and time of each hostile CLI case, the server's peak while 16
sessions paste ~400-word texts at once, and a soak of 200 varied requests against the cache budget.

    python bench/hostile.py                 # all three parts
    python bench/hostile.py --only cli      # cli | load | soak

Targets (issue 13): every hostile CLI case exits 2 with one line, peak < 1.5 GB; 16 long-text sessions finish with
no exception and the server < 4 GB; after the soak the server holds no more than the cache budget over what it held
after the first 20 requests. Only 127.0.0.1 is contacted; the server is started with this venv's python, so the PID
read in /proc is the server's own.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.results import Record, load_average, variant  # noqa: E402
from tests.browser.support import CHROMIUM, CHROMIUM_ARGS, free_port  # noqa: E402
from tests.cli import hostile_cases  # noqa: E402

GB = 1 << 30
WORDS = (
    "the attention of every head looks at tokens across a sentence while students watch the lecture and the "
    "model reads a long paragraph about rivers mountains cities and the people who travel between them in spring"
).split()


def run_cli(rec: Record) -> bool:
    print("hostile CLI cases (each in its own process; peak = the process's max RSS from wait4)")
    table = rec.table(
        "Hostile CLI cases, each in its own process (peak = its max RSS from wait4)",
        ["case", "exit", "peak MB", "s", "message"],
    )
    print(f"{'case':<44} {'exit':>4} {'peak MB':>8} {'s':>6}  message")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for case in hostile_cases.build(Path(tmp)):
            out = open(case.stdout, "w") if case.stdout else subprocess.DEVNULL
            start = time.perf_counter()
            proc = subprocess.Popen(
                hostile_cases.command(case),
                cwd=ROOT,
                env=hostile_cases.environment(case),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
            )
            timer = threading.Timer(case.timeout, proc.kill)
            timer.start()
            err = proc.stderr.read() if proc.stderr else ""
            _, status, usage = os.wait4(proc.pid, 0)
            timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
            seconds = time.perf_counter() - start
            if case.stdout:
                out.close()
            peak = usage.ru_maxrss * 1024
            line = err.strip().splitlines()[-1] if err.strip() else ""
            good = (
                proc.returncode == case.code
                and peak < 1.5 * GB
                and (case.code == 0 or len(err.strip().splitlines()) == 1)
            )
            ok &= good
            table.add(case.name, proc.returncode, peak / 2**20, seconds, line[:90] + ("" if good else "  <-- MISSED"))
            print(
                f"{case.name[:44]:<44} {proc.returncode:>4} {peak / 2**20:>8.0f} {seconds:>6.1f}  {line[:90]}{'' if good else '   <-- MISSED'}"
            )
    print(
        f"every case exit {'as expected' if ok else 'NOT as expected'}, peaks < 1.5 GB: {'met' if ok else 'missed'}\n"
    )
    peak_mb = max(row[2] for row in table.rows)
    rec.headline("hostile CLI cases: highest peak (all exit as expected)" if ok else "hostile CLI cases: highest peak "
                 "(NOT all exit as expected)", peak_mb, "MB", "< 1536 MB, exit 2", ok)  # fmt: skip
    return ok


class Server:
    """`streamlit run app.py` on 127.0.0.1 with this venv's python; its RSS sampled from /proc every 0.2 s."""

    def __init__(self, env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self) -> Server:
        self.log = open(tempfile.mktemp(suffix=".log"), "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
             "--server.address", "127.0.0.1", "--server.port", str(self.port), "--server.fileWatcherType", "none"],
            cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        threading.Thread(target=self._sample, daemon=True).start()
        return self

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.rss())
            except OSError:
                return
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _wait_done(page, timeout_ms: int) -> str:
    """Wait until the page shows the overview or an error; return 'ok', the error's text, or 'exception'."""
    page.locator(".js-plotly-plot image, [data-testid=stAlertContentError], [data-testid=stException]").first.wait_for(
        timeout=timeout_ms
    )
    if page.locator("[data-testid=stException]").count():
        return "exception"
    errors = page.locator("[data-testid=stAlertContentError]").all_inner_texts()
    return "ok" if not errors else errors[0][:120]


def run_load(rec: Record, sessions: int = 16, words: int = 400) -> bool:
    from playwright.sync_api import sync_playwright

    print(f"load: {sessions} sessions paste a different ~{words}-word text at once (bundled model, 127.0.0.1 only)")
    rng = random.Random(0)
    with Server() as server, sync_playwright() as pw:
        idle = server.rss()
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        pages = []
        for _ in range(sessions):
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.goto(server.url)
            page.locator(".js-plotly-plot image").first.wait_for(timeout=300_000)  # the default sentence
            pages.append(page)
        warm = server.rss()
        start = time.perf_counter()
        for page in pages:  # paste into every session, then commit them all at once
            page.get_by_label("Text", exact=True).fill(_text(rng, words))
        for page in pages:
            page.get_by_label("Text", exact=True).press("Control+Enter")
        outcomes = []
        for page in pages:
            page.wait_for_timeout(300)
            try:
                page.wait_for_function(
                    "() => !document.querySelector('[data-testid=stSpinner], [data-testid=stStatusWidget] button')",
                    timeout=600_000,
                )
                outcomes.append(_wait_done(page, 600_000))
            except Exception as err:  # noqa: BLE001 - a timeout is an outcome to report
                outcomes.append(f"timeout: {type(err).__name__}")
        seconds = time.perf_counter() - start
        browser.close()
        peak = server.peak
    good = all(o == "ok" for o in outcomes) and peak < 4 * GB
    print(
        f"server RSS idle {idle / 2**20:.0f} MB, with {sessions} sessions open {warm / 2**20:.0f} MB, peak {peak / 2**20:.0f} MB"
    )
    print(
        f"{sum(o == 'ok' for o in outcomes)}/{sessions} finished with the overview in {seconds:.0f} s; others: {[o for o in outcomes if o != 'ok'][:3]}"
    )
    print(f"target: all finish, server < 4 GB: {'met' if good else 'missed'}\n")
    done = sum(o == "ok" for o in outcomes)
    table = rec.table(
        f"Load: {sessions} sessions paste a different ~{words}-word text at once (bundled model)",
        ["server RSS idle MB", f"with {sessions} open MB", "peak MB", "finished", "seconds"],
    )
    table.add(idle / 2**20, warm / 2**20, peak / 2**20, f"{done}/{sessions}", seconds)
    rec.headline(f"server peak, {sessions} sessions pasting ~{words} words at once", peak / 2**20, "MB",
                 "< 4096 MB, all finish", good)  # fmt: skip
    return good


def run_soak(rec: Record, requests: int = 200) -> bool:
    from playwright.sync_api import sync_playwright

    cache_mb = int(os.environ.get("ATTENTION_LENS_CACHE_MB", "2048"))
    print(f"soak: {requests} varied requests (texts of 5–300 words, views, masks, pages), one session after another")
    rng = random.Random(1)
    views = ["overview", "layer", "head", "aggregate"]
    masks = ["bidirectional", "causal", "window:3", "prefix:4"]
    pages_ = ["", "heads", "inside_head", "troubleshooting"]
    after20 = 0
    outcomes: list[str] = []
    with Server() as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        start = time.perf_counter()
        for i in range(requests):
            q = {"text": _text(rng, rng.randint(5, 300)), "view": rng.choice(views), "mask": rng.choice(masks)}
            path = rng.choice(pages_) if i % 5 == 4 else ""
            page.goto(f"{server.url}/{path}?{urllib.parse.urlencode(q)}")
            try:
                page.wait_for_timeout(200)
                page.wait_for_function("() => !document.querySelector('[data-testid=stSpinner]')", timeout=300_000)
                outcomes.append("exception" if page.locator("[data-testid=stException]").count() else "ok")
            except Exception as err:  # noqa: BLE001
                outcomes.append(f"timeout: {type(err).__name__}")
            if i == 19:
                after20 = server.rss()
        seconds = time.perf_counter() - start
        after = server.rss()
        browser.close()
        peak = server.peak
    grew = after - after20
    good = grew <= cache_mb << 20 and all(o == "ok" for o in outcomes)
    print(
        f"server RSS after 20: {after20 / 2**20:.0f} MB, after {requests}: {after / 2**20:.0f} MB (grew {grew / 2**20:+.0f} MB), peak {peak / 2**20:.0f} MB, {seconds:.0f} s"
    )
    print(
        f"{sum(o == 'ok' for o in outcomes)}/{requests} without exception; growth within the cache budget ({cache_mb} MB): {'met' if good else 'missed'}\n"
    )
    table = rec.table(
        f"Soak: {requests} varied requests, one session after another (cache budget {cache_mb} MB)",
        ["RSS after 20 MB", f"after {requests} MB", "grew MB", "peak MB", "without exception", "seconds"],
    )
    table.add(after20 / 2**20, after / 2**20, grew / 2**20, peak / 2**20,
              f"{sum(o == 'ok' for o in outcomes)}/{requests}", seconds)  # fmt: skip
    rec.headline(f"server growth over {requests} varied requests", grew / 2**20, "MB", f"≤ {cache_mb} MB", good)
    return good


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["cli", "load", "soak"], default=None)
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs visible; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    ok = True
    rec = Record(variant("hostile", args.only), "Hostile inputs and a class at once: memory, time, the cache budget")
    if args.only in (None, "cli"):
        ok &= run_cli(rec)
    if args.only in (None, "load"):
        ok &= run_load(rec, args.sessions)
    if args.only in (None, "soak"):
        ok &= run_soak(rec, args.requests)
    rec.note(f"{os.cpu_count()} CPUs visible; load average {load_average()} at the end")
    rec.save()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
