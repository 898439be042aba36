"""Two attention targets to try `check-attention` on: `python -m models check-attention --target "examples/causal_attention.py:CausalSelfAttention()" --expect causal`.

CausalSelfAttention is causal self-attention written out (scores, a tril mask and optionally a sliding window,
softmax, values); `layer` is an instance with a window of 3; `attend` is a function around PyTorch's fused
attention. Your own module or function goes where these are: `--target my_attn.py:MyAttention()`.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: x (batch, seq, d_model) -> (batch, seq, d_model)."""

    def __init__(self, d_model: int = 64, heads: int = 4, window: int | None = None):
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv, self.out = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # batch, seq, d_model
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)  # (B, h, T, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)  # (B, h, q_pos, k_pos)
        keep = torch.ones(T, T, dtype=torch.bool).tril()  # True = may attend
        if self.window is not None:
            keep &= ~torch.ones(T, T, dtype=torch.bool).tril(-self.window - 1)  # and i - j <= window
        probs = scores.masked_fill(~keep, torch.finfo(scores.dtype).min).softmax(-1)
        return self.out((probs @ v).transpose(1, 2).reshape(B, T, C))


layer = CausalSelfAttention(window=3)  # an instance: --target examples/causal_attention.py:layer


def attend(x: torch.Tensor) -> torch.Tensor:
    """One head of PyTorch's fused attention, causal: x (batch, seq, d_model) -> (batch, seq, d_model)."""
    return F.scaled_dot_product_attention(x, x, x, is_causal=True)
