"""A GPT-2 decoder written out in PyTorch, causal multi-head attention by hand.

Module names mirror Hugging Face's GPT2Model (`h.3.attn.c_attn.weight`, `ln_f.bias`), so porting is a strict
state-dict copy; GPT-2's Conv1D weights are stored (in, out), so `port_gpt2` hands each one over transposed, the
only rename-free step. The attention is the tutorial's, causal:

    c_attn → split(q, k, v) → view(batch, seq, heads, d_k) → transpose(1, 2) → Q·Kᵀ/√d_k
           → mask (the causal mask, made once per forward) → softmax → ·V → transpose(1, 2).contiguous().view
           → c_proj

the middle of it in the core every family shares (models.attention.attend). The same attention also runs one
new token against a KV cache (models.network.KVCache): its query row over every cached key.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from .attention import Options, attend
from .config import GPT2Config, Shape, TrainingRecipe
from .network import ACTIVATIONS, BlockParts, KVCache, LayerInputs, Network, causal_keeps

# Keys whose checkpoint tensors are Conv1D weights, stored (in, out); `port_gpt2` transposes exactly these.
CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention: h heads of width d_k, each query sees itself and the keys before it."""

    def __init__(self, cfg: GPT2Config, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.n_heads = cfg.n_heads
        self.d_k = cfg.d_k
        self.d_model = cfg.d_model
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model)  # W_q, W_k, W_v side by side
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model)  # W_o
        # 1/√d_k, and for checkpoints trained so, 1/(layer + 1) on top (transformers' scale_attn_by_inverse_layer_idx).
        scale = 1.0 / math.sqrt(self.d_k) if cfg.scale_attn_weights else 1.0
        self.scale = scale / (layer_idx + 1) if cfg.scale_attn_by_inverse_layer_idx else scale

    def forward(
        self, x: torch.Tensor, keep: torch.Tensor | None, opts: Options, inputs: LayerInputs | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Return the projected context (batch, seq, d_model) and probs (batch, heads, q_pos, k_pos).

        keep: bool broadcastable to (batch, heads, q_pos, k_pos), True = may attend: the causal mask already
            ANDed with the caller's (the model makes it once per forward).
        inputs.cache: when given, x holds only the new positions; their keys and values are appended to this
            layer's cache and the new queries attend over all of them (q_pos = new positions, k_pos = all positions).
        """
        hook = opts.hook
        B, T, C = x.size()  # batch, new positions, d_model
        x = hook("attn_in", x)
        q, k, v = self.c_attn(x).split(self.d_model, dim=2)  # 3 × (B, T, d_model)
        q = hook("q_proj", q)
        q = hook("q_split", q.view(B, T, self.n_heads, self.d_k))  # (B, T, nh, d_k)
        q = hook("q_heads", q.transpose(1, 2))  # (B, nh, T, d_k)
        k = k.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, nh, T, d_k)
        v = v.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, nh, T, d_k)
        if inputs is not None and inputs.cache is not None:
            k, v = inputs.cache.update(self.layer_idx, k, v)  # (B, nh, start + T, d_k)
        context, probs = attend(q, k, None if opts.maps_only else v, keep, self.scale, opts)
        if context is None:
            return None, probs
        merged = hook(
            "merged", context.transpose(1, 2).contiguous().view(B, T, -1)
        )  # (B, T, d_model): heads concatenated
        return hook("attn_out", self.c_proj(merged)), probs

    def projections(self) -> dict[str, nn.Linear]:
        """Return W_q, W_k, W_v and W_o as Linear layers: the first three are views of c_attn's rows."""
        C = self.d_model
        return {name: _row_view(self.c_attn, slice(i * C, (i + 1) * C)) for i, name in enumerate("qkv")} | {
            "o": self.c_proj
        }


def _row_view(linear: nn.Linear, rows: slice) -> nn.Linear:
    """Return a Linear whose weight and bias are `rows` of another's (views: no copy)."""
    part = nn.Linear(linear.in_features, rows.stop - rows.start, device="meta")
    part.weight = nn.Parameter(linear.weight[rows], requires_grad=False)
    part.bias = nn.Parameter(linear.bias[rows], requires_grad=False)
    return part


class MLP(nn.Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, cfg.d_ff)
        self.act = ACTIVATIONS[cfg.hidden_act]  # gelu_new: GELU, tanh approximation
        self.c_proj = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(x)))


