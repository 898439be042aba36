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

from .. import settings
from ..analysis.norms import check_budget, value_weighted
from ..analysis.words import word_groups
from ..weights import load_encoder
from .check_mask import export_mask
from .common import (
    EXIT_OK,
    UsageError,
    add_model_args,
    add_text_args,
    fit_text,
    id_list,
    text_of,
    write_file,
)

HELP = "run the model and write tokens, attentions and hidden states"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    add_text_args(p, text_file=True)
    p.add_argument("--layers", default=None, help="comma list of layers to write, e.g. 0,29 or 3-5 (default all)")
    p.add_argument("--heads", default=None, help="comma list of heads to write (default all)")
    p.add_argument(
        "--mask",
        default=None,
        help="bidirectional (default), causal, window:W, prefix:P, a .npy/.npz/.pt FILE, an expression over seq, "
        "a predicate over q_idx and kv_idx such as '(kv_idx <= q_idx) & (q_idx - kv_idx < 4)', or FILE.py:NAME "
        "(a mask_mod, a transformers mask function or a BlockMask; importing the file runs its code)",
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
    text = text_of(args)
    enc = load_encoder(args.model, device=args.device, dtype=args.dtype)
    c = enc.config
    layers = id_list(args.layers, c.n_layers, "layers")
    heads = id_list(args.heads, c.n_heads, "heads")
    # Cut at the model's positions (a 10⁵-token text is not tokenized whole), then at ATTENTION_LENS_TEXT_WORK.
    text = fit_text(enc, text, args.text_b, command="export")
    # The maps written are asked of their budget before the forward (a long text's forward alone takes minutes).
    seq = enc.tokenize([text], None if args.text_b is None else [args.text_b]).input_ids.shape[1]
    n_l, n_h = len(layers) if layers is not None else c.n_layers, len(heads) if heads is not None else c.n_heads
    settings.require(
        "max_map_mb",
        -(-4 * n_l * n_h * seq * seq // (1 << 20)),
        f"the maps of {n_l} layers × {n_h} heads at {seq} tokens (choose fewer with --layers and --heads)",
    )
    mask: Any = export_mask(enc, text, args.text_b, args.mask, args.convention)
    # --norms needs the values of every layer (internals: the maps are then kept whole, never on demand)
    out = enc.encode(text, args.text_b, mask=mask, layers=layers, internals=args.norms)
    for note in out.notes:
        print(f"warning: {note}", file=sys.stderr)
    L = list(range(c.n_layers)) if layers is None else layers
    H = list(range(c.n_heads)) if heads is None else heads
    T = out.seq
    settings.require(
        "max_map_mb",
        -(-4 * len(L) * len(H) * T * T // (1 << 20)),
        f"the maps of {len(L)} layers × {len(H)} heads at {T} tokens (choose fewer with --layers and --heads)",
    )
    attn = np.empty((len(L), len(H), T, T), dtype=np.float32)  # (layers, heads, q_pos, k_pos): only those asked
    for a, layer in enumerate(L):
        for b, head in enumerate(H):
            attn[a, b] = out.attentions[layer, head].numpy()
    arrays: dict[str, Any] = {  # Any: numpy's stub would read a value as savez's allow_pickle flag
        "tokens": np.array(out.tokens, dtype=str),  # unicode array: loads with allow_pickle=False
        "token_type_ids": out.token_type_ids.numpy().astype(np.int64),
        "attentions": attn,
        "mask": out.keep.numpy().astype(bool),  # (q_pos, k_pos), True = may attend
    }
    if layers is not None or heads is not None:  # which layers and heads the attentions hold
        arrays["layer_ids"] = np.array(L, dtype=np.int64)
        arrays["head_ids"] = np.array(H, dtype=np.int64)
    if out.hidden_states is not None:  # encode() computes it by default
        arrays["hidden_states"] = out.hidden_states.numpy().astype(np.float32)  # (seq, d_model)
    lists: dict[str, Any] = {}  # JSON only: lists of lists that NPZ cannot hold as one array
    if args.norms:
        vw = value_weighted(enc, out)
        arrays["norms"] = vw.norms[np.ix_(L, H)]  # (layers, heads, q_pos, k_pos) float32, the layers/heads asked
        arrays["output_norm"] = vw.output_norm[np.ix_(L, H)].astype(np.float32)  # (layers, heads)
    if args.words:
        check_budget(out, "word maps of this text")
        words = word_groups(out.tokens, out.capabilities.token_display, enc.tokenizer.all_special_tokens)
        arrays["words"] = np.array(words.words, dtype=str)
        arrays["word_of_token"] = words.word_of()  # (seq,) int64: the word each token belongs to
        arrays["word_attentions"] = words.merge(attn)  # (layers, heads, words, words)
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
        print(f"wrote {args.out}: {T} tokens, attentions {tuple(attn.shape)}", file=sys.stderr)
    return EXIT_OK
