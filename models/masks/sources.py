"""Where masks come from: tensors, arrays, files (.npy without pickle, .pt with weights_only=True, .npz) and
short expressions over `seq` (models.masks.expressions, evaluated without eval()). Torch and numpy only."""

from __future__ import annotations

import io
import os
import warnings
import zipfile
from pathlib import Path

import numpy as np
import torch

from ..errors import MaskError
from .conventions import _WORD, MASK_FILE_SUFFIXES, MAX_FILE_BYTES, as_tensor, is_named
from .expectations import EXPECT_HELP
from .expectations import parse as parse_expectation
from .expressions import evaluate

# ---- loading ----------------------------------------------------------------------------------------


def _pick(named: dict, what: str) -> object:
    if "mask" in named:
        return named["mask"]
    if len(named) == 1:
        return next(iter(named.values()))
    raise MaskError(f"{what} holds {len(named)} entries ({', '.join(sorted(named)[:6])}); name the mask 'mask'")


def load_mask_bytes(data: bytes, name: str) -> torch.Tensor:
    """Return the mask stored in a .npy, .npz or .pt file's bytes, never unpickling anything.

    .npy/.npz load with allow_pickle=False; .pt with torch.load(weights_only=True) and must hold a tensor (or a
    dict with one tensor, or one named 'mask'). An .npz from `python -m models export` works: its 'mask' is used.
    """
    suffix = Path(name).suffix.lower()
    if len(data) > MAX_FILE_BYTES:
        raise MaskError(f"{name} is {len(data) / 2**20:.0f} MiB; a mask file may be at most {MAX_FILE_BYTES >> 20} MiB")
    try:
        if suffix == ".npy":
            if not data.startswith(b"\x93NUMPY"):  # np.load would take anything else for a pickle
                raise MaskError(f"{name} is not a readable .npy file: no NumPy header (save it with np.save)")
            arr = np.load(io.BytesIO(data), allow_pickle=False)
            return as_tensor(arr)
        if suffix == ".npz":
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                key = _pick({k: k for k in z.files}, name)
                return as_tensor(z[key])  # type: ignore[index]
        if suffix in (".pt", ".pth"):
            if not data.startswith((b"PK\x03\x04", b"\x80")):  # torch.save's zip, or its legacy pickle stream
                raise MaskError(f"{name} is not a readable {suffix} file: not written by torch.save")
            with warnings.catch_warnings():  # torch warns about pickle protocols it then refuses anyway
                warnings.simplefilter("ignore")
                obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            if isinstance(obj, dict):
                obj = _pick({str(k): v for k, v in obj.items()}, name)
            if not isinstance(obj, torch.Tensor):
                raise MaskError(
                    f"{name} holds a {type(obj).__name__}, not a tensor: save it with torch.save(mask, path)"
                )
            return as_tensor(obj)
    except MaskError:
        raise
    except ValueError as err:  # np.load refuses object arrays without pickle; bad headers
        if "pickle" in str(err).lower():
            raise MaskError(
                f"{name} holds Python objects, which are never unpickled: save a plain bool/int/float array"
            ) from None
        raise MaskError(f"{name} is not a readable {suffix} file: {err}") from None
    except (OSError, EOFError, RuntimeError, zipfile.BadZipFile, KeyError, TypeError) as err:
        raise MaskError(
            f"{name} is not a readable {suffix} file: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
        ) from None
    except Exception as err:  # torch's weights_only unpickler raises its own UnpicklingError for foreign objects
        if "pickl" in type(err).__name__.lower() or "weights_only" in str(err):
            raise MaskError(
                f"{name} holds objects other than tensors, which are never unpickled: save a plain tensor"
            ) from None
        raise
    raise MaskError(f"{name}: a mask file is .npy, .npz or .pt")


def load_mask_file(path: str | os.PathLike) -> torch.Tensor:
    """Return the mask stored in a .npy, .npz or .pt file (see load_mask_bytes)."""
    p = Path(path).expanduser()
    if p.suffix.lower() not in MASK_FILE_SUFFIXES:
        raise MaskError(f"{p}: a mask file is .npy, .npz or .pt")
    if not p.is_file():
        raise MaskError(f"mask file {p} does not exist")
    if p.stat().st_size > MAX_FILE_BYTES:
        raise MaskError(
            f"{p} is {p.stat().st_size / 2**20:.0f} MiB; a mask file may be at most {MAX_FILE_BYTES >> 20} MiB"
        )
    try:
        data = p.read_bytes()
    except OSError as err:
        raise MaskError(f"cannot read {p}: {err.strerror or err}") from None
    return load_mask_bytes(data, p.name)


def looks_like_file(source: str) -> bool:
    s = source.strip()
    return Path(s).suffix.lower() in MASK_FILE_SUFFIXES and "(" not in s


def resolve(
    source: str | torch.Tensor | np.ndarray,
    seq: int,
    batch: int = 1,
    heads: int = 1,
    attention_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, str]:
    """Return (mask tensor as given, kind) for a tensor, an array, a file path, a named mask or an expression.

    kind is 'tensor', 'file', 'named' or 'expression'. Expressions see `seq`, `batch`, `heads` and the
    tokenizer's `attention_mask` (batch, seq) 0/1; they are evaluated by models.masks.expressions, never by eval().
    """
    if isinstance(source, torch.Tensor | np.ndarray):
        return as_tensor(source), "tensor"
    if not isinstance(source, str) or not source.strip():
        raise MaskError("no mask given: pass a file (.npy, .pt, .npz), a name such as causal, or an expression")
    s = source.strip()
    if looks_like_file(s):
        return load_mask_file(s), "file"
    if is_named(s):
        exp = parse_expectation(s)
        if exp.padding and attention_mask is not None:
            return exp.keep(seq, attention_mask.bool())[:, None], "named"  # (batch, 1, q_pos, k_pos)
        return exp.keep(seq), "named"
    if _WORD.fullmatch(s) and s != "attention_mask":  # words joined by + can only be a misspelt expectation
        try:
            parse_expectation(s)
        except MaskError as err:
            if "unknown expectation" not in str(err):
                raise
            raise MaskError(
                f"unknown mask {s!r}: use {EXPECT_HELP}, a .npy/.npz/.pt file, or an expression over seq such as "
                "torch.tril(torch.ones(seq, seq))"
            ) from None
    return evaluate(s, seq=seq, batch=batch, heads=heads, attention_mask=attention_mask), "expression"
