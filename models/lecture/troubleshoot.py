"""Live demonstrations for the tutorial's troubleshooting table, run on the real tensors of the current input.

Each function takes the encoder's result (and, where the model must run again, the encoder) and returns plain
numbers and numpy arrays for a page to show:

    scaling_effect      no /√d_k → saturated softmax: max weight, entropy and logit spread with and without it
    contiguous_error    view after transpose without contiguous() → the real RuntimeError, and the fix's shape
    masked_row_nan      a fully masked row: masked_fill(-inf) gives NaN, finfo.min gives a uniform row
    wrong_mask          a transposed causal mask (triu for tril) run through the real model: mass on the future
    kv_cache_savings    what a KV cache saves when generating token by token
    head_spread         per-head normalised entropy: heads that spread their weight (nearly) uniformly
    head_similarity     cosine similarity of the heads' maps: heads that do the same thing
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import masks
from ..analysis import heads
from ..attention import repeat_kv
from ..encoder import Encoder, EncoderOutput
from ..errors import InputError
from ..network import ForwardOptions
from .memory import kv_cache_bytes


def _need_internals(out: EncoderOutput, layer: int) -> None:
    if out.is_batch:
        raise InputError("the demonstrations take a single-text result")
    if out.queries is None or out.keys is None or out.scores is None or out.context is None:
        raise InputError("the demonstrations need the encoder's internals: encode(..., internals=True)")
    if not 0 <= layer < out.n_layers:
        raise InputError(f"layer {layer} does not exist: this model has layers 0–{out.n_layers - 1}")


def _real_rows(out: EncoderOutput) -> torch.Tensor:
    """Return (q_pos,) bool: query rows that are real tokens (METRICS: padded rows are dropped)."""
    return out.padding.bool()


@dataclass
class ScalingEffect:
    """One layer's heads with and without the division by √d_k, on the real Q and K (mask applied)."""

    d_k: int
    max_weight: np.ndarray  # [2, heads] mean over rows of max_j A[i, j]; [0] scaled, [1] unscaled
    entropy: np.ndarray  # [2, heads] mean row entropy, nats
    logit_std: np.ndarray  # [2, heads] standard deviation of the visible logits
    row_scaled: np.ndarray  # [k_pos] one row of the chosen head, scaled
    row_unscaled: np.ndarray  # [k_pos] the same row without /√d_k
    scale: float = float("nan")  # the scale the layer itself applied (1/√d_k for most checkpoints; 1 if unscaled)


