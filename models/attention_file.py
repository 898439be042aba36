"""Attention from elsewhere: maps saved by any model, read from a file or taken from memory, as (layers, heads,
q_pos, k_pos) float32 with their tokens. May import numpy only; torch only to read a `.pt`, with weights_only=True.

One layout normaliser, `normalise_attentions`, serves the file reader, the notebook's `show` and the app, so every
accepted shape is handled here and nowhere else:

- one array: (layers, heads, q, k); (layers, batch, heads, q, k) picks one item; (heads, q, k) is one layer;
  (q, k) is one head;
- a tuple or list of per-layer arrays, as transformers returns `output.attentions`: each (batch, heads, q, k)
  (one item is picked) or (heads, q, k);
- anything with an `attentions` attribute (a transformers ModelOutput) is read through it;
- torch tensors are duck-typed through `.detach().cpu().numpy()`: this module never imports torch for them.

Files: our own NPZ/JSON export; NPZ, NPY or safetensors holding `attentions` (or `attentions.0`, `attentions.1`,
…), with `tokens` (or `q_tokens` and `k_tokens` for cross-attention, q ≠ k) and optionally `mask` (q, k), True =
may attend; a `torch.save`d tuple, list, dict or tensor. Sizes are checked from headers before anything is
inflated or allocated; pickled objects are never loaded.
"""

from __future__ import annotations

import io
import json
import math
import struct
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import settings
from .capabilities import Capabilities
from .errors import InputError
from .files import NpyHeader, NpyHeaderError, read_npy_header, read_user_file

ROW_SUM_TOL = 1e-3  # rows further than this from 1 get a warning (masked or renormalised maps are legitimate)
SUFFIXES = (".npz", ".npy", ".json", ".safetensors", ".pt", ".pth", ".bin")
_SAFETENSORS_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # widened to float32 by hand: numpy has no bfloat16
    "BOOL": np.dtype("?"),
    "U8": np.dtype("u1"),
    "I8": np.dtype("i1"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
}


class AttentionFileError(InputError):
    """An attention file (or array) that cannot be shown as given; the message says what to change."""


@dataclass(frozen=True)
class Note:
    """Something a person should know about maps that were accepted: a code and values (the app words it in the
    page's language) and the English text (the CLI and notebooks print it)."""

    code: str  # "batch", "positions", "keys" or "rows"
    text: str
    values: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.text


@dataclass
class AttentionMaps:
    """Attention maps that came without a model: the same names the pages read from a model's output.

    attentions are numpy (not torch): pages read them with np.asarray, which takes both.
    """

    attentions: np.ndarray  # (layers, heads, q_pos, k_pos) float32
    q_tokens: list[str]  # one per query row
    k_tokens: list[str]  # one per key column (== q_tokens for self-attention)
    keep: np.ndarray | None = None  # (q_pos, k_pos) bool, True = may attend: the file's mask, if it has one
    token_type_ids: np.ndarray | None = None  # (q_pos,) int64 for a sentence pair (self-attention only)
    cross: bool = False  # queries and keys are different sequences (encoder-decoder cross-attention)
    causal: bool = False  # every map is all zeros above the diagonal (detected, self-attention only)
    named: bool = True  # False when the tokens were not given and positions are named 0…n−1
    model: str = "attention file"  # where the maps came from (a file name), for captions and reports
    notes: list[Note] = field(default_factory=list)  # what a person should know (item picked, rows off 1, …)
    mask: str = "from file"
    truncated: int = 0
    n_unknown: int = 0
    many_unknown: bool = False
    is_batch: bool = False

    @property
    def tokens(self) -> list[str]:
        return self.q_tokens

    @property
    def display_tokens(self) -> list[str]:
        return self.q_tokens

    @property
    def kind(self) -> str:
        """'decoder' when the maps are causal, else 'encoder' (cross-attention is read as an encoder's)."""
        return "decoder" if self.causal else "encoder"

    @property
    def capabilities(self) -> Capabilities:
        """What the maps alone tell (no model): causality as detected; the first token's role for causal maps."""
        return Capabilities(
            causal=self.causal,
            special_roles="first_token" if self.causal else "none",
            heads=self.n_heads,
            kv_heads=self.n_heads,
        )

    @property
    def n_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.attentions.shape[1])

    @property
    def n_q(self) -> int:
        return int(self.attentions.shape[2])

    @property
    def n_k(self) -> int:
        return int(self.attentions.shape[3])

    @property
    def seq(self) -> int:
        return self.n_k

    @property
    def square(self) -> bool:
        return not self.cross and self.n_q == self.n_k

    @property
    def segments(self) -> list[int]:
        if self.token_type_ids is None:
            return [0] * self.n_q
        return [int(t) for t in self.token_type_ids]


