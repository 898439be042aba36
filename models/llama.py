"""The Llama family written out in PyTorch: rotary positions, grouped-query attention, RMSNorm, SwiGLU.

One module tree for Llama, Mistral, Qwen2 and Qwen3; the variants are config fields (models.config.LlamaConfig),
never copies: q/k/v biases (Qwen2), an RMSNorm over each head's q and k (Qwen3), a sliding window per layer
(Mistral, Qwen2 with use_sliding_window), an explicit head_dim, a tied or untied LM head. Module names mirror
transformers' LlamaForCausalLM (`model.layers.3.self_attn.q_proj.weight`), so porting is a strict state-dict
copy, from safetensors or from a GGUF file alike (transformers' GGUF reader gives those keys). The attention:

    q_proj, k_proj, v_proj → view(batch, seq, heads, d_k) → transpose(1, 2) → rotate q and k by position
      → Q·Kᵀ/√d_k with each query head reading key/value head h // (heads / kv_heads) → causal (or window) mask
      → softmax → ·V → transpose(1, 2).contiguous().view → o_proj

the middle of it in the core every family shares (models.attention.attend). Keys are cached per key/value head:
a grouped cache holds kv_heads, not heads.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from .attention import Options, attend
from .config import LlamaConfig, Shape, TrainingRecipe
from .network import ACTIVATIONS, BlockParts, FrozenNorm, KVCache, LayerInputs, Network, causal_keeps
from .rotary import apply_rotary, rotary_tables


class LlamaRMSNorm(nn.Module):
    """x / √(mean(x²) + ε) · weight, computed in float32 (no mean subtracted, no bias: unlike LayerNorm)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)

    def frozen(self, x: torch.Tensor) -> FrozenNorm:
        """Return this norm at input x (..., dim) with each token's RMS frozen: an affine map (no bias)."""
        rms = torch.sqrt(x.double().pow(2).mean(-1, keepdim=True) + self.eps)  # (..., 1)
        return FrozenNorm(gain=self.weight.double() / rms, bias=None, centred=False)


