"""Attention from elsewhere: maps saved by any model, read from a file or taken from memory, as (layers, heads,
q_pos, k_pos) float32 with their tokens. May import numpy and safetensors; torch only to read a `.pt` (with
weights_only=True) or a bfloat16 safetensors tensor.

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
may attend; a `torch.save`d tuple, list, dict or tensor.

One validation layer, before anything is allocated (every refusal is an AttentionFileError, an InputError, whose
one line names the field and the limit): the structure (zip members counted from the bytes, per-layer keys dense
from 0 and within ATTENTION_LENS_FILE_LAYERS, a torch file's pickle within PICKLE_BYTES and its objects plain
containers), the types (dtypes on an allow-list per field, tokens strings of at most TOKEN_CHARS characters,
token-type ids whole numbers 0…TYPE_ID_MAX), the sizes (every declared shape from .npy headers, safetensors'
header as its own library parses it, or a tensor's metadata, against ATTENTION_LENS_MAX_UPLOAD_MB as float32) and
the counts (layers, heads per layer, layers × heads and positions against their ATTENTION_LENS_FILE_* budgets).
JSON goes through files.load_json (values, keys, depth and the length of each number bounded). Values: NaN, ±inf
and negative weights are refused with the first position. Pickled objects are never loaded.
"""

from __future__ import annotations

import io
import math
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import settings
from .capabilities import Capabilities
from .errors import InputError
from .files import NpyHeader, NpyHeaderError, load_json, read_npy_header, read_user_file, zip_members

ROW_SUM_TOL = 1e-3  # rows further than this from 1 get a warning (masked or renormalised maps are legitimate)
SUFFIXES = (".npz", ".npy", ".json", ".safetensors", ".pt", ".pth", ".bin")
FIELDS = ("attentions", "tokens", "q_tokens", "k_tokens", "mask", "token_type_ids")
TOKEN_CHARS = 1_000  # a token of any tokenizer is a few characters; a pasted document is not a token
TYPE_ID_MAX = settings.CONFIG_BOUNDS["type_vocab_size"][1] - 1  # what a model here may have (BERT: 0 and 1)
EXTRA_MEMBERS = 16  # zip members besides one per layer: tokens, mask, token_type_ids, rollout, torch's records
PICKLE_BYTES = 2 << 20  # a torch file's pickle: torch's weights_only unpickler is Python, ~1 s per MB
LEGACY_TORCH_BYTES = 4 << 20  # the pre-1.6 torch.save format is one pickle with the data: read up to this size
JSON_VALUE_BYTES = 32  # one parsed JSON number costs Python about this much (a float object and its list slot)
OBJECTS = 100_000  # containers and values walked in a torch file's object (a pickle can share one list many times)
NUMERIC = "fiub"  # numpy kinds a map or a mask may hold: floats, integers, booleans
# safetensors dtypes (its header's own names) a map or a mask may hold; F8/F4 and complex are refused by name.
SAFETENSORS_DTYPES = ("F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL")
TORCH_DTYPES = (
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16",
    "uint8", "bool",
)  # fmt: skip
NDIM = {"attentions": 5, "mask": 4, "token_type_ids": 2, "tokens": 1, "q_tokens": 1, "k_tokens": 1}
_BUDGET_OF = {"layers": "file_layers", "heads": "file_heads", "maps": "file_maps", "positions": "file_positions"}


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


# ---- limits: the operator's budgets, read once per file ----------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What one attention file may hold: bytes as float32, layers, heads per layer, layers × heads, positions."""

    max_bytes: int
    layers: int
    heads: int
    maps: int
    positions: int

    @classmethod
    def now(cls, max_bytes: int | None = None) -> Limits:
        s = settings.current()
        return cls(
            max_bytes=s.max_upload_bytes if max_bytes is None else max_bytes,
            layers=s.file_layers,
            heads=s.file_heads,
            maps=s.file_maps,
            positions=s.file_positions,
        )

    @property
    def elements(self) -> int:
        """Values any one field may declare: each becomes 4 bytes of float32 (an itemsize of 0 changes nothing)."""
        return self.max_bytes // 4

    def check(self, what: str, count: str, n: int) -> None:
        """Refuse n layers / heads / maps / positions over their budget, naming `what` and the budget."""
        budget = _BUDGET_OF[count]
        if n > getattr(self, count):
            raise AttentionFileError(settings.over_budget(budget, n, what))

    def check_maps(self, L: int, H: int, Q: int, K: int, what: str = "the attention") -> None:
        """Refuse (layers, heads, q_pos, k_pos) over any budget, before anything of that size is made."""
        self.check(f"{what} ({L} layers)", "layers", L)
        self.check(f"{what} ({H} heads per layer)", "heads", H)
        self.check(f"{what} ({L} layers × {H} heads)", "maps", L * H)
        self.check(f"{what} ({Q} query positions)", "positions", Q)
        self.check(f"{what} ({K} key positions)", "positions", K)
        nbytes = L * H * Q * K * 4
        if nbytes > self.max_bytes:
            raise AttentionFileError(_too_big(what, nbytes, self.max_bytes))


