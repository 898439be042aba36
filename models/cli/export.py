"""`python -m models export`: run the encoder and write tokens, attentions, hidden states and the mask.

--norms adds `norms`, shaped like `attentions` (layers, heads, q_pos, k_pos): α_ij · ‖W_O^h v_j‖, what each key
really passes on (value-weighted attention, Kobayashi et al. 2020), in the hidden state's units; and `output_norm`
(layers, heads), the mean norm of each head's output. --words adds the words (sub-tokens merged: `words`, the
tokens of each as `word_tokens` in JSON and `word_of_token` in NPZ) and `word_attentions` (keys of a word summed,
its queries averaged: rows still sum to 1), and with --norms `word_norms`. Definitions: docs/METRICS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..analysis.norms import check_budget, value_weighted
from ..analysis.words import word_groups
from ..weights import load_encoder
from .check_mask import export_mask
from .common import EXIT_OK, UsageError, add_model_args, add_text_args, write_file

HELP = "run the encoder and write tokens, attentions and hidden states"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    add_text_args(p)
    p.add_argument(
        "--mask",
        default=None,
        help="bidirectional (default), causal, window:W, prefix:P, a .npy/.npz/.pt FILE or an expression over seq",
    )
    p.add_argument(
        "--convention",
        default=None,
        choices=["keep", "drop", "additive"],
        help="how a mask FILE or expression reads: keep (True = may attend, the default), drop, additive",
    )
    p.add_argument("--out", default=None, help="output file (.npz; .json with --json; stdout when omitted with --json)")
    p.add_argument("--json", action="store_true", help="write JSON instead of NPZ")
    p.add_argument(
        "--norms", action="store_true", help="add value-weighted attention: norms = α·‖W_O v‖, shaped like attentions"
    )
    p.add_argument(
        "--words", action="store_true", help="add the words (sub-tokens merged) and the maps merged to words"
    )


def run(args: argparse.Namespace) -> int:
    if not args.json and not args.out:
        raise UsageError("export: --out FILE.npz is required (or --json to print JSON)")
    enc = load_encoder(args.model, device=args.device, dtype=args.dtype)
    mask = export_mask(enc, args.text, args.text_b, args.mask, args.convention)
    out = enc.encode(args.text, args.text_b, mask=mask, internals=args.norms)
    for note in out.notes:
        print(f"warning: {note}", file=sys.stderr)
    arrays: dict[str, Any] = {  # Any: numpy's stub would read a value as savez's allow_pickle flag
        "tokens": np.array(out.tokens, dtype=str),  # unicode array: loads with allow_pickle=False
        "token_type_ids": out.token_type_ids.numpy().astype(np.int64),
        "attentions": out.attentions.numpy().astype(np.float32),  # (layers, heads, q_pos, k_pos)
        "mask": out.keep.numpy().astype(bool),  # (q_pos, k_pos), True = may attend
    }
    if out.hidden_states is not None:  # encode() computes it by default
        arrays["hidden_states"] = out.hidden_states.numpy().astype(np.float32)  # (seq, d_model)
    lists: dict[str, Any] = {}  # JSON only: lists of lists that NPZ cannot hold as one array
    if args.norms:
        vw = value_weighted(enc, out)
        arrays["norms"] = vw.norms  # (layers, heads, q_pos, k_pos) float32
        arrays["output_norm"] = vw.output_norm.astype(np.float32)  # (layers, heads)
    if args.words:
        check_budget(out, "word maps of this text")
        words = word_groups(out.tokens, out.capabilities.token_display, enc.tokenizer.all_special_tokens)
        arrays["words"] = np.array(words.words, dtype=str)
        arrays["word_of_token"] = words.word_of()  # (seq,) int64: the word each token belongs to
        arrays["word_attentions"] = np.stack([words.merge(out.attentions[la].numpy()) for la in range(out.n_layers)])
        if args.norms:
            arrays["word_norms"] = words.merge(arrays["norms"])
        lists["word_tokens"] = [[out.tokens[i] for i in g] for g in words.groups()]
    if isinstance(mask, torch.Tensor) and mask.shape[1] > 1:  # per-head masks: `mask` is head 0's
        T = out.seq
        arrays["mask_heads"] = torch.broadcast_to(mask.cpu(), (1, mask.shape[1], T, T))[0].numpy().astype(bool)
    if args.json:
        doc = {"model": enc.name, "mask_name": out.mask, "truncated": out.truncated}
        doc.update({k: v.tolist() for k, v in arrays.items()})
        doc.update(lists)
        text = json.dumps(doc)
        if args.out:
            write_file(Path(args.out), lambda f: f.write(text.encode()))
        else:
            print(text)
    else:
        write_file(Path(args.out), lambda f: np.savez_compressed(f, **arrays))
    if args.out:
        L, H, T, _ = arrays["attentions"].shape
        print(f"wrote {args.out}: {T} tokens, attentions ({L}, {H}, {T}, {T})", file=sys.stderr)
    return EXIT_OK
