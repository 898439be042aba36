"""Value-weighted attention (Kobayashi et al. 2020, "Attention is Not Only a Weight"): what a head passes on.

A head's output at query i is Σ_j α_ij · f_h(x_j), with f_h(x_j) = W_O^h v_j: the value of key j (the value of
the key/value head that query head h reads, under grouped-query attention; v includes the value bias) through
head h's columns of the output projection (W_O's bias is added once per token, not per key, and is left out).
The weight a key really gets is then

    N[h, i, j] = ‖α_ij · f_h(x_j)‖ = α_ij · ‖W_O^h v_j‖

(docs/METRICS.md, "Value-weighted attention"). A first-token sink with α ≈ 0.7 but a value near zero passes on
almost nothing (Gu et al. 2024). Views show each row as shares, N[h, i, j] / Σ_k N[h, i, k], so that rows sum to 1
like the raw maps; exports keep N itself. Torch in, numpy out; every map is read one layer at a time
(`out.attentions[layer]`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .. import settings
from ..encoder import Encoder, EncoderOutput
from ..errors import InputError


def projections(encoder: Encoder, layer: int) -> dict[str, nn.Linear]:
    """Return W_q, W_k, W_v and W_o of a layer as Linear layers (the family's attention module names them)."""
    for sub in encoder.model.layers[layer].modules():
        found = getattr(sub, "projections", None)
        if callable(found):
            return found()
    raise LookupError("this layer has no attention projections")


def head_output_weights(encoder: Encoder, layer: int) -> torch.Tensor:
    """Return W_O split by head: (heads, d_model, d_k) float32 on the CPU; [h] is W_O's columns h·d_k … (h+1)·d_k − 1."""
    w = projections(encoder, layer)["o"].weight.detach().float().cpu()  # (d_model, heads·d_k)
    d_model = w.shape[0]
    H = encoder.capabilities.heads or encoder.config.n_heads
    return w.view(d_model, H, -1).permute(1, 0, 2)  # (H, d_model, d_k)


@dataclass
class ValueWeighted:
    """Value-weighted maps of one run, numpy only (pickles, caches)."""

    norms: np.ndarray  # (layers, heads, q_pos, k_pos) float32: α_ij · ‖W_O^h v_j‖, in the hidden state's units
    value_norms: np.ndarray  # (layers, heads, k_pos) float32: ‖W_O^h v_j‖ of each key, per query head
    output_norm: np.ndarray  # (layers, heads) float64: mean over query rows of ‖Σ_j α_ij W_O^h v_j‖ (the head's output)

    def shares(self) -> np.ndarray:
        """Return the norms as each row's shares, (layers, heads, q_pos, k_pos): rows sum to 1 (a row of zeros stays 0)."""
        total = self.norms.sum(-1, keepdims=True)
        return np.divide(self.norms, total, out=np.zeros_like(self.norms), where=total > 0)


def check_budget(out: EncoderOutput, what: str) -> None:
    """Refuse (BudgetError) before allocating when a run's maps hold more values than max_derived_values."""
    L, H, Q, K = (int(s) for s in out.attentions.shape[-4:])
    settings.require("max_derived_values", L * H * Q * K, what)


def value_weighted(encoder: Encoder, out: EncoderOutput) -> ValueWeighted:
    """Return the value-weighted maps of a single run of `encoder` (encode(..., internals=True))."""
    if out.is_batch:
        raise InputError("value-weighted maps are for one text: use item(i) of a batch")
    if out.values is None or out.context is None:
        raise InputError("value-weighted maps need the values: encode with internals=True")
    check_budget(out, "value-weighted maps of this text")
    caps = out.capabilities
    L, H, Q, K = (int(s) for s in out.attentions.shape)
    kv_of = torch.tensor([caps.kv_head(h) for h in range(H)]) if caps.grouped else torch.arange(H)
    real = out.padding.bool()
    norms = np.empty((L, H, Q, K), dtype=np.float32)
    value_norms = np.empty((L, H, K), dtype=np.float32)
    output_norm = np.empty((L, H), dtype=np.float64)
    for layer in range(L):
        w_o = head_output_weights(encoder, layer)  # (H, d_model, d_k)
        v = out.values[layer].float()[kv_of]  # (H, k_pos, d_k): the value head each query head reads
        f = torch.linalg.vector_norm(v @ w_o.transpose(1, 2), dim=-1)  # (H, k_pos): ‖W_O^h v_j‖
        value_norms[layer] = f.numpy()
        norms[layer] = (out.attentions[layer].float() * f[:, None, :]).numpy()  # α_ij · ‖W_O^h v_j‖
        ctx = out.context[layer].float()  # (H, q_pos, d_k): Σ_j α_ij v_j
        per_row = torch.linalg.vector_norm(ctx @ w_o.transpose(1, 2), dim=-1)  # (H, q_pos): ‖W_O^h Σ_j α_ij v_j‖
        output_norm[layer] = (per_row[:, real].double().mean(-1)).numpy()
    return ValueWeighted(norms=norms, value_norms=value_norms, output_norm=output_norm)


def first_token_share(maps: np.ndarray) -> np.ndarray:
    """Return each head's mean share on position 0 over the rows after it (the METRICS `first`): (layers, heads)."""
    a = np.asarray(maps)
    if a.shape[-2] < 2:
        return np.zeros(a.shape[:-2])
    return a[..., 1:, 0].mean(-1)