def _limits(max_bytes: int | Limits | None) -> Limits:
    return max_bytes if isinstance(max_bytes, Limits) else Limits.now(max_bytes)


def _short(text: object, n: int = 40) -> str:
    """Return a key or value as a short name: as it is when printable and short, else quoted and cut (a hostile
    key may be 5,000 characters long or hold line breaks and control characters)."""
    s = str(text)
    if len(s) <= n and s.isprintable():
        return s
    r = repr(s)
    return r if len(r) <= n else r[: n - 4] + "…" + r[-3:]


def _too_big(what: str, nbytes: int, max_bytes: int) -> str:
    return (
        f"{what} would take {nbytes / 2**20:.0f} MB as float32, over this server's limit of "
        f"{max_bytes / 2**20:.0f} MB (ATTENTION_LENS_MAX_UPLOAD_MB); save fewer layers or a shorter input"
    )


def _file_too_big(label: str, size: int, max_bytes: int) -> str:
    return (
        f"{label} is {size / 2**20:.0f} MB, over this server's limit of {max_bytes / 2**20:.0f} MB "
        "(ATTENTION_LENS_MAX_UPLOAD_MB)"
    )


def check_declared(what: str, key: str, shape: Sequence[int], kind: str, limits: Limits) -> None:
    """Refuse a field's declared shape and dtype kind before its data is read.

    key: which field (`attentions`, `mask`, `token_type_ids`, `tokens`…); kind: its numpy dtype kind ('f', 'i',
    'u', 'b', 'U', 'S', …). Dimensions must be non-negative and their product within the float32 budget.
    """
    if len(shape) > NDIM[key]:
        raise AttentionFileError(f"{what} has {len(shape)} dimensions; {key} has at most {NDIM[key]}")
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise AttentionFileError(f"{what} declares shape {tuple(shape)}: dimensions are whole numbers ≥ 0")
    # No axis of any field is longer than the positions (or the maps, for the heads axis of one layer), whatever
    # the other axes are: a zero beside 10¹⁸ declares no bytes, yet no such axis is ever looped over.
    budget = "file_positions" if limits.positions >= limits.maps else "file_maps"
    if shape and max(shape) > max(limits.positions, limits.maps):
        raise AttentionFileError(settings.over_budget(budget, max(shape), f"{what}: one of its axes"))
    count = math.prod(shape)
    if count > limits.elements:
        raise AttentionFileError(_file_too_big(f"{what} ({count:,} values)", count * 4, limits.max_bytes))
    allowed = "US" + NUMERIC if key in ("tokens", "q_tokens", "k_tokens") else NUMERIC
    if kind not in allowed:
        raise AttentionFileError(f"{what} holds {_KINDS.get(kind, kind)} values; {key} takes {_allowed(key)}")


_KINDS = {"c": "complex", "M": "datetime", "m": "timedelta", "V": "structured", "O": "Python object", "U": "string"}
_KINDS["S"] = "byte-string"


def _allowed(key: str) -> str:
    if key in ("tokens", "q_tokens", "k_tokens"):
        return "strings"
    if key == "token_type_ids":
        return f"whole numbers 0…{TYPE_ID_MAX}"
    return "numbers (floats, integers or booleans)"


# ---- the one layout normaliser ---------------------------------------------------------------------


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "detach") and hasattr(x, "numel")


def _tensor_array(x: Any, what: str, limits: Limits) -> np.ndarray:
    """Return a torch tensor (duck-typed) as numpy, after its layout, dtype and size are checked."""
    layout = str(getattr(x, "layout", "torch.strided"))
    if layout != "torch.strided":
        raise AttentionFileError(f"{what} is a {layout.removeprefix('torch.')} tensor: save it dense (.to_dense())")
    dtype = str(getattr(x, "dtype", "")).removeprefix("torch.")
    if dtype not in TORCH_DTYPES:
        raise AttentionFileError(f"{what} holds {dtype} values; maps take {', '.join(TORCH_DTYPES)}")
    n = int(x.numel())
    if n * 4 > limits.max_bytes:
        raise AttentionFileError(_too_big(what, n * 4, limits.max_bytes))
    t = x.detach().cpu()
    return t.float().numpy() if t.is_floating_point() else t.numpy()  # bfloat16 has no numpy dtype