@torch.no_grad()
def scaling_effect(out: EncoderOutput, layer: int, head: int = 0, query: int = 0) -> ScalingEffect:
    """Return softmax statistics of `layer` with its scale (as trained: the layer's own scores, 1/√d_k for most
    checkpoints) and without it (q·kᵀ), from the real Q, K."""
    _need_internals(out, layer)
    assert out.queries is not None and out.keys is not None  # _need_internals raised otherwise
    q = out.queries[layer].float()  # (heads, seq, d_k)
    k = repeat_kv(out.keys[layer][None].float(), q.shape[0] // out.keys.shape[1])[0]  # the key each head reads
    d_k = q.shape[-1]
    keep = out.keep.bool()[None]  # (1, q_pos, k_pos)
    rows = _real_rows(out)
    dots = torch.matmul(q, k.transpose(-2, -1))  # (heads, q_pos, k_pos), unscaled
    assert out.scores is not None  # _need_internals raised otherwise
    scaled = out.scores[layer].float()  # the layer's own q·kᵀ·scale: its scale, never re-derived here
    seen = keep.expand_as(dots)
    scale = float((scaled * dots)[seen].sum() / (dots * dots)[seen].sum().clamp_min(1e-30))
    stats = []
    probs = []
    for logits in (scaled, dots):
        p = torch.softmax(logits.masked_fill(~keep, torch.finfo(logits.dtype).min), dim=-1)
        visible = logits.masked_select(keep.expand_as(logits)).view(logits.shape[0], -1)
        stats.append((p.max(-1).values[:, rows].mean(-1), heads.row_entropy(p)[:, rows].mean(-1), visible.std(-1)))
        probs.append(p)
    return ScalingEffect(
        d_k=int(d_k),
        max_weight=np.stack([s[0].numpy() for s in stats]),
        entropy=np.stack([s[1].numpy() for s in stats]),
        logit_std=np.stack([s[2].numpy() for s in stats]),
        row_scaled=probs[0][head, query].numpy().copy(),
        row_unscaled=probs[1][head, query].numpy().copy(),
        scale=scale,
    )


@dataclass
class ContiguousDemo:
    code_wrong: str
    code_right: str
    context_shape: tuple[int, ...]  # (1, heads, seq, d_k)
    transposed_shape: tuple[int, ...]  # (1, seq, heads, d_k)
    transposed_stride: tuple[int, ...]
    error: str  # the RuntimeError's text ('' if view happened to work, e.g. a single head)
    fixed_shape: tuple[int, ...]  # (1, seq, d_model)


def contiguous_error(out: EncoderOutput, layer: int) -> ContiguousDemo:
    """Return what `context.transpose(1, 2).view(B, T, C)` does to the layer's real context: the real error."""
    _need_internals(out, layer)
    assert out.context is not None  # _need_internals raised otherwise
    context = out.context[layer].unsqueeze(0).contiguous()  # (1, heads, seq, d_k), as the encoder holds it
    B, H, T, d_k = context.shape
    C = H * d_k
    code_wrong = "context.transpose(1, 2).view(B, T, C)"
    code_right = "context.transpose(1, 2).contiguous().view(B, T, C)"
    moved = context.transpose(1, 2)
    try:
        moved.view(B, T, C)
        error = ""
    except RuntimeError as err:
        error = str(err)
    fixed = context.transpose(1, 2).contiguous().view(B, T, C)
    return ContiguousDemo(
        code_wrong=code_wrong,
        code_right=code_right,
        context_shape=tuple(context.shape),
        transposed_shape=tuple(moved.shape),
        transposed_stride=tuple(moved.stride()),
        error=error,
        fixed_shape=tuple(fixed.shape),
    )


@dataclass
class MaskedRowDemo:
    scores: np.ndarray  # [k_pos] the real scaled scores of the row
    with_inf: np.ndarray  # [k_pos] softmax after masked_fill(-inf) of every key: NaN
    with_min: np.ndarray  # [k_pos] softmax after masked_fill(finfo.min): uniform 1/n


@torch.no_grad()
def masked_row_nan(out: EncoderOutput, layer: int, head: int, query: int) -> MaskedRowDemo:
    """Return one real score row with every key masked, soft-maxed after −inf and after finfo.min."""
    _need_internals(out, layer)
    assert out.scores is not None  # _need_internals raised otherwise
    row = out.scores[layer, head, query].float()  # (k_pos,), Q·Kᵀ/√d_k before the mask
    hidden = torch.ones_like(row, dtype=torch.bool)  # a query that may see nothing (e.g. a padded query, causal)
    with_inf = torch.softmax(row.masked_fill(hidden, float("-inf")), dim=-1)
    with_min = torch.softmax(row.masked_fill(hidden, torch.finfo(row.dtype).min), dim=-1)
    return MaskedRowDemo(scores=row.numpy().copy(), with_inf=with_inf.numpy(), with_min=with_min.numpy())


@dataclass
class WrongMaskDemo:
    """The real model run with the intended causal mask and with a planted transposed one (triu for tril)."""

    intended: np.ndarray  # [q_pos, k_pos] bool: tril, what the decoder should see
    planted: np.ndarray  # [q_pos, k_pos] bool: triu, the bug
    right: np.ndarray  # [layers, heads, q_pos, k_pos] attention under the intended mask
    wrong: np.ndarray  # [layers, heads, q_pos, k_pos] attention under the planted mask
    future_mass_right: np.ndarray  # [layers, heads] mean over rows of Σ_{j>i} A[i, j]
    future_mass_wrong: np.ndarray  # [layers, heads]
    leaked_cells: int  # cells of the planted run with weight on a position the intended mask hides (any head)
    mask_rows: list[str]  # the first rows of the planted mask, printed as the tutorial advises


def _future_mass(attn: torch.Tensor, intended: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Return (layers, heads): mean over real query rows of the weight on keys the intended mask hides."""
    return (attn * (~intended).float()).sum(-1)[..., rows].mean(-1)


@torch.no_grad()
def wrong_mask(encoder: Encoder, text: str, text_b: str | None = None, show_rows: int = 4) -> WrongMaskDemo:
    """Return the model's attention with the right causal mask (tril) and with the transposed one (triu).

    For a decoder the planted triu replaces the model's own tril buffer for this one pass (GPT2Model's `causal`
    argument): a user mask could not do it, since the decoder ANDs every mask with its own.
    """
    if not encoder.capabilities.pairs:
        text_b = None
    first = encoder.encode(text, text_b, mask="causal")
    T = first.seq
    intended = masks.causal_keep(T)  # (q_pos, k_pos), True = may attend
    planted = intended.T.contiguous()  # torch.triu: each position sees itself and the FUTURE
    if encoder.capabilities.causal:
        with torch.inference_mode():
            res = encoder.model(
                first.input_ids[None].to(encoder.device), options=ForwardOptions(causal=planted.to(encoder.device))
            )
        wrong = res.attentions[0].float().cpu()
    else:
        wrong = encoder.encode(text, text_b, mask=planted).attentions.float()
    rows = _real_rows(first)
    right = first.attentions.float()
    leaked = ((wrong > 0) & ~intended).any(dim=(0, 1))
    return WrongMaskDemo(
        intended=intended.numpy(),
        planted=planted.numpy(),
        right=right.numpy(),
        wrong=wrong.numpy(),
        future_mass_right=_future_mass(right, intended, rows).numpy(),
        future_mass_wrong=_future_mass(wrong, intended, rows).numpy(),
        leaked_cells=int(leaked.sum()),
        mask_rows=[" ".join("1" if x else "0" for x in r) for r in planted[:show_rows].tolist()],
    )


@dataclass
class KVCacheDemo:
    seq: int
    recomputed_without: int  # K/V rows computed when every new token recomputes all previous ones: T(T+1)/2
    computed_with: int  # with a cache: T
    cache_bytes: int  # 2·layers·batch·seq·heads·d_k × bytes (batch 1, the model's dtype)


def kv_cache_savings(layers: int, heads: int, d_k: int, seq: int, dtype: str = "fp32") -> KVCacheDemo:
    """Return how many K/V rows token-by-token generation computes with and without a cache, and its size."""
    return KVCacheDemo(
        seq=seq,
        recomputed_without=seq * (seq + 1) // 2,
        computed_with=seq,
        cache_bytes=kv_cache_bytes(layers, 1, seq, heads, d_k, dtype),
    )


def _check_layer(out: EncoderOutput, layer: int) -> None:
    if not 0 <= layer < out.n_layers:
        raise InputError(f"layer {layer} does not exist: this model has layers 0–{out.n_layers - 1}")


def head_spread(out: EncoderOutput, layer: int) -> np.ndarray:
    """Return (heads,) normalised entropy of each head in `layer`: mean row entropy / ln n (1 = uniform).

    The Heads page's `entropy_norm` (models.analysis.heads, docs/METRICS.md), for one layer.
    """
    _check_layer(out, layer)
    attn = out.attentions[layer : layer + 1][None]  # (batch 1, layers 1, heads, q_pos, k_pos)
    return heads.sentence_stats(attn, heads.Roles.of_output(out))["entropy_norm"][0, 0].numpy()


def head_similarity(out: EncoderOutput, layer: int) -> np.ndarray:
    """Return (heads, heads) cosine similarity of the flattened maps of `layer` (METRICS: `cosine`)."""
    _check_layer(out, layer)
    return heads.cosine_matrix(out.attentions[layer : layer + 1], out.padding).numpy()
