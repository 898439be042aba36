"""Recipe sweeps for the Train page's induction task: candidate recipes over seeds, one process per run (one torch
thread each), each run's checkpoint measured by transformers from position 0 at the held-out lengths. How the
default recipe (docs/training.md, "How the recipe was chosen") was picked; not a timed benchmark, and it writes
no bench/results file.

    python tools/train_sweep.py --grid warmup --seeds 0-3 --procs 16 --out sweep.jsonl
    python tools/train_sweep.py --grid default --seeds 0 --procs 1 --max-steps 30     # does it run

Grids: `warmup` (sweep 1: learning rate, warmup, weight decay, layout, head counts; 3,000 steps, constant rate),
`copy` (sweep 3: the position-0 share with the decay and with d_model 128; 5,000 steps), `copy_only` (sweep 4: the
loss on the copy alone once the head forms, on and off; 2,000 steps), `default` (the default recipe per head
count). Sweeps 1 and 3 predate the switch (they ran with every target counted throughout). Each run writes one JSON line: its history of (step, copy loss, best score), how it
ended, and the copy measured through transformers. (Sweep 1 also tried gradient clipping at 1.0 through a patched
optimiser; it is not a TrainConfig setting and is left out here.)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from models.training import TrainConfig, save_checkpoint, train
from models.training.checkpoint import transformers_copy

NEW = (("lengths", (2, 16)), ("held_out", (6, 10, 14)), ("at_start", 0.0))
OLD = (("lengths", (3, 15)), ("held_out", (5, 8, 11)), ("at_start", 0.0))
CONST = dict(decay=False, plateau_window=0, copy_only_after_head=False)
BEFORE_SWITCH = dict(copy_only_after_head=False, plateau_window=1000)  # sweep 3 ran so (the defaults of then)
GRIDS: dict[str, dict[str, dict]] = {
    "warmup": {
        "old": dict(lr=3e-3, warmup=100, task_extra=OLD, **CONST),
        "lr3_w100": dict(lr=3e-3, warmup=100, task_extra=NEW, **CONST),
        "lr1_w200": dict(lr=1e-3, warmup=200, task_extra=NEW, **CONST),
        "lr3_w500": dict(lr=3e-3, warmup=500, task_extra=NEW, **CONST),
        "lr3_w200_wd": dict(lr=3e-3, warmup=200, weight_decay=0.1, task_extra=NEW, **CONST),
        "lr1_w200_wd": dict(lr=1e-3, warmup=200, weight_decay=0.1, task_extra=NEW, **CONST),
        "periodic": dict(lr=3e-3, warmup=200, task_extra=(*NEW, ("layout", "periodic")), **CONST),
        "h8_lr3": dict(heads=8, lr=3e-3, warmup=200, task_extra=NEW, **CONST),
        "h8_lr1": dict(heads=8, lr=1e-3, warmup=200, task_extra=NEW, **CONST),
        "h1_lr3": dict(heads=1, lr=3e-3, warmup=200, task_extra=NEW, **CONST),
        "h2_lr3": dict(heads=2, lr=3e-3, warmup=200, task_extra=NEW, **CONST),
    },
    "copy": {
        "lr1_const": dict(lr=1e-3, warmup=200, decay=False, **BEFORE_SWITCH),
        "lr3_w500_decay": dict(lr=3e-3, warmup=500, **BEFORE_SWITCH),
        "d128_lr1_const": dict(lr=1e-3, warmup=200, d_model=128, decay=False, **BEFORE_SWITCH),
        "d128_lr1_decay": dict(lr=1e-3, warmup=200, d_model=128, **BEFORE_SWITCH),
    },
    # Sweep 4: the switch to the copy's loss once the head forms, with and without it (2,000 steps).
    "copy_only": {"switch": {}, "no_switch": dict(copy_only_after_head=False)},
    "default": {f"h{h}": dict(heads=h) for h in (1, 2, 4, 8)},
}
MAX_STEPS = {"warmup": 3000, "copy": 5000, "copy_only": 2000, "default": TrainConfig().steps}


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def one(job: tuple[str, dict, int, int]) -> dict:
    name, options, seed, steps = job
    torch.set_num_threads(1)
    config = replace(TrainConfig(**options), seed=seed, steps=steps, every=100)
    history: list[tuple[int, float, float]] = []
    result = train(
        config,
        on_record=lambda r: history.append((r.step, round(r.val_determined, 4), round(r.best_induction[2], 4))),
        max_seconds=1e9,
    )
    task = result.task
    with tempfile.TemporaryDirectory(prefix="sweep-") as folder:
        save_checkpoint(result, folder)
        copy = transformers_copy(folder, tuple(task.held_out), task.n_symbols, bos_id=task.bos_id if task.bos else None)  # type: ignore[attr-defined]
    return {
        "name": name,
        "seed": seed,
        "heads": config.heads,
        "formed_step": result.formed_step,
        "stop": result.stop_reason,
        "steps": result.steps_done,
        "seconds": round(result.seconds, 1),
        "copy": round(copy["copy_loss"], 4),
        "head": copy["head"],
        "score": round(copy["score"], 4),
        "history": history,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="default", choices=list(GRIDS))
    p.add_argument("--seeds", default="0-3")
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=None, help="default: the grid's (3,000 or 5,000)")
    p.add_argument("--out", default=None, help="write one JSON line per run")
    args = p.parse_args()
    steps = args.max_steps or MAX_STEPS[args.grid]
    jobs = [(n, o, s, steps) for s in _seeds(args.seeds) for n, o in GRIDS[args.grid].items()]
    rows = []
    with Pool(max(1, args.procs)) as pool, open(args.out or "/dev/null", "w", encoding="utf-8") as out:
        for row in pool.imap_unordered(one, jobs):
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(
                f"{row['name']:>15} seed {row['seed']}: formed {row['formed_step']}, {row['stop']} at {row['steps']}, "
                f"copy from position 0 {row['copy']:.3f}, {row['head']} {row['score']:.2f}",
                flush=True,
            )
    print()
    for name in GRIDS[args.grid]:
        mine = [r for r in rows if r["name"] == name]
        heads = sum(r["score"] >= 0.5 for r in mine)
        copies = sum(r["score"] >= 0.5 and r["copy"] <= 0.3 for r in mine)
        print(f"{name:>15}: a head ≥ 0.5 in {heads}/{len(mine)}, copies ≤ 0.3 in {copies}/{len(mine)}, copy losses "
              f"{sorted(r['copy'] for r in mine)}")  # fmt: skip


if __name__ == "__main__":
    main()