def _array(x: Any, what: str, limits: Limits) -> np.ndarray:
    """Return x as a numpy array without copying more than needed; torch tensors through .detach().cpu().numpy()."""
    if _is_tensor(x):
        return _tensor_array(x, what, limits)
    if isinstance(x, np.ndarray):
        return x
    try:
        a = np.asarray(x)
    except (ValueError, OverflowError, TypeError) as err:  # ragged nested lists, integers past int64
        detail = str(err).splitlines()[0][:160] if str(err) else type(err).__name__
        raise AttentionFileError(
            f"{what} is ragged or not numbers: expected nested lists of floats ({detail})"
        ) from None
    if a.dtype == object:
        raise AttentionFileError(f"{what} is ragged or not numbers: expected nested lists of floats")
    return a


def _pick(a: np.ndarray, axis: int, item: int, notes: list[Note]) -> np.ndarray:
    batch = a.shape[axis]
    if not 0 <= item < batch:
        raise AttentionFileError(f"item {item} was asked for, but the batch holds {batch} item(s) (0…{batch - 1})")
    if batch > 1:
        text = f"the attention holds a batch of {batch}; showing item {item} (choose another with item=…)"
        notes.append(Note("batch", text, {"batch": batch, "item": item}))
    return a[(slice(None),) * axis + (item,)]  # a view: the one copy is made when layers are stacked


def normalise_attentions(
    obj: Any, item: int = 0, max_bytes: int | Limits | None = None, notes: list[Note] | None = None
) -> np.ndarray:
    """Return attention in any accepted layout as one (layers, heads, q_pos, k_pos) float32 array.

    Accepted layouts are listed in the module docstring. item picks the batch element where there is a batch
    axis (a note in `notes` says so when the batch has more than one). Raises AttentionFileError naming the
    shape it got when the layout is not one of them, and naming the budget when the maps would go over one
    (bytes as float32, layers, heads, layers × heads, positions): checked before the float32 copy is made.
    """
    notes = notes if notes is not None else []
    limits = _limits(max_bytes)
    if not isinstance(obj, np.ndarray | list | tuple) and getattr(obj, "attentions", None) is not None:
        obj = obj.attentions  # a transformers ModelOutput
    per_layer = isinstance(obj, list | tuple) and len(obj) > 0 and all(hasattr(x, "shape") for x in obj)
    if per_layer:
        limits.check(f"the attention ({len(obj)} per-layer arrays)", "layers", len(obj))
        total = sum(math.prod(int(n) for n in x.shape) for x in obj)
        if total * 4 > limits.max_bytes:
            raise AttentionFileError(_too_big("the attention", total * 4, limits.max_bytes))
        layers: list[np.ndarray] = []
        for i, x in enumerate(obj):
            a = _array(x, f"layer {i}", limits)
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
            if i == 0:
                H, Q, K = (int(n) for n in a.shape)
                limits.check_maps(len(obj), H, Q, K)
            layers.append(_float(a, f"layer {i}"))
        attn = np.stack(layers)
    else:
        if isinstance(obj, list | tuple) and len(obj) == 0:
            raise AttentionFileError("the attention is empty (no layers)")
        a = _array(obj, "the attention", limits)
        if a.size * 4 > limits.max_bytes:
            raise AttentionFileError(_too_big("the attention", a.size * 4, limits.max_bytes))
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
        L, H, Q, K = (int(n) for n in a.shape)
        limits.check_maps(L, H, Q, K)
        attn = _float(a, "the attention")
    if attn.size == 0:
        raise AttentionFileError(f"the attention is empty: shape {tuple(attn.shape)}")
    return np.ascontiguousarray(attn, dtype=np.float32)


def _float(a: np.ndarray, what: str) -> np.ndarray:
    if a.dtype.kind not in NUMERIC:
        raise AttentionFileError(f"{what} holds {a.dtype} values, not numbers")
    with np.errstate(over="ignore"):  # float64 past float32's range becomes inf, which check_values refuses by name
        return a.astype(np.float32, copy=False)


# ---- checks ----------------------------------------------------------------------------------------


def _first(bad: np.ndarray) -> tuple[int, ...]:
    """Return the index of the first True of a bool array (one pass, no list of every offending cell)."""
    return tuple(int(v) for v in np.unravel_index(int(np.argmax(bad)), bad.shape))