# ---- the one layout normaliser ---------------------------------------------------------------------


def _array(x: Any, what: str, max_bytes: int) -> np.ndarray:
    """Return x as a numpy array without copying more than needed; torch tensors through .detach().cpu().numpy()."""
    if hasattr(x, "detach"):  # a torch tensor, duck-typed
        n = int(x.numel()) if hasattr(x, "numel") else 0
        if n * 4 > max_bytes:
            raise AttentionFileError(_too_big(what, n * 4, max_bytes))
        t = x.detach().cpu()
        if not t.is_floating_point():
            return t.numpy()
        return t.float().numpy()  # bfloat16 has no numpy dtype; float32 is what we keep anyway
    if isinstance(x, np.ndarray):
        return x
    try:
        a = np.asarray(x)
    except ValueError as err:  # ragged nested lists
        raise AttentionFileError(f"{what} is ragged: its rows have different lengths ({err})") from err
    if a.dtype == object:
        raise AttentionFileError(f"{what} is ragged or not numbers: expected nested lists of floats")
    return a


def _cap(max_bytes: int | None) -> int:
    """Return max_bytes, or the operator's ATTENTION_LENS_MAX_UPLOAD_MB (models.settings) when None."""
    return settings.current().max_upload_bytes if max_bytes is None else max_bytes


def _too_big(what: str, nbytes: int, max_bytes: int) -> str:
    return (
        f"{what} would take {nbytes / 2**20:.0f} MB as float32, over this server's limit of "
        f"{max_bytes / 2**20:.0f} MB (ATTENTION_LENS_MAX_UPLOAD_MB); save fewer layers or a shorter input"
    )


def _pick(a: np.ndarray, axis: int, item: int, notes: list[Note]) -> np.ndarray:
    batch = a.shape[axis]
    if not 0 <= item < batch:
        raise AttentionFileError(f"item {item} was asked for, but the batch holds {batch} item(s) (0…{batch - 1})")
    if batch > 1:
        text = f"the attention holds a batch of {batch}; showing item {item} (choose another with item=…)"
        notes.append(Note("batch", text, {"batch": batch, "item": item}))
    return a[(slice(None),) * axis + (item,)]  # a view: the one copy is made when layers are stacked


