"""`python -m models ablate`: remove heads (or whole key/value groups) and measure what the prediction loses.

    python -m models ablate --model smollm2 --text "The capital of France is" --heads 3.7,12.0 --json
    python -m models ablate --model smollm2 --text "The capital of France is" --kv-groups 12.1 \\
        --texts-file prompts.txt --json

The JSON: {"model", "heads" (the query heads removed, "L.H"), "tokens", "kl" (KL(original ‖ ablated) of the
next-token distribution at the last position, nats), "logit_diff" (the change of the original top token's logit),
"top_token", "per_position_kl"}; with --texts-file (one prompt a line) also "mean_kl", "ci95" (95 % percentile
bootstrap over the prompts, 1,000 resamples, seeded) and "per_text_kl". Definitions: docs/METRICS.md ("What if").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..analysis.ablate import BOOTSTRAP, ablate, ablate_over, heads_of
from ..files import read_user_file
from ..weights import load_model
from .common import EXIT_OK, UsageError, add_model_args, require_text_work, token_count, write_file

HELP = "remove heads or key/value groups and measure the next-token KL (over prompts: the mean and its 95-percent interval)"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    p.set_defaults(model=None)
    p.add_argument("--text", default=None, help="the prompt (its last position's next-token distribution)")
    p.add_argument("--heads", default=None, help="query heads to remove, L.H[,L.H…] (0-based), e.g. 3.7,12.0")
    p.add_argument(
        "--kv-groups", default=None, help="key/value heads to remove with every query head reading them, L.G[,…]"
    )
    p.add_argument(
        "--texts-file", default=None, help="a UTF-8 file, one prompt a line: adds mean_kl and its 95 % interval"
    )
    p.add_argument("--json", action="store_true", help="print the JSON document (otherwise a summary for people)")
    p.add_argument("--out", default=None, help="write the JSON to this file instead of stdout")


def pairs(spec: str | None, flag: str) -> list[tuple[int, int]]:
    """Return [(layer, index)] from "3.7,12.0"; UsageError names the part that is not L.N."""
    if spec is None:
        return []
    out = []
    for part in spec.split(","):
        a, dot, b = part.strip().partition(".")
        if not dot or not (a.isascii() and a.isdigit() and b.isascii() and b.isdigit()) or len(a + b) > 12:
            raise UsageError(f"{flag}: {part.strip()[:20]!r} is not LAYER.INDEX, e.g. 3.7")
        out.append((int(a), int(b)))
    return out


def _prompts(path: str) -> list[str]:
    raw = read_user_file(Path(path), "the prompts file")
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise UsageError(f"{path} is not UTF-8 text (byte {err.start}): save it as UTF-8") from None
    prompts = [line.strip() for line in lines if line.strip()]
    if not prompts:
        raise UsageError(f"{path} holds no prompt: write one a line")
    return prompts


def run(args: argparse.Namespace) -> int:
    if args.model is None:
        raise UsageError("ablate: --model is required: a decoder (smollm2, gpt2, a folder, random:llama-tiny)")
    if args.heads is None and args.kv_groups is None:
        raise UsageError("ablate: say what to remove: --heads L.H[,…] and/or --kv-groups L.G[,…]")
    if args.text is None and args.texts_file is None:
        raise UsageError("ablate: give --text, --texts-file or both")
    heads, groups = pairs(args.heads, "--heads"), pairs(args.kv_groups, "--kv-groups")
    prompts = _prompts(args.texts_file) if args.texts_file else []
    enc = load_model(args.model, device=args.device, dtype=args.dtype)
    removed = heads_of(enc, heads, groups)
    # Each text runs twice (whole, then with the heads removed): their work together, before any forward.
    texts = ([args.text] if args.text is not None else []) + prompts
    require_text_work(enc, [token_count(enc, t) for t in texts], "ablate", runs=2)
    a = ablate(enc, args.text if args.text is not None else prompts[0], removed)
    doc: dict[str, Any] = {"model": enc.name, "spec": enc.spec, **a.to_json()}
    if prompts:
        over = ablate_over(enc, prompts, removed)
        doc |= over.to_json() | {"prompts": len(prompts), "resamples": BOOTSTRAP}
    if args.json or args.out:
        text = json.dumps(doc, allow_nan=False, ensure_ascii=False)
        if args.out:
            write_file(Path(args.out), lambda f: f.write(text.encode("utf-8")))
            print(f"wrote {args.out}: KL {a.kl:.4g} nats", file=sys.stderr)
        else:
            print(text)
        return EXIT_OK
    print(f"removed {len(removed)} head(s): {', '.join(doc['heads'])}")
    print(f"KL(original ‖ ablated) at the last position: {a.kl:.4g} nats")
    print(f"logit of the original top token {a.top_token!r}: {a.logit_diff:+.4f}")
    if prompts:
        lo, hi = doc["ci95"]
        print(f"over {len(prompts)} prompts: mean KL {doc['mean_kl']:.4g} nats, 95 % interval {lo:.4g} … {hi:.4g}")
    return EXIT_OK
