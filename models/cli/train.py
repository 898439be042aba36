"""`python -m models train`: train a small decoder (our own modules, plain torch) and watch its heads form.

Prints one line per record (losses, the best induction head), then a summary: losses, per-head induction scores
on the held-out segment lengths, the step an induction head formed at; `--json` prints that summary as JSON
instead (the per-record lines go to stderr). `--out DIR` writes the checkpoint folder load_model opens.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ..errors import InputError
from ..files import read_user_file
from ..training import TASKS, TrainConfig, save_checkpoint, train
from ..training.arch import trainable
from ..training.recorder import FLAGS, Record
from .common import EXIT_OK, UsageError, integer, number, seed

HELP = "train a small decoder (induction, reverse or text task) and report when its induction head forms"
DEFAULTS = TrainConfig()
SEED_MAX = 2**63 - 1  # what TrainConfig takes
MAX_TEXT_FILE = 10 << 20  # bytes read from --text-file at most (the character budget applies after)


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", choices=list(TASKS), default=DEFAULTS.task, help=f"default {DEFAULTS.task}")
    p.add_argument(
        "--family",
        choices=list(trainable()),
        default=DEFAULTS.family,
        help=f"decoder family (default {DEFAULTS.family})",
    )
    p.add_argument("--layers", type=integer(), default=DEFAULTS.layers, help=f"1–4 (default {DEFAULTS.layers})")
    p.add_argument("--heads", type=integer(), default=DEFAULTS.heads, help=f"1–16 (default {DEFAULTS.heads})")
    p.add_argument("--d-model", type=integer(), default=DEFAULTS.d_model, help=f"default {DEFAULTS.d_model}")
    p.add_argument("--mlp", action="store_true", help="with the MLP (default: attention-only, the MLP zero)")
    p.add_argument("--steps", type=integer(), default=DEFAULTS.steps, help=f"default {DEFAULTS.steps}")
    p.add_argument(
        "--batch", type=integer(), default=DEFAULTS.batch, help=f"sequences per step (default {DEFAULTS.batch})"
    )
    p.add_argument(
        "--lr",
        type=number(0, 1, above=True),
        default=None,
        help="AdamW peak learning rate (default: by head count)",
    )
    p.add_argument(
        "--seed",
        type=seed(SEED_MAX),
        default=DEFAULTS.seed,
        help=f"seed of the weights and every batch, 0 … {SEED_MAX} (default 0)",
    )
    p.add_argument(
        "--every", type=integer(), default=DEFAULTS.every, help=f"record every N steps (default {DEFAULTS.every})"
    )
    p.add_argument(
        "--symbols",
        type=integer(),
        default=DEFAULTS.symbols,
        help=f"induction/reverse: symbols drawn (default {DEFAULTS.symbols})",
    )
    p.add_argument("--text-file", default=None, help="text task: a UTF-8 text file (default: the bundled passage)")
    p.add_argument("--no-scale", action="store_true", help="break it: scores without the 1/√d_k (§7)")
    p.add_argument("--no-causal", action="store_true", help="break it: train without the causal mask (§7)")
    p.add_argument("--device", default=DEFAULTS.device, help="cpu (default), cuda, auto")
    p.add_argument(
        "--threads", type=integer(), default=DEFAULTS.threads, help=f"torch CPU threads (default {DEFAULTS.threads})"
    )
    p.add_argument(
        "--max-seconds",
        type=number(0, 1e9, above=True),
        default=None,
        help="stop after this long (ATTENTION_LENS_MAX_TRAIN_SECONDS)",
    )
    p.add_argument("--out", default=None, help="write the trained model as a checkpoint folder DIR")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (record lines go to stderr)")


def _read_text(path: str) -> str:
    # A regular file only (a FIFO or a device would block or never end), at most MAX_TEXT_FILE bytes.
    raw = read_user_file(path, "the training text", max_bytes=MAX_TEXT_FILE)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"train: {path} is not UTF-8 text ({err.reason} at byte {err.start})") from err


def _line(rec: Record) -> str:
    layer, head, score = rec.best_induction
    parts = [
        f"step {rec.step:6d}",
        f"{rec.seconds:7.1f} s",
        f"loss {rec.train_loss:.3f}",
        f"val {rec.val_loss:.3f}",
    ]
    if math.isfinite(rec.val_determined):
        parts.append(f"copy {rec.val_determined:.3f}")
    if math.isfinite(score):
        parts.append(f"induction L{layer}H{head} {score:.2f}")
    if rec.flags:
        parts.append("flags " + ",".join(rec.flags))
    return "  ".join(parts)


def run(args: argparse.Namespace) -> int:
    if args.task != "text" and args.text_file:
        raise UsageError("train: --text-file is for --task text")
    if not 1 <= args.threads <= 256:
        raise UsageError(f"train: --threads must be 1 to 256, got {args.threads}")
    if args.max_seconds is not None and not (args.max_seconds > 0):
        raise UsageError(f"train: --max-seconds must be > 0, got {args.max_seconds}")
    config = TrainConfig(
        task=args.task,
        family=args.family,
        layers=args.layers,
        heads=args.heads,
        d_model=args.d_model,
        mlp=args.mlp,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        every=args.every,
        scale=not args.no_scale,
        causal=not args.no_causal,
        device=args.device,
        threads=args.threads,
        symbols=args.symbols,
        text=_read_text(args.text_file) if args.text_file else "",
    )
    out = None if args.out is None else Path(args.out)
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"train: --out {out} is a file: give a folder")
    log = sys.stderr if args.json else sys.stdout
    try:
        result = train(
            config, on_record=lambda rec: print(_line(rec), file=log, flush=True), max_seconds=args.max_seconds
        )
    except InputError as err:
        raise UsageError(f"train: {err}") from err
    summary = result.summary()
    if out is not None:
        summary["out"] = str(save_checkpoint(result, out))
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
        return EXIT_OK
    _print_summary(result, summary)
    return EXIT_OK


def verdict_line(v: dict) -> str:
    """Return the run's verdict in one sentence: the head and the copy's loss, and the advice when it fell short."""
    ended = {"plateau": "it stopped when the copy's loss stopped falling", "steps": "it reached its step budget"}.get(
        v["stop"], f"it ended ({v['stop']})"
    )
    copy = f"loss on the copy {v['copy_loss']:.3f} nat (target ≤ {v['copy_target']:g})"
    if v["state"] == "formed":
        return f"induction head formed: {v['head']} scores {v['score']:.2f}, {copy}, first at step {v['formed_step']}; {ended}"
    if v["state"] == "weak_copy":
        return f"an induction head ({v['head']}, {v['score']:.2f}) but the copy is not reliable yet: {copy}; {ended}; advice: {v['advice']}"
    if v["state"] == "no_head":
        return f"no induction head: {ended} on the plateau, {copy}; advice: {v['advice']}"
    return ""


def _print_summary(result, summary: dict) -> None:
    last = result.last
    print()
    stop = {
        "steps": "all steps done",
        "plateau": "the copy's loss stopped falling",
        "stopped": "stopped",
        "budget": "stopped at the time budget",
        "nan": "the loss became NaN",
    }
    print(
        f"{result.steps_done} steps in {result.seconds:.1f} s ({summary['steps_per_second']} steps/s): {stop[result.stop_reason]}"
    )
    if last is None:
        return
    print(f"train loss {last.train_loss:.3f}  validation loss {last.val_loss:.3f} nats per token")
    if math.isfinite(last.val_determined):
        print(
            f"loss on the copy (targets the context decides) {last.val_determined:.3f}; chance ln V = {result.task.chance_loss:.3f}"
        )
    if math.isfinite(last.val_chance):
        print(f"loss on tokens drawn afresh {last.val_chance:.3f} (below ln V only if the model sees the future)")
    if result.copy_only_step is not None:
        print(
            f"from step {result.copy_only_step} the loss counted only the copy (an induction head had formed): the "
            "model then bets on every repeat, so the loss on fresh draws may rise above ln V"
        )
    if last.induction_by:
        lengths = ", ".join(k for k in last.induction_by)
        print(f"induction score per head (smallest over held-out lengths {lengths}):")
        for layer, row in enumerate(last.induction):
            print(f"  layer {layer}: " + "  ".join(f"H{h} {s:.2f}" for h, s in enumerate(row)))
        print(verdict_line(result.verdict()))
    for flag in last.flags:
        print(f"flag {flag}: {FLAGS[flag]}")
    if "out" in summary:
        print(f"wrote {summary['out']} (open it with --model {summary['out']} or on any page)")