def normalise_attentions(
    obj: Any, item: int = 0, max_bytes: int | None = None, notes: list[Note] | None = None
) -> np.ndarray:
    """Return attention in any accepted layout as one (layers, heads, q_pos, k_pos) float32 array.

    Accepted layouts are listed in the module docstring. item picks the batch element where there is a batch
    axis (a note in `notes` says so when the batch has more than one). Raises AttentionFileError naming the
    shape it got when the layout is not one of them, and when the float32 result would exceed max_bytes.
    """
    notes = notes if notes is not None else []
    max_bytes = _cap(max_bytes)
    if not isinstance(obj, np.ndarray | list | tuple) and getattr(obj, "attentions", None) is not None:
        obj = obj.attentions  # a transformers ModelOutput
    per_layer = isinstance(obj, list | tuple) and len(obj) > 0 and all(hasattr(x, "shape") for x in obj)
    if per_layer:
        total = sum(int(np.prod(x.shape)) for x in obj)
        if total * 4 > max_bytes:
            raise AttentionFileError(_too_big("the attention", total * 4, max_bytes))
        layers: list[np.ndarray] = []
        for i, x in enumerate(obj):
            a = _array(x, f"layer {i}", max_bytes)
            if a.ndim == 4:  # transformers: (batch, heads, q_pos, k_pos)
                a = _pick(a, 0, item, notes if i == 0 else [])
            elif a.ndim == 2:  # (q_pos, k_pos): one head
                a = a[None]
            if a.ndim != 3:
                raise AttentionFileError(
                    f"layer {i} has shape {tuple(a.shape)}: each layer must be (batch, heads, q_pos, k_pos) "
                    "or (heads, q_pos, k_pos)"
                )
            if layers and a.shape != layers[0].shape:
                raise AttentionFileError(
                    f"layer {i} has shape {tuple(a.shape)}, layer 0 has {tuple(layers[0].shape)}: "
                    "every layer must have the same heads, queries and keys"
                )
            layers.append(_float(a, f"layer {i}"))
        attn = np.stack(layers)
    else:
        if isinstance(obj, list | tuple) and len(obj) == 0:
            raise AttentionFileError("the attention is empty (no layers)")
        a = _array(obj, "the attention", max_bytes)
        if a.size * 4 > max_bytes:
            raise AttentionFileError(_too_big("the attention", a.size * 4, max_bytes))
        if a.ndim == 5:  # (layers, batch, heads, q_pos, k_pos)
            a = _pick(a, 1, item, notes)
        elif a.ndim == 3:
            a = a[None]  # (heads, q_pos, k_pos): one layer
        elif a.ndim == 2:
            a = a[None, None]  # (q_pos, k_pos): one head
        if a.ndim != 4:
            raise AttentionFileError(
                f"attention of shape {tuple(a.shape)}: expected (layers, heads, q_pos, k_pos), (layers, batch, "
                "heads, q_pos, k_pos), (heads, q_pos, k_pos), (q_pos, k_pos) or a tuple of per-layer arrays"
            )
        attn = _float(a, "the attention")
    if attn.size == 0:
        raise AttentionFileError(f"the attention is empty: shape {tuple(attn.shape)}")
    return np.ascontiguousarray(attn, dtype=np.float32)


def _float(a: np.ndarray, what: str) -> np.ndarray:
    if a.dtype.kind not in "fiub":
        raise AttentionFileError(f"{what} holds {a.dtype} values, not numbers")
    return a.astype(np.float32, copy=False)


# ---- checks ----------------------------------------------------------------------------------------


def check_values(attn: np.ndarray) -> list[Note]:
    """Refuse NaN, ±inf and negative weights (naming the first head and cell); return notes on row sums.

    attn: (layers, heads, q_pos, k_pos). Rows that do not sum to 1 are a note, not a refusal: masked rows and
    renormalised maps are legitimate, but the shares shown are then not fractions of a whole. Two passes over
    the maps (the row sums, which NaN and ±inf reach, and the minimum); the offending cell is looked up only
    when there is one.
    """
    sums = attn.sum(-1, dtype=np.float64)  # (layers, heads, q_pos)
    if not np.isfinite(sums).all():
        bad = ~np.isfinite(attn)
        layer, h, i, j = (int(v) for v in np.argwhere(bad)[0])
        raise AttentionFileError(
            f"the attention holds {int(bad.sum())} NaN or infinite value(s), the first at layer {layer}, "
            f"head {h}, query {i}, key {j} ({attn[layer, h, i, j]}): fix the source (a fully masked row with -inf?)"
        )
    if attn.min() < 0:
        neg = attn < 0
        layer, h, i, j = (int(v) for v in np.argwhere(neg)[0])
        raise AttentionFileError(
            f"the attention holds {int(neg.sum())} negative value(s), the first {attn[layer, h, i, j]:.4g} at layer "
            f"{layer}, head {h}, query {i}, key {j}: these are not softmax weights (scores or logits?)"
        )
    off = np.abs(sums - 1.0)
    if off.max() <= ROW_SUM_TOL:
        return []
    worst = np.unravel_index(int(off.argmax()), off.shape)
    layer, head, row = (int(v) for v in worst)
    values = {
        "n": int((off > ROW_SUM_TOL).sum()),
        "total": int(off.size),
        "off": float(off.max()),
        "layer": layer,
        "head": head,
        "row": row,
        "sum": float(sums[worst]),
    }
    text = (
        "{n} of {total} rows do not sum to 1 (off by up to {off:.3g}: layer {layer}, head {head}, query {row} sums "
        "to {sum:.4g}); masked or renormalised maps are fine, but the shares shown are then not fractions of 1"
    ).format(**values)
    return [Note("rows", text, values)]


