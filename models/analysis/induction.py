"""Induction scores (Olsson et al. 2022): how much each head of a decoder attends to the token that followed the
current token's earlier occurrence, measured on a repeated random token sequence. torch only.

The input is [BOS] r_1 … r_n r_1 … r_n with r_i drawn uniformly from the ordinary vocabulary (no special
tokens), so nothing but the repetition tells a head where to look. For the second copy's token at position
n + 1 + k (it is r_{k+1}), the induction target is position k + 2: the token after r_{k+1}'s first occurrence.
A head's induction score is its attention weight on that target, averaged over k = 0 … n − 1 and over the
batch of sequences: 1 for a perfect induction head, about 1/(n + k) for a uniform one.
"""

from __future__ import annotations

import numpy as np
import torch

from ..encoder import Encoder
from ..errors import InputError

SEQ = 50  # n: tokens per copy (TransformerLens' default for this test)
BATCH = 4
SEED = 0


def repeated_random_tokens(encoder: Encoder, n: int = SEQ, batch: int = BATCH, seed: int = SEED) -> torch.Tensor:
    """Return (batch, 2n + 1) token ids: BOS, then n random ordinary tokens twice."""
    vocab = min(len(encoder.tokenizer), encoder.config.vocab_size)
    special = set(getattr(encoder.tokenizer, "all_special_ids", []) or [])
    ordinary = torch.tensor([i for i in range(vocab) if i not in special], dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    half = ordinary[torch.randint(0, len(ordinary), (batch, n), generator=gen)]  # (batch, n)
    bos = getattr(encoder.tokenizer, "bos_token_id", None)
    bos = getattr(encoder.config, "bos_token_id", None) if bos is None else bos
    bos = 0 if bos is None else bos
    return torch.cat([torch.full((batch, 1), int(bos), dtype=torch.long), half, half], dim=1)


def induction_from_maps(attn: torch.Tensor, start: torch.Tensor, n: int) -> torch.Tensor:
    """Return (layers, heads) induction scores of maps whose repeated segment of length n starts at start[b].

    attn: (batch, layers, heads, q_pos, k_pos); sequence b holds r_1 … r_n at start[b] … start[b] + n − 1 and again
    right after. The query at start + n + k (the copy's r_{k+1}) targets start + k + 1 (the token after r_{k+1}'s
    first occurrence); the score is that weight averaged over k = 0 … n − 1 and the batch. With start = 1 (BOS
    first) it is the score of the module docstring.
    """
    B = attn.shape[0]  # batch
    k = torch.arange(n, device=attn.device)[None, :]  # (1, n)
    s = start.to(attn.device).long()[:, None]  # (B, 1)
    batch = torch.arange(B, device=attn.device)[:, None]  # (B, 1)
    # Advanced indices on axes 0, 3 and 4, slices between: the indexed axes come first, (B, n, layers, heads).
    target = attn[batch, :, :, s + n + k, s + k + 1]  # A[start + n + k, start + k + 1]
    return target.mean(dim=(0, 1))


@torch.inference_mode()
def induction_scores(encoder: Encoder, n: int = SEQ, batch: int = BATCH, seed: int = SEED) -> np.ndarray:
    """Return (layers, heads) induction scores in [0, 1] of a decoder (see the module docstring)."""
    if not encoder.capabilities.causal:
        raise InputError("induction scores are for decoders: an encoder sees the repeated copy from both sides")
    n = min(n, (encoder.max_tokens - 1) // 2)
    ids = repeated_random_tokens(encoder, n, batch, seed).to(encoder.device)
    attn = encoder.model(ids).attentions.float()  # (batch, layers, heads, 2n + 1, 2n + 1)
    start = torch.ones(attn.shape[0], dtype=torch.long)  # r_1 right after BOS
    return induction_from_maps(attn, start, n).cpu().numpy().astype(np.float64)