def check_values(attn: np.ndarray) -> list[Note]:
    """Refuse NaN, ±inf and weights outside [0, 1] (naming the first head and cell); return notes on row sums.

    attn: (layers, heads, q_pos, k_pos). Rows that do not sum to 1 are a note, not a refusal: masked rows and
    renormalised maps are legitimate, but the shares shown are then not fractions of a whole. Three passes over
    the maps (the row sums, which NaN and ±inf reach, then below 0 and above 1); the offending cell is looked up
    only when there is one.
    """
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and inf are the point: found and named below
        sums = attn.sum(-1, dtype=np.float64)  # (layers, heads, q_pos)
    if not np.isfinite(sums).all():
        bad = ~np.isfinite(attn)
        if bad.any():
            layer, h, i, j = _first(bad)
            raise AttentionFileError(
                f"the attention holds {int(bad.sum())} NaN or infinite value(s), the first at layer {layer}, head "
                f"{h}, query {i}, key {j} ({attn[layer, h, i, j]}): fix the source (a fully masked row with -inf?)"
            )
        layer, h, i = _first(~np.isfinite(sums))  # float32 rows cannot overflow float64; kept so NaN never passes
        raise AttentionFileError(f"the attention's row at layer {layer}, head {h}, query {i} does not sum to a number")
    for bad, what in ((attn < 0, "negative value(s)"), (attn > 1 + ROW_SUM_TOL, "value(s) above 1")):
        if bad.any():  # a softmax weight lies in [0, 1]; 3e38 would also overflow every statistic downstream
            layer, h, i, j = _first(bad)
            raise AttentionFileError(
                f"the attention holds {int(bad.sum())} {what}, the first {attn[layer, h, i, j]:.4g} at layer "
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


def _count(x: Any) -> int | None:
    """Return how many entries a flat sequence-like x has without converting it (None: not sequence-like)."""
    if isinstance(x, np.ndarray) or _is_tensor(x):
        return int(math.prod(int(n) for n in x.shape))
    if isinstance(x, list | tuple):
        return len(x)
    return None


def _tokens(x: Any, what: str, n: int, axis: str, limits: Limits) -> list[str]:
    """Return the tokens of one axis as strings: n of them (the maps' positions on `axis`), each short."""
    if x is None:
        raise AttentionFileError(f"{what} is missing")
    count = _count(x)
    if isinstance(x, str) or count is None:
        raise AttentionFileError(f"{what} must be a list of strings, got {type(x).__name__}")
    if count != n:
        if what == "tokens":
            raise AttentionFileError(
                f"the attention has {n} {axis} positions, while the tokens number {count}: give one token per "
                f"{'query row' if axis == 'query' else 'key column'}"
            )
        raise AttentionFileError(
            f"the attention has {n} {axis} positions, while {what} number {count}: give one key token per column"
        )
    if isinstance(x, np.ndarray) or _is_tensor(x):
        a = _array(x, what, limits)
        if a.ndim != 1:
            raise AttentionFileError(f"{what} must be one flat list of strings (one per position), not {a.shape}")
        if a.dtype.kind not in "USiub":
            raise AttentionFileError(f"{what} holds {_KINDS.get(a.dtype.kind, str(a.dtype))} values; it takes strings")
        x = a.tolist()
    out: list[str] = []
    for i, t in enumerate(x):
        if isinstance(t, bytes):
            t = t.decode("utf-8", errors="replace")
        if isinstance(t, bool) or not isinstance(t, str | int):
            kind = "a list" if isinstance(t, list | tuple) else type(t).__name__
            raise AttentionFileError(f"{what}[{i}] is {kind}: {what} must be one flat list of strings")
        t = str(t)
        if len(t) > TOKEN_CHARS:
            raise AttentionFileError(f"{what}[{i}] has {len(t):,} characters; a token here has at most {TOKEN_CHARS:,}")
        out.append(t)
    return out


def _type_ids(x: Any, n: int, limits: Limits) -> np.ndarray:
    """Return token_type_ids as (n,) int64: whole numbers 0…TYPE_ID_MAX, one per query position."""
    want = f"token_type_ids must be whole numbers 0…{TYPE_ID_MAX} (0 = sentence A, 1 = sentence B), one per position"
    count = _count(x)
    if count is None or isinstance(x, str):
        raise AttentionFileError(f"{want}; got {type(x).__name__}")
    if count != n:
        raise AttentionFileError(f"token_type_ids has {count} entries, the attention {n} positions")
    if isinstance(x, list | tuple):
        for i, v in enumerate(x):  # JSON or a pickle: each a Python number, checked before numpy sees it
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or isinstance(v, int)
                and not 0 <= v <= TYPE_ID_MAX
            ):
                raise AttentionFileError(f"{want}; token_type_ids[{i}] is {_short(v)}")
    a = _array(x, "token_type_ids", limits).reshape(-1)
    if a.dtype.kind not in NUMERIC:
        raise AttentionFileError(f"{want}; got {_KINDS.get(a.dtype.kind, str(a.dtype))} values")
    if a.dtype.kind == "f":
        whole = np.isfinite(a) & (a == np.round(a))
        if not whole.all():
            i = int(np.argmin(whole))
            raise AttentionFileError(f"{want}; token_type_ids[{i}] is {a[i]}")
    bad = (a < 0) | (a > TYPE_ID_MAX)
    if bad.any():
        i = int(np.argmax(bad))
        raise AttentionFileError(f"{want}; token_type_ids[{i}] is {a[i]}")
    return a.astype(np.int64)


