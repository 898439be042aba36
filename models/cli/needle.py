"""`python -m models needle`: a needle in a haystack of N tokens at each depth, and the heads that retrieve it."""

from __future__ import annotations

import argparse
import json

from ..analysis.needle import NEEDLE, needle_grid
from ..weights import load_model
from .common import EXIT_OK, UsageError, add_model_args

HELP = "needle in a haystack at each context length and depth, and every head's retrieval score (Wu et al. 2024)"


def _numbers(text: str, what: str, kind: type) -> list:
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            if len(part) > 12:
                raise ValueError
            out.append(kind(part))
        except ValueError:
            raise UsageError(f"needle: --{what}: {part[:20]!r} is not a number (give a comma list)") from None
    return out


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    p.set_defaults(model=None)
    p.add_argument("--context", required=True, help="context lengths in tokens, comma-separated (e.g. 1024,4096)")
    p.add_argument("--depths", default="0,0.5,1", help="needle depths from 0 (start) to 1 (end), comma-separated")
    p.add_argument(
        "--json", action="store_true", help='print {"cases": […], "heads": [{layer, head, retrieval_score}]}'
    )


def run(args: argparse.Namespace) -> int:
    if args.model is None:
        raise UsageError("needle: --model is required: a decoder (smollm2, random:llama-tiny)")
    contexts = _numbers(args.context, "context", int)
    depths = _numbers(args.depths, "depths", float)
    dec = load_model(args.model, device=args.device, dtype=args.dtype)
    g = needle_grid(dec, contexts, depths)
    if args.json:
        print(json.dumps(g.to_json()))
        return EXIT_OK
    print(f"needle: {NEEDLE!r}")
    for c in g.cases:
        mark = "found" if c.found else "not found"
        print(f"context {c.context:>6}  depth {c.depth:4.2f}  {mark:<9}  answer {c.answer.strip()[:40]!r}")
    print("top retrieval heads (layer.head score):")
    print("  " + "  ".join(f"{h['layer']}.{h['head']} {h['retrieval_score']:.2f}" for h in g.heads()[:10]))
    return EXIT_OK
