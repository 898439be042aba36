"""Corpus statistics at scale: rows/s of the local engine and of Ray Data with 1 and 2 workers, and the driver's
peak memory, at 2,400 and 24,000 lines of short sentences with minilm.

    python bench/corpus_scale.py            # the recorded run (a quiet machine: load average < 1.5)
    python bench/corpus_scale.py --smoke    # 24 and 48 lines, nothing saved: proves the script runs

Each run is `python -m models stats --file … --no-importance --out …` in a fresh process (Ray's start, the actors'
model loads and the driver's own load included in the wall time), which reports its own peak RSS: for Ray that is
the driver's, the actors being other processes. Targets: at 2,400 lines ray with 2 workers ≤ 2× the local wall time;
at 10× the lines each driver's peak within 1.25× + 100 MB of its peak at 2,400 (the input streams, batches in flight
are bounded). Plan for 1M sentences, on paper: rows/s of one GPU actor (`--workers 1 --device cuda`) × N actors,
plus the start.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.results import Record, load_average  # noqa: E402

RUNS = (("local", 1), ("ray", 1), ("ray", 2))


def write_corpus(path: Path, lines: int) -> None:
    """Short sentences from the example corpus, numbered so that no two lines are the same."""
    base = [ln for ln in (ROOT / "examples" / "corpus_en.txt").read_text(encoding="utf-8").splitlines() if ln.strip()]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(f"{base[i % len(base)]} ({i})\n")


def one(engine: str, workers: int, path: str, out: str) -> None:
    """Child process: run the command in-process, print its wall time and this process's peak RSS as JSON."""
    from models.cli import main

    args = ["stats", "--model", "minilm", "--file", path, "--no-importance", "--out", out, "--engine", engine]
    if engine == "ray":
        args += ["--workers", str(workers)]
    t0 = time.perf_counter()
    rc = main(args)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rc": rc, "wall": wall, "peak_mb": peak_mb}))


def measure(engine: str, workers: int, path: Path, tmp: Path) -> dict:
    env = dict(os.environ, ATTENTION_LENS_MAX_CORPUS_TOKENS="1000000000", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, __file__, "--one", engine, str(workers), str(path), str(tmp / "out.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    last = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not last:
        raise SystemExit(f"{engine} ×{workers} failed:\n{done.stderr[-2000:]}")
    return json.loads(last[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny corpora, nothing saved")
    p.add_argument("--one", nargs=4, metavar=("ENGINE", "WORKERS", "PATH", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        one(args.one[0], int(args.one[1]), args.one[2], args.one[3])
        return
    sizes = (24, 48) if args.smoke else (2400, 24000)
    print(f"load average {load_average()} at the start (a recorded figure needs < 1.5)")
    rec = Record("corpus_scale", "Corpus statistics at scale: local vs Ray Data, rows/s and the driver's peak")
    table = rec.table(
        "minilm, short sentences, --no-importance; wall time includes start and model loads",
        ["lines", "engine", "workers", "wall s", "rows/s", "driver peak MB"],
    )
    results: dict[tuple[int, str, int], dict] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for n in sizes:
            path = tmp / f"corpus{n}.txt"
            write_corpus(path, n)
            for engine, workers in RUNS:
                r = measure(engine, workers, path, tmp)
                results[(n, engine, workers)] = r
                print(
                    f"{n:>7,} lines  {engine:<5} ×{workers}  {r['wall']:8.1f} s  {n / r['wall']:8.1f} rows/s  "
                    f"peak {r['peak_mb']:7.0f} MB",
                    flush=True,
                )
                table.add(n, engine, workers, r["wall"], n / r["wall"], r["peak_mb"])
    small, big = sizes
    ratio = results[(small, "ray", 2)]["wall"] / results[(small, "local", 1)]["wall"]
    rec.headline(f"ray ×2 ÷ local wall time, {small:,} lines", ratio, "×", "≤ 2", ratio <= 2)
    for engine, workers in RUNS:
        a, b = results[(small, engine, workers)]["peak_mb"], results[(big, engine, workers)]["peak_mb"]
        ok = b <= 1.25 * a + 100
        rec.headline(
            f"driver peak at {big:,} lines, {engine} ×{workers} (vs {a:.0f} MB at {small:,})",
            b,
            "MB",
            f"≤ {1.25 * a + 100:.0f}",
            ok,
        )
    rate = {w: small / results[(small, "ray", w)]["wall"] for w in (1, 2)}
    rec.note(
        f"plan for 1M sentences: {1_000_000 / max(rate[1], 1e-9) / 3600:.1f} h at one CPU actor's "
        f"{rate[1]:.0f} rows/s; N GPU actors: 1M / (rows/s per GPU actor × N) plus the start"
    )
    rec.note(f"{os.cpu_count()} cores visible; load average {load_average()} at the end")
    if args.smoke:
        print("smoke run: nothing saved")
    else:
        rec.save()


if __name__ == "__main__":
    main()
