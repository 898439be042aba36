"""Attention masks. Inside this codebase a mask is `keep`: bool, True = the query may attend to the key.

Shapes broadcast to (batch, heads, q_pos, k_pos). Other conventions are converted at the edge, where the user
declares them (`to_keep`):

  keep      True / 1 = may attend: scaled_dot_product_attention's bool mask, Hugging Face's attention_mask,
            the tutorial's `scores.masked_fill(mask == 0, -inf)`
  drop      True / 1 = masked: nn.MultiheadAttention's bool attn_mask and key_padding_mask
  additive  a float added to the scores: 0 = may attend, -inf or a large negative (finfo.min, -1e4, -1e9) = masked

User masks come as tensors, arrays, files (.npy without pickle, .pt with weights_only=True, .npz) or short
expressions over `seq` (models.masks.expressions, evaluated without eval()).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import MaskError
from . import predicates
from .expectations import is_expectation
from .expectations import parse as parse_expectation

NAMED_MASKS = ("bidirectional", "causal", "window:W", "prefix:P", "chunk:C", "docs:L1,L2,…", "padding")
_WORD = re.compile(r"[A-Za-z_][\w-]*(:[\w,-]*)?(\s*\+\s*[A-Za-z_][\w-]*(:[\w,-]*)?)*")

CONVENTIONS = ("keep", "drop", "additive")
CONVENTION_HELP = {
    "keep": "True / 1 = may attend (SDPA bool mask, Hugging Face attention_mask, masked_fill(mask == 0, -inf))",
    "drop": "True / 1 = masked (nn.MultiheadAttention attn_mask and key_padding_mask)",
    "additive": "added to the scores: 0 = may attend, -inf / finfo.min / -1e4 = masked",
}
# An additive value at or below this hides the key: exp(-1e4) is exactly 0 in float32, float16 and bfloat16.
# It covers -inf, finfo.min, -1e9 (masked_fill(..., -1e9)) and the -10000.0 of the original BERT code.
HARD_NEGATIVE = -1e4
AXES = ("batch", "heads", "q_pos", "k_pos")
# Largest mask anyone may build or load: 2^24 cells holds (4, 12, 512, 512), 16 MiB as bool, 128 MiB as float64.
MAX_ELEMENTS = 1 << 24
MAX_FILE_BYTES = 256 << 20
MASK_FILE_SUFFIXES = (".npy", ".npz", ".pt", ".pth")


# ---- named masks -----------------------------------------------------------------------------------


def padding_keep(attention_mask: torch.Tensor) -> torch.Tensor:
    """Return (batch, 1, 1, k_pos) bool from a tokenizer's (batch, seq) 0/1 mask: padded keys are hidden.

    Padding masks keys, not queries: a padded query row still gets a distribution over the real tokens,
    exactly as in Hugging Face's BertModel (statistics drop those rows later).
    """
    if attention_mask.dim() != 2:
        raise MaskError(f"a padding mask is (batch, seq); got shape {tuple(attention_mask.shape)}")
    return attention_mask.bool()[:, None, None, :]


def causal_keep(seq: int, device: torch.device | str | None = None, window: int | None = None) -> torch.Tensor:
    """Return (seq, seq) bool lower triangle: each position sees itself and the positions to its left.

    window W: a sliding-window causal mask (Mistral's, transformers' sliding_window_causal_mask_function): query
    i sees keys i − W + 1 … i, itself and the W − 1 before it.
    """
    return predicates.dense(predicates.causal_window(window), seq, device)


def sink_window_keep(
    queries: torch.Tensor | int, keys: torch.Tensor | None, window: int | None, sink: int = 0
) -> torch.Tensor:
    """Return (len(queries), len(keys)) bool: what a bounded KV cache lets each query see (StreamingLLM's cache).

    queries, keys: 1-D long tensors of the tokens' own positions (a cache that evicts keys keeps their positions);
    an int n for queries with keys None: positions 0 … n − 1 for both, the (n, n) mask of one pass.
    Query i sees key j when j ≤ i and (j < sink or i − j < window): the first `sink` tokens plus the `window` most
    recent, itself included. window None: every earlier key (causal). sink 0: causal_keep(window=W)'s rows.
    """
    if isinstance(queries, int):
        queries = torch.arange(queries)
    if keys is None:
        keys = queries
    i, j = queries[:, None], keys[None, :]
    keep = j <= i
    if window is not None:
        keep &= (i - j < window) | (j < sink)
    return keep


def window_keep(seq: int, width: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Return (seq, seq) bool: position i sees j when |i − j| ≤ width (a band, both sides)."""
    return predicates.dense(predicates.band(width), seq, device)


def prefix_keep(seq: int, prefix: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Return (seq, seq) bool prefix-LM mask: the first `prefix` positions see each other, the rest is causal."""
    return predicates.dense(predicates.prefix(prefix), seq, device)


def is_named(spec: str) -> bool:
    """Return True when spec is an expectation ('causal', 'window:2', 'causal+chunk:4', …), not a file or expression."""
    return is_expectation(spec)


def named_keep(spec: str, seq: int, device: torch.device | str | None = None) -> torch.Tensor | None:
    """Return the (seq, seq) keep mask an expectation stands for by position; None when it hides nothing so.

    `padding` adds nothing here: padded keys come from the tokenizer's attention_mask, which the encoder always
    applies. The grammar is models.masks.expectations (one parser for --mask, --expect and the sidebar).
    """
    return parse_expectation(spec, allow_empty=True, what="mask").position_keep(seq, device)


def combine(*keeps: torch.Tensor | None) -> torch.Tensor | None:
    """Return the logical AND of keep masks under broadcasting; None entries mean "everything visible"."""
    out = None
    for k in keeps:
        if k is None:
            continue
        out = k if out is None else (out & k)
    return out


def as_4d(keep: torch.Tensor) -> torch.Tensor:
    """Return keep with leading singleton axes so that it has 4 dims (batch, heads, q_pos, k_pos)."""
    if keep.dim() > 4:
        raise MaskError(f"a mask has at most 4 axes (batch, heads, q_pos, k_pos); got {keep.dim()}")
    return keep.reshape((1,) * (4 - keep.dim()) + tuple(keep.shape))


# ---- conventions ------------------------------------------------------------------------------------


def check_convention(convention: str) -> str:
    """Return the convention's canonical name, or raise MaskError naming the three there are."""
    c = str(convention).strip().lower()
    if c not in CONVENTIONS:
        raise MaskError(f"unknown mask convention {convention!r}: use keep, drop or additive")
    return c


def read_as(mask: torch.Tensor, convention: str) -> torch.Tensor:
    """Return bool, same shape: what code written for `convention` lets attend, whatever the values are.

    This is the lenient reading the checker needs, mirroring what the usual code does with the values:
    keep → `masked_fill(mask == 0, -inf)` (so -inf counts as visible!), drop → `masked_fill(mask.bool(), -inf)`,
    additive → `scores + mask` (a value hides its key only when it is -inf or ≤ -1e4; adding True or 1 hides
    nothing). `to_keep` is the strict conversion for the encoder.
    """
    convention = check_convention(convention)
    if convention == "additive":
        if mask.dtype == torch.bool:
            return torch.ones_like(mask, dtype=torch.bool)
        return ~(mask.double() <= HARD_NEGATIVE)  # NaN stays visible: NaN ≤ x is False
    nonzero = mask if mask.dtype == torch.bool else mask != 0
    return nonzero if convention == "keep" else ~nonzero


def to_keep(mask: torch.Tensor | np.ndarray, convention: str = "keep") -> torch.Tensor:
    """Return bool keep (True = may attend), same shape, from a mask in the declared convention.

    keep/drop take bool or 0/1 numbers; additive takes floats that are 0 (visible) or -inf / ≤ -1e4 (hidden).
    Anything else — a soft bias such as 0.5, NaN, +inf, a 0/1 mask declared additive — raises MaskError:
    the encoder applies hard masks only, and a value it cannot read is a bug to fix at its source.
    """
    convention = check_convention(convention)
    t = as_tensor(mask)
    if convention == "additive":
        if t.dtype == torch.bool or not t.is_floating_point():
            raise MaskError(
                f"an additive mask holds floats (0 and -inf or finfo.min); this one is {dtype_name(t)} "
                f"with values {describe_values(t)}: declare keep or drop instead"
            )
        v = t.double()
        bad = ~((v == 0) | (v <= HARD_NEGATIVE))
        if bad.any():
            raise MaskError(
                f"an additive mask must be 0 (attend) or -inf / ≤ {HARD_NEGATIVE:g} (masked); this one has "
                f"values {describe_values(t)}: soft biases are not masks"
            )
        return v == 0
    if t.dtype != torch.bool:
        bad = ~((t == 0) | (t == 1))  # NaN is neither
        if bad.any():
            raise MaskError(
                f"a {convention} mask holds True/False or 0/1; this one has values {describe_values(t)}"
                + (
                    ": it looks additive, declare --convention additive"
                    if t.is_floating_point() and (t <= HARD_NEGATIVE).any()
                    else ""
                )
            )
    return read_as(t, convention)


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def format_value(v: float, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "True" if v else "False"
    if v == 0:
        return "0"  # -0.0 too: (1 - mask) * finfo.min gives it
    if np.isneginf(v):
        return "-inf"
    if np.isposinf(v):
        return "inf"
    if np.isnan(v):
        return "nan"
    for name, dt in (
        ("float32", torch.float32),
        ("float16", torch.float16),
        ("bfloat16", torch.bfloat16),
        ("float64", torch.float64),
    ):
        if v == torch.finfo(dt).min:
            return f"finfo({name}).min"
    return f"{v:g}"


def distinct_values(t: torch.Tensor, limit: int = 6) -> tuple[list[tuple[str, int]], int]:
    """Return up to `limit` (value as text, count) pairs, the most frequent first, and how many distinct values."""
    flat = t.detach().reshape(-1).cpu()
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    elif flat.is_floating_point():
        flat = flat.double()
    pairs: list[tuple[str, int]] = []
    if flat.is_floating_point():
        nan = torch.isnan(flat)
        if nan.any():  # unique() counts every NaN apart
            pairs.append(("nan", int(nan.sum())))
            flat = flat[~nan]
    vals, counts = torch.unique(flat, return_counts=True)
    pairs += [(format_value(float(v), t.dtype), int(c)) for v, c in zip(vals.tolist(), counts.tolist(), strict=True)]
    pairs.sort(key=lambda p: -p[1])
    return pairs[:limit], len(pairs)


def describe_values(t: torch.Tensor) -> str:
    """Return e.g. 'True ×105, False ×91' or '0 ×105, -inf ×91' (most frequent first) for messages."""
    vals, n = distinct_values(t)
    more = f" and {n - len(vals)} more" if n > len(vals) else ""
    return ", ".join(f"{v} ×{c}" for v, c in vals) + more


# ---- shapes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Where a user mask's axes land among (batch, heads, q_pos, k_pos)."""

    shape: tuple[int, ...]  # the mask's own shape
    view: tuple[int, int, int, int]  # the mask reshaped to 4 axes before broadcasting
    target: tuple[int, int, int, int]  # (batch, heads, seq, seq) of this input
    lands_on: tuple[str, ...]  # per axis of the mask, the axis of the scores it lands on
    key_padding: bool = False  # read as a (batch, seq) key-padding mask, as tokenizers and nn.MHA give it

    def describe(self) -> str:
        """Return e.g. '(2, 9) read as (batch, seq) key padding → (2, 1, 1, 9): axis 0 → batch, axis 1 → k_pos'."""
        parts = [f"axis {i} ({n}) → {name}" for i, (n, name) in enumerate(zip(self.shape, self.lands_on, strict=True))]
        how = "read as a (batch, seq) key-padding mask " if self.key_padding else ""
        return f"{self.shape} {how}→ {self.view}, broadcast to {self.target}: " + ", ".join(parts)


def place(shape: tuple[int, ...] | torch.Size, batch: int, heads: int, seq: int) -> Placement:
    """Return where a mask of `shape` lands on scores of shape (batch, heads, seq, seq), or raise MaskError.

    PyTorch aligns shapes from the right: a (seq, seq) mask is (q_pos, k_pos); a (batch, 1, seq) mask puts
    batch on heads. One exception, as tokenizers and nn.MultiheadAttention's key_padding_mask give it: a 2-D
    mask of exactly (batch, seq) with batch > 1 and batch ≠ seq is a key-padding mask, (batch, 1, 1, k_pos).
    Every axis must equal its target or be 1 (a mask never grows the batch).
    """
    shape = tuple(int(n) for n in shape)
    target = (int(batch), int(heads), int(seq), int(seq))
    if len(shape) == 0:
        raise MaskError("a mask needs at least one axis; got a single number")
    if len(shape) > 4:
        raise MaskError(f"a mask has at most 4 axes (batch, heads, q_pos, k_pos); got shape {shape}")
    if len(shape) == 2 and batch > 1 and shape == (batch, seq) and batch != seq:
        return Placement(shape, (batch, 1, 1, seq), target, ("batch", "k_pos"), key_padding=True)
    view = (1,) * (4 - len(shape)) + shape
    lands = AXES[4 - len(shape) :]
    for i, (n, want, name) in enumerate(zip(view, target, AXES, strict=True)):
        if n not in (1, want):
            j = i - (4 - len(shape))
            hint = ""
            if n == seq and name != "k_pos":
                hint = "; a (batch, seq) padding mask goes on keys as mask[:, None, None, :]"
            raise MaskError(
                f"mask of shape {shape} does not fit the scores (batch, heads, q_pos, k_pos) = {target} of this "
                f"{seq}-token input: its axis {j} has size {n} and lands on {name}, which has size {want} "
                f"(each axis must match or be 1){hint}"
            )
    return Placement(shape, view, target, lands)  # type: ignore[arg-type]


def fit(keep: torch.Tensor, batch: int, heads: int, seq: int) -> torch.Tensor:
    """Return keep reshaped to 4 axes (batch or 1, heads or 1, seq or 1, seq or 1); MaskError if it does not fit."""
    p = place(tuple(keep.shape), batch, heads, seq)
    return keep.reshape(p.view)


def as_tensor(mask: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Return the mask as a CPU tensor of a plain dtype (bool, int, float); MaskError for anything else."""
    if isinstance(mask, np.ndarray):
        if mask.dtype == object or mask.dtype.kind not in "biuf":
            raise MaskError(f"a mask holds bool, int or float numbers; this array is {mask.dtype}")
        if mask.dtype.kind == "u" and mask.dtype != np.uint8:
            mask = mask.astype(np.int64)
        mask = torch.from_numpy(np.ascontiguousarray(mask))
    if not isinstance(mask, torch.Tensor):
        raise MaskError(f"a mask is a tensor or an array; got {type(mask).__name__}")
    if mask.is_complex() or mask.dtype in (torch.quint8, torch.qint8, torch.qint32):
        raise MaskError(f"a mask holds bool, int or float numbers; this tensor is {dtype_name(mask)}")
    if mask.dim() == 0:
        raise MaskError("a mask has at least one axis; this is a single number (0-d): give shape (seq, seq)")
    if mask.layout != torch.strided:
        raise MaskError(f"a mask is a dense tensor; this one is {mask.layout}: pass mask.to_dense()")
    if mask.numel() > MAX_ELEMENTS:
        raise MaskError(f"mask of shape {tuple(mask.shape)} has {mask.numel():,} cells; the limit is {MAX_ELEMENTS:,}")
    return mask.detach().cpu()
