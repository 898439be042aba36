"""A BERT encoder written out in PyTorch, multi-head attention by hand.

Module names mirror the Hugging Face checkpoint (`encoder.layer.3.attention.self.query.weight`), so porting
weights is a strict state-dict copy with no rename table. The attention follows the path the tutorial teaches:

    Linear → view(batch, seq, heads, d_k) → transpose(1, 2) → Q·Kᵀ/√d_k → mask → softmax → ·V
           → transpose(1, 2).contiguous().view(batch, seq, d_model) → W_o

with the same dot products written feature-major (`linear_t`): each linear computes W·xᵀ + b, so each head's Qᵀ,
Kᵀ, Vᵀ (d_k, seq) come out of one GEMM laid out for the next, and the context goes into W_o as (probs·V)ᵀ. That
is faster on CPU, and the numbers are the same (tests hold them to transformers' eager BERT). The submodules'
own forwards keep the token-major form; the lecture steps through those.

No transformers forward, no nn.MultiheadAttention, no scaled_dot_product_attention: we need the weights
themselves, and we want to show the code that makes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig

_ACTIVATIONS = {
    "gelu": F.gelu,  # exact erf form, as BERT was trained
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}

# Names of the per-layer tensors `record=True` keeps, with their axes.
INTERNAL_NAMES = ("queries", "keys", "values", "scores", "context")


@dataclass
class Recorder:
    """Collects per-layer intermediate tensors during one forward pass (only when asked: they cost memory)."""

    queries: list[torch.Tensor] = field(default_factory=list)  # [batch, heads, seq, d_k] per layer
    keys: list[torch.Tensor] = field(default_factory=list)  # [batch, heads, seq, d_k]
    values: list[torch.Tensor] = field(default_factory=list)  # [batch, heads, seq, d_k]
    scores: list[torch.Tensor] = field(default_factory=list)  # [batch, heads, q_pos, k_pos], scaled, before mask
    context: list[torch.Tensor] = field(default_factory=list)  # [batch, heads, seq, d_k], probs·V per head
    hidden_states: list[torch.Tensor] = field(default_factory=list)  # [batch, seq, d_model], layer inputs + last


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


def linear_t(linear: nn.Linear, xT: torch.Tensor) -> torch.Tensor:
    """Return linear(x)ᵀ given xᵀ: (out_features, tokens) = W·xᵀ + b, for xᵀ of shape (in_features, tokens).

    The encoder's layers run their linears this way round (feature-major): the same dot products as F.linear,
    with tokens as the GEMM's columns instead of its rows. On CPU, MKL's sgemm runs BERT's shapes faster so —
    the whole forward takes ~12 % less at 128 tokens on BERT-base (bench/encoder.py, README) — and each head's
    Qᵀ and Kᵀ come out of the projection laid out for the score GEMM, with no copy.
    """
    if linear.bias is None:
        return linear.weight @ xT
    return torch.addmm(linear.bias[:, None], linear.weight, xT)


class SelfAttention(nn.Module):
    """Multi-head self-attention: h heads of width d_k = d_model / h, computed together by reshaping."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.d_k = cfg.d_k
        self.query = nn.Linear(cfg.d_model, cfg.d_model)  # W_q, all heads side by side
        self.key = nn.Linear(cfg.d_model, cfg.d_model)  # W_k
        self.value = nn.Linear(cfg.d_model, cfg.d_model)  # W_v
        # (3·d_model, d_model) weight and (3·d_model,) bias of which W_q, W_k, W_v are views, once fuse_qkv ran.
        self._qkv: tuple[torch.Tensor, torch.Tensor] | None = None

    def fuse_qkv(self) -> None:
        """Make W_q, W_k, W_v (and their biases) views of one stacked weight, so the forward runs one GEMM, not three.

        The one place the three projections are joined. The modules keep their names and parameters — the
        checkpoint's weights are ported into `query`, `key`, `value`, and "Inside a head" reads W_q, W_k, W_v
        there — but their storage becomes rows of one tensor, so nothing is held twice and a change to
        `query.weight` in place is a change to what the forward uses. Call after loading, moving and casting
        (Encoder does); `.to()` afterwards gives the parameters storage of their own again, and the forward then
        notices and runs the three projections separately, with the same result.
        """
        q, k, v = self.query, self.key, self.value
        with torch.no_grad():
            weight = torch.cat([q.weight, k.weight, v.weight])  # (3·d_model, d_model): W_q; W_k; W_v
            bias = torch.cat([q.bias, k.bias, v.bias])  # (3·d_model,)
        C = q.out_features  # d_model
        for i, m in enumerate((q, k, v)):
            m.weight = nn.Parameter(weight[i * C : (i + 1) * C], requires_grad=m.weight.requires_grad)
            m.bias = nn.Parameter(bias[i * C : (i + 1) * C], requires_grad=m.bias.requires_grad)
        self._qkv = (weight, bias)

    def _fused(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Return the stacked weight and bias when W_q, W_k, W_v still live in them (and need no gradient)."""
        if self._qkv is None:
            return None
        weight, bias = self._qkv
        C = self.query.out_features
        for i, m in enumerate((self.query, self.key, self.value)):
            if (
                m.weight.data_ptr() != weight[i * C].data_ptr()
                or m.bias.data_ptr() != bias[i * C :].data_ptr()
                or m.weight.requires_grad
                or m.weight.dtype != weight.dtype
            ):
                return None
        return weight, bias

    def project(self, x2: torch.Tensor, n: int = 3) -> torch.Tensor:
        """Return the first n of Q, K, V for the tokens x2 (tokens, d_model), feature-major: (n·d_model, tokens).

        Rows are W_q·xᵀ + b_q, then W_k·xᵀ + b_k, then W_v·xᵀ + b_v: the same dot products as `query(x2)` and
        its siblings, written transposed (see `linear_t`). With the stacked weight (see fuse_qkv) it is one GEMM
        over its first n·d_model rows.
        """
        fused = self._fused()
        if fused is not None:
            weight, bias = fused
            C = self.query.out_features
            return torch.addmm(bias[: n * C, None], weight[: n * C], x2.t())
        return torch.cat([linear_t(m, x2.t()) for m in (self.query, self.key, self.value)[:n]])

    def attend(
        self,
        x: torch.Tensor,
        keep: torch.Tensor | None = None,
        head_gates: torch.Tensor | None = None,
        record: Recorder | None = None,
        probs_out: torch.Tensor | None = None,
        fill: float | None = None,
        probs_only: bool = False,
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Return the heads' concatenated context, feature-major (d_model, batch·seq), and the probs; see forward.

        The layer feeds the context straight into W_o the same way round (`linear_t`), so it is never transposed
        back. Per head the steps are the tutorial's: Qᵀ and Kᵀ (d_k, seq) come out of the projection GEMM
        already laid out per head, scores = Q·Kᵀ/√d_k, mask, softmax, and the context per head is (probs·V)ᵀ =
        Vᵀ·probsᵀ (d_k, seq).
        """
        B, T, C = x.size()  # batch, seq, d_model
        nh, d_k = self.n_heads, self.d_k
        want_v = not probs_only or record is not None
        n = 3 if want_v else 2  # without V, only the first 2·d_model rows of the stacked weight
        # (n·C, B·T) → per (batch, head) matrices (d_k, T): a view for one text, a copy for a batch.
        proj = self.project(x.reshape(B * T, C), n).view(n, nh, d_k, B, T)
        parts = proj.permute(0, 3, 1, 2, 4).reshape(n, B * nh, d_k, T)  # Qᵀ, Kᵀ[, Vᵀ]
        qT, kT = parts[0], parts[1]
        vT = parts[2] if want_v else None

        # Q·Kᵀ/√d_k. The scale goes on q (seq·d_k numbers) rather than on the scores (seq² numbers), and when
        # nothing needs the raw scores kept they are computed straight into the memory of the returned probs.
        out = None  # where the scores GEMM writes: the returned probs' memory, when nothing keeps the raw scores
        if probs_out is not None and record is None and qT.dtype == torch.float32:
            out = probs_out.view(B * nh, T, T)
        scores = torch.bmm((qT * (1.0 / math.sqrt(d_k))).transpose(1, 2), kT, out=out).view(B, nh, T, T)
        if record is not None:
            assert vT is not None
            record.queries.append(qT.view(B, nh, d_k, T).transpose(-2, -1))  # (B, nh, T, d_k)
            record.keys.append(kT.view(B, nh, d_k, T).transpose(-2, -1))
            record.values.append(vT.view(B, nh, d_k, T).transpose(-2, -1))
            record.scores.append(scores)
        if keep is not None:
            # finfo.min, not -inf: a row with every key masked becomes uniform instead of NaN.
            value = torch.finfo(scores.dtype).min if fill is None else fill
            scores = scores.masked_fill(~keep, value) if record is not None else scores.masked_fill_(~keep, value)
        # Softmax in float32 whatever the model dtype: the maps we show are float32 probabilities.
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32, out=probs_out)  # (B, nh, q_pos, k_pos)
        if vT is None:
            return None, probs

        # Per head (probs·V)ᵀ = Vᵀ·probsᵀ: (d_k, T), the heads one under the other = the concatenated context.
        ctxT = torch.bmm(vT, probs.to(vT.dtype).view(B * nh, T, T).transpose(1, 2)).view(B, nh, d_k, T)
        if head_gates is not None:
            ctxT = ctxT * head_gates.to(ctxT.dtype).view(-1, nh, 1, 1)  # (1 or B, nh, 1, 1)
        if record is not None:
            record.context.append(ctxT.transpose(-2, -1))  # (B, nh, T, d_k)
        return ctxT.view(B, C, T).transpose(0, 1).reshape(C, B * T), probs

    def forward(
        self,
        x: torch.Tensor,
        keep: torch.Tensor | None = None,
        head_gates: torch.Tensor | None = None,
        record: Recorder | None = None,
        probs_out: torch.Tensor | None = None,
        fill: float | None = None,
        probs_only: bool = False,
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Return the heads' concatenated context (batch, seq, d_model) and probs (batch, heads, q_pos, k_pos).

        keep: bool, broadcastable to (batch, heads, q_pos, k_pos); True = the query may attend to the key.
        head_gates: (heads,) or (batch, heads) multipliers on each head's context (Michel et al.'s ξ; 1 =
            unchanged, 0 = removed); per-batch gates let one forward pass try a different set of heads per item.
        probs_out: float32 (batch, heads, q_pos, k_pos) to write probs into, so that the caller need not copy
            every layer's map into one tensor afterwards (no autograd through it).
        fill: the score a hidden cell gets before the softmax; None = finfo(dtype).min (see below). The mask
            checker passes float("-inf"), the tutorial's value, to show what it does to a row with no visible key.
        probs_only: return (None, probs) without computing V or the context — for the last layer when only the
            maps are asked for (nothing reads its output). The probs are the same numbers.
        """
        B, T, C = x.size()
        ctxT, probs = self.attend(x, keep, head_gates, record, probs_out, fill, probs_only)
        if ctxT is None:
            return None, probs
        return ctxT.view(C, B, T).permute(1, 2, 0), probs  # (B, T, d_model), a view of the feature-major context


class SelfOutput(nn.Module):
    """W_o, then the residual connection and post-LN."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)  # W_o
        self.LayerNorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)

    def forward(self, context: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(context) + residual)


