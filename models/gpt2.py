"""A GPT-2 decoder written out in PyTorch, causal multi-head attention by hand (nanoGPT's model.py is the model).

Module names mirror the Hugging Face checkpoint (`h.0.attn.c_attn.weight`, `h.0.mlp.c_fc.bias`, `ln_f.weight`),
so porting weights is a strict state-dict copy with no rename table. GPT-2's checkpoints store their linear
layers as `Conv1D` with weights laid out (in, out); ours are `nn.Linear`, (out, in): the transpose happens in one
place, `models.weights.port_gpt2` (see `CONV1D_WEIGHTS`). One block is pre-LN:

    x → x + attn(ln_1(x)) → x + mlp(ln_2(x))          and after the last block, ln_f

and the attention follows the tutorial's path, with the causal mask a `torch.tril` buffer:

    c_attn(x).split(d_model) → q, k, v → view(batch, seq, heads, d_k) → transpose(1, 2) → Q·Kᵀ/√d_k
        → masked_fill(tril == 0, finfo.min) → softmax → ·V → transpose(1, 2).contiguous().view → c_proj

No transformers forward, no nn.MultiheadAttention, no scaled_dot_product_attention.

The same attention also runs one new token against a KV cache (`KVCache`): its query row over every cached key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .bert import _ACTIVATIONS, ForwardResult, Recorder
from .config import GPT2Config

# Keys whose checkpoint tensors are Conv1D weights, stored (in, out); `port_gpt2` transposes exactly these.
CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


@dataclass
class KVCache:
    """Keys and values of every position seen so far, per layer: what a decoder keeps instead of recomputing.

    keys[i], values[i]: (batch, heads, seq, d_k) for layer i. Bytes = 2 · layers · batch · heads · seq · d_k ·
    bytes per element, the Memory page's formula.
    """

    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)

    @property
    def seq(self) -> int:
        """Return how many positions the cache holds (0 when empty)."""
        return int(self.keys[0].shape[2]) if self.keys else 0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def shape(self) -> tuple[int, ...]:
        """Return one layer's key tensor shape (batch, heads, seq, d_k); () when empty."""
        return tuple(self.keys[0].shape) if self.keys else ()


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention: h heads of width d_k, each query sees itself and the keys before it."""

    bias: torch.Tensor  # (max_positions, max_positions) bool, the tril buffer

    def __init__(self, cfg: GPT2Config, layer_idx: int):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.d_k = cfg.d_k
        self.d_model = cfg.d_model
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model)  # W_q, W_k, W_v side by side
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model)  # W_o
        # 1/√d_k, and for checkpoints trained so, 1/(layer + 1) on top (transformers' scale_attn_by_inverse_layer_idx).
        scale = 1.0 / math.sqrt(self.d_k) if cfg.scale_attn_weights else 1.0
        self.scale = scale / (layer_idx + 1) if cfg.scale_attn_by_inverse_layer_idx else scale
        self.max_positions = cfg.max_positions
        # The causal mask, as the tutorial makes it: position i may attend to 0…i. A bool buffer (1 byte per cell),
        # sliced per input; named `bias` as nanoGPT (and GPT-2's original checkpoints) name it. Not persistent:
        # it is a function of the shape, not a weight. GPT2Model gives every block the same tensor.
        self.register_buffer("bias", self.make_tril(cfg.max_positions), persistent=False)

    @staticmethod
    def make_tril(n: int, device: torch.device | str | None = None) -> torch.Tensor:
        """Return the (n, n) bool causal mask: True on and below the diagonal."""
        return torch.tril(torch.ones(n, n, dtype=torch.bool, device=device))

    def forward(
        self,
        x: torch.Tensor,
        keep: torch.Tensor | None = None,
        head_gates: torch.Tensor | None = None,
        record: Recorder | None = None,
        probs_out: torch.Tensor | None = None,
        cache: KVCache | None = None,
        layer: int = 0,
        fill: float | None = None,
        causal: torch.Tensor | None = None,
        probs_only: bool = False,
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Return the projected context (batch, seq, d_model) and probs (batch, heads, q_pos, k_pos).

        keep: bool broadcastable to (batch, heads, q_pos, k_pos), True = may attend; it is ANDed with the causal
            mask, never replaces it.
        head_gates: (heads,) or (batch, heads) multipliers on each head's context (1 = unchanged, 0 = removed).
        cache: when given, x holds only the new positions; their keys and values are appended to layer `layer`'s
            cache and the new queries attend over all of them (q_pos = new positions, k_pos = all positions).
        fill: the score a hidden cell gets before the softmax; None = finfo(dtype).min. The mask checker passes
            float("-inf") to show what the tutorial's value does to a row with no visible key.
        probs_only: return (None, probs) without computing V or the context — for the last block when only the
            maps are asked for. Not with a cache (its values are needed) or a record.
        """
        B, T, C = x.size()  # batch, new positions, d_model
        if probs_only and cache is None and record is None:
            # W_q and W_k are the first 2·d_model rows of c_attn's (3·d_model, d_model) weight: one GEMM, no V.
            q, k = F.linear(x, self.c_attn.weight[: 2 * C], self.c_attn.bias[: 2 * C]).split(self.d_model, dim=2)
            v = None
        else:
            q, k, v = self.c_attn(x).split(self.d_model, dim=2)  # 3 × (B, T, d_model)
            v = v.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, nh, T, d_k)
        q = q.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, nh, T, d_k)
        k = k.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, nh, T, d_k)
        start = 0  # position of the first new token
        if cache is not None:
            assert v is not None
            start = int(cache.keys[layer].shape[2]) if layer < len(cache.keys) else 0
            if start:
                k = torch.cat([cache.keys[layer], k], dim=2)  # (B, nh, start + T, d_k)
                v = torch.cat([cache.values[layer], v], dim=2)
            if layer < len(cache.keys):
                cache.keys[layer], cache.values[layer] = k, v
            else:
                cache.keys.append(k)
                cache.values.append(v)
        S = k.size(2)  # keys: start + T
        if S > self.max_positions:
            raise ValueError(f"{S} positions, but the causal mask (and the position table) has {self.max_positions}")

        in_place = probs_out is not None and record is None and q.dtype == torch.float32
        scores = torch.matmul(q * self.scale, k.transpose(-2, -1), out=probs_out if in_place else None)  # (B, nh, T, S)
        if record is not None:
            assert v is not None  # probs_only never runs with a record
            record.queries.append(q)
            record.keys.append(k)
            record.values.append(v)
            record.scores.append(scores)
        # The tril step: rows start…start+T-1 of the causal mask, columns 0…S-1. `causal` replaces the buffer only
        # in the troubleshooting page's what-if (a transposed mask planted on purpose).
        allowed = self.bias[start : start + T, :S] if causal is None else causal[start : start + T, :S]
        if keep is not None:
            allowed = allowed & keep
        # finfo.min, not -inf: the same numbers as transformers' additive mask, and never a NaN row.
        value = torch.finfo(scores.dtype).min if fill is None else fill
        scores = scores.masked_fill(~allowed, value) if record is not None else scores.masked_fill_(~allowed, value)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32, out=probs_out)  # (B, nh, T, S)
        if v is None:
            return None, probs

        context = torch.matmul(probs.to(v.dtype), v)  # (B, nh, T, d_k)
        if head_gates is not None:
            context = context * head_gates.to(context.dtype).view(-1, self.n_heads, 1, 1)
        if record is not None:
            record.context.append(context)
        out = context.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, d_model): heads concatenated
        return self.c_proj(out), probs


