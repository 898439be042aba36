"""`python -m models compare`: run A against run B (another text, model, mask or checkpoint), heads ranked.

    python -m models compare --model smollm2 --against-model random:smollm2 --text "The keys to the cabinet are" --json
    python -m models compare --model smollm2 --text "The keys to the cabinet are" \\
        --against-text "The keys to the cabinet is" --json
    python -m models compare --model minilm --text "The cat sat." --mask bidirectional --against-mask causal

The JSON: {"mode": "maps" | "statistics" | "separate", "a": {"model", "text", "mask"}, "b": {…}, "layers",
"heads_per_layer", "tokens_a", "tokens_b", "columns", "rows", "differs": [{"position", "a", "b"}], "heads":
[{"layer", "head", "distance", "js", "js_per_row", "max_delta", "moved", "a": {statistic: value}, "b": {…},
"label_a", "label_b"}, …], "lens", "definitions"}, every head, the most changed first. "maps": the runs have as many
tokens as each other and the same layers × heads, distance = √(Σ_i JS(A_i, B_i) / n); "statistics": lengths
differ, distance = the largest change of any statistic ("moved" names it); "separate": heads do not correspond,
"heads" is empty and "separate" holds each run's statistics. Definitions: docs/METRICS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..analysis.compare import Comparison, compare
from ..analysis.norms import value_weighted
from ..encoder import Encoder, EncoderOutput
from ..weights import load_encoder
from .check_mask import user_mask
from .common import EXIT_OK, UsageError, add_model_args, integer, require_text_work, token_count, write_file

HELP = "compare two runs (text, model, mask or checkpoint): Δ maps and heads ranked by how much they changed"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    p.add_argument("--against-model", default=None, help="run B's model (default: --model): a spec, folder or random:…")
    p.add_argument("--text", required=True, help="run A's text")
    p.add_argument("--against-text", default=None, help="run B's text (default: --text)")
    p.add_argument(
        "--mask",
        default=None,
        help="run A's mask: bidirectional (default), causal, window:W, prefix:P, …, a predicate over q_idx and "
        "kv_idx, or FILE.py:NAME (a mask_mod, a transformers mask function or a BlockMask)",
    )
    p.add_argument("--against-mask", default=None, help="run B's mask (default: --mask)")
    p.add_argument(
        "--weighted",
        action="store_true",
        help="compare value-weighted maps (‖α·W_O v‖ as each row's shares) instead of raw attention",
    )
    p.add_argument("--top", type=integer(), default=10, help="heads in the table for people (default 10; JSON has all)")
    p.add_argument("--json", action="store_true", help="print the JSON document (otherwise a table for people)")
    p.add_argument("--out", default=None, help="write the JSON to this file instead of stdout")


def _run(enc: Encoder, text: str, mask: Any, weighted: bool) -> tuple[EncoderOutput, Any]:
    out = enc.encode(text, mask=mask, internals=weighted, hidden=False)
    return out, value_weighted(enc, out).shares() if weighted else None


def run(args: argparse.Namespace) -> int:
    if args.against_model is None and args.against_text is None and args.against_mask is None:
        raise UsageError("compare: say what run B changes: --against-model, --against-text and/or --against-mask")
    if args.top < 1:
        raise UsageError("compare: --top must be at least 1")
    enc_a = load_encoder(args.model, device=args.device, dtype=args.dtype)
    same_model = args.against_model is None or args.against_model == args.model
    enc_b = enc_a if same_model else load_encoder(args.against_model, device=args.device, dtype=args.dtype)
    text_b = args.text if args.against_text is None else args.against_text
    mask_b = args.mask if args.against_mask is None else args.against_mask
    for enc, text in ((enc_a, args.text), (enc_b, text_b)):  # both runs' work, before either forward
        require_text_work(enc, token_count(enc, text), "compare")
    a, maps_a = _run(enc_a, args.text, user_mask(args.mask), args.weighted)
    b, maps_b = _run(enc_b, text_b, user_mask(mask_b), args.weighted)
    for label, out in (("A", a), ("B", b)):
        for note in out.notes:
            print(f"warning: run {label}: {note}", file=sys.stderr)
    cmp = compare(a, b, maps_a, maps_b)
    doc = {
        "a": {"model": enc_a.name, "spec": enc_a.spec, "text": args.text, "mask": a.mask},
        "b": {"model": enc_b.name, "spec": enc_b.spec, "text": text_b, "mask": b.mask},
        "lens": "value-weighted" if args.weighted else "raw",
        **cmp.to_json(),
    }
    if args.json or args.out:
        text = json.dumps(doc, allow_nan=False, ensure_ascii=False)
        if args.out:
            write_file(Path(args.out), lambda f: f.write(text.encode("utf-8")))
            print(f"wrote {args.out}: {cmp.mode}, {len(doc['heads'])} heads ranked", file=sys.stderr)
        else:
            print(text)
    else:
        print(_table(cmp, doc, args.top))
    return EXIT_OK


def _table(cmp: Comparison, doc: dict[str, Any], top: int) -> str:
    """Return the most changed heads as a plain-text table, for people at a terminal."""
    a, b = doc["a"], doc["b"]
    lines = [
        f"A: {a['model']} · {a['mask']} · {a['text']!r} ({len(cmp.tokens_a)} tokens)",
        f"B: {b['model']} · {b['mask']} · {b['text']!r} ({len(cmp.tokens_b)} tokens)",
    ]
    if cmp.mode == "separate":
        lines.append("the two models have different layers × heads (or causality): their heads do not correspond;")
        lines.append("use --json for each run's statistics")
        return "\n".join(lines)
    if cmp.mode == "maps":
        changed = ", ".join(f"{i}: {cmp.tokens_a[i]!r}→{cmp.tokens_b[i]!r}" for i in cmp.differs) or "none"
        lines.append(f"positions line up ({cmp.rows} tokens); tokens that differ: {changed}")
        lines.append("layer head  JS distance   JS nats/row  max |Δ|  label A → B")
        for la, h in cmp.ranked[:top]:
            assert cmp.distance is not None and cmp.js is not None and cmp.max_delta is not None
            lines.append(
                f"{la:5d} {h:4d}  {cmp.distance[la, h]:11.4f}  {cmp.js[la, h] / max(cmp.rows, 1):12.3e}"
                f"  {cmp.max_delta[la, h]:7.3f}  {cmp.labels_a[la, h]} → {cmp.labels_b[la, h]}"
            )
    else:
        lines.append(f"the texts have different lengths ({len(cmp.tokens_a)} and {len(cmp.tokens_b)} tokens):")
        lines.append("heads ranked by the largest change of a statistic")
        lines.append("layer head  change  statistic       A        B  label A → B")
        for la, h in cmp.ranked[:top]:
            assert cmp.distance is not None and cmp.moved is not None
            k = str(cmp.moved[la, h])
            lines.append(
                f"{la:5d} {h:4d}  {cmp.distance[la, h]:6.3f}  {k:<12} {cmp.stats_a[k][la, h]:8.3f} "
                f"{cmp.stats_b[k][la, h]:8.3f}  {cmp.labels_a[la, h]} → {cmp.labels_b[la, h]}"
            )
    lines.append(f"definitions: {doc['definitions']}")
    return "\n".join(lines)
