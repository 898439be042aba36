"""A BERT encoder written out in PyTorch, multi-head attention by hand.

Module names mirror the Hugging Face checkpoint (`encoder.layer.3.attention.self.query.weight`), so porting
weights is a strict state-dict copy with no rename table. The attention follows the path the tutorial teaches:

    Linear → view(batch, seq, heads, d_k) → transpose(1, 2) → Q·Kᵀ/√d_k → mask → softmax → ·V
           → transpose(1, 2).contiguous().view(batch, seq, d_model) → W_o → residual → LayerNorm (post-LN)

the middle of it in the one core every family shares (models.attention.attend). Each submodule's own forward
runs: what the lecture steps through is what the encoder computes.
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from .attention import Options, attend
from .config import BertConfig
from .masks.conventions import combine
from .network import ACTIVATIONS, BlockParts, LayerInputs, Network


class Embeddings(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_token_id)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.d_model)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.d_model)
        self.LayerNorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        """Return (batch, seq, d_model) embeddings for (batch, seq) token ids."""
        T = input_ids.size(1)  # seq
        positions = torch.arange(T, device=input_ids.device)  # (seq,), broadcast over batch
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)
        return self.LayerNorm(x)


class SelfAttention(nn.Module):
    """Multi-head self-attention: h heads of width d_k = d_model / h, computed together by reshaping."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.d_k = cfg.d_k
        self.scale = 1.0 / math.sqrt(self.d_k)
        self.query = nn.Linear(cfg.d_model, cfg.d_model)  # W_q, all heads side by side
        self.key = nn.Linear(cfg.d_model, cfg.d_model)  # W_k
        self.value = nn.Linear(cfg.d_model, cfg.d_model)  # W_v

    def forward(
        self, x: torch.Tensor, keep: torch.Tensor | None, opts: Options, inputs: LayerInputs | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Return the heads' concatenated context (batch, seq, d_model) and probs (batch, heads, q_pos, k_pos).

        The signature of every family's attention module (inputs: the per-forward facts; BERT reads none).

        keep: bool, broadcastable to (batch, heads, q_pos, k_pos); True = the query may attend to the key.
        With opts.maps_only, V and the context are not computed: (None, probs).
        """
        hook = opts.hook
        B, T, C = x.size()  # batch, seq, d_model
        x = hook("attn_in", x)
        q = hook("q_proj", self.query(x))  # (B, T, d_model)
        k = self.key(x)
        q = hook("q_split", q.view(B, T, self.n_heads, self.d_k))  # (B, T, nh, d_k)
        q = hook("q_heads", q.transpose(1, 2))  # (B, nh, T, d_k)
        k = k.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, nh, T, d_k)
        v = None if opts.maps_only else self.value(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        context, probs = attend(q, k, v, keep, self.scale, opts)  # (B, nh, T, d_k), (B, nh, T, T)
        if context is None:
            return None, probs
        return hook(
            "merged", context.transpose(1, 2).contiguous().view(B, T, -1)
        ), probs  # (B, T, d_model): heads concatenated


class SelfOutput(nn.Module):
    """W_o, then the residual connection and post-LN."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)  # W_o
        self.LayerNorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)

    def forward(self, context: torch.Tensor, residual: torch.Tensor, opts: Options) -> torch.Tensor:
        out = opts.hook("attn_out", self.dense(context))  # (B, T, d_model)
        return self.LayerNorm(out + residual)


class Attention(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.self = SelfAttention(cfg)
        self.output = SelfOutput(cfg)

    @property
    def scale(self) -> float:
        return self.self.scale

    def projections(self) -> dict[str, nn.Linear]:
        """Return W_q, W_k, W_v and W_o as Linear layers (the lecture counts and reuses them)."""
        return {"q": self.self.query, "k": self.self.key, "v": self.self.value, "o": self.output.dense}


class Intermediate(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.d_model, cfg.d_ff)
        self.act = ACTIVATIONS[cfg.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x))


class Output(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.d_ff, cfg.d_model)
        self.LayerNorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Layer(nn.Module):
    """One post-LN encoder layer: x → LN(x + MHA(x)) → LN(h + FFN(h))."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = Attention(cfg)
        self.intermediate = Intermediate(cfg)
        self.output = Output(cfg)

    def forward(
        self, x: torch.Tensor, keep: torch.Tensor | None, opts: Options, inputs: LayerInputs | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Return the layer's output (batch, seq, d_model) and its probs; with opts.maps_only, x unchanged."""
        context, probs = self.attention.self(x, keep, opts, inputs)
        if context is None:
            return x, probs
        h = self.attention.output(context, x, opts)  # LN(x + W_o·context)
        return self.output(self.intermediate(h), h), probs  # LN(h + FFN(h))


class BertEncoder(nn.Module):
    """The stack of layers, named as transformers names it (`encoder.layer.N.…` in the state dict)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layers))


class BertModel(Network):
    """The whole BERT: embeddings and the stack of post-LN layers; state-dict keys equal transformers' BertModel's
    (no pooler). Before the names followed transformers it was called BertEncoder (`models.BertEncoder` still
    finds it, with a DeprecationWarning)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.encoder = BertEncoder(cfg)

    @property
    def layers(self) -> nn.ModuleList:
        return self.encoder.layer

    def input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def embed(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None, start: int = 0
    ) -> torch.Tensor:
        """Return (batch, seq, d_model) embeddings, the first layer's input."""
        return self.embeddings(input_ids, torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids)

    def prepare(
        self,
        input_ids: torch.Tensor,
        keep: torch.Tensor | None,
        start: int = 0,
        cache: object = None,
        causal: torch.Tensor | None = None,
    ) -> LayerInputs:
        """Every layer reads the caller's mask as it is (an encoder has no mask of its own)."""
        if cache is not None:
            raise ValueError("an encoder has no KV cache: it reads the whole text at once")
        keep = combine(causal, keep) if causal is not None else keep
        return LayerInputs(keeps=[keep] * self.config.n_layers)

    def block_parts(self, layer: int) -> BlockParts:
        """Post-LN: the attention reads the stream as it is; LayerNorms after the attention's sum and the FFN's."""
        block = cast(Layer, self.encoder.layer[layer])
        return BlockParts(
            attention=block.attention,
            attn_norm=None,
            mlp=block.output.dense,  # W_2·act(W_1·h) + b_2: the FFN's contribution before the residual sum
            post_norms=(block.attention.output.LayerNorm, block.output.LayerNorm),
        )

    def embedding_norm(self) -> nn.Module:
        """Return the LayerNorm over word + position + token-type embeddings: the first layer reads its output."""
        return self.embeddings.LayerNorm

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last hidden state from the last layer's output: BERT's is that output itself."""
        return x
