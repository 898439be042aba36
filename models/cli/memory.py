"""`python -m models memory`: the score tensor's memory, FlashAttention, one MHA block's parameters, the KV cache."""

from __future__ import annotations

import argparse
import json

from ..lecture.memory import BYTES_PER_ELEMENT, estimate, fmt_bytes
from .common import EXIT_OK, whole

HELP = "estimate the score tensor's memory and one MHA block's parameters"


MAX_SIZE = 1 << 40  # any count past this is a typo, and its figures would not fit a line
_size = whole(1, MAX_SIZE)  # a positive whole number of at most MAX_SIZE (cli.common's one integer parser)


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=_size, default=2, help="batch size (default 2, the tutorial's)")
    p.add_argument("--heads", type=_size, default=12, help="attention heads (default 12)")
    p.add_argument("--seq", type=_size, default=512, help="sequence length in tokens (default 512)")
    p.add_argument("--d-model", type=_size, default=768, help="model width; d_k = d_model / heads (default 768)")
    p.add_argument("--dtype", default="fp32", choices=list(BYTES_PER_ELEMENT), help="element type of the scores")
    p.add_argument("--training", action="store_true", help="score_bytes for training: kept again for backward (× 2)")
    p.add_argument("--layers", type=_size, default=12, help="layers, for the KV cache line (default 12)")
    p.add_argument("--heads-kv", type=_size, default=None, help="K/V heads for GQA (1 = MQA); default: heads")
    p.add_argument("--json", action="store_true", help='print {"score_elements", "score_bytes", "params"} as JSON')


def run(args: argparse.Namespace) -> int:
    e = estimate(args.batch, args.heads, args.seq, args.d_model, args.dtype, args.layers, args.heads_kv)
    sbytes = e.score_bytes_training if args.training else e.score_bytes
    if args.json:
        print(json.dumps({"score_elements": e.score_elements, "score_bytes": sbytes, "params": e.params}))
        return EXIT_OK
    d_k = e.d_model // e.heads
    rows = [
        ("score tensor", f"(batch, heads, q_pos, k_pos) = ({e.batch}, {e.heads}, {e.seq}, {e.seq})"),
        ("score elements", f"{e.score_elements:,}  (batch · heads · seq²)"),
        (
            f"score bytes, {e.dtype}",
            f"{fmt_bytes(e.score_bytes)} forward, {fmt_bytes(e.score_bytes_training)} training",
        ),
        ("FlashAttention", f"{fmt_bytes(e.flash_bytes)}  (no seq² tensor; fp32 log-sum-exp per row)"),
        ("MHA parameters", f"{e.params:,}  (4·d_model² + 4·d_model, d_model {e.d_model}, d_k {d_k})"),
        (f"KV cache, {e.layers} layers", f"{fmt_bytes(e.kv_cache_bytes)}  (2·layers·batch·seq·heads·d_k·bytes)"),
    ]
    if e.heads_kv != e.heads:
        rows.append(
            (f"with {e.heads_kv} K/V heads", f"KV cache {fmt_bytes(e.kv_cache_bytes_gqa)}, params {e.params_gqa:,}")
        )
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return EXIT_OK
