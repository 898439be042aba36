"""Rotary position embeddings (RoPE): positions enter attention by rotating q and k, pair by pair.

Pair i of a head's d_k dimensions (dimension i with i + d_k/2, transformers' rotate-half layout) turns by the
angle p·θ_i at position p, θ_i = base^(−2i/d_k). Then q_p·k_s depends on p − s only: what attention sees is the
distance between two tokens, not where they sit. Shared by the Llama family and the lecture's demonstration;
a config needs head_dim, rope_theta, rope_type and the scaling fields of models.config.LlamaConfig.
"""

from __future__ import annotations

import math
from typing import Any

import torch


def rope_frequencies(cfg: Any) -> torch.Tensor:
    """Return (d_k / 2,) float32 inverse frequencies θ_i = base^(−2i/d_k), rescaled as cfg.rope_type says.

    "linear" divides every frequency by the factor (positions stretched); "llama3" divides only the low
    frequencies (wavelengths beyond the original context) and blends the middle band, as Llama 3.1 does.
    """
    d = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).to(torch.float32) / d))
    if cfg.rope_type == "linear":
        return inv_freq / cfg.rope_factor
    if cfg.rope_type == "llama3":
        factor, low, high = cfg.rope_factor, cfg.rope_low_freq_factor, cfg.rope_high_freq_factor
        old = cfg.rope_original_positions
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        middle = ~(wavelen < old / high) * ~(wavelen > old / low)
        return torch.where(middle, blended, scaled)
    return inv_freq


def rotary_tables(cfg: Any, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return cos, sin (1, seq, d_k) for the positions (seq,): the angle of position p in pair i is p·θ_i.

    Each frequency appears twice (rotate_half pairs dimension i with i + d_k/2), as in transformers.
    """
    inv_freq = rope_frequencies(cfg).to(positions.device)
    freqs = positions[None, :, None].float() * inv_freq  # (1, seq, d_k / 2)
    angles = torch.cat((freqs, freqs), dim=-1)  # (1, seq, d_k)
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Return (−x₂, x₁) for x = (x₁, x₂) split in halves on the last axis: a quarter turn of every pair (i, i + d/2)."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Return x (batch, heads, seq, d_k) rotated by each position's angles: x·cos + rotate_half(x)·sin."""
    return x * cos[:, None].to(x.dtype) + rotate_half(x) * sin[:, None].to(x.dtype)


def rotary_pairs(d_k: int) -> torch.Tensor:
    """Return (d_k / 2, 2) long: the dimensions each rotary frequency turns together, (i, i + d_k/2) as rotate_half
    pairs them; pair i turns at rope_frequencies(cfg)[i]."""
    half = torch.arange(d_k // 2)
    return torch.stack((half, half + d_k // 2), dim=1)