class Attention(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.self = SelfAttention(cfg)
        self.output = SelfOutput(cfg)


class Intermediate(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.d_model, cfg.d_ff)
        self.act = _ACTIVATIONS[cfg.hidden_act]

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
        self,
        x: torch.Tensor,
        keep: torch.Tensor | None = None,
        head_gates: torch.Tensor | None = None,
        record: Recorder | None = None,
        probs_out: torch.Tensor | None = None,
        fill: float | None = None,
        probs_only: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the layer's output (batch, seq, d_model) and its probs; arguments as SelfAttention's.

        probs_only: compute the probs alone and return the input x unchanged in place of the output.

        Feature-major inside (see linear_t): every linear runs as W·xᵀ + b, and only the residual sum, which
        LayerNorm normalises per token, has tokens as rows again. The modules' own forwards (SelfOutput, Intermediate,
        Output) compute the same numbers token-major; the lecture steps through those.
        """
        ctxT, probs = self.attention.self.attend(x, keep, head_gates, record, probs_out, fill, probs_only)
        if ctxT is None:
            return x, probs
        B, T, C = x.size()
        attn_out, ffn_in, ffn_out = self.attention.output, self.intermediate, self.output
        h = attn_out.LayerNorm(x.reshape(B * T, C) + linear_t(attn_out.dense, ctxT).t())  # (B·T, d_model)
        gT = ffn_in.act(linear_t(ffn_in.dense, h.t()))  # (d_ff, B·T)
        y = ffn_out.LayerNorm(h + linear_t(ffn_out.dense, gT).t())  # (B·T, d_model)
        return y.view(B, T, C), probs


class BertEncoder(nn.Module):
    """The stack of layers, named as transformers names it (`encoder.layer.N.…` in the state dict)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layers))


