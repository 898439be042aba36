"""Long contexts with the bundled SmolLM2-135M: memory of `export` and `stats`, and our forward against SDPA.

    python bench/long_context.py                       # 1,024 / 2,048 / 4,096 / 8,192 tokens on the CPU
    python bench/long_context.py --lengths 4096 --skip-stats
    python bench/long_context.py --device cuda --lengths 8192,16384   # where a GPU is lent (positions permitting)

For each length, in one run:
- peak resident memory of `python -m models export --layers 29 --heads 0 --text-file …` and of
  `python -m models stats --text-file … --json`, each a fresh process: its own high-water mark (VmHWM), which
  it reads from /proc as it exits (ru_maxrss would carry this bench's own peak over into the child);
- the time of our forward that keeps everything any map needs later (models.maps: rows in blocks, queries, keys
  and log-sum-exps kept) ÷ transformers' plain forward with SDPA attention and no attentions returned, same
  weights, same ids, alternating in one process;
- the dense maps that forward avoided holding: layers · heads · seq² · 4 bytes (the formula), beside what it kept;
- the app (where Debian's chromium is installed; `--skip-app` leaves it out): `streamlit run app.py` on 127.0.0.1,
  SmolLM2 picked, a text of 4,096 tokens uploaded as a .txt file into the sidebar; the seconds from the upload
  until the new overview is painted in headless Chromium, and the server's peak resident memory (VmHWM of the
  server's own process, read from /proc) once it is.
Targets (CPU): export ≤ 2 GB at 4,096 and ≤ 3 GB at 8,192; stats ≤ 3 GB at 4,096; forward ≤ 1.5× SDPA at 4,096;
the app's overview ≤ 30 s after the upload on two cores, with the server ≤ 4 GB.
Writes bench/results/long_context.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.results import Record, load_average
from bench.timing import alternate
from models import load_model
from models.network import ForwardOptions
from models.weights import bundled_decoder_dir

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"export": {4096: 2.0, 8192: 3.0}, "stats": {4096: 3.0}, "forward": {4096: 1.5}}  # GB, GB, ratio
APP_TOKENS, APP_SECONDS, APP_GB = 4096, 30.0, 4.0
PARAGRAPH = (
    "Attention lets every token look at every other token. In a decoder each token sees only the tokens before "
    "it, and the first token often collects the attention nobody else needs. Heads that copy what came after an "
    "earlier occurrence of the current token are called induction heads; they appear in long texts. "
)


def text_file(tokenizer, n_tokens: int, folder: Path) -> Path:
    """Write a text of exactly n_tokens tokens and return its path."""
    ids = tokenizer(PARAGRAPH * (n_tokens // 40 + 2), add_special_tokens=False)["input_ids"][:n_tokens]
    path = folder / f"text-{n_tokens}.txt"
    path.write_text(tokenizer.decode(ids), encoding="utf-8")
    return path


# Runs `python -m models ARGS…` in this interpreter's child and, as it exits, writes the child's own peak resident
# memory (VmHWM of its address space) to the file named by BENCH_HWM_FILE. Not ru_maxrss: Linux carries the
# parent's peak over a fork and exec into the child's ru_maxrss, so it would report this bench's own memory.
_CHILD = (
    "import atexit, os, runpy, sys\n"
    "def _hwm():\n"
    "    kb = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
    "    open(os.environ['BENCH_HWM_FILE'], 'w').write(kb)\n"
    "atexit.register(_hwm)\n"
    "sys.argv = ['models', *sys.argv[1:]]\n"
    "runpy.run_module('models', run_name='__main__', alter_sys=True)\n"
)


def peak_of(argv: list[str]) -> tuple[float, float, int]:
    """Return (peak resident GB, seconds, exit code) of a fresh `python -m models …` process: its own high-water
    mark (VmHWM, read by the child itself as it exits)."""
    with tempfile.NamedTemporaryFile(suffix=".hwm") as hwm:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, *argv],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # The whole length is what is measured: the work budget (ATTENTION_LENS_TEXT_WORK, which would cut a long
            # text for a one-minute command) is raised to what 8,192 tokens of stats need.
            env={**os.environ, "BENCH_HWM_FILE": hwm.name, "ATTENTION_LENS_TEXT_WORK": "20000"},
        )
        seconds = time.perf_counter() - t0
        kb = Path(hwm.name).read_text().strip()
    if proc.returncode:
        print(
            f"  {' '.join(argv[:3])} …: exit {proc.returncode}: {proc.stderr.decode('utf-8', 'replace').strip()[-300:]}"
        )
    return int(kb) / 2**20 if kb else float("nan"), seconds, proc.returncode


def _server_gb(pid: int, field: str) -> float:
    """VmHWM (peak) or VmRSS (now) of a process, in GB, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 2**20  # kB
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def app_overview(path: Path) -> dict[str, float]:
    """Upload the text file on Explore with SmolLM2 picked; time until the new overview image is on the page."""
    from lens_testing.browser import app_process, browser

    with app_process(timeout=300) as (base, proc), browser() as b:
        page = b.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/?model=smollm2&lang=en")
        first = page.locator("[data-testid=stMain] .js-plotly-plot image").first
        first.wait_for(timeout=600_000)  # the default sentence's overview: model loaded, page idle
        page.wait_for_timeout(1500)
        before_gb = _server_gb(proc.pid, "VmRSS")
        old = first.get_attribute("href")
        t0 = time.perf_counter()
        page.locator("[data-testid=stSidebar] input[type=file]").set_input_files(str(path))
        page.wait_for_function(
            "(old) => { const i = document.querySelector('[data-testid=stMain] .js-plotly-plot image');"
            " return i && i.getAttribute('href') !== old }",
            arg=old,
            timeout=600_000,
        )
        seconds = time.perf_counter() - t0
        peak_gb = _server_gb(proc.pid, "VmHWM")
        page.close()
    return {"seconds": seconds, "server_peak_gb": peak_gb, "server_before_gb": before_gb}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="1024,2048,4096,8192")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-stats", action="store_true", help="leave out the stats process (the slowest part)")
    ap.add_argument("--skip-app", action="store_true", help="leave out the app in headless Chromium")
    args = ap.parse_args()

    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    ours = load_model("smollm2", device=args.device)
    theirs = LlamaForCausalLM.from_pretrained(str(bundled_decoder_dir()), attn_implementation="sdpa")
    theirs = theirs.to(ours.device).eval()
    c = ours.config
    print(
        f"SmolLM2-135M: {c.n_layers} layers × {c.n_heads} heads ({c.n_kv_heads} key/value), device {ours.device}, "
        f"threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'tokens':>6} {'export GB':>9} {'stats GB':>8} {'ours ms':>9} {'SDPA ms':>9} {'ratio':>6} "
        f"{'kept MB':>8} {'dense GB avoided':>16}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.lengths.split(",")]:
            path = text_file(ours.tokenizer, n, Path(tmp))
            ids = torch.tensor(
                [ours.tokenizer(path.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"]]
            )
            ids = ids[:, :n].to(ours.device)
            export_gb, export_s, export_rc = peak_of(
                ["export", "--model", "smollm2", "--text-file", str(path), "--layers", str(c.n_layers - 1),
                 "--heads", "0", "--out", str(Path(tmp) / "one-head.npz"), "--device", args.device]
            )  # fmt: skip
            stats_gb = stats_s = None
            if not args.skip_stats:
                stats_gb, stats_s, _ = peak_of(
                    ["stats", "--model", "smollm2", "--text-file", str(path), "--json", "--no-importance",
                     "--out", str(Path(tmp) / "stats.json"), "--device", args.device]
                )  # fmt: skip

            def run_ours(ids=ids):
                with torch.inference_mode():
                    return ours.model(ids, options=ForwardOptions(on_demand=True, maps_only=True)).attentions

            def run_theirs(ids=ids):
                with torch.inference_mode():
                    return theirs.model(input_ids=ids).last_hidden_state

            maps = run_ours()
            mo, mt = alternate([run_ours, run_theirs], 1, args.repeats, ours.device)
            dense_gb = 4 * c.n_layers * c.n_heads * n * n / 2**30
            row = {
                "tokens": n,
                "export_peak_gb": export_gb,
                "export_seconds": export_s,
                "export_exit": export_rc,
                "stats_peak_gb": stats_gb,
                "stats_seconds": stats_s,
                "ours_ms": mo,
                "sdpa_ms": mt,
                "ratio": mo / mt,
                "kept_mb": maps.nbytes / 2**20,
                "dense_gb_avoided": dense_gb,
            }
            rows.append(row)
            stats_txt = f"{stats_gb:>8.2f}" if stats_gb is not None else f"{'–':>8}"
            print(
                f"{n:>6} {export_gb:>9.2f} {stats_txt} {mo:>9.0f} {mt:>9.0f} {mo / mt:>6.2f} "
                f"{maps.nbytes / 2**20:>8.0f} {dense_gb:>16.1f}"
            )
            del maps
        app = None
        from lens_testing.browser import have_browser

        if not args.skip_app and args.device == "cpu" and have_browser():
            del theirs  # the server is a process of its own: leave it the memory
            app = app_overview(text_file(ours.tokenizer, APP_TOKENS, Path(tmp)))
            print(
                f"app, {APP_TOKENS} tokens uploaded: overview painted after {app['seconds']:.1f} s, server peak "
                f"{app['server_peak_gb']:.2f} GB (with the default sentence before: {app['server_before_gb']:.2f} GB)"
            )
        elif not args.skip_app:
            print("app: left out (needs /usr/bin/chromium and playwright, on the CPU)")
    verdicts = []
    for r in rows:
        n = r["tokens"]
        if n in TARGETS["export"]:
            verdicts.append(f"export at {n}: {r['export_peak_gb']:.2f} GB ≤ {TARGETS['export'][n]} GB: "
                            f"{'met' if r['export_peak_gb'] <= TARGETS['export'][n] else 'NOT met'}")  # fmt: skip
        if n in TARGETS["stats"] and r["stats_peak_gb"] is not None:
            verdicts.append(f"stats at {n}: {r['stats_peak_gb']:.2f} GB ≤ {TARGETS['stats'][n]} GB: "
                            f"{'met' if r['stats_peak_gb'] <= TARGETS['stats'][n] else 'NOT met'}")  # fmt: skip
        if n in TARGETS["forward"]:
            verdicts.append(f"forward at {n}: {r['ratio']:.2f} × SDPA ≤ {TARGETS['forward'][n]}: "
                            f"{'met' if r['ratio'] <= TARGETS['forward'][n] else 'NOT met'}")  # fmt: skip
    if app is not None:
        ok = app["seconds"] <= APP_SECONDS and app["server_peak_gb"] <= APP_GB
        verdicts.append(f"app at {APP_TOKENS}: overview {app['seconds']:.1f} s ≤ {APP_SECONDS:.0f} s, server "
                        f"{app['server_peak_gb']:.2f} GB ≤ {APP_GB:.0f} GB: {'met' if ok else 'NOT met'}")  # fmt: skip
    for v in verdicts:
        print(v)
    rec = Record("long_context", "Long contexts on SmolLM2-135M: memory of export and stats, our forward against SDPA")
    t = rec.table(
        "SmolLM2-135M on the CPU",
        ["tokens", "export peak GB", "stats peak GB", "ours ms", "SDPA ms", "ratio", "kept MB", "dense GB avoided"],
    )
    for r in rows:
        n = r["tokens"]
        t.add(n, r["export_peak_gb"], r["stats_peak_gb"], r["ours_ms"], r["sdpa_ms"], r["ratio"], r["kept_mb"],
              r["dense_gb_avoided"])  # fmt: skip
        if n in TARGETS["export"]:
            rec.headline(f"export of one head, peak memory, {n} tokens, SmolLM2", r["export_peak_gb"], "GB",
                         f"≤ {TARGETS['export'][n]}", r["export_peak_gb"] <= TARGETS["export"][n])  # fmt: skip
        if n in TARGETS["stats"] and r["stats_peak_gb"] is not None:
            rec.headline(f"stats, peak memory, {n} tokens, SmolLM2", r["stats_peak_gb"], "GB",
                         f"≤ {TARGETS['stats'][n]}", r["stats_peak_gb"] <= TARGETS["stats"][n])  # fmt: skip
        if n in TARGETS["forward"]:
            rec.headline(f"forward keeping every map's inputs ÷ SDPA, {n} tokens, SmolLM2", r["ratio"], "×",
                         f"≤ {TARGETS['forward'][n]}", r["ratio"] <= TARGETS["forward"][n])  # fmt: skip
    if app is not None:
        a = rec.table("The app, a 4,096-token text uploaded on Explore (SmolLM2, headless Chromium)",
                      ["tokens", "seconds to the overview", "server peak GB", "server GB before"])  # fmt: skip
        a.add(APP_TOKENS, app["seconds"], app["server_peak_gb"], app["server_before_gb"])
        rec.headline(f"app: overview painted after uploading {APP_TOKENS} tokens, SmolLM2, two cores",
                     app["seconds"], "s", f"≤ {APP_SECONDS:.0f}", app["seconds"] <= APP_SECONDS)  # fmt: skip
        rec.headline(f"app: server peak memory with {APP_TOKENS} tokens, SmolLM2", app["server_peak_gb"], "GB",
                     f"≤ {APP_GB:.0f}", app["server_peak_gb"] <= APP_GB)  # fmt: skip
    xs = [r["tokens"] for r in rows]
    rec.series("Time against tokens", "tokens", "ms", xs, {"ours": [r["ours_ms"] for r in rows],
               "SDPA": [r["sdpa_ms"] for r in rows]})  # fmt: skip
    rec.series("Peak memory against tokens", "tokens", "GB", xs, {
        "export one head": [r["export_peak_gb"] for r in rows],
        "stats": [r["stats_peak_gb"] for r in rows],
        "dense maps (formula)": [r["dense_gb_avoided"] for r in rows],
    })  # fmt: skip
    rec.note(f"load average {load_average()} at the end of the run")
    rec.save()


if __name__ == "__main__":
    main()
