"""Attention masks. Inside this codebase a mask is `keep`: bool, True = the query may attend to the key.

Shapes broadcast to (batch, heads, q_pos, k_pos). Other conventions (True = masked, 0/1 ints, additive floats)
are converted at the edge, where the user declares them.
"""

from __future__ import annotations

import re

import torch

from .errors import MaskError

NAMED_MASKS = ("bidirectional", "causal", "window:W", "prefix:P")
_PARAM = re.compile(r"^(window|prefix):(\d+)$")


def padding_keep(attention_mask: torch.Tensor) -> torch.Tensor:
    """Return (batch, 1, 1, k_pos) bool from a tokenizer's (batch, seq) 0/1 mask: padded keys are hidden.

    Padding masks keys, not queries: a padded query row still gets a distribution over the real tokens,
    exactly as in Hugging Face's BertModel (statistics drop those rows later).
    """
    if attention_mask.dim() != 2:
        raise MaskError(f"a padding mask is (batch, seq); got shape {tuple(attention_mask.shape)}")
    return attention_mask.bool()[:, None, None, :]


def causal_keep(seq: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Return (seq, seq) bool lower triangle: each position sees itself and the positions to its left."""
    return torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=device))


def window_keep(seq: int, width: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Return (seq, seq) bool: position i sees j when |i − j| ≤ width (a band, both sides)."""
    idx = torch.arange(seq, device=device)
    return (idx[:, None] - idx[None, :]).abs() <= width


def prefix_keep(seq: int, prefix: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Return (seq, seq) bool prefix-LM mask: the first `prefix` positions see each other, the rest is causal."""
    keep = causal_keep(seq, device)
    p = min(prefix, seq)
    keep[:, :p] = True  # everyone sees the prefix…
    return keep  # …and causality holds after it (row i < p sees only the prefix, which includes itself)


def parse_named(spec: str) -> tuple[str, int | None]:
    """Return (kind, parameter) for 'bidirectional', 'causal', 'window:W' or 'prefix:P'."""
    s = spec.strip().lower()
    if s in ("bidirectional", "none", "full", ""):
        return "bidirectional", None
    if s == "causal":
        return "causal", None
    m = _PARAM.match(s)
    if m:
        return m.group(1), int(m.group(2))
    raise MaskError(f"unknown mask {spec!r}: use one of {', '.join(NAMED_MASKS)}")


def named_keep(spec: str, seq: int, device: torch.device | str | None = None) -> torch.Tensor | None:
    """Return the (seq, seq) keep mask a name stands for; None for bidirectional (nothing hidden)."""
    kind, p = parse_named(spec)
    if kind == "bidirectional":
        return None
    if kind == "causal":
        return causal_keep(seq, device)
    if kind == "window":
        return window_keep(seq, int(p), device)
    return prefix_keep(seq, int(p), device)


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
