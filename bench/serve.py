"""The server's cost of a typed text, against the encode it needs; and sixteen sessions typing at once.

    python bench/serve.py                        # bundled model and BERT-base shape, 128 and 512 tokens, 16 sessions
    python bench/serve.py --models minilm --lengths 128 --sessions 0     # a quick look

Starts `streamlit run app.py` on 127.0.0.1 with this venv's python (so the child's PID is the server's), opens
the Explore page in Debian's headless chromium and types like a person: fills the sidebar's text box with a text
the app has not seen, commits it (Ctrl+Enter) and waits until the page is idle (the new overview is drawn and
Streamlit's "running" indicator is gone, twice 0.3 s apart). Per typed text it reads the server's CPU time from
/proc/<pid>/stat (user + system, every thread) and the wall time from the key press to idle, and counts the
script runs in the server's debug log (ATTENTION_LENS_DEBUG=1). The encode's CPU is measured in this process
on the same texts with the same model (`Encoder.encode(text, hidden=False)`, what the page asks for), after the
server has stopped.

Prints, per model and length: median server CPU per typed text, the encode's CPU, their ratio (target ≤ 3 at
128 tokens), typed → idle wall time, script runs per typed text, and the script thread's own CPU (the app's code: the
encode's main thread, figures, widgets; from the debug log), so that the rest — OpenMP's helper threads, the
event loop serialising and sending, Streamlit's work after the run — is the difference. Then the wall time from sixteen sessions
(separate browser contexts) each typing a different 128-token text at once until the last is idle. Models:
`minilm` (bundled, 6 layers) and `bert-base` (a random BertConfig() folder with the bundled uncased vocabulary,
the shape of bert-base-uncased). Everything stays on 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import ui  # noqa: E402,F401  # before torch: the encode measured here runs with the server's OpenMP settings
from bench.results import Record, load_average  # noqa: E402  # at once: it takes --allow-load off argv, notes the load

WORDS = (
    "the model looks at every token and weighs how much each other token matters here while a lecturer "
    "explains why heads attend to commas periods names verbs and the sentence start in many different ways"
).split()
TICK = os.sysconf("SC_CLK_TCK")
# Idle: the overview image of the new text is drawn and Streamlit's running indicator is gone.
RUNNING_JS = "() => !!document.querySelector('[data-testid=stStatusWidget] [data-testid=stStatusWidgetRunningIcon]')"
IMAGE_JS = "() => { const i = document.querySelector('.js-plotly-plot image'); return i ? i.getAttribute('href') : '' }"


def cpu_seconds(pid: int) -> float:
    """Return the process's user + system CPU seconds so far (every thread), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15 of stat)


def thread_cpu(pid: int) -> dict[int, float]:
    """Return each living thread's user + system CPU seconds so far, by thread id (/proc/<pid>/task/<tid>/stat)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def texts_of(tokenizer, n_tokens: int, count: int, seed: int) -> list[str]:
    """Return `count` different texts that each tokenize to about n_tokens ([CLS] and [SEP] included)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(n_tokens * 2)]
        ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"][: n_tokens - 2]
        out.append(tokenizer.decode(ids))
    return out


def wait_idle(page, old_image: str, timeout_s: float) -> float:
    """Wait until the page shows a new overview and Streamlit has stopped running; return when it first was."""
    deadline = time.perf_counter() + timeout_s
    first_idle = None
    while time.perf_counter() < deadline:
        idle = page.evaluate(IMAGE_JS) not in ("", old_image) and not page.evaluate(RUNNING_JS)
        now = time.perf_counter()
        if idle:
            first_idle = first_idle or now
            if now - first_idle >= 0.3:  # still idle 0.3 s later: no rerun followed
                return first_idle
        else:
            first_idle = None
        time.sleep(0.02)
    raise TimeoutError(f"the page did not become idle within {timeout_s} s")


def type_text(page, text: str) -> tuple[str, float]:
    """Type a text into the sidebar like a person (fill, then Ctrl+Enter to commit it).

    Return the overview image before it and the moment (perf_counter) of the key press: typed → idle counts from
    the press, as the person's wait starts there (filling the box is their typing, not the app's work; the
    browser never sends a text before it is committed).
    """
    old = page.evaluate(IMAGE_JS)
    box = page.get_by_label("Text", exact=True)
    box.fill(text)
    pressed = time.perf_counter()
    box.press("Control+Enter")
    return old, pressed


