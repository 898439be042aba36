"""Where masks come from: tensors, arrays, files (.npy without pickle, .pt with weights_only=True, .npz) and
short expressions over `seq` (models.masks.expressions, evaluated without eval()). Torch and numpy only."""

from __future__ import annotations

import io
import math
import os
import warnings
import zipfile
from pathlib import Path
from typing import IO

import numpy as np
import torch

from .. import settings
from ..errors import MaskError
from ..files import NpyHeaderError, read_npy_header, read_user_file
from .conventions import _WORD, MASK_FILE_SUFFIXES, MAX_ELEMENTS, as_tensor, is_named
from .expectations import EXPECT_HELP
from .expectations import parse as parse_expectation
from .expressions import evaluate, is_predicate_expression, predicate_expression
from .predicates import Predicate, as_predicate, materialise

# ---- loading ----------------------------------------------------------------------------------------


def _pick(named: dict, what: str) -> object:
    if "mask" in named:
        return named["mask"]
    if len(named) == 1:
        return next(iter(named.values()))
    raise MaskError(f"{what} holds {len(named)} entries ({', '.join(sorted(named)[:6])}); name the mask 'mask'")


def _npy_header(f: IO[bytes], name: str) -> tuple[tuple[int, ...], np.dtype]:
    """Return (shape, dtype) from a .npy header, refusing object arrays and sizes over the budgets before the data."""
    try:
        header = read_npy_header(f)
    except NpyHeaderError as err:
        if err.reason == "objects":
            raise MaskError(
                f"{name} holds Python objects, which are never unpickled: save a plain bool/int/float array"
            ) from None
        raise MaskError(f"{name} is not a readable .npy file: {err}") from None
    except (ValueError, OSError, EOFError) as err:
        raise MaskError(
            f"{name} is not a readable .npy file: {str(err).splitlines()[0] if str(err) else 'bad header'}"
        ) from None
    _check_shape(header.shape, name, header.dtype.itemsize)
    return header.shape, header.dtype


def _check_shape(shape: tuple[int, ...], name: str, itemsize: int) -> None:
    if len(shape) == 0:
        raise MaskError(f"{name} holds a single number (a 0-d array), not a mask: save an array of shape (seq, seq)")
    n = math.prod(shape)
    if n > MAX_ELEMENTS:
        raise MaskError(f"{name} declares shape {shape}: {n:,} cells; a mask may have at most {MAX_ELEMENTS:,}")
    settings.require("max_upload_mb", round(n * itemsize / 2**20, 1), f"{name}'s array")


