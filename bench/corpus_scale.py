"""Corpus statistics at scale: rows/s of the local engine and of Ray Data with 1 and 2 workers, and the driver's
peak memory, at 2,400 and 24,000 lines of short sentences with minilm.

    python bench/corpus_scale.py            # the recorded run (a quiet machine: load average < 1.5)
    python bench/corpus_scale.py --quick    # 24 and 240 lines, nothing saved: proves the script runs (--smoke too)

Each run is `python -m models stats --file … --no-importance --out …` in a fresh process (Ray's start, the actors'
model loads and the driver's own load included in the wall time), which reports its own peak RSS: for Ray that is
the driver's, the actors being other processes. Targets: at 2,400 lines ray with 2 workers ≤ 2× the local wall time;
at 10× the lines each driver's peak within 1.25× + 100 MB of its peak at 2,400 (the input streams, batches in flight
are bounded). Plan for 1M sentences, on paper: rows/s of one GPU actor (`--workers 1 --device cuda`) × N actors,
plus the start.

How large a corpus Ray needs to win: each engine's wall time at the two sizes gives a straight line, wall(n) =
start + n ÷ rate (start: the process, Ray's start and the model loads; rate: rows/s once running); where Ray's rate
is higher, the lines cross at n* = (start_ray − start_local) ÷ (1/rate_local − 1/rate_ray) lines. The script prints
n* for 1 and 2 workers, or says that Ray's rate does not beat the local engine's on this machine.
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


def line_fit(small: int, big: int, wall_small: float, wall_big: float) -> tuple[float, float | None]:
    """Return (start s, rate rows/s) of the line wall(n) = start + n / rate through the two measured sizes; rate is
    None when the wall time did not grow with the lines (noise, e.g. a busy machine: start and rate cannot be told
    apart)."""
    per_row = (wall_big - wall_small) / (big - small)
    if per_row <= 0:
        return wall_small, None
    return wall_small - small * per_row, 1 / per_row


def break_even(local: tuple[float, float | None], ray: tuple[float, float | None]) -> float | None:
    """Return the lines n* from which Ray's wall time is below the local engine's (0: from the start), or None when
    Ray's rate is not above the local engine's (its fixed start is then never paid back). Both rates must be known."""
    (a_local, r_local), (a_ray, r_ray) = local, ray
    assert r_local is not None and r_ray is not None
    gain = 1 / r_local - 1 / r_ray  # seconds saved per row once running
    if gain <= 0:
        return None
    return max(0.0, (a_ray - a_local) / gain)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", "--smoke", action="store_true", help="small corpora (24 and 240 lines), nothing saved")
    p.add_argument("--one", nargs=4, metavar=("ENGINE", "WORKERS", "PATH", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        one(args.one[0], int(args.one[1]), args.one[2], args.one[3])
        return
    sizes = (24, 240) if args.quick else (2400, 24000)
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
    fits = {run: line_fit(small, big, results[(small, *run)]["wall"], results[(big, *run)]["wall"]) for run in RUNS}
    for run in RUNS:
        start, rows_s = fits[run]
        running = (
            "rows/s unknown: its wall time did not grow with the lines" if rows_s is None else f"{rows_s:.1f} rows/s"
        )
        print(f"{run[0]} ×{run[1]}: start {start:.1f} s, then {running} (a line through both sizes)")
    for workers in (1, 2):
        if fits[("local", 1)][1] is None or fits[("ray", workers)][1] is None:
            words = (
                f"cannot tell for ray ×{workers}: a wall time did not grow with the lines (rerun on a quiet machine)"
            )
            print(f"how large a corpus it takes for ray to win: {words}")
            rec.note(f"how large a corpus it takes for ray to win: {words}")
            continue
        n_star = break_even(fits[("local", 1)], fits[("ray", workers)])
        if n_star is None:
            words = f"ray ×{workers} does not win on this machine: its rows/s once running do not beat local's"
        else:
            words = f"ray ×{workers} wins from about {n_star:,.0f} lines (its start paid back by its higher rows/s)"
        print(f"how large a corpus it takes for ray to win: {words}")
        rec.note(f"how large a corpus it takes for ray to win: {words}")
        if n_star is not None:
            rec.headline(f"lines from which ray ×{workers} beats local", n_star, "lines")
    start, fitted = fits[("ray", 1)]  # one actor's rows/s once running, and the start it pays once
    rate = fitted if fitted is not None else small / results[(small, "ray", 1)]["wall"]  # else: start included
    plan = (
        f"plan for 1M sentences: {1_000_000 / max(rate, 1e-9) / 3600:.1f} h at one CPU actor's {rate:.0f} rows/s "
        f"{'once running, plus' if fitted is not None else 'with'} {start:.0f} s of start; N GPU actors: "
        "1M / (rows/s per GPU actor × N) plus the start"
    )
    print(plan)
    rec.note(plan)
    rec.note(f"{os.cpu_count()} cores visible; load average {load_average()} at the end")
    if args.quick:
        print("quick run: nothing saved")
    else:
        rec.save()


if __name__ == "__main__":
    main()