def is_causal(attn: np.ndarray) -> bool:
    """Return True when every (square) map is all zeros above the diagonal, and there is more than one token."""
    L, H, Q, K = attn.shape  # layers, heads, q_pos, k_pos
    if Q != K or Q < 2:
        return False
    # Row by row, so that no copy of the upper triangle is made; the first row settles most non-causal maps.
    return not any(bool(attn[..., i, i + 1 :].any()) for i in range(Q - 1))


def _tokens(x: Any, what: str) -> list[str]:
    if x is None:
        raise AttentionFileError(f"{what} is missing")
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, str) or not isinstance(x, Sequence):
        raise AttentionFileError(f"{what} must be a list of strings, got {type(x).__name__}")
    if any(isinstance(t, list | tuple) for t in x):
        raise AttentionFileError(f"{what} must be one flat list of strings (one per position), not a list of lists")
    return [str(t) for t in x]


def maps_from(
    attentions: Any,
    tokens: Any = None,
    k_tokens: Any = None,
    *,
    q_tokens: Any = None,
    keep: Any = None,
    token_type_ids: Any = None,
    item: int = 0,
    name: str = "attention",
    max_bytes: int | None = None,
) -> AttentionMaps:
    """Return AttentionMaps from attention in any accepted layout and its tokens, checked.

    tokens (or q_tokens) name the query rows, k_tokens the key columns when they differ (cross-attention).
    Without tokens, positions are named 0…n−1 and a note says so. Token counts must match the maps (the
    message names both sizes); values must be finite and ≥ 0; rows off 1 give a note.
    """
    notes: list[Note] = []
    max_bytes = _cap(max_bytes)
    attn = normalise_attentions(attentions, item=item, max_bytes=max_bytes, notes=notes)
    L, H, Q, K = attn.shape  # layers, heads, q_pos, k_pos
    notes += check_values(attn)
    q_given = q_tokens if q_tokens is not None else tokens
    named = q_given is not None
    q_list = _tokens(q_given, "tokens") if named else [str(i) for i in range(Q)]
    if len(q_list) != Q:
        raise AttentionFileError(
            f"the attention has {Q} query positions, while the tokens number {len(q_list)}: "
            "give one token per query row"
        )
    if k_tokens is not None:
        k_list = _tokens(k_tokens, "k_tokens")
        if len(k_list) != K:
            raise AttentionFileError(
                f"the attention has {K} key positions, while k_tokens number {len(k_list)}: "
                "give one key token per column"
            )
    elif K == Q:
        k_list = q_list
    else:
        k_list = [str(j) for j in range(K)]
        if named:
            text = f"the keys ({K}) are not the queries ({Q}) and no k_tokens were given: keys are named 0…{K - 1}"
            notes.append(Note("keys", text, {"k": K, "q": Q, "last": K - 1}))
    cross = K != Q or (k_tokens is not None and k_list != q_list)
    if not named:
        notes.append(
            Note("positions", f"no tokens were given: positions are named 0…{max(Q, K) - 1}", {"last": max(Q, K) - 1})
        )
    keep_arr = None
    if keep is not None:
        keep_arr = _array(keep, "the mask", max_bytes)
        if keep_arr.ndim == 4 and keep_arr.shape[:2] == (1, 1) or keep_arr.ndim == 3 and keep_arr.shape[0] == 1:
            keep_arr = keep_arr.reshape(keep_arr.shape[-2:])
        if keep_arr.shape != (Q, K):
            raise AttentionFileError(
                f"the mask has shape {tuple(keep_arr.shape)}, the maps are (q_pos, k_pos) = ({Q}, {K}): "
                "a file's mask must be (q_pos, k_pos), True = may attend"
            )
        keep_arr = keep_arr.astype(bool)
    types = None
    if token_type_ids is not None and not cross:
        types = _array(token_type_ids, "token_type_ids", max_bytes).astype(np.int64).reshape(-1)
        if types.shape != (Q,):
            raise AttentionFileError(f"token_type_ids has {types.size} entries, the attention {Q} positions")
    causal = not cross and is_causal(attn)
    return AttentionMaps(
        attentions=attn,
        q_tokens=q_list,
        k_tokens=k_list,
        keep=keep_arr,
        token_type_ids=types if types is not None and types.any() else None,
        cross=cross,
        causal=causal,
        named=named,
        model=name,
        notes=notes,
        mask="from file" if keep_arr is not None else ("causal (detected)" if causal else "none"),
    )


