"""The Long-context lab's figures on SmolLM2-135M: the needle grid, the retrieval-head counts, and the loss along a
2,048-token text through a full, a window and a sink + window KV cache, with times and peak memory.

    python bench/long_lab.py                                   # SmolLM2, contexts 1,024 … 8,000, 2,048 tokens
    python bench/long_lab.py --model random:llama-tiny --contexts 64,128 --depths 0,1 --tokens 256 --window 32
                                                               # a smoke run (seconds)

- needle: `models.analysis.needle.needle_grid` over contexts × depths (greedy, our KV cache): found / not per case,
  seconds per case, and the heads whose retrieval score (Wu et al. 2024) is above 0.1 and 0.5, of all heads;
- cost of a bounded cache: `models.analysis.cache.perplexity` of the bundled passage (models/data, repeated until
  it has --tokens tokens: its second half can be copied from the first, which only a cache that still holds the
  first half can do) through full, window:W and sink:S+window:W: perplexity, the cache's most bytes, seconds and
  the process's peak resident memory during the read (Linux; reset before each), and the loss curves (running
  mean over 64 tokens) as a series.
Writes bench/results/long_lab.json. Figures count only from a quiet machine (load average < 1.5).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from bench.results import Record, load_average
from models import load_model
from models.analysis.cache import CacheSpec, perplexity, text_ids
from models.analysis.needle import needle_grid
from models.lecture.memory import _peak_rss_bytes, _reset_peak_rss

CORPUS = Path(__file__).resolve().parents[1] / "models" / "data" / "tokenizer_corpus.txt"
SMOOTH = 64


def _numbers(text: str, kind: type) -> list:
    return [kind(p) for p in text.split(",") if p.strip()]


def _peak() -> int | None:
    return _peak_rss_bytes() if sys.platform.startswith("linux") else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--contexts", default="1024,2048,4096,8000")
    p.add_argument("--depths", default="0,0.25,0.5,0.75,1")
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--sink", type=int, default=4)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    enc = load_model(args.model, device=args.device)
    contexts, depths = _numbers(args.contexts, int), _numbers(args.depths, float)
    rec = Record("long_lab", f"Long-context lab on {args.model}: needles, retrieval heads, a bounded cache's cost")
    rec.note(f"load average at the start: {load_average()}; {args.threads} torch threads; device {args.device}")

    t0 = time.perf_counter()
    grid = needle_grid(enc, contexts, depths)
    needle_s = time.perf_counter() - t0
    t = rec.table("Needle found (1) or not (0), context × depth", ["context", *[f"depth {d:g}" for d in depths]])
    found = grid.found_grid(contexts, depths)
    for i, c in enumerate(contexts):
        t.add(c, *[int(v) for v in found[i]])
    scores = grid.scores()
    heads = rec.table("Retrieval heads (Wu et al. 2024)", ["threshold", "heads", "of", "share %", "top heads"])
    top = ", ".join(f"{h['layer']}.{h['head']} ({h['retrieval_score']:.2f})" for h in grid.heads()[:5])
    for thr in (0.1, 0.5):
        n = int((scores > thr).sum())
        heads.add(f"> {thr}", n, scores.size, round(100 * n / scores.size, 1), top)
    times = rec.table("Needle cases", ["context", "depth", "prompt tokens", "seconds", "answer"])
    for c in grid.cases:
        times.add(c.context, c.depth, c.prompt_tokens, round(c.seconds, 2), c.answer.strip()[:30])
    rec.headline(f"needle grid found, {len(grid.cases)} cases", int(np.nansum(found)), unit="cases")
    rec.note(f"needle grid: {needle_s:.1f} s in all; {grid.counted} answer tokens counted for the scores")

    text = CORPUS.read_text(encoding="utf-8")
    ids = text_ids(enc, text)
    while len(ids) < args.tokens:
        ids = ids + text_ids(enc, text)
    ids = ids[: args.tokens]
    specs = ["full", CacheSpec(window=args.window).name, CacheSpec(window=args.window, sink=args.sink).name]
    cost = rec.table(
        f"A {len(ids):,}-token text through each cache",
        ["cache", "perplexity", "cache bytes, most", "seconds", "peak RSS MB"],
    )
    curves = {}
    for spec in specs:
        _reset_peak_rss()
        res = perplexity(enc, ids, spec)
        peak = _peak()
        cost.add(
            spec,
            round(res.perplexity, 3),
            res.cache_bytes_max,
            round(res.seconds, 2),
            None if peak is None else round(peak / 2**20),
        )
        smooth = np.convolve(res.nll, np.ones(SMOOTH) / SMOOTH, mode="valid")
        step = max(1, len(smooth) // 128)
        curves[spec] = [round(float(v), 4) for v in smooth[::step]]
    x = [SMOOTH + i * step for i in range(len(curves[specs[0]]))]
    rec.series(f"Loss per token (running mean over {SMOOTH})", "token", "nats", x, curves)
    rec.save()


if __name__ == "__main__":
    main()
