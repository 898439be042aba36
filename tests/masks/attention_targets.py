"""Attention modules to judge: correct ones and the classic bugs, planted on purpose (tests and bench/masks.py).

Every module takes x (batch, seq, d_model) and, where it says so, attention_mask (batch, seq) with 1 = real token.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def tril(T: int, diagonal: int = 0) -> torch.Tensor:
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=diagonal)


def band(T: int, w: int) -> torch.Tensor:
    i = torch.arange(T)
    return tril(T) & (i[:, None] - i[None, :] <= w)


def blocks(T: int, c: int, offset: int = 0) -> torch.Tensor:
    b = torch.div(torch.arange(T) - offset, c, rounding_mode="floor")
    return tril(T) & (b[:, None] == b[None, :])


class Attention(nn.Module):
    """Multi-head self-attention written out, with a keep mask (T → (T, T) bool) and a way to apply it.

    how: 'before' (masked_fill with finfo.min before softmax, right), 'neg_inf' (-inf before softmax),
    'after_renorm' (softmax, zero the masked weights, renormalise rows: right), 'after' (softmax then zero,
    no renormalising: the bug), 'queries' (softmax over dim=-2, the bug).
    padding: 'keys' (mask[:, None, None, :], right), 'queries' (mask[:, None, :, None], the bug), 'ignore',
    'lengths' (built from lengths as if padded on the right: wrong for left padding).
    """

    def __init__(self, d_model=64, heads=4, keep=tril, how="before", padding="keys", seq_norm=False):
        super().__init__()
        self.h, self.dk = heads, d_model // heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.keep, self.how, self.padding, self.seq_norm = keep, how, padding, seq_norm

    def forward(self, x, attention_mask=None):
        B, T, C = x.shape
        if self.seq_norm:  # the bug: normalise over positions (dim=1) instead of features (dim=-1)
            x = (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-5)
        q, k, v = self.qkv(x).view(B, T, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)  # each (B, h, T, dk)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        keep = self.keep(T)[None, None] if self.keep is not None else torch.ones(1, 1, T, T, dtype=torch.bool)
        if attention_mask is not None:
            m = attention_mask.bool()
            if self.padding == "keys":
                keep = keep & m[:, None, None, :]
            elif self.padding == "queries":
                keep = keep & m[:, None, :, None]
            elif self.padding == "lengths":
                n = m.sum(1)
                keep = keep & (torch.arange(T)[None, :] < n[:, None])[:, None, None, :]
        if self.how in ("before", "neg_inf", "queries"):
            fill = float("-inf") if self.how == "neg_inf" else torch.finfo(scores.dtype).min
            p = scores.masked_fill(~keep, fill).softmax(dim=-2 if self.how == "queries" else -1)
        else:
            p = scores.softmax(-1) * keep
            if self.how == "after_renorm":
                p = p / p.sum(-1, keepdim=True)
        return self.out((p @ v).transpose(1, 2).reshape(B, T, C))


class SDPACausal(nn.Module):
    def __init__(self, d_model=64, heads=4):
        super().__init__()
        self.h = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)


class MHACausal(nn.Module):
    """nn.MultiheadAttention with its bool mask (True = masked): batch_first=False is the batch bug."""

    def __init__(self, d_model=64, heads=4, batch_first=True, causal=True):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, heads, batch_first=batch_first)
        self.causal = causal

    def forward(self, x):
        n = x.shape[1] if self.mha.batch_first else x.shape[0]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1) if self.causal else None
        return self.mha(x, x, x, attn_mask=mask, need_weights=False)[0]


class Block(nn.Module):
    """Pre-norm transformer block: attention and MLP with residuals."""

    def __init__(self, d_model=64, heads=4, keep=tril):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model, heads, keep)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, attention_mask=None):
        x = x + self.attn(self.ln1(x), attention_mask)
        return x + self.mlp(self.ln2(x))


class Stack(nn.Module):
    def __init__(self, d_model=64, heads=4, layers=2, keep=tril):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d_model, heads, keep) for _ in range(layers))

    def forward(self, x, attention_mask=None):
        for b in self.blocks:
            x = b(x, attention_mask)
        return x


def cumulative_mean(x):
    """Not attention, but causal: y_i = mean(x_0 … x_i)."""
    return x.cumsum(1) / torch.arange(1, x.shape[1] + 1)[None, :, None]


# Ready-made instances for FILE.py:NAME targets (tests/cli) and the factories for FILE.py:NAME().
torch.manual_seed(0)
causal_attention = Attention()
transposed_attention = Attention(keep=lambda T: tril(T).T)
query_padding_attention = Attention(padding="queries")  # attention_mask[:, None, :, None]: the query axis


def make_stack():
    return Stack(64, 4, 2)


def wrong_shape(x):
    return x[:, :, :, None]


def raises(x):
    raise ValueError("planted failure in user code")
