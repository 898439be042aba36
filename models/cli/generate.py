"""`python -m models generate`: a decoder adds tokens to a prompt, step by step with our KV cache."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.cache import CACHE_HELP, parse_cache
from ..lecture.generate import generate
from ..weights import load_model
from .common import EXIT_OK, UsageError, add_model_args, whole, write_file

SEED_MAX = 2**64 - 1  # what torch.Generator.manual_seed takes

HELP = "generate tokens after a prompt with a decoder (greedy, or top-k), step by step with our KV cache"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    p.set_defaults(model=None)
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument(
        "--tokens",
        type=whole(-(10**30), 10**30),  # the budget ATTENTION_LENS_MAX_GENERATE names itself in run()
        required=True,
        help="how many tokens to add (budget: ATTENTION_LENS_MAX_GENERATE)",
    )
    p.add_argument(
        "--top-k",
        type=whole(-(10**30), 10**30),
        default=None,
        help="sample from the K most likely tokens (greedy without it)",
    )
    p.add_argument(
        "--seed", type=whole(0, SEED_MAX), default=0, help=f"seed of top-k sampling, 0 … {SEED_MAX} (default 0)"
    )
    p.add_argument(
        "--chat", action="store_true", help="put the prompt in the tokenizer's chat template (instruct models)"
    )
    p.add_argument("--cache", default="full", help=f"which keys the KV cache keeps: {CACHE_HELP} (default full)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print {prompt_tokens, generated_tokens, text, stop} as JSON (and cache, cache_bytes per step when bounded)",
    )
    p.add_argument(
        "--out", default=None, help="write tokens, rows (steps, layers, heads, max_len) and lengths to FILE.npz"
    )


def run(args: argparse.Namespace) -> int:
    if args.model is None:
        raise UsageError(
            "generate: --model is required: a decoder (smollm2, gpt2, distilgpt2, a folder, random:gpt2-tiny)"
        )
    if args.tokens < 1:
        raise UsageError(f"generate: --tokens must be ≥ 1, got {args.tokens}")
    if args.top_k is not None and args.top_k < 1:
        raise UsageError(f"generate: --top-k must be ≥ 1, got {args.top_k}")
    spec = parse_cache(args.cache)
    dec = load_model(args.model, device=args.device, dtype=args.dtype)
    if not dec.capabilities.generation:
        raise UsageError(f"generate: {args.model} cannot generate (an encoder); use a decoder such as smollm2")
    g = generate(
        dec,
        args.prompt,
        args.tokens,
        top_k=args.top_k,
        seed=args.seed,
        check=args.out is not None,
        chat=args.chat,
        cache_spec=spec,
    )
    for note in g.notes:
        print(f"notice: {note}", file=sys.stderr)
    if args.out:
        rows, lengths = g.rows_array()
        arrays: dict[str, Any] = {  # Any: numpy's stub would read a value as savez's allow_pickle flag
            "tokens": np.array(g.tokens, dtype=str),  # raw, prompt then generated; loads with allow_pickle=False
            "rows": rows,  # (steps, layers, heads, max_len) float32, zero-padded
            "lengths": lengths,  # (steps,): step s's row covers keys 0 … lengths[s] − 1
        }
        write_file(Path(args.out), lambda f: np.savez_compressed(f, **arrays))
        print(
            f"wrote {args.out}: {len(g.tokens)} tokens, rows {tuple(rows.shape)}; cached rows equal the full "
            f"forward's to {g.max_row_error:.1e}",
            file=sys.stderr,
        )
    n = len(g.prompt_ids)
    if args.json:
        doc: dict[str, Any] = {
            "prompt_tokens": g.tokens[:n],
            "generated_tokens": g.tokens[n:],
            "text": g.text,
            "stop": g.stop,
        }
        if spec.bounded:  # the cache's bytes after each step: flat once the window is full
            doc |= {"cache": g.cache, "cache_bytes": [s.cache_bytes for s in g.steps]}
        print(json.dumps(doc))
    else:
        print(args.prompt.strip())
        print(g.text)
    return EXIT_OK