def _npz_members(data: bytes, name: str) -> dict[str, zipfile.ZipInfo]:
    """Return the .npz's array members by name after checking their declared sizes against the upload budget."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = [i for i in z.infolist() if not i.is_dir()]
    total = sum(i.file_size for i in infos)  # declared uncompressed sizes: zipfile never inflates past them
    settings.require("max_upload_mb", round(total / 2**20, 1), f"{name} once decompressed")
    return {i.filename[: -len(".npy")] if i.filename.endswith(".npy") else i.filename: i for i in infos}


def load_mask_bytes(data: bytes, name: str) -> torch.Tensor:
    """Return the mask stored in a .npy, .npz or .pt file's bytes, never unpickling anything.

    .npy/.npz load without pickle, their headers (shape, dtype) and declared sizes checked before any data is
    read or inflated; .pt with torch.load(weights_only=True) and must hold a tensor (or a dict with one tensor,
    or one named 'mask'); sparse tensors are made dense within the same budgets. An .npz from
    `python -m models export` works: its 'mask' is used.
    """
    suffix = Path(name).suffix.lower()
    settings.require("max_upload_mb", round(len(data) / 2**20, 1), name)
    try:
        if suffix == ".npy":
            if not data.startswith(b"\x93NUMPY"):  # np.load would take anything else for a pickle
                raise MaskError(f"{name} is not a readable .npy file: no NumPy header (save it with np.save)")
            return _read_npy(io.BytesIO(data), name)
        if suffix == ".npz":
            members = _npz_members(data, name)
            key = _pick({k: k for k in members}, name)
            with zipfile.ZipFile(io.BytesIO(data)) as z, z.open(members[str(key)]) as f:
                return _read_npy(f, f"{name}[{key}]")
        if suffix in (".pt", ".pth"):
            if not data.startswith((b"PK\x03\x04", b"\x80")):  # torch.save's zip, or its legacy pickle stream
                raise MaskError(f"{name} is not a readable {suffix} file: not written by torch.save")
            if data.startswith(b"PK"):
                _npz_members(data, name)  # the same declared-size check on torch.save's zip
            with warnings.catch_warnings():  # torch warns about pickle protocols it then refuses anyway
                warnings.simplefilter("ignore")
                obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            if isinstance(obj, dict):
                obj = _pick({str(k): v for k, v in obj.items()}, name)
            if not isinstance(obj, torch.Tensor):
                raise MaskError(
                    f"{name} holds a {type(obj).__name__}, not a tensor: save it with torch.save(mask, path)"
                )
            if obj.layout != torch.strided:  # sparse: sized from its shape before it is made dense
                _check_shape(tuple(obj.shape), name, obj.element_size())
                obj = obj.to_dense()
            _check_shape(tuple(obj.shape), name, obj.element_size())
            return as_tensor(obj)
    except MaskError:
        raise
    except ValueError as err:  # np.load refuses object arrays without pickle; bad headers
        if "pickle" in str(err).lower():
            raise MaskError(
                f"{name} holds Python objects, which are never unpickled: save a plain bool/int/float array"
            ) from None
        raise MaskError(
            f"{name} is not a readable {suffix} file: {str(err).splitlines()[0] if str(err) else err}"
        ) from None
    except (OSError, EOFError, RuntimeError, zipfile.BadZipFile, KeyError, TypeError, NotImplementedError) as err:
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


def _read_npy(f: IO[bytes], name: str) -> torch.Tensor:
    """Return the array of a .npy stream after its header passed the checks (no pickle, within budget)."""
    start = f.tell()
    _npy_header(f, name)
    f.seek(start)
    try:
        return as_tensor(np.lib.format.read_array(f, allow_pickle=False))
    except (ValueError, EOFError) as err:  # the data is shorter than its header declares
        raise MaskError(f"{name} is damaged: {str(err).splitlines()[0]}") from None


def load_mask_file(path: str | os.PathLike) -> torch.Tensor:
    """Return the mask stored in a .npy, .npz or .pt file (see load_mask_bytes): a regular file within budget."""
    p = Path(path).expanduser()
    if p.suffix.lower() not in MASK_FILE_SUFFIXES:
        raise MaskError(f"{p}: a mask file is .npy, .npz or .pt")
    if not p.exists():
        raise MaskError(f"mask file {p} does not exist")
    return load_mask_bytes(read_user_file(p, "mask file"), p.name)


def looks_like_file(source: str) -> bool:
    s = source.strip()
    return Path(s).suffix.lower() in MASK_FILE_SUFFIXES and "(" not in s


def resolve(
    source: str | torch.Tensor | np.ndarray | Predicate,
    seq: int,
    batch: int = 1,
    heads: int = 1,
    attention_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, str]:
    """Return (mask tensor as given, kind) for a tensor, an array, a file path, a named mask or an expression.

    kind is 'tensor', 'file', 'named', 'expression' or 'predicate'. Expressions see `seq`, `batch`, `heads` and
    the tokenizer's `attention_mask` (batch, seq) 0/1; they are evaluated by models.masks.expressions, never by
    eval(). A predicate — a function (b, h, q_idx, kv_idx) → bool (a FlexAttention mask_mod, a transformers mask
    function, a BlockMask) or an expression over q_idx, kv_idx, b and h — comes back as its keep tensor
    (batch or 1, heads or 1, seq, seq): True = may attend, whatever convention was declared.
    """
    if isinstance(source, torch.Tensor | np.ndarray):
        return as_tensor(source), "tensor"
    if not isinstance(source, str) and (callable(source) or hasattr(source, "mask_mod")):
        return materialise(as_predicate(source), seq, batch=batch, heads=heads), "predicate"
    if not isinstance(source, str) or not source.strip():
        raise MaskError("no mask given: pass a file (.npy, .pt, .npz), a name such as causal, or an expression")
    s = source.strip()
    if looks_like_file(s):
        return load_mask_file(s), "file"
    if is_predicate_expression(s):
        return materialise(predicate_expression(s), seq, batch=batch, heads=heads), "predicate"
    if is_named(s):
        exp = parse_expectation(s)
        if exp.padding and attention_mask is not None:
            return exp.keep(seq, attention_mask.bool())[:, None], "named"  # (batch, 1, q_pos, k_pos)
        return exp.keep(seq), "named"
    if _WORD.fullmatch(s) and s != "attention_mask":  # words joined by + can only be a misspelt expectation
        try:
            parse_expectation(s, what="mask")
        except MaskError as err:
            if "unknown mask" not in str(err):
                raise
            raise MaskError(
                f"unknown mask {s!r}: use {EXPECT_HELP}, a .npy/.npz/.pt file, or an expression over seq such as "
                "torch.tril(torch.ones(seq, seq))"
            ) from None
    return evaluate(s, seq=seq, batch=batch, heads=heads, attention_mask=attention_mask), "expression"
