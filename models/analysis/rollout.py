"""Aggregates over heads and layers: the mean over heads and attention rollout (Abnar & Zuidema 2020).

Definitions follow docs/METRICS.md exactly: Ā_l = mean over heads; Â_l = 0.5·Ā_l + 0.5·I with rows
renormalised; R_1 = Â_1 and R_l = Â_l · R_{l-1}. Rows of every R_l sum to 1.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import settings
from ..errors import BudgetError


def mean_heads(attentions: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Return Ā, the mean over heads: (layers, heads, q_pos, k_pos) → (layers, q_pos, k_pos) float32."""
    attn = torch.as_tensor(attentions)
    if attn.dim() < 3:
        raise ValueError(f"expected (…, heads, q_pos, k_pos), got shape {tuple(attn.shape)}")
    return attn.float().mean(dim=-3)


def rollout_work(n_layers: int, seq: int) -> float:
    """Return rollout's work in billions of multiply-adds: one (seq, seq) product per layer."""
    return n_layers * seq**3 / 1e9


def rollout_refusal(n_layers: int, seq: int) -> str:
    """Return why rollout is not computed over n_layers layers of seq positions ("" when it is within budget)."""
    work = rollout_work(n_layers, seq)
    if work > settings.limit("rollout_work"):
        return settings.over_budget(
            "rollout_work", work, f"attention rollout over {n_layers} layers of {seq} positions"
        )
    return ""


def attention_rollout(attentions: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Return R_l for every layer: (layers, heads, seq, seq) → (layers, seq, seq) float32, rows summing to 1.

    R_l[i, j] is how much of token j's input embedding reaches position i after layer l, when each layer is
    taken as half its head-averaged attention and half the residual connection. Computed in float64 so that
    12 chained products keep rows summing to 1 within 1e-6. BudgetError (ATTENTION_LENS_ROLLOUT_WORK) before
    anything is computed when layers × seq³ is over the budget.
    """
    attn = torch.as_tensor(attentions)
    if attn.dim() != 4 or attn.shape[-1] != attn.shape[-2]:
        raise ValueError(f"expected (layers, heads, seq, seq), got shape {tuple(attn.shape)}")
    L, _, T, _ = attn.shape  # layers, heads, seq
    refusal = rollout_refusal(L, T)
    if refusal:
        raise BudgetError(refusal)
    mean = attn.double().mean(dim=1)  # (layers, seq, seq)
    eye = torch.eye(T, dtype=torch.float64)
    resid = 0.5 * mean + 0.5 * eye
    resid = resid / resid.sum(dim=-1, keepdim=True)  # rows of Ā sum to 1 already; this keeps the definition's step
    out = torch.empty(L, T, T, dtype=torch.float64)
    running = eye
    for layer in range(L):
        running = resid[layer] @ running  # (seq, seq): R_l = Â_l · R_{l-1}
        out[layer] = running
    return out.float()
