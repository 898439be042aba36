"""`python -m models perplexity`: the loss of every next token of a text, read through a full or bounded KV cache."""

from __future__ import annotations

import argparse
import json

from ..analysis.cache import CACHE_HELP, CHUNK, parse_cache, perplexity, text_ids
from ..lecture.memory import fmt_bytes
from ..weights import load_model
from .common import EXIT_OK, UsageError, add_model_args, require_text_work, text_of, whole

HELP = "per-token loss and perplexity of a text read through a full or bounded KV cache (window, sinks + window)"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    p.set_defaults(model=None)
    p.add_argument("--text", default=None, help="the text to read")
    p.add_argument("--text-file", default=None, help="read the text from a UTF-8 file instead (a long text)")
    p.add_argument("--cache", default="full", help=f"which keys the cache keeps: {CACHE_HELP} (default full)")
    p.add_argument(
        "--chunk", type=whole(1, 1 << 20), default=CHUNK, help=f"tokens per pass (default {CHUNK}; same result)"
    )
    p.add_argument("--json", action="store_true", help='print {"tokens", "nll", "perplexity", "cache_bytes_max"}')


def run(args: argparse.Namespace) -> int:
    if args.model is None:
        raise UsageError("perplexity: --model is required: a decoder (smollm2, a folder, random:llama-tiny)")
    spec = parse_cache(args.cache)  # before the model loads: a bad spec costs nothing
    text = text_of(args)
    dec = load_model(args.model, device=args.device, dtype=args.dtype)
    if not (dec.capabilities.causal and dec.capabilities.lm_head):
        raise UsageError(f"perplexity: {args.model} does not predict the next token; use a decoder such as smollm2")
    ids = text_ids(dec, text)
    if len(ids) <= dec.config.max_positions:  # longer: perplexity() refuses it for the positions, in one line
        require_text_work(dec, len(ids), "perplexity")  # refused, not cut: a prefix's perplexity is another number
    p = perplexity(dec, ids, spec, chunk=args.chunk)
    if args.json:
        print(json.dumps(p.to_json()))
    else:
        print(f"cache            {p.spec}")
        print(f"tokens           {p.tokens:,}")
        print(f"mean loss        {p.mean_nll:.4f} nats per token")
        print(f"perplexity       {p.perplexity:.3f}")
        print(f"cache, at most   {fmt_bytes(p.cache_bytes_max)} ({p.cache_bytes_max:,} bytes)")
    return EXIT_OK