@dataclass
class ForwardResult:
    last_hidden: torch.Tensor | None  # [batch, seq, d_model]; None when the forward ran with maps_only
    attentions: torch.Tensor  # [batch, layers, heads, q_pos, k_pos], float32 (layers lead in memory)
    record: Recorder | None = None

    @property
    def hidden(self) -> torch.Tensor:
        """Return last_hidden, which every forward without maps_only has."""
        if self.last_hidden is None:
            raise RuntimeError("this forward ran with maps_only=True: it has no last hidden state")
        return self.last_hidden


class BertModel(nn.Module):
    """The whole BERT: embeddings and the stack of post-LN layers; state-dict keys equal transformers' BertModel's
    (no pooler). Before the names followed transformers it was called BertEncoder (`models.BertEncoder` still
    finds it, with a DeprecationWarning)."""

    kind = "encoder"

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.encoder = BertEncoder(cfg)

    @property
    def layers(self) -> nn.ModuleList:
        return self.encoder.layer

    def embed(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Return (batch, seq, d_model) embeddings, the first layer's input."""
        return self.embeddings(input_ids, torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last hidden state from the last layer's output: BERT's is that output itself."""
        return x

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        keep: torch.Tensor | None = None,
        head_gates: torch.Tensor | None = None,
        record: bool = False,
        maps_only: bool = False,
    ) -> ForwardResult:
        """Run the encoder.

        input_ids, token_type_ids: (batch, seq) long.
        keep: bool broadcastable to (batch, heads, q_pos, k_pos), True = may attend; None = everything visible.
        head_gates: (layers, heads), or (batch, layers, heads) for per-item gates, multipliers on each head's
            context; None = all ones.
        record: keep Q, K, V, scores, per-head context and every layer's input (see Recorder).
        maps_only: the attention maps are all that is wanted: the last layer stops at its probs (no V, context,
            W_o or feed-forward: ~10/12 of that layer's matrix work) and last_hidden is None. Ignored with record.
        """
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        rec = Recorder() if record else None
        B, T = input_ids.shape  # batch, seq
        cfg = self.config
        # Without autograd, softmax writes each layer's map straight into the result: no copy at the end
        # (at 512 tokens on BERT-base that copy alone costs ~40 ms on 2 CPU cores). Layers lead in memory so that
        # each layer's slot (batch, heads, q, k) is contiguous; the result is a (batch, layers, …) view of it.
        direct = not torch.is_grad_enabled()
        attn = (
            torch.empty(cfg.n_layers, B, cfg.n_heads, T, T, dtype=torch.float32, device=input_ids.device)
            if direct
            else None
        )
        per_layer = []
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, d_model)
        last = len(self.layers) - 1
        skip_tail = maps_only and rec is None
        for i, layer in enumerate(self.layers):
            if rec is not None:
                rec.hidden_states.append(x)
            gates = None if head_gates is None else head_gates[..., i, :]  # (heads,) or (batch, heads)
            x, probs = layer(x, keep, gates, rec, None if attn is None else attn[i], probs_only=skip_tail and i == last)
            per_layer.append(probs)
        if rec is not None:
            rec.hidden_states.append(x)
        attentions = attn.transpose(0, 1) if attn is not None else torch.stack(per_layer, dim=1)
        return ForwardResult(last_hidden=None if skip_tail else x, attentions=attentions, record=rec)