def script_runs(log: Path) -> int:
    return log.read_text(errors="replace").count("script run") if log.is_file() else 0


def script_cpu(log: Path) -> float:
    """Return the script threads' CPU seconds logged so far (ui.debug.script_done: the app's own code per run)."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    return sum(float(m) for m in re.findall(r"script done: ([0-9.]+) ms CPU", text)) / 1e3


@dataclass
class Typed:
    cpu: list[float] = field(default_factory=list)  # server CPU s per typed text
    wall: list[float] = field(default_factory=list)  # typed → idle s
    runs: list[int] = field(default_factory=list)  # script runs per typed text
    script: list[float] = field(default_factory=list)  # of the server CPU: the script thread's (the app's code)
    # The server CPU split by thread (from /proc, nothing sampled): the event loop (the main thread: Streamlit
    # sending the run's messages), the threads still alive after the text (the model's batching worker, which runs
    # the encode, its OpenMP helpers, Streamlit's pools) and the threads that ended meanwhile (each script run is
    # a thread of its own). Per thread the kernel counts whole clock ticks (10 ms): read medians over texts.
    loop: list[float] = field(default_factory=list)
    living: list[float] = field(default_factory=list)
    ended: list[float] = field(default_factory=list)


def drive(browser, url: str, pid: int, log: Path, spec: str, texts: list[str], timeout_s: float) -> Typed:
    """Open the app on `spec`, warm it on one text, then type each text and measure the server's cost."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{url}/?model={quote(spec)}")
    wait_idle(page, "", timeout_s)
    out = Typed()
    for text in texts:
        runs0, cpu0, script0, threads0 = script_runs(log), cpu_seconds(pid), script_cpu(log), thread_cpu(pid)
        old, pressed = type_text(page, text)
        idle_at = wait_idle(page, old, timeout_s)
        threads1, cpu1 = thread_cpu(pid), cpu_seconds(pid)
        out.wall.append(idle_at - pressed)
        out.cpu.append(cpu1 - cpu0)
        out.loop.append(threads1.get(pid, 0.0) - threads0.get(pid, 0.0))
        out.living.append(sum(c - threads0.get(t, 0.0) for t, c in threads1.items() if t != pid))
        out.ended.append(max(0.0, out.cpu[-1] - out.loop[-1] - out.living[-1]))
        out.runs.append(script_runs(log) - runs0)
        out.script.append(script_cpu(log) - script0)
    page.close()
    return out


def sessions_at_once(browser, url: str, spec: str, texts: list[str], timeout_s: float) -> float:
    """Return seconds from the first of len(texts) sessions typing (all at once) until the last is idle."""
    pages = []
    for _ in texts:
        ctx = browser.new_context(viewport={"width": 1200, "height": 800})
        page = ctx.new_page()
        page.goto(f"{url}/?model={quote(spec)}")
        pages.append(page)
    for page in pages:
        wait_idle(page, "", timeout_s)
    typed = [type_text(page, text) for page, text in zip(pages, texts, strict=True)]
    t0 = typed[0][1]  # the first key press
    for page, (old, _pressed) in zip(pages, typed, strict=True):
        wait_idle(page, old, timeout_s)
    wall = time.perf_counter() - t0
    for page in pages:
        page.context.close()
    return wall


