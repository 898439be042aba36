"""`python -m models check-attention`: judge your own attention code by what each output depends on.

    python -m models check-attention --target my_attn.py:CausalSelfAttention() --expect causal
    python -m models check-attention --target my_attn.py:layer --expect causal+window:3 --seq 32 --json
    python -m models check-attention --target hf:./gpt2-folder --expect causal+padding --pad 4 --padding-side left

Exit 0 when the dependency pattern is what --expect allows, 1 when it is not (the report says which pairs leak
and the likely cause), 2 on bad input (a missing file or name, user code that raised, a wrong output shape, an
unsupported model) with one line on stderr. Importing the target runs its code: use it on your own code.
"""

from __future__ import annotations

import argparse
import json

from ..masks.expectations import EXPECT_HELP
from ..masks.harness import DEFAULT_BATCH, DEFAULT_D_MODEL, DEFAULT_SEQ, check_attention
from .common import EXIT_FAIL, EXIT_OK, SEED_MAX, integer, seed

HELP = "judge an attention module, function or transformers model by what each output depends on (exit 0/1/2)"


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        required=True,
        help="FILE.py:NAME (an nn.Module instance or a function), FILE.py:NAME() (a class or factory, called "
        "first), or hf:FOLDER_OR_ID (a transformers decoder-only or encoder-only model, fed inputs_embeds). "
        "Importing the file runs its code",
    )
    p.add_argument("--expect", required=True, help=f"what each output may depend on: {EXPECT_HELP}")
    p.add_argument("--seq", type=integer(), default=DEFAULT_SEQ, help=f"positions (default {DEFAULT_SEQ})")
    p.add_argument(
        "--d-model",
        type=integer(),
        default=None,
        help=f"input width for file targets (default {DEFAULT_D_MODEL}; a transformers model brings its own)",
    )
    p.add_argument("--batch", type=integer(), default=DEFAULT_BATCH, help=f"batch items (default {DEFAULT_BATCH})")
    p.add_argument(
        "--pad",
        type=integer(),
        default=None,
        help="padded positions in batch item 0, passed as attention_mask=(batch, seq), 1 = real token "
        "(default: seq // 4 when --expect has padding, else 0)",
    )
    p.add_argument(
        "--padding-side",
        choices=("both", "right", "left"),
        default="both",
        help="where the padding goes (default both: right, then left, the side where a causal target can fail)",
    )
    p.add_argument(
        "--depth",
        type=integer(),
        default=None,
        help="layers the expectation is closed over (a window widens by W per layer; default 1, a transformers "
        "model's own layer count)",
    )
    p.add_argument(
        "--seed", type=seed(SEED_MAX - 1), default=0, help="seed for the weights a factory makes and the inputs"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    report = check_attention(
        args.target,
        args.expect,
        seq=args.seq,
        d_model=args.d_model,
        batch=args.batch,
        pad=args.pad,
        padding_side=args.padding_side,
        depth=args.depth,
        seed=args.seed,
    )
    print(json.dumps(report.to_dict()) if args.json else report.text())
    return EXIT_OK if report.ok else EXIT_FAIL