class LlamaAttention(nn.Module):
    """Grouped-query attention with rotary positions: n_heads queries, kv_heads shared keys and values."""

    def __init__(self, cfg: LlamaConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.n_heads, self.kv_heads, self.d_k = cfg.n_heads, cfg.kv_heads, cfg.head_dim
        self.scale = 1.0 / math.sqrt(self.d_k)
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=cfg.qkv_bias)  # W_q
        self.k_proj = nn.Linear(cfg.d_model, cfg.kv_heads * cfg.head_dim, bias=cfg.qkv_bias)  # W_k: kv_heads wide
        self.v_proj = nn.Linear(cfg.d_model, cfg.kv_heads * cfg.head_dim, bias=cfg.qkv_bias)  # W_v
        self.o_proj = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=cfg.o_bias)  # W_o
        if cfg.qk_norm:  # Qwen3: each head's q and k normalised over d_k before rotation
            self.q_norm = LlamaRMSNorm(cfg.head_dim, cfg.rms_norm_eps)
            self.k_norm = LlamaRMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.qk_norm = cfg.qk_norm

    def forward(
        self, x: torch.Tensor, keep: torch.Tensor | None, opts: Options, inputs: LayerInputs | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Return the projected context (batch, seq, d_model) and probs (batch, heads, q_pos, k_pos).

        keep: the layer's causal (or sliding-window) mask ANDed with the caller's, made once per forward.
        inputs.rope: cos, sin of the new positions; inputs.cache: this layer's keys and values so far.
        """
        hook = opts.hook
        B, T, C = x.size()  # batch, new positions, d_model
        x = hook("attn_in", x)
        q = hook("q_proj", self.q_proj(x))  # (B, T, nh·d_k)
        q = hook("q_split", q.view(B, T, self.n_heads, self.d_k))  # (B, T, nh, d_k)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.d_k)  # (B, T, n_kv, d_k)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q = hook("q_heads", q.transpose(1, 2))  # (B, nh, T, d_k)
        k = hook("k_heads", k.transpose(1, 2))  # (B, n_kv, T, d_k)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.d_k).transpose(1, 2)  # (B, n_kv, T, d_k)
        assert inputs is not None and inputs.rope is not None  # LlamaForCausalLM.prepare made it
        cos, sin = inputs.rope
        q = hook("q_rot", apply_rotary(q, cos, sin))  # rotated by each query's position
        k = apply_rotary(k, cos, sin)  # by each key's: q·k then depends on the distance only
        if inputs.cache is not None:
            k, v = inputs.cache.update(self.layer_idx, k, v)  # (B, n_kv, start + T, d_k)
        context, probs = attend(q, k, None if opts.maps_only else v, keep, self.scale, opts)
        if context is None:
            return None, probs
        merged = hook(
            "merged", context.transpose(1, 2).contiguous().view(B, T, -1)
        )  # (B, T, nh·d_k): heads concatenated
        return hook("attn_out", self.o_proj(merged)), probs

    def projections(self) -> dict[str, nn.Linear]:
        """Return W_q, W_k, W_v and W_o as Linear layers (W_k and W_v are kv_heads · d_k wide)."""
        return {"q": self.q_proj, "k": self.k_proj, "v": self.v_proj, "o": self.o_proj}


class LlamaMLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) · up(x))."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.mlp_bias)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.mlp_bias)
        self.act = ACTIVATIONS[cfg.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    """One pre-norm block: x → x + attn(RMSNorm(x)) → x + mlp(RMSNorm(x))."""

    def __init__(self, cfg: LlamaConfig, layer_idx: int):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(cfg.d_model, cfg.rms_norm_eps)
        self.self_attn = LlamaAttention(cfg, layer_idx)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.d_model, cfg.rms_norm_eps)
        self.mlp = LlamaMLP(cfg)

    @property
    def attn(self) -> LlamaAttention:
        return self.self_attn

    def forward(
        self, x: torch.Tensor, keep: torch.Tensor | None, opts: Options, inputs: LayerInputs | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Return the block's output and its probs; with opts.maps_only, x unchanged."""
        a, probs = self.self_attn(self.input_layernorm(x), keep, opts, inputs)
        if a is None:
            return x, probs
        x = x + a  # (B, T, d_model)
        return x + self.mlp(self.post_attention_layernorm(x)), probs


class LlamaModel(nn.Module):
    """The body: token embeddings, the blocks, the final norm (transformers' `model.` prefix)."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg, i) for i in range(cfg.n_layers))
        self.norm = LlamaRMSNorm(cfg.d_model, cfg.rms_norm_eps)


class LlamaForCausalLM(Network):
    """The body and the LM head (tied to the embeddings or its own `lm_head`); keys equal transformers'."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.config = cfg
        self.model = LlamaModel(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    @property
    def layers(self) -> nn.ModuleList:
        return self.model.layers

    def input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def embed(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None, start: int = 0
    ) -> torch.Tensor:
        """Return (batch, seq, d_model) token embeddings: positions enter later, by rotating q and k."""
        return self.model.embed_tokens(input_ids)

    def prepare(
        self,
        input_ids: torch.Tensor,
        keep: torch.Tensor | None,
        start: int = 0,
        cache: KVCache | None = None,
        causal: torch.Tensor | None = None,
    ) -> LayerInputs:
        """The masks (one per kind of layer: full causal, each sliding window) and the rotary tables, once."""
        T = input_ids.size(1)
        cfg = self.config
        keeps = causal_keeps(cfg.n_layers, T, start + T, start, cfg.windows, keep, input_ids.device, causal)
        positions = torch.arange(start, start + T, device=input_ids.device)  # (seq,)
        rope = rotary_tables(cfg, positions)
        return LayerInputs(keeps=keeps, start=start, cache=cache, rope=rope, causal=True, windows=cfg.windows)

    def block_parts(self, layer: int) -> BlockParts:
        """Pre-norm: input_layernorm before the attention; Qwen3's per-head q and k norms before rotation."""
        block = cast(LlamaDecoderLayer, self.model.layers[layer])
        attn = block.self_attn
        qk = (attn.q_norm, attn.k_norm) if attn.qk_norm else None
        return BlockParts(attention=attn, attn_norm=block.input_layernorm, mlp=block.mlp, qk_norms=qk)

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return cos, sin (1, len(positions), d_k): the tables prepare() makes for a forward."""
        return rotary_tables(self.config, positions)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last hidden state: the final RMSNorm (transformers' last_hidden_state)."""
        return self.model.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Return next-token logits (..., vocab) from last hidden states: lm_head, or the tied embeddings."""
        weight = self.model.embed_tokens.weight if self.config.tie_word_embeddings else self.lm_head.weight
        return F.linear(hidden, weight)


# ---- what the training lab asks of Llama (models.training.arch) -----------------------------------------------


def _train_config(shape: Shape) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=shape.vocab_size,
        d_model=shape.d_model,
        n_layers=shape.layers,
        n_heads=shape.heads,
        kv_heads=shape.heads,
        head_dim=shape.d_model // shape.heads,
        d_ff=4 * shape.d_model if shape.mlp else 1,
        max_positions=shape.positions,
        rms_norm_eps=1e-5,
        rope_theta=10_000.0,
        tie_word_embeddings=True,
        bos_token_id=shape.bos_id,
        eos_token_id=shape.bos_id,
        pad_token_id=None,
    )


def _hf_config(cfg: LlamaConfig) -> dict[str, Any]:
    return dict(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.kv_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_positions,
        rms_norm_eps=cfg.rms_norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        hidden_act=cfg.hidden_act,
        attention_bias=False,
        mlp_bias=False,
        tie_word_embeddings=True,
        bos_token_id=cfg.bos_token_id,
        eos_token_id=cfg.eos_token_id,
        architectures=["LlamaForCausalLM"],
    )


def _qk_grads(model: LlamaForCausalLM) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = []
    for layer in model.model.layers:
        attn = cast(LlamaDecoderLayer, layer).self_attn
        gq, gk = attn.q_proj.weight.grad, attn.k_proj.weight.grad
        if gq is None or gk is None:
            raise RuntimeError("no gradient yet: call after a backward pass")
        out.append((gq, gk))
    return out


def _norms(model: LlamaForCausalLM, mlp: bool) -> list[tuple[str, nn.Module]]:
    out: list[tuple[str, nn.Module]] = []
    for i, layer in enumerate(model.model.layers):
        blk = cast(LlamaDecoderLayer, layer)
        out.append((f"L{i}.input_layernorm", blk.input_layernorm))
        if mlp:
            out.append((f"L{i}.post_attention_layernorm", blk.post_attention_layernorm))
    out.append(("norm", model.model.norm))
    return out


TRAINING = TrainingRecipe(
    config=_train_config,
    hf_config=_hf_config,
    residual=("self_attn.o_proj", "mlp.down_proj"),
    qk_grads=_qk_grads,
    norms=_norms,
)