# ---- files -----------------------------------------------------------------------------------------


def read(
    source: str | Path | bytes, name: str | None = None, item: int = 0, max_bytes: int | None = None
) -> AttentionMaps:
    """Return the maps in an attention file (a path, or its bytes with its file name), checked.

    The format is told by the file's first bytes (and, for a torch file, its suffix): NPZ, NPY, JSON,
    safetensors or torch.save. Every size is checked before it is inflated or allocated.
    """
    max_bytes = _cap(max_bytes)
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        label = name or "upload"
    else:
        path = Path(source)
        label = name or path.name
        data = read_user_file(path, "attention file")  # a regular file within ATTENTION_LENS_MAX_UPLOAD_MB
    if len(data) > max_bytes:
        raise AttentionFileError(_file_too_big(label, len(data), max_bytes))
    if not data:
        raise AttentionFileError(f"{label} is empty")
    suffix = Path(label).suffix.lower()
    fields = _fields(data, label, suffix, max_bytes)
    attn = fields.pop("attentions")
    try:
        return maps_from(attn, item=item, name=label, max_bytes=max_bytes, **fields)
    except AttentionFileError as err:
        raise AttentionFileError(f"{label}: {err}") from err


def _file_too_big(label: str, size: int, max_bytes: int) -> str:
    return (
        f"{label} is {size / 2**20:.0f} MB, over this server's limit of {max_bytes / 2**20:.0f} MB "
        "(ATTENTION_LENS_MAX_UPLOAD_MB)"
    )


def _fields(data: bytes, label: str, suffix: str, max_bytes: int) -> dict[str, Any]:
    """Return {'attentions', 'tokens', 'q_tokens', 'k_tokens', 'keep', 'token_type_ids'} read from the bytes."""
    if suffix in (".pt", ".pth", ".bin"):
        return _from_torch(data, label, max_bytes)
    if data[:6] == b"\x93NUMPY":
        return {"attentions": _npy(io.BytesIO(data), label, max_bytes)}
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            if any(n.endswith("data.pkl") for n in z.namelist()):
                return _from_torch(data, label, max_bytes)
        return _from_npz(data, label, max_bytes)
    if data.lstrip()[:1] in (b"{", b"["):
        return _from_json(data, label)
    if len(data) >= 9 and data[8:9] == b"{":
        return _from_safetensors(data, label, max_bytes)
    if data[:1] == b"\x80":
        return _from_torch(data, label, max_bytes)
    raise AttentionFileError(
        f"{label} is not an attention file this app reads: use NPZ, NPY, JSON, safetensors or a torch.save "
        "file (.pt) of tensors"
    )


