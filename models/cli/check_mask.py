"""`python -m models check-mask`: is a mask what it claims? Exit 0 when it is, 1 when a check fails, 2 on bad input.

    python -m models check-mask --model minilm --text "The cat sat." \\
        --mask "torch.tril(torch.ones(seq, seq))" --convention keep --expect causal
    python -m models check-mask --text "A long first sentence here." --text "Short." \\
        --mask pad.npy --convention drop --expect padding --json

    python -m models check-mask --model smollm2 --text "One two three four five six." \
        --mask my_masks.py:SW --expect causal+window:3
    python -m models check-mask --model smollm2 --text "One two three four five six." \
        --mask "(kv_idx <= q_idx) & (q_idx - kv_idx < 4)" --expect causal+window:3

A predicate mask — `FILE.py:NAME` naming a FlexAttention-style `mask_mod(b, h, q_idx, kv_idx)`, a transformers
mask function (`SW = sliding_window_causal_mask_function(4)`) or a `BlockMask` (its `mask_mod`), or an expression
over `q_idx`, `kv_idx`, `b` and `h` — needs no `--convention`: True = may attend. Importing FILE.py runs its code
(as `check-attention --target` does): use it on your own files.

`--text` may be given several times: the texts form one batch, padded by the tokenizer to the longest
(right padding, [PAD] keys), which `--expect padding` needs. Expressions see `seq` (the padded length),
`batch` (the number of texts), `heads` and `attention_mask` (the tokenizer's (batch, seq) 0/1 mask).

Also here: `export_mask`, which turns `export --mask FILE|EXPR --convention ...` into the keep tensor the
encoder takes.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from .. import masks, settings
from ..analysis.mask_checker import check_mask
from ..encoder import Encoder
from ..errors import MaskError
from ..masks.expectations import EXPECT_HELP
from ..masks.harness import is_file_object, load_file_object
from ..masks.predicates import Predicate
from ..weights import load_encoder
from .common import EXIT_FAIL, EXIT_OK, add_model_args, require_text_work, token_count

HELP = "check an attention mask against what it should be (exit 0 = it is, 1 = a check fails, 2 = bad input)"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    p.add_argument(
        "--text",
        action="append",
        required=True,
        help="a sentence; repeat it for a padded batch (needed for --expect padding)",
    )
    p.add_argument(
        "--mask",
        required=True,
        help="a .npy/.npz/.pt file, a named mask (causal, window:2), an expression over seq, batch, "
        "heads and attention_mask, e.g. 'torch.tril(torch.ones(seq, seq))', a predicate expression over q_idx, "
        "kv_idx, b and h, e.g. '(kv_idx <= q_idx) & (q_idx - kv_idx < 4)', or FILE.py:NAME: a mask_mod, a "
        "transformers mask function or a BlockMask (importing the file runs its code)",
    )
    p.add_argument(
        "--convention",
        default=None,
        choices=masks.CONVENTIONS,
        help="keep: True/1 = may attend; drop: True/1 = masked (nn.MultiheadAttention); "
        "additive: 0 / -inf (or finfo.min) added to the scores. Needed for a file or a tensor expression, "
        "not for a predicate",
    )
    p.add_argument("--expect", required=True, help=f"what the mask should be: {EXPECT_HELP}")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def user_mask(spec: str | None, convention: str | None = None) -> str | Predicate | None:
    """Return what a --mask value names: FILE.py:NAME imported and read as a predicate, a predicate expression
    parsed (never evaluated by eval()), anything else as given. MaskError when a predicate gets a convention other
    than keep: a predicate says True = may attend."""
    if spec is None:
        return None
    if is_file_object(spec):
        obj, label = load_file_object(spec, "mask")
        pred: Predicate | None = masks.as_predicate(obj, label)
    elif masks.is_predicate_expression(spec):
        pred = masks.predicate_expression(spec)
    else:
        return spec
    if convention not in (None, "keep"):
        raise MaskError(
            f"--convention {convention}: a predicate mask says True = may attend (keep); leave --convention out"
        )
    return pred


def run(args: argparse.Namespace) -> int:
    mask = user_mask(args.mask, args.convention)
    convention = args.convention
    if convention is None:
        if not isinstance(mask, Predicate) and not masks.is_named(args.mask):
            raise MaskError(
                "--convention is needed for a mask file or a tensor expression: keep, drop or additive "
                "(a predicate over q_idx and kv_idx, or FILE.py:NAME, needs none)"
            )
        convention = "keep"
    enc = load_encoder(args.model, device=args.device, dtype=args.dtype)
    texts = args.text if isinstance(args.text, list) else [args.text]
    if len(texts) <= settings.limit("max_batch"):  # over it, check_mask refuses the batch in one line
        # one padded batch: every text runs at the longest one's length
        longest = max(token_count(enc, t) for t in texts)
        require_text_work(enc, [longest] * len(texts), "check-mask")
    report = check_mask(enc, args.text, mask, convention, args.expect)
    for note in report.notes:
        print(f"warning: {note}", file=sys.stderr)
    print(json.dumps(report.to_dict(), ensure_ascii=False) if args.json else report.text())
    return EXIT_OK if report.ok else EXIT_FAIL


def export_mask(
    enc: Encoder, text: str, text_b: str | None, mask: str | None, convention: str | None
) -> str | torch.Tensor | Predicate | None:
    """Return what `encode(mask=...)` takes for `export --mask`: a name as is, a file or expression as keep.

    The file's or expression's values are read in the declared convention (keep when not given) and must fit
    (1, heads, seq, seq) for this text; a named mask is keep by definition and takes no convention.
    """
    if mask is None or masks.is_named(mask):
        if convention is not None:
            raise MaskError("--convention is for a mask file or expression; named masks are keep (True = may attend)")
        return mask
    pred = user_mask(mask, convention)
    if isinstance(pred, Predicate):
        return pred  # made into this text's keep by the encoder, at any length
    batch = enc.tokenize([text], None if text_b is None else [text_b])
    seq = batch.input_ids.shape[1]
    raw, _ = masks.resolve(mask, seq=seq, batch=1, heads=enc.config.n_heads, attention_mask=batch.attention_mask)
    keep = masks.to_keep(raw, convention or "keep")
    return masks.fit(keep, 1, enc.config.n_heads, seq)