class MLP(nn.Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, cfg.d_ff)
        self.act = _ACTIVATIONS[cfg.hidden_act]  # gelu_new: GELU, tanh approximation
        self.c_proj = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(x)))


class Block(nn.Module):
    """One pre-LN decoder block: x → x + attn(ln_1(x)) → x + mlp(ln_2(x))."""

    def __init__(self, cfg: GPT2Config, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.ln_1 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.attn = CausalSelfAttention(cfg, layer_idx)
        self.ln_2 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.mlp = MLP(cfg)

    def forward(
        self,
        x: torch.Tensor,
        keep: torch.Tensor | None = None,
        head_gates: torch.Tensor | None = None,
        record: Recorder | None = None,
        probs_out: torch.Tensor | None = None,
        cache: KVCache | None = None,
        fill: float | None = None,
        causal: torch.Tensor | None = None,
        probs_only: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the block's output and its probs; probs_only: the probs alone, x returned unchanged."""
        a, probs = self.attn(
            self.ln_1(x), keep, head_gates, record, probs_out, cache, self.layer_idx, fill, causal, probs_only
        )
        if a is None:
            return x, probs
        x = x + a  # (B, T, d_model)
        return x + self.mlp(self.ln_2(x)), probs


class GPT2Model(nn.Module):
    """Token and position embeddings, pre-LN blocks, ln_f; state-dict keys equal Hugging Face GPT2Model's."""

    kind = "decoder"

    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)  # token embeddings; also the LM head (tied)
        self.wpe = nn.Embedding(cfg.max_positions, cfg.d_model)  # learned positions
        self.h = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.reset_causal_masks()

    @property
    def layers(self) -> nn.ModuleList:
        return self.h

    def reset_causal_masks(self) -> None:
        """Give every block one shared tril buffer on the model's device (max_positions² bytes in all).

        Called at construction and after `.to()` (which copies each block's buffer separately) or a weight port
        onto the meta device (which builds no real buffer).
        """
        device = self.wte.weight.device
        tril = CausalSelfAttention.make_tril(self.config.max_positions, None if device.type == "meta" else device)
        for block in self.h:
            block.attn.bias = tril  # type: ignore[union-attr]  # ModuleList items are Blocks

    def _apply(self, fn, recurse=True):  # nn.Module's own signature
        super()._apply(fn, recurse)
        if self.wte.weight.device.type != "meta":
            self.reset_causal_masks()  # .to(device) copied the shared buffer once per block: share it again
        return self

    def embed(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None, start: int = 0
    ) -> torch.Tensor:
        """Return (batch, seq, d_model) token + position embeddings; positions start at `start` (the cache's length)."""
        T = input_ids.size(1)  # seq
        positions = torch.arange(start, start + T, device=input_ids.device)  # (seq,)
        return self.wte(input_ids) + self.wpe(positions)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last hidden state from the last block's output: ln_f."""
        return self.ln_f(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Return next-token logits (..., vocab) from last hidden states (after ln_f): the LM head, tied to wte."""
        return F.linear(hidden, self.wte.weight)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        keep: torch.Tensor | None = None,
        head_gates: torch.Tensor | None = None,
        record: bool = False,
        cache: KVCache | None = None,
        causal: torch.Tensor | None = None,
        maps_only: bool = False,
    ) -> ForwardResult:
        """Run the decoder.

        input_ids: (batch, seq) long. token_type_ids: ignored (a decoder has no segments).
        keep: bool broadcastable to (batch, heads, q_pos, k_pos), True = may attend, ANDed with the causal mask
            (e.g. key padding); None = the causal mask alone.
        head_gates: (layers, heads) or (batch, layers, heads) multipliers on each head's context.
        record: keep Q, K, V, scores, per-head context and every block's input (see Recorder; the last entry of
            hidden_states is the last block's output, before ln_f).
        cache: a KVCache to extend: input_ids are the new positions only, and attentions are (batch, layers,
            heads, new positions, all positions).
        causal: a bool mask used INSTEAD of the tril buffer, only to show what a wrong causal mask does (the
            troubleshooting page); None in every real use.
        maps_only: only the attention maps are wanted: the last block stops at its probs (no V, context, c_proj or
            MLP) and last_hidden is None. Ignored with record or a cache.
        """
        rec = Recorder() if record else None
        B, T = input_ids.shape  # batch, new positions
        start = cache.seq if cache is not None else 0
        cfg = self.config
        if start + T > cfg.max_positions:
            raise ValueError(f"{start + T} positions, but this model has {cfg.max_positions}")
        S = start + T  # keys
        direct = not torch.is_grad_enabled()
        attn = (
            torch.empty(cfg.n_layers, B, cfg.n_heads, T, S, dtype=torch.float32, device=input_ids.device)
            if direct
            else None
        )
        per_layer = []
        x = self.embed(input_ids, start=start)  # (B, T, d_model)
        last = len(self.h) - 1
        skip_tail = maps_only and rec is None and cache is None
        for i, block in enumerate(self.h):
            if rec is not None:
                rec.hidden_states.append(x)
            gates = None if head_gates is None else head_gates[..., i, :]
            x, probs = block(
                x,
                keep,
                gates,
                rec,
                None if attn is None else attn[i],
                cache,
                causal=causal,
                probs_only=skip_tail and i == last,
            )
            per_layer.append(probs)
        if rec is not None:
            rec.hidden_states.append(x)
        attentions = attn.transpose(0, 1) if attn is not None else torch.stack(per_layer, dim=1)
        return ForwardResult(last_hidden=None if skip_tail else self.ln_f(x), attentions=attentions, record=rec)
