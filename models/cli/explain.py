"""`python -m models explain`: why one head's query looks at one key — its score split into exact parts.

    python -m models explain --model smollm2 --text "The animal didn't cross the street because it was tired" \\
        --layer 12 --head 3 --query -1 --key 2 --json

The JSON: {"layer", "head", "query", "key", "query_token", "key_token", "score" (the pre-softmax logit: q·k × the
layer's scale, after rotation, before the mask), "weight" (the attention the cell got), "visible", "scale",
"kv_head", "by_dimension" (d_k terms), "by_frequency" (rotary pairs; null without rotary), "frequencies",
"by_component": {"query_side", "key_side" (the parts' names), "table" (rows: query side, columns: key side),
"query_totals", "key_totals"} (null, with "refused" saying which budget, when the table is too large), "top"
([query part, key part, value], the ten largest |cells|)}. Every decomposition sums to "score". Definitions:
docs/METRICS.md ("Why here").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..analysis.explain import Explanation, explain
from ..weights import load_encoder
from .common import EXIT_OK, add_model_args, add_text_args, fit_text, text_of, whole, write_file

HELP = "split one attention score into exact parts: by dimension, rotary frequency and residual-stream component"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    add_text_args(p, text_file=True)
    p.add_argument("--layer", type=whole(0, 10**6), required=True, help="the layer, from 0")
    p.add_argument("--head", type=whole(0, 10**6), required=True, help="the query head, from 0")
    p.add_argument("--query", type=whole(-(10**6), 10**6), required=True, help="the query token (−1: the last)")
    p.add_argument("--key", type=whole(-(10**6), 10**6), required=True, help="the key token (−1: the last)")
    p.add_argument("--no-components", action="store_true", help="skip the component table (the costly part)")
    p.add_argument("--json", action="store_true", help="print the JSON document (otherwise a summary for people)")
    p.add_argument("--out", default=None, help="write the JSON to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    text = text_of(args)
    enc = load_encoder(args.model, device=args.device, dtype=args.dtype)
    e = explain(
        enc,
        fit_text(enc, text, args.text_b, command="explain"),  # the positions, then ATTENTION_LENS_TEXT_WORK
        args.layer,
        args.head,
        args.query,
        args.key,
        text_b=args.text_b,
        components=not args.no_components,
    )
    if e.refused:
        print(f"notice: no component table: {e.refused}", file=sys.stderr)
    doc = {"model": enc.name, "spec": enc.spec, **e.to_json()}
    if args.json or args.out:
        text = json.dumps(doc, allow_nan=False, ensure_ascii=False)
        if args.out:
            write_file(Path(args.out), lambda f: f.write(text.encode("utf-8")))
            print(f"wrote {args.out}: score {e.score:.4f}", file=sys.stderr)
        else:
            print(text)
    else:
        print(summary(e))
    return EXIT_OK


def summary(e: Explanation) -> str:
    """Return the score and its largest parts as plain text, for people at a terminal."""
    q, k = e.tokens[e.query], e.tokens[e.key]
    lines = [
        f"layer {e.layer} head {e.head} (key/value head {e.kv_head}): query {e.query} {q!r} → key {e.key} {k!r}",
        f"score {e.score:.4f} (q·k × {e.scale:.4g})"
        + (f", weight {e.weight:.4f}" if e.weight is not None else "")
        + ("" if e.visible else " — hidden by the mask"),
    ]
    freq = e.by_frequency
    if freq is not None:
        top = sorted(range(len(freq)), key=lambda i: -abs(freq[i]))[:5]
        parts = ", ".join(f"pair {i}: {freq[i]:+.3f}" for i in top)
        lines.append(f"largest rotary pairs: {parts}")
    if e.refused:
        lines.append(f"no component table: {e.refused}")
    for a, b, v in e.top:
        lines.append(f"  {a:>14} (query side) × {b:<14} (key side) {v:+9.4f}  {100 * e.share(v):6.1f} % of the score")
    return "\n".join(lines)