def _named(get: Any, keys: Sequence[str], label: str) -> Any:
    """Return the attentions from a mapping's keys: 'attentions', or per layer 'attentions.0', 'attentions.1', …"""
    if "attentions" in keys:
        return get("attentions")
    numbered = sorted(int(k.split(".", 1)[1]) for k in keys if k.startswith("attentions.") and k[11:].isdigit())
    if not numbered:
        found = ", ".join(sorted(keys)[:12]) or "nothing"
        raise AttentionFileError(
            f"{label} holds no attention maps: expected 'attentions' or per layer 'attentions.0', 'attentions.1', …; "
            f"found {found}"
        )
    missing = sorted(set(range(numbered[-1] + 1)) - set(numbered))
    if missing:
        raise AttentionFileError(
            f"{label} has per-layer maps up to attentions.{numbered[-1]} but attentions.{missing[0]} is missing"
        )
    return [get(f"attentions.{i}") for i in numbered]


def _npy_header(f: Any, label: str, member: str, max_bytes: int | None = None) -> NpyHeader:
    """Return a .npy stream's header (files.read_npy_header), its refusals worded for attention files."""
    try:
        return read_npy_header(f, max_bytes)
    except NpyHeaderError as err:
        if err.reason == "damaged":
            raise AttentionFileError(f"{label}: {member} is not a readable .npy array: {err}") from None
        if err.reason == "version":
            raise AttentionFileError(f"{label}: {member} has an unknown .npy version {err.version}") from None
        if err.reason == "objects":
            raise AttentionFileError(
                f"{label}: {member} holds Python objects, which need pickle to load; they are refused. Save tokens "
                "as a string array (np.array(tokens, dtype=str))"
            ) from None
        assert err.header is not None and max_bytes is not None  # a size refusal has both
        what = f"{label} ({member}, {err.header.shape} {err.header.dtype})"
        raise AttentionFileError(_file_too_big(what, err.header.nbytes, max_bytes)) from None


def _npy(f: Any, label: str, max_bytes: int, member: str = "the array") -> np.ndarray:
    start = f.tell()
    _npy_header(f, label, member, max_bytes)
    f.seek(start)
    try:
        return np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, EOFError) as err:  # the data is shorter than its header declares
        raise AttentionFileError(f"{label} is damaged: {str(err).splitlines()[0]}") from None


def _from_npz(data: bytes, label: str, max_bytes: int) -> dict[str, Any]:
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as err:
        raise AttentionFileError(f"{label} is not a readable NPZ (zip) file: {err}") from err
    with z:
        members = {n[:-4]: n for n in z.namelist() if n.endswith(".npy")}
        # Declared sizes first: the zip's own and each .npy header's; nothing is inflated beyond a header yet.
        total = 0
        for key, member in members.items():
            with z.open(member) as f:
                total += _npy_header(f, label, key).nbytes
        if total > max_bytes:
            raise AttentionFileError(_file_too_big(f"{label} (inflated)", total, max_bytes))

        def get(key: str) -> np.ndarray:
            with z.open(members[key]) as f:
                return np.lib.format.read_array(f, allow_pickle=False)

        try:
            out: dict[str, Any] = {"attentions": _named(get, list(members), label)}
            for key, field_name in (
                ("tokens", "tokens"),
                ("q_tokens", "q_tokens"),
                ("k_tokens", "k_tokens"),
                ("mask", "keep"),
                ("token_type_ids", "token_type_ids"),
            ):
                if key in members:
                    out[field_name] = get(key)
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
            raise AttentionFileError(f"{label} is damaged: {err}") from err
    return out


