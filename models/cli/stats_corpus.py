"""`stats --file PATH`: a corpus of any size on this machine (`--engine local`) or on Ray (`--engine ray`).

PATH is a .txt (one sentence a line, A<TAB>B for a pair), a .jsonl ({"text", "text_b"}), a .parquet (columns
text and optional text_b) or a folder of these. Both engines stream the input in batches of input rows, turn
each batch into float64 sums (models.analysis.corpus.chunk_sums) and add them up: the same document either way,
with "input" (rows read, skipped by reason, truncated), "tokens_sample" (the document lists a sample of lines'
tokens, not every line's), "redundancy_sample" (JS, cosine and CKA are summed over about --redundancy-lines lines
picked by a hash of their text: {"lines", "of", "rows", "rule"}) and "engine" ({"name", "workers", "batches"}).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ..analysis.corpus import (
    BATCH_ROWS,
    IMPORTANCE_SENTENCES,
    REDUNDANCY_LINES,
    CorpusSums,
    corpus_importance,
    count_rows,
    first_lines,
    redundancy_cut,
    stream_corpus,
)
from ..encoder import Encoder
from .common import integer

ENGINES = ("local", "ray")
MIN_REDUNDANCY_LINES = 64  # a smaller sample could come out empty (the chance is e^-N)


def add_engine_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("a corpus at scale (with --file)")
    g.add_argument("--engine", choices=ENGINES, default="local", help="local (this process, default) or ray")
    g.add_argument(
        "--workers", type=integer(), default=None, help="with --engine ray: actors, one model each (default 1)"
    )
    g.add_argument(
        "--batch-size", type=integer(), default=None, help=f"input rows per batch of sums (default {BATCH_ROWS})"
    )
    g.add_argument("--ray-address", default=None, help="with --engine ray: join this cluster (default RAY_ADDRESS)")
    g.add_argument(
        "--redundancy-lines",
        type=integer(),
        default=None,
        help=f"redundancy between heads (JS, cosine, CKA) over about N lines of the file, picked by a hash of their "
        f"text (default {REDUNDANCY_LINES}; 0: every line, which costs per head pair and cell; else at least "
        f"{MIN_REDUNDANCY_LINES})",
    )


def check_engine_args(args: argparse.Namespace) -> str | None:
    """Return what is wrong with the engine options, or None."""
    ray_only = args.workers is not None or args.ray_address is not None
    if not args.file and (
        args.engine != "local" or ray_only or args.batch_size is not None or args.redundancy_lines is not None
    ):
        return "stats: --engine, --workers, --batch-size, --ray-address and --redundancy-lines go with --file"
    n = args.redundancy_lines
    if n is not None and n != 0 and not MIN_REDUNDANCY_LINES <= n <= 1_000_000_000:
        return (
            f"stats: --redundancy-lines must be 0 (every line) or from {MIN_REDUNDANCY_LINES} to 1,000,000,000, got {n}"
        )
    if args.engine == "local" and ray_only:
        return "stats: --workers and --ray-address go with --engine ray"
    for name in ("workers", "batch_size"):
        value = getattr(args, name)
        if value is not None and not 1 <= value <= 1_000_000:
            return f"stats: --{name.replace('_', '-')} must be between 1 and 1,000,000, got {value}"
    return None


class Progress:
    """Rows done / rows known and rows per second, on one stderr line rewritten in place, at most twice a second.

    Nothing is written in a run's first second, nor before a sentence was analysed: a quick run, or one refused at
    once, leaves stderr to its one line.
    """

    def __init__(self, known: int | None, show: bool):
        self.known, self.show, self.start = known, show, time.perf_counter()
        self.last = self.start + 0.5  # the first line after one second
        self.shown = False

    def __call__(self, part: CorpusSums, total: CorpusSums, *_: Any) -> None:
        now = time.perf_counter()
        if not self.show or not total.sentences or now - self.last < 0.5:
            return
        self.last, self.shown = now, True
        rate = total.read / max(now - self.start, 1e-9)
        of = f" / {self.known:,}" if self.known else ""
        print(f"\r{total.read:,}{of} rows, {rate:,.0f} rows/s", end="", file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.shown:
            print(file=sys.stderr, flush=True)


def run_corpus(
    args: argparse.Namespace, enc: Encoder, notes: list[str], mask: Any = None
) -> tuple[Any, Any, dict[str, Any]]:
    """Return the corpus's HeadReport, its importance (or None) and the document's additions.

    mask: what --mask names (a name, or a predicate the CLI parsed or imported); every engine's encoder applies it.
    """
    batch = args.batch_size or BATCH_ROWS
    known = count_rows(args.file)
    limit = REDUNDANCY_LINES if args.redundancy_lines is None else args.redundancy_lines
    cut = redundancy_cut(known, limit)
    progress = Progress(known, show=not args.json or bool(args.out))
    workers = 1
    try:
        if args.engine == "ray":
            from ..analysis.corpus_ray import run_ray

            workers = args.workers or 1
            c = enc.config
            sums = run_ray(
                args.model,
                args.file,
                c.n_layers,
                c.n_heads,
                mask=mask,
                workers=workers,
                batch_rows=batch,
                device=args.device,
                dtype=args.dtype,
                address=args.ray_address,
                context_width=c.n_heads * c.d_k,
                on_batch=progress,
                pair_cut=cut,
            )
        else:
            sums = stream_corpus(enc, args.file, mask=mask, batch_rows=batch, on_batch=progress, pair_cut=cut)
    finally:
        progress.end()
    report = sums.report(enc)
    if sums.truncated:
        notes.append(f"{sums.truncated} line(s) were truncated to the model's {enc.max_tokens} tokens")
    bad = {k: v for k, v in sums.skipped.items() if v}
    if bad:
        notes.append("skipped rows: " + ", ".join(f"{v:,} {k}" for k, v in sorted(bad.items())))
    importance = None
    if not args.no_importance:
        limit = args.importance_sentences or IMPORTANCE_SENTENCES
        importance = corpus_importance(enc, first_lines(args.file, limit), mask=mask, limit=limit)
        if sums.sentences > limit:
            importance.notes[:] = [f"importance over the first {limit} of {sums.sentences} lines"]
        notes += importance.notes
    extra = {
        # What the Corpus page needs to show the file as a corpus analysed there (models.analysis.corpus.report_from_document)
        "cls_entropy": [[round(float(v), 6) for v in row] for row in report.cls_entropy],
        "d_model": enc.config.d_model,
        "input": sums.input_json(),
        "tokens_sample": sums.sample_json(),
        "redundancy_sample": sums.redundancy_sample_json(limit),
        "engine": {"name": args.engine, "workers": workers, "batches": sums.batches},
    }
    return report, importance, extra
