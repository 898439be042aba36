"""Command line: `python -m models COMMAND ...`. Bad input → one line on stderr and exit code 2.

Each command is a pair (add_arguments, run) registered in COMMANDS; `run` returns the exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from . import check_mask, memory, stats_cli
from .encoder import TruncationWarning
from .errors import AttnVizError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(AttnVizError):
    """Bad command-line arguments."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        raise UsageError(f"{self.prog}: {message}")


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm", help="minilm (bundled), an HF id, a folder, or random:tiny|minilm|bert-base")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:N")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"], help="half precision on GPU only")


def add_text_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text", required=True, help="the sentence to encode")
    p.add_argument("--text-b", default=None, help="optional second sentence (token type 1)")


# ---- export -----------------------------------------------------------------------------------------


def _export_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    add_text_args(p)
    p.add_argument("--mask", default=None,
                   help="bidirectional (default), causal, window:W, prefix:P, a .npy/.npz/.pt FILE or an expression over seq")
    p.add_argument("--convention", default=None, choices=["keep", "drop", "additive"],
                   help="how a mask FILE or expression reads: keep (True = may attend, the default), drop, additive")
    p.add_argument("--out", default=None, help="output file (.npz; .json with --json; stdout when omitted with --json)")
    p.add_argument("--json", action="store_true", help="write JSON instead of NPZ")


def _export(args: argparse.Namespace) -> int:
    from .weights import load_encoder

    if not args.json and not args.out:
        raise UsageError("export: --out FILE.npz is required (or --json to print JSON)")
    enc = load_encoder(args.model, device=args.device, dtype=args.dtype)
    mask = check_mask.export_mask(enc, args.text, args.text_b, args.mask, args.convention)
    out = enc.encode(args.text, args.text_b, mask=mask)
    for note in out.notes:
        print(f"warning: {note}", file=sys.stderr)
    arrays = {
        "tokens": np.array(out.tokens, dtype=str),  # unicode array: loads with allow_pickle=False
        "token_type_ids": out.token_type_ids.numpy().astype(np.int64),
        "attentions": out.attentions.numpy().astype(np.float32),  # (layers, heads, q_pos, k_pos)
        "hidden_states": out.hidden_states.numpy().astype(np.float32),  # (seq, d_model)
        "mask": out.keep.numpy().astype(bool),  # (q_pos, k_pos), True = may attend
    }
    if isinstance(mask, torch.Tensor) and mask.shape[1] > 1:  # per-head masks: `mask` is head 0's
        T = out.seq
        arrays["mask_heads"] = torch.broadcast_to(mask.cpu(), (1, mask.shape[1], T, T))[0].numpy().astype(bool)
    if args.json:
        doc = {"model": enc.name, "mask_name": out.mask, "truncated": out.truncated}
        doc.update({k: v.tolist() for k, v in arrays.items()})
        text = json.dumps(doc)
        if args.out:
            _write(Path(args.out), lambda f: f.write(text.encode()))
        else:
            print(text)
    else:
        _write(Path(args.out), lambda f: np.savez_compressed(f, **arrays))
    if args.out:
        L, H, T, _ = arrays["attentions"].shape
        print(f"wrote {args.out}: {T} tokens, attentions ({L}, {H}, {T}, {T})", file=sys.stderr)
    return EXIT_OK


def _write(path: Path, write: Callable) -> None:
    try:
        with open(path, "wb") as f:
            write(f)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from err


# ---- info -------------------------------------------------------------------------------------------


def _info_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)


def _info(args: argparse.Namespace) -> int:
    from .weights import load_encoder

    print(json.dumps(load_encoder(args.model, device=args.device, dtype=args.dtype).describe(), indent=2))
    return EXIT_OK


COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "export": ("run the encoder and write tokens, attentions and hidden states", _export_args, _export),
    "info": ("load a model and print its shape", _info_args, _info),
    "check-mask": (check_mask.HELP, check_mask.add_args, check_mask.run),
    "memory": ("estimate the score tensor's memory and one MHA block's parameters", memory.add_args, memory.run),
    "stats": ("per-head statistics, pattern labels, redundancy and importance", stats_cli.add_args, stats_cli.run),
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m models", description="Our BERT encoder from the command line.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (help_text, add_args, _) in COMMANDS.items():
        add_args(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    warnings.simplefilter("ignore", TruncationWarning)  # the commands print out.notes themselves
    try:
        args = build_parser().parse_args(argv)
        if not args.command:
            raise UsageError(f"python -m models: choose a command: {', '.join(COMMANDS)}")
        return COMMANDS[args.command][2](args)
    except AttnVizError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`… --json | head`): not our error. Point stdout at devnull so that Python's
        # final flush does not raise again (the recipe in the signal module's documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