def _keep(x: Any, Q: int, K: int, limits: Limits) -> np.ndarray:
    """Return a file's mask as (q_pos, k_pos) bool, True = may attend."""
    count = _count(x)
    if count is not None and count > limits.elements:
        raise AttentionFileError(_file_too_big(f"the mask ({count:,} values)", count * 4, limits.max_bytes))
    keep = _array(x, "the mask", limits)
    if keep.dtype.kind not in NUMERIC:
        raise AttentionFileError(f"the mask holds {_KINDS.get(keep.dtype.kind, str(keep.dtype))} values; a mask is 0/1")
    if keep.ndim == 4 and keep.shape[:2] == (1, 1) or keep.ndim == 3 and keep.shape[0] == 1:
        keep = keep.reshape(keep.shape[-2:])
    if keep.shape != (Q, K):
        raise AttentionFileError(
            f"the mask has shape {tuple(keep.shape)}, the maps are (q_pos, k_pos) = ({Q}, {K}): "
            "a file's mask must be (q_pos, k_pos), True = may attend"
        )
    return keep.astype(bool)


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
    max_bytes: int | Limits | None = None,
) -> AttentionMaps:
    """Return AttentionMaps from attention in any accepted layout and its tokens, checked.

    tokens (or q_tokens) name the query rows, k_tokens the key columns when they differ (cross-attention).
    Without tokens, positions are named 0…n−1 and a note says so. Token counts must match the maps (the
    message names both sizes); values must be finite and ≥ 0; rows off 1 give a note.
    """
    notes: list[Note] = []
    limits = _limits(max_bytes)
    attn = normalise_attentions(attentions, item=item, max_bytes=limits, notes=notes)
    L, H, Q, K = attn.shape  # layers, heads, q_pos, k_pos
    notes += check_values(attn)
    q_given = q_tokens if q_tokens is not None else tokens
    named = q_given is not None
    q_list = _tokens(q_given, "tokens", Q, "query", limits) if named else [str(i) for i in range(Q)]
    if k_tokens is not None:
        k_list = _tokens(k_tokens, "k_tokens", K, "key", limits)
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
    keep_arr = None if keep is None else _keep(keep, Q, K, limits)
    types = None
    if token_type_ids is not None and not cross:
        types = _type_ids(token_type_ids, Q, limits)
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
    safetensors or torch.save. Every size and count is checked before it is inflated or allocated; every
    refusal is an AttentionFileError (an InputError) whose one line starts with the file's name.
    """
    limits = Limits.now(max_bytes)
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        label = name or "upload"
    else:
        path = Path(source)
        label = name or path.name
        data = read_user_file(path, "attention file")  # a regular file within ATTENTION_LENS_MAX_UPLOAD_MB
    label = _short(label, 80)
    if len(data) > limits.max_bytes:
        raise AttentionFileError(_file_too_big(label, len(data), limits.max_bytes))
    if not data:
        raise AttentionFileError(f"{label} is empty")
    suffix = Path(label).suffix.lower()
    fields = _fields(data, label, suffix, limits)
    attn = fields.pop("attentions")
    try:
        return maps_from(attn, item=item, name=label, max_bytes=limits, **fields)
    except AttentionFileError as err:
        raise AttentionFileError(f"{label}: {err}") from err


def _fields(data: bytes, label: str, suffix: str, limits: Limits) -> dict[str, Any]:
    """Return {'attentions', 'tokens', 'q_tokens', 'k_tokens', 'keep', 'token_type_ids'} read from the bytes."""
    if suffix in (".pt", ".pth", ".bin"):
        return _from_torch(data, label, limits)
    if data[:6] == b"\x93NUMPY":
        f = io.BytesIO(data)
        return {"attentions": _npy(f, label, "the array", "attentions", limits)}
    if data[:4] == b"PK\x03\x04":
        with _zip(data, label, limits) as z:
            torch_zip = any(n.endswith("data.pkl") for n in z.namelist())
        return _from_torch(data, label, limits) if torch_zip else _from_npz(data, label, limits)
    if data.lstrip()[:1] in (b"{", b"["):
        return _from_json(data, label, limits)
    if len(data) >= 9 and data[8:9] == b"{":
        return _from_safetensors(data, label, limits)
    if data[:1] == b"\x80":
        return _from_torch(data, label, limits)
    raise AttentionFileError(
        f"{label} is not an attention file this app reads: use NPZ, NPY, JSON, safetensors or a torch.save "
        "file (.pt) of tensors"
    )


def _layer_keys(keys: Sequence[str], label: str, limits: Limits) -> list[str]:
    """Return the per-layer keys 'attentions.0', 'attentions.1', … in layer order, checked before any is read.

    Numbers of more digits than the layer budget has, or over it, are refused from the key's text (no int() of
    5,000 digits, no range over 10¹¹ layers); the layers must be dense from 0, each named once.
    """
    digits_max = len(str(limits.layers))
    by_layer: dict[int, str] = {}
    for key in keys:
        if not key.startswith("attentions."):
            continue
        digits = key[len("attentions.") :]
        if not (digits.isascii() and digits.isdigit()):
            continue  # attentions.meta and the like are not layers
        if len(digits) > digits_max or int(digits) >= limits.layers:
            shown = digits if len(digits) <= 30 else f"a {len(digits):,}-digit number"
            raise AttentionFileError(
                f"{label}: key attentions.{shown} names a layer past the budget ATTENTION_LENS_FILE_LAYERS, which "
                f"allows {limits.layers:,} layers (attentions.0 … attentions.{limits.layers - 1})"
            )
        layer = int(digits)
        if layer in by_layer:
            raise AttentionFileError(
                f"{label}: keys {_short(by_layer[layer])} and {_short(key)} both name layer {layer}"
            )
        by_layer[layer] = key
    if not by_layer:
        return []
    last = max(by_layer)
    missing = next((i for i in range(last + 1) if i not in by_layer), None)
    if missing is not None:
        raise AttentionFileError(
            f"{label} has per-layer maps up to attentions.{last} but attentions.{missing} is missing"
        )
    return [by_layer[i] for i in range(last + 1)]


def _attention_keys(keys: Sequence[str], label: str, limits: Limits) -> str | list[str]:
    """Return 'attentions', or the per-layer keys in order; refuse a mapping that holds neither."""
    if "attentions" in keys:
        return "attentions"
    layers = _layer_keys(keys, label, limits)
    if not layers:
        found = ", ".join(_short(k, 30) for k in sorted(keys)[:12]) or "nothing"
        raise AttentionFileError(
            f"{label} holds no attention maps: expected 'attentions' or per layer 'attentions.0', 'attentions.1', …; "
            f"found {found}"
        )
    return layers


def _read_fields(keys: Sequence[str], get: Callable[[str, str], Any], label: str, limits: Limits) -> dict[str, Any]:
    """Return the fields of a mapping whose entries `get(key, field)` reads; the attention keys first checked."""
    names = _attention_keys(keys, label, limits)
    out: dict[str, Any] = {
        "attentions": get(names, "attentions") if isinstance(names, str) else [get(k, "attentions") for k in names]
    }
    for key in ("tokens", "q_tokens", "k_tokens", "mask", "token_type_ids"):
        if key in keys:
            value = get(key, key)
            if value is not None:
                out["keep" if key == "mask" else key] = value
    return out


# ---- NPY and NPZ -----------------------------------------------------------------------------------


def _header(f: Any, label: str, member: str, key: str, limits: Limits) -> NpyHeader:
    """Return a .npy stream's header, refused in the attention file's words when it is damaged, holds objects or
    structured values, or declares a shape or dtype this field does not take."""
    try:
        header = read_npy_header(f, limits.max_bytes)
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
        assert err.header is not None  # a size refusal has the header
        what = f"{label} ({member}, {err.header.shape} {err.header.dtype})"
        raise AttentionFileError(_file_too_big(what, err.header.nbytes, limits.max_bytes)) from None
    if header.dtype.fields:
        raise AttentionFileError(f"{label}: {member} holds structured values; {key} takes {_allowed(key)}")
    check_declared(f"{label}: {member} {header.shape}", key, header.shape, header.dtype.kind, limits)
    return header


def _npy(f: Any, label: str, member: str, key: str, limits: Limits) -> np.ndarray:
    """Return one .npy array (alone or an NPZ member), its header checked first: never unpickled."""
    start = f.tell()
    _header(f, label, member, key, limits)
    f.seek(start)
    try:
        return np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, zlib.error) as err:  # shorter than declared, bad CRC
        detail = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        where = "" if member == "the array" else f"{member}: "
        raise AttentionFileError(f"{label} is damaged: {where}{detail}") from None


# What zipfile raises on a damaged or unusual archive: a bad CRC or header, bad deflate data, an encrypted or
# unknown compression method, a member shorter than its entry says.
_ZIP_ERRORS: tuple[type[Exception], ...] = (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)
_ZIP_ERRORS += (ValueError, EOFError, OSError, KeyError, OverflowError, UnicodeDecodeError)


def _zip(data: bytes, label: str, limits: Limits) -> zipfile.ZipFile:
    """Return the zip archive in data, its members counted from the bytes first (zipfile makes one object each)."""
    most = limits.layers + EXTRA_MEMBERS
    if zip_members(data) > most:
        raise AttentionFileError(
            f"{label} holds about {zip_members(data):,} zip members; an attention file has at most {most:,} (one per "
            f"layer within ATTENTION_LENS_FILE_LAYERS = {limits.layers:,}, and {EXTRA_MEMBERS} more)"
        )
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except _ZIP_ERRORS as err:
        raise AttentionFileError(f"{label} is not a readable zip file: {str(err)[:200]}") from None


def _from_npz(data: bytes, label: str, limits: Limits) -> dict[str, Any]:
    with _zip(data, label, limits) as z:
        members = {n[:-4]: n for n in z.namelist() if n.endswith(".npy")}

        def get(key: str, field_name: str) -> np.ndarray:  # every member is read through its checked header
            try:
                with z.open(members[key]) as f:
                    return _npy(f, label, key, field_name, limits)
            except _ZIP_ERRORS as err:
                raise AttentionFileError(f"{label} is damaged: {key}: {str(err)[:200]}") from None

        # Declared sizes first, of every member that will be read: nothing is inflated beyond a header yet.
        names = _attention_keys(list(members), label, limits)
        wanted = [names] if isinstance(names, str) else list(names)
        wanted += [k for k in ("tokens", "q_tokens", "k_tokens", "mask", "token_type_ids") if k in members]
        total = 0
        for key in wanted:
            try:
                with z.open(members[key]) as f:
                    header = _header(f, label, key, "attentions" if key.startswith("attentions") else key, limits)
            except _ZIP_ERRORS as err:
                raise AttentionFileError(f"{label} is damaged: {key}: {str(err)[:200]}") from None
            total += math.prod(header.shape) * max(header.dtype.itemsize, 4)
        if total > limits.max_bytes:
            raise AttentionFileError(_file_too_big(f"{label} (inflated)", total, limits.max_bytes))
        return _read_fields(list(members), get, label, limits)


# ---- JSON ------------------------------------------------------------------------------------------


def _from_json(data: bytes, label: str, limits: Limits) -> dict[str, Any]:
    try:
        doc = load_json(
            data, label, max_values=limits.max_bytes // JSON_VALUE_BYTES, max_keys=limits.layers + EXTRA_MEMBERS
        )
    except InputError as err:
        raise AttentionFileError(str(err)) from None
    if isinstance(doc, list):
        return {"attentions": doc}
    if not isinstance(doc, dict):
        raise AttentionFileError(f"{label} must hold a JSON object with 'attentions' (and 'tokens')")
    out = _read_fields(list(doc), lambda key, _field: doc[key], label, limits)
    if "keep" in out and not isinstance(out["keep"], list):
        raise AttentionFileError(f"{label}: mask must be a (q_pos, k_pos) array of 0/1 or true/false")
    return out


# ---- safetensors: its own library reads the header --------------------------------------------------------


def _from_safetensors(data: bytes, label: str, limits: Limits) -> dict[str, Any]:
    """Return the fields of a safetensors file; the header is parsed and checked by the safetensors library
    (offsets inside the file and not overlapping, known dtypes, shape × dtype = size, metadata strings)."""
    from safetensors import SafetensorError, safe_open

    with tempfile.TemporaryDirectory(prefix="attention-lens-") as tmp:
        path = Path(tmp) / "upload.safetensors"  # safe_open reads a path (memory-mapped), not bytes
        path.write_bytes(data)
        try:
            with safe_open(path, framework="numpy") as f:
                keys = list(f.keys())
                most = limits.layers + EXTRA_MEMBERS
                if len(keys) > most:
                    raise AttentionFileError(
                        f"{label} holds {len(keys):,} tensors; an attention file has at most {most:,}"
                    )
                meta = f.metadata() or {}

                def get(key: str, field_name: str) -> Any:
                    if field_name in ("tokens", "q_tokens", "k_tokens"):
                        return None  # tokens live in the metadata (below); a tensor of that name is not read
                    piece = f.get_slice(key)
                    dtype, shape = piece.get_dtype(), [int(n) for n in piece.get_shape()]
                    if dtype not in SAFETENSORS_DTYPES:
                        raise AttentionFileError(
                            f"{label}: tensor {_short(key)} has dtype {dtype}; {field_name} takes "
                            f"{', '.join(SAFETENSORS_DTYPES)}"
                        )
                    check_declared(f"{label}: tensor {_short(key)} {tuple(shape)}", field_name, shape, "f", limits)
                    if dtype == "BF16":  # numpy has no bfloat16: this one tensor through torch
                        with safe_open(path, framework="pt") as ft:
                            return ft.get_tensor(key).float().numpy()
                    return f.get_tensor(key)

                out = _read_fields(keys, get, label, limits)
        except SafetensorError as err:
            detail = str(err).removeprefix("Error while deserializing header: ")
            raise AttentionFileError(f"{label} is not a readable safetensors file: {detail[:200]}") from None
    for key in ("tokens", "q_tokens", "k_tokens"):
        if key in meta:
            what = f"{label}: metadata {key!r}"
            try:
                value = load_json(meta[key].encode("utf-8"), what, max_values=limits.positions + 1, max_keys=0)
            except InputError as err:
                raise AttentionFileError(f"{err} (it must be a JSON list of strings)") from None
            if not isinstance(value, list):
                raise AttentionFileError(f"{what} must be a JSON list of strings, got {type(value).__name__}")
            out[key] = value
    return out


# ---- torch.save: weights_only, within a pickle budget -----------------------------------------------------


def _from_torch(data: bytes, label: str, limits: Limits) -> dict[str, Any]:
    if data[:4] == b"PK\x03\x04":
        with _zip(data, label, limits) as z:
            try:
                infos = z.infolist()
            except _ZIP_ERRORS as err:
                raise AttentionFileError(f"{label} is not a readable torch file: {str(err)[:200]}") from None
        inflated = sum(i.file_size for i in infos)
        if inflated > limits.max_bytes:
            raise AttentionFileError(_file_too_big(f"{label} (inflated)", inflated, limits.max_bytes))
        pickled = sum(i.file_size for i in infos if i.filename.endswith(".pkl"))
        if pickled > PICKLE_BYTES:
            raise AttentionFileError(
                f"{label}: its pickle is {pickled / 2**20:.1f} MB; a torch file of attention keeps at most "
                f"{PICKLE_BYTES / 2**20:.0f} MB there (tensors are stored beside it; long lists of Python values are not)"
            )
    elif len(data) > LEGACY_TORCH_BYTES:
        raise AttentionFileError(
            f"{label} is {len(data) / 2**20:.1f} MB in torch's legacy format (one pickle), read up to "
            f"{LEGACY_TORCH_BYTES / 2**20:.0f} MB; save it with torch.save's default (zip) format"
        )
    # torch only here: the rest of this module reads files without it. weights_only=True unpickles tensors,
    # lists, dicts, strings and numbers only; anything else (code) is refused before it runs.
    import torch

    try:
        with warnings.catch_warnings():
            # torch warns while it rebuilds a sparse-CSR or a quantized tensor (beta, deprecated): those files are
            # refused below in one line, which its warnings would have turned into three to five.
            warnings.simplefilter("ignore")
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise AttentionFileError(
            f"{label} could not be read as tensors (torch.load with weights_only=True; pickled objects are never "
            f"run): {first[:300]}"
        ) from err
    _plain(obj, label)
    if isinstance(obj, dict):
        entries = {str(k): v for k, v in obj.items()}
        return _read_fields(list(entries), lambda key, _field: entries[key], label, limits)
    return {"attentions": obj}


def _plain(obj: Any, label: str) -> None:
    """Refuse what weights_only lets through but a file of attention never holds: other objects, deep nesting, and
    more than OBJECTS containers and values (a pickle can put one list inside another many times over)."""
    seen = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        x, depth = stack.pop()
        seen += 1
        if seen > OBJECTS:
            raise AttentionFileError(f"{label} holds more than {OBJECTS:,} objects; an attention file holds far fewer")
        if depth > NDIM["attentions"] + 2:
            raise AttentionFileError(f"{label} nests lists or dicts more than {NDIM['attentions'] + 2} levels deep")
        if _is_tensor(x) or x is None or isinstance(x, str | bytes | int | float):
            continue
        if isinstance(x, dict):
            if any(not isinstance(k, str | int) for k in x):
                raise AttentionFileError(f"{label}: a dict with keys that are not names or numbers")
            stack.extend((v, depth + 1) for v in x.values())
        elif isinstance(x, list | tuple):
            stack.extend((v, depth + 1) for v in x)
        else:
            raise AttentionFileError(f"{label} holds a {type(x).__name__}; an attention file holds tensors and lists")
