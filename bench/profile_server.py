"""Where the running server spends its CPU when people type: py-spy on the real Streamlit process.

    python bench/profile_server.py                          # bundled model, 128-token texts, Explore
    python bench/profile_server.py --model random:bert-base --tokens 512 --texts 4
    python bench/profile_server.py --raw /tmp/server.txt    # keep py-spy's collapsed stacks (flamegraph.pl input)

Starts the app on 127.0.0.1 with this venv's python (so the PID is the server's), opens it in headless Chromium,
types one text to warm it, then types `--texts` new texts like a person (fill, Ctrl+Enter, wait until idle,
as bench/serve.py does) while `py-spy record` samples every Python thread of the server. Prints the server's CPU
per typed text (from /proc, every thread) and the pieces of the request path: for each, the samples whose stack
passes through it, as milliseconds per typed text and as a share of all samples. Pieces nest (the encode runs
inside the overview's cache miss).

Unlike bench/profile_app.py (cProfile around one script run in AppTest), this sees what only a server does:
Streamlit's work after a run (its full garbage collection, `runner.postScriptGC`), the event loop that
serialises and sends messages, and threads other than the script's. py-spy sees Python threads only: OpenMP's
helper threads (torch's second core) count in the CPU figure but not in the samples.

py-spy samples threads that are running, not sleeping: a busy thread's wall time, which on a loaded machine includes
waiting for a core, so its milliseconds can exceed the CPU figure; read the shares. Streamlit's config-file
pollers (a thread per file, every 0.2 s) show up as a few per cent of samples although the idle server uses ~6 ms
of CPU a second.

Needs py-spy (requirements-dev.txt) and permission to trace the server (root, or ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (label, a piece of the file's path, the function's name): samples whose stack passes through it.
PIECES = [
    ("script runs (ScriptRunner thread, all of it)", "scriptrunner/script_runner.py", "_run_script"),
    ("  the app's script (app.py and the page)", "scriptrunner/exec_code.py", "exec_func_with_error_handling"),
    ("    sidebar (ui.sidebar.render)", "ui/sidebar.py", "render"),
    ("    encode (Encoder.encode_batch)", "models/encoder.py", "encode_batch"),
    ("    overview PNG (render_mosaic)", "viz/overview.py", "render_mosaic"),
    ("      of which PNG encoding (PIL save)", "PIL/Image.py", "save"),
    ("    overview figure built (overview_figure)", "viz/overview.py", "overview_figure"),
    ("    st.plotly_chart (validation, JSON, id)", "streamlit/elements/plotly_chart.py", "plotly_chart"),
    ("      of which figure JSON (plotly to_json)", "plotly/io/_json.py", "to_json"),
    ("    export panel (Explore)", "app_pages/explore.py", "_export"),
    ("    URL sync (ui.state.sync_url)", "ui/state.py", "sync_url"),
    ("  after the run (postScriptGC: gc.collect(2))", "scriptrunner/script_runner.py", "_on_script_finished"),
    ("event loop (messages serialised and sent)", "asyncio/base_events.py", "_run_once"),
]
FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>.+?)(?::\d+)?\)$")


def parse(raw: Path) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    """Return (samples, samples per piece label, samples per thread name) from py-spy's raw (collapsed) output."""
    total = 0
    pieces: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        if frames and frames[0].startswith("thread ("):
            name = frames[0].split(": ", 1)[-1]
            threads[re.sub(r"[-_]\d+$", "", name)] += n
            frames = frames[1:]
        parsed = [m.groupdict() for m in map(FRAME.match, frames) if m]
        for label, path_part, func in PIECES:
            if any(f["func"].split(".")[-1] == func and path_part in f["file"] for f in parsed):
                pieces[label] += n
    return total, pieces, threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--texts", type=int, default=6, help="typed texts while sampling")
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--raw", help="keep py-spy's collapsed stacks in this file")
    args = ap.parse_args()

    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).is_file():
        sys.exit("error: py-spy not found: pip install -r requirements-dev.txt")

    from bench.serve import cpu_seconds, texts_of, type_text, wait_idle
    from lens_testing.browser import app_process, browser
    from models import bundled_model_dir
    from models.loading import load_tokenizer

    texts = texts_of(load_tokenizer(bundled_model_dir()), args.tokens, args.texts + 1, seed=11 * args.tokens)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(args.raw) if args.raw else Path(tmp) / "server.txt"
        with app_process(timeout=120) as (url, proc), browser() as b:
            page = b.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}/?model={quote(args.model)}")
            wait_idle(page, "", args.timeout)
            wait_idle(page, type_text(page, texts[0])[0], args.timeout)  # warm: plotly, caches' code paths
            sampler = subprocess.Popen(
                [spy, "record", "-p", str(proc.pid), "-r", str(args.rate), "-f", "raw", "-o", str(raw)]
                + ["--threads", "--nonblocking"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)  # py-spy attaches
            cpu, wall = [], []
            for text in texts[1:]:
                c0 = cpu_seconds(proc.pid)
                old, pressed = type_text(page, text)
                wall.append(wait_idle(page, old, args.timeout) - pressed)
                cpu.append(cpu_seconds(proc.pid) - c0)
            sampler.send_signal(signal.SIGINT)
            sampler.wait(timeout=60)
        if not raw.is_file():
            sys.exit("error: py-spy wrote nothing (permission to trace the server? run as root or set ptrace_scope 0)")
        total, pieces, threads = parse(raw)

    n = len(texts) - 1
    per_text = 1e3 / args.rate / n  # ms of one thread's CPU per sample, per typed text
    print(
        f"{args.model}, {args.tokens}-token texts, {n} typed: server CPU per typed text {statistics.median(cpu) * 1e3:.0f} ms "
        f"(median, every thread, from /proc); typed → idle {statistics.median(wall):.2f} s; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"py-spy: {total} samples at {args.rate}/s of the server's Python threads ≈ {total * per_text:.0f} ms per text"
    )
    print(f"{'piece (samples through it, nested)':<48} {'ms/text':>8} {'share':>6}")
    from bench.results import Record, load_average, variant

    rec = Record(
        variant("profile_server", None if args.model == "minilm" else args.model, None if args.tokens == 128 else
                f"{args.tokens}tokens"),
        "Where a typed text goes in the running server (py-spy)",
    )  # fmt: skip
    table = rec.table(
        f"{args.model}, {args.tokens}-token texts, {n} typed; server CPU per typed text "
        f"{statistics.median(cpu) * 1e3:.0f} ms (py-spy attached); typed → idle {statistics.median(wall):.2f} s",
        ["piece (samples through it, nested)", "ms/text", "share %"],
    )
    for label, _path, _func in PIECES:
        if pieces[label]:
            print(f"{label:<48} {pieces[label] * per_text:>8.1f} {100 * pieces[label] / max(1, total):>5.0f}%")
            table.add(label, pieces[label] * per_text, 100 * pieces[label] / max(1, total))
    print("threads: " + ", ".join(f"{name} {100 * c / max(1, total):.0f}%" for name, c in threads.most_common(6)))
    rec.note(f"py-spy's sampling slows the server: read the shares; load average {load_average()} at the end")
    rec.save()


if __name__ == "__main__":
    main()