class Block(nn.Module):
    """One pre-LN decoder block: x → x + attn(ln_1(x)) → x + mlp(ln_2(x))."""

    def __init__(self, cfg: GPT2Config, layer_idx: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.attn = CausalSelfAttention(cfg, layer_idx)
        self.ln_2 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.mlp = MLP(cfg)

    def forward(
        self, x: torch.Tensor, keep: torch.Tensor | None, opts: Options, inputs: LayerInputs | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Return the block's output and its probs; with opts.maps_only, x unchanged."""
        a, probs = self.attn(self.ln_1(x), keep, opts, inputs)
        if a is None:
            return x, probs
        x = x + a  # (B, T, d_model)
        return x + self.mlp(self.ln_2(x)), probs


class GPT2Model(Network):
    """Token and position embeddings, pre-LN blocks, ln_f; state-dict keys equal Hugging Face GPT2Model's."""

    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)  # token embeddings; also the LM head (tied)
        self.wpe = nn.Embedding(cfg.max_positions, cfg.d_model)  # learned positions
        self.h = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)

    @property
    def layers(self) -> nn.ModuleList:
        return self.h

    def input_embeddings(self) -> nn.Embedding:
        return self.wte

    def embed(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None, start: int = 0
    ) -> torch.Tensor:
        """Return (batch, seq, d_model) token + position embeddings; positions start at `start` (the cache's length)."""
        T = input_ids.size(1)  # seq
        positions = torch.arange(start, start + T, device=input_ids.device)  # (seq,)
        return self.wte(input_ids) + self.wpe(positions)

    def prepare(
        self,
        input_ids: torch.Tensor,
        keep: torch.Tensor | None,
        start: int = 0,
        cache: KVCache | None = None,
        causal: torch.Tensor | None = None,
    ) -> LayerInputs:
        """The causal mask, once for every block, ANDed with the caller's keep."""
        T = input_ids.size(1)
        keeps = causal_keeps(self.config.n_layers, T, start + T, start, (), keep, input_ids.device, causal)
        return LayerInputs(keeps=keeps, start=start, cache=cache, causal=True)

    def block_parts(self, layer: int) -> BlockParts:
        """Pre-LN: ln_1 before the attention, the MLP's output added to the stream."""
        block = cast(Block, self.h[layer])
        return BlockParts(attention=block.attn, attn_norm=block.ln_1, mlp=block.mlp)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last hidden state from the last block's output: ln_f."""
        return self.ln_f(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Return next-token logits (..., vocab) from last hidden states (after ln_f): the LM head, tied to wte."""
        return F.linear(hidden, self.wte.weight)


def port_gpt2(state: dict[str, Any], cfg: GPT2Config) -> dict[str, torch.Tensor]:
    """Return a transformers GPT2Model state dict with our key names: each Conv1D weight (in, out) transposed.

    THE transpose: GPT-2's Conv1D layers store their weight as (in, out), x @ W; our nn.Linear computes x @ Wᵀ
    with W stored (out, in). Each Conv1D weight (CONV1D_WEIGHTS) is handed over as `.t()`, a view of the same
    memory: nothing is copied, and this is the only place in the code base that knows about Conv1D.
    """
    theirs = {}
    for k, v in state.items():
        if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue  # old checkpoints saved their causal mask; ours is made per forward
        theirs[k] = v.t() if k.split(".", 2)[-1] in CONV1D_WEIGHTS else v
    return theirs


# ---- what the training lab asks of GPT-2 (models.training.arch) -----------------------------------------------


def _train_config(shape: Shape) -> GPT2Config:
    return GPT2Config(
        vocab_size=shape.vocab_size,
        d_model=shape.d_model,
        n_layers=shape.layers,
        n_heads=shape.heads,
        d_ff=4 * shape.d_model if shape.mlp else 1,
        max_positions=shape.positions,
        scale_attn_weights=shape.scale,
        bos_token_id=shape.bos_id,
        eos_token_id=shape.bos_id,
        pad_token_id=shape.bos_id,
    )


def _hf_config(cfg: GPT2Config) -> dict[str, Any]:
    return dict(
        vocab_size=cfg.vocab_size,
        n_positions=cfg.max_positions,
        n_embd=cfg.d_model,
        n_layer=cfg.n_layers,
        n_head=cfg.n_heads,
        n_inner=cfg.d_ff,
        activation_function=cfg.hidden_act,
        layer_norm_epsilon=cfg.layer_norm_eps,
        scale_attn_weights=cfg.scale_attn_weights,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=cfg.bos_token_id,
        eos_token_id=cfg.eos_token_id,
        tie_word_embeddings=True,
        architectures=["GPT2LMHeadModel"],
    )


def _qk_grads(model: GPT2Model) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = []
    for layer in model.h:
        blk = cast(Block, layer)
        g = blk.attn.c_attn.weight.grad  # (3·d_model, d_model): rows W_q, W_k, W_v
        if g is None:
            raise RuntimeError("no gradient yet: call after a backward pass")
        d = blk.attn.d_model
        out.append((g[:d], g[d : 2 * d]))
    return out


def _norms(model: GPT2Model, mlp: bool) -> list[tuple[str, nn.Module]]:
    out: list[tuple[str, nn.Module]] = []
    for i, layer in enumerate(model.h):
        blk = cast(Block, layer)
        out.append((f"L{i}.ln_1", blk.ln_1))
        if mlp:  # attention-only: ln_2 feeds the zero MLP, its output is unused
            out.append((f"L{i}.ln_2", blk.ln_2))
    out.append(("ln_f", model.ln_f))
    return out


TRAINING = TrainingRecipe(
    config=_train_config,
    hf_config=_hf_config,
    residual=("attn.c_proj", "mlp.c_proj"),
    qk_grads=_qk_grads,
    norms=_norms,
    saves_unscaled=True,  # transformers' GPT-2 has scale_attn_weights
)
