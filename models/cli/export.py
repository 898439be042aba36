"""`python -m models export`: run the encoder and write tokens, attentions, hidden states and the mask."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import settings
from ..weights import load_encoder
from .check_mask import export_mask
from .common import EXIT_OK, UsageError, add_model_args, add_text_args, id_list, text_of, write_file

HELP = "run the model and write tokens, attentions and hidden states"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    add_text_args(p, text_file=True)
    p.add_argument("--layers", default=None, help="comma list of layers to write, e.g. 0,29 or 3-5 (default all)")
    p.add_argument("--heads", default=None, help="comma list of heads to write (default all)")
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


def run(args: argparse.Namespace) -> int:
    if not args.json and not args.out:
        raise UsageError("export: --out FILE.npz is required (or --json to print JSON)")
    text = text_of(args)
    enc = load_encoder(args.model, device=args.device, dtype=args.dtype)
    c = enc.config
    layers = id_list(args.layers, c.n_layers, "layers")
    heads = id_list(args.heads, c.n_heads, "heads")
    mask = export_mask(enc, text, args.text_b, args.mask, args.convention)
    out = enc.encode(text, args.text_b, mask=mask, layers=layers)
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
    if isinstance(mask, torch.Tensor) and mask.shape[1] > 1:  # per-head masks: `mask` is head 0's
        T = out.seq
        arrays["mask_heads"] = torch.broadcast_to(mask.cpu(), (1, mask.shape[1], T, T))[0].numpy().astype(bool)
    if args.json:
        doc = {"model": enc.name, "mask_name": out.mask, "truncated": out.truncated}
        doc.update({k: v.tolist() for k, v in arrays.items()})
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