def encode_cpu(spec: str, texts: list[str]) -> list[float]:
    """Return the CPU seconds (this process, every thread) of Encoder.encode on each text, after a warm-up."""
    from models import load_encoder

    enc = load_encoder(spec, device="cpu")
    for _ in range(3):
        enc.encode(texts[0][: len(texts[0]) // 2], hidden=False)
    out = []
    for text in texts:
        runs = []
        for _ in range(3):  # the median of three: one run disturbed by the machine does not decide
            c0 = time.process_time()
            enc.encode(text, hidden=False)  # what the app's pages ask for (ui.cache.encode)
            runs.append(time.process_time() - c0)
        out.append(statistics.median(runs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="minilm,bert-base")
    ap.add_argument("--lengths", default="128,512")
    ap.add_argument("--texts", type=int, default=5, help="typed texts per model and length (median reported)")
    ap.add_argument("--sessions", type=int, default=16, help="sessions typing at once (0: skip), at most 32")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for any one page to be idle")
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads of the server and of the encode measured here (0: torch's default). On a busy machine "
        "use 1: threads spinning at a barrier count as CPU time and inflate the encode, flattering the ratio",
    )
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    from bench.encoder import bert_base_folder
    from lens_testing.browser import ARTIFACTS, app_process, browser
    from models import bundled_model_dir
    from models.loading import load_tokenizer

    lengths = [int(x) for x in args.lengths.split(",")]
    sessions = max(0, min(args.sessions, 32))
    threads = f"{args.threads} torch thread(s)" if args.threads else "torch's default threads"
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; {threads}")
    with tempfile.TemporaryDirectory() as tmp:
        specs = {
            m: str(bert_base_folder(Path(tmp) / "bert-base")) if m == "bert-base" else m for m in args.models.split(",")
        }
        tokenizer = load_tokenizer(bundled_model_dir())
        plan = {(m, n): texts_of(tokenizer, n, args.texts, seed=n) for m in specs for n in lengths}
        crowd = texts_of(tokenizer, 128, sessions, seed=1000)
        typed: dict[tuple[str, int], Typed] = {}
        crowd_s = None
        log = ARTIFACTS / "serve-debug.log"
        env = {"ATTENTION_LENS_DEBUG": "1", "ATTENTION_LENS_DEBUG_FILE": str(log)}
        if args.threads:
            env["OMP_NUM_THREADS"] = str(args.threads)
        with app_process(timeout=120, extra_env=env) as (url, proc), browser() as b:
            for (m, n), texts in plan.items():
                typed[(m, n)] = drive(b, url, proc.pid, log, specs[m], texts, args.timeout)
            if sessions:
                crowd_s = sessions_at_once(b, url, specs[next(iter(specs))], crowd, args.timeout)
        time.sleep(2.0)  # the browser and the server exit: their last CPU is not the encode's machine
        encode = {(m, n): encode_cpu(specs[m], texts) for (m, n), texts in plan.items()}

    print(
        f"{'model':>9} {'tokens':>6} {'server CPU ms':>13} {'encode CPU ms':>13} {'ratio':>6} "
        f"{'typed→idle s':>12} {'runs':>5} {'script thread ms':>16}"
    )
    rec = Record("serve", "The server's cost of a typed text, against the encode the page asks for")
    table = rec.table(
        f"Typed texts in Explore (median of {args.texts}; {threads})",
        ["model", "tokens", "server CPU ms", "encode CPU ms", "ratio", "typed→idle s", "runs", "script thread ms"],
    )
    for (m, n), t in typed.items():
        server, enc = statistics.median(t.cpu) * 1e3, statistics.median(encode[(m, n)]) * 1e3
        table.add(m, n, server, enc, server / enc, statistics.median(t.wall), statistics.median(t.runs),
                  statistics.median(t.script) * 1e3)  # fmt: skip
        if n == 128:
            rec.headline(f"server CPU per typed text ÷ its encode, {m}, 128 tokens", server / enc, "×", "≤ 3",
                         server / enc <= 3)  # fmt: skip
        print(
            f"{m:>9} {n:>6} {server:>13.0f} {enc:>13.0f} {server / enc:>6.2f} "
            f"{statistics.median(t.wall):>12.2f} {statistics.median(t.runs):>5.0f} "
            f"{statistics.median(t.script) * 1e3:>16.0f}"
        )
    print("target: server CPU per typed text ≤ 3 × the encode's at 128 tokens")
    if crowd_s is not None:
        print(
            f"{sessions} sessions typing a 128-token text at once ({next(iter(specs))}): all idle after {crowd_s:.1f} s"
        )
        crowd = rec.table("Sessions typing at once", ["sessions", "model", "tokens", "all idle after s"])
        crowd.add(sessions, next(iter(specs)), 128, crowd_s)
        rec.headline(f"{sessions} sessions typing a 128-token text at once: all idle after", crowd_s, "s")
    rec.note(f"{os.cpu_count()} cores; load average {load_average()} at the end")
    rec.save()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