def _from_json(data: bytes, label: str) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AttentionFileError(f"{label} is not valid JSON: {err}") from err
    if isinstance(doc, list):
        return {"attentions": doc}
    if not isinstance(doc, dict):
        raise AttentionFileError(f"{label} must hold a JSON object with 'attentions' (and 'tokens')")
    out: dict[str, Any] = {"attentions": _named(doc.get, list(doc), label)}
    for key, field_name in (("tokens", "tokens"), ("q_tokens", "q_tokens"), ("k_tokens", "k_tokens")):
        if key in doc:
            out[field_name] = doc[key]
    if "mask" in doc and isinstance(doc["mask"], list):
        out["keep"] = doc["mask"]
    if "token_type_ids" in doc:
        out["token_type_ids"] = doc["token_type_ids"]
    return out


def _from_safetensors(data: bytes, label: str, max_bytes: int) -> dict[str, Any]:
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8 or n > 100 * 2**20:
        raise AttentionFileError(f"{label} is not a safetensors file: its header says {n} bytes")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AttentionFileError(f"{label} is not a safetensors file: bad header ({err})") from err
    meta = header.pop("__metadata__", None) or {}
    body = memoryview(data)[8 + n :]
    total = 0
    for key, spec in header.items():
        dtype = _SAFETENSORS_DTYPES.get(spec.get("dtype"))
        if dtype is None:
            raise AttentionFileError(f"{label}: tensor {key} has dtype {spec.get('dtype')}, which is not supported")
        shape = tuple(int(s) for s in spec.get("shape", []))
        begin, end = (int(v) for v in spec.get("data_offsets", (0, 0)))
        size = math.prod(shape) * dtype.itemsize
        if end - begin != size or end > len(body) or begin < 0:
            raise AttentionFileError(f"{label}: tensor {key} {shape} does not fit its offsets; the file is damaged")
        total += math.prod(shape) * 4
    if total > max_bytes:
        raise AttentionFileError(_file_too_big(f"{label} (as float32)", total, max_bytes))

    def get(key: str) -> np.ndarray:
        spec = header[key]
        begin, end = spec["data_offsets"]
        raw = np.frombuffer(body[begin:end], dtype=_SAFETENSORS_DTYPES[spec["dtype"]])
        if spec["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        return raw.reshape(spec["shape"])

    out: dict[str, Any] = {"attentions": _named(get, list(header), label)}
    for key in ("tokens", "q_tokens", "k_tokens"):
        if key in meta:
            try:
                out[key] = json.loads(meta[key])
            except json.JSONDecodeError as err:
                raise AttentionFileError(f"{label}: metadata {key!r} must be a JSON list of strings ({err})") from err
    if "mask" in header:
        out["keep"] = get("mask")
    if "token_type_ids" in header:
        out["token_type_ids"] = get("token_type_ids")
    return out


def _from_torch(data: bytes, label: str, max_bytes: int) -> dict[str, Any]:
    if data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                inflated = sum(i.file_size for i in z.infolist())
        except zipfile.BadZipFile as err:
            raise AttentionFileError(f"{label} is not a readable torch file: {err}") from err
        if inflated > max_bytes:
            raise AttentionFileError(_file_too_big(f"{label} (inflated)", inflated, max_bytes))
    # torch only here: the rest of this module reads files without it. weights_only=True unpickles tensors,
    # lists, dicts, strings and numbers only; anything else (code) is refused before it runs.
    import torch

    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise AttentionFileError(
            f"{label} could not be read as tensors (torch.load with weights_only=True; pickled objects are never "
            f"run): {first[:300]}"
        ) from err
    if isinstance(obj, dict):
        out: dict[str, Any] = {"attentions": _named(obj.get, [str(k) for k in obj], label)}
        for key, field_name in (
            ("tokens", "tokens"),
            ("q_tokens", "q_tokens"),
            ("k_tokens", "k_tokens"),
            ("mask", "keep"),
            ("token_type_ids", "token_type_ids"),
        ):
            if obj.get(key) is not None:
                out[field_name] = obj[key]
        return out
    return {"attentions": obj}
