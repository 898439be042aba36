"""One head, step by step: the tensors our encoder makes for one query token, with their shapes and code.

`head_steps` recomputes one layer's attention from the encoder's real layer input and its real weights, the way
the tutorial writes it — Linear → view → transpose → Q·Kᵀ → /√d_k → mask → softmax → ·V → transpose back →
contiguous().view → W_o — and keeps, at every step, the exact shape of the whole tensor for this input, the line
that made it here, and the line of models/bert.py that makes the same tensor inside the encoder. It checks
itself against the encoder: the head's map, its context and (through residual, LayerNorm and the feed-forward
block) the next layer's input; `HeadSteps.errors` holds the largest differences.

`one_vs_many` sets a layer's h heads next to a single head of width d_model built from the same W_q, W_k, W_v,
W_o, and counts the parameters of both (equal).

Shapes follow the encoder: batch 1 here, so Q of BERT-base on 16 tokens is (1, 12, 16, 64).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..analysis.heads import row_entropy
from ..bert import Layer, SelfAttention
from ..encoder import Encoder, EncoderOutput
from ..errors import InputError
from ..gpt2 import Block, CausalSelfAttention

# The steps, in order. Each: the code executed in `head_steps` (verbatim below) and the encoder's own line(s).
STEP_KEYS = (
    "input",
    "project",
    "split",
    "transpose",
    "dot",
    "scale",
    "mask",
    "softmax",
    "weighted_sum",
    "concat",
    "w_o",
)

CODE = {
    "input": "x = out.layer_inputs[layer].unsqueeze(0)",
    "project": "q, k, v = attn.query(x), attn.key(x), attn.value(x)",
    "split": "q = q.view(B, T, attn.n_heads, attn.d_k)",
    "transpose": "q = q.transpose(1, 2)",
    "dot": "dots = torch.matmul(q, k.transpose(-2, -1))",
    "scale": "scores = torch.matmul(q * (1.0 / math.sqrt(attn.d_k)), k.transpose(-2, -1))",
    "mask": "masked = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)",
    "softmax": "probs = torch.softmax(masked, dim=-1)",
    "weighted_sum": "context = torch.matmul(probs, v)",
    "concat": "merged = context.transpose(1, 2).contiguous().view(B, T, C)",
    "w_o": "output = W_o(merged)",
}
# The axes of each step's tensor, in the codebase's names.
AXES = {
    "input": ("batch", "seq", "d_model"),
    "project": ("batch", "seq", "d_model"),
    "split": ("batch", "seq", "heads", "d_k"),
    "transpose": ("batch", "heads", "seq", "d_k"),
    "dot": ("batch", "heads", "q_pos", "k_pos"),
    "scale": ("batch", "heads", "q_pos", "k_pos"),
    "mask": ("batch", "heads", "q_pos", "k_pos"),
    "softmax": ("batch", "heads", "q_pos", "k_pos"),
    "weighted_sum": ("batch", "heads", "seq", "d_k"),
    "concat": ("batch", "seq", "d_model"),
    "w_o": ("batch", "seq", "d_model"),
}
# The same tensors inside models/bert.py (tests check these lines are there, whitespace aside). The encoder runs
# feature-major (models.bert.linear_t): it makes Qᵀ, Kᵀ, Vᵀ per head and (probs·V)ᵀ — the same numbers, transposed.
SOURCE = {
    "input": "B, T, C = x.size()  # batch, seq, d_model",
    "project": "return torch.addmm(bias[: n * C, None], weight[: n * C], x2.t())",
    "split": "proj = self.project(x.reshape(B * T, C), n).view(n, nh, d_k, B, T)",
    "transpose": "parts = proj.permute(0, 3, 1, 2, 4).reshape(n, B * nh, d_k, T)  # Qᵀ, Kᵀ[, Vᵀ]",
    "dot": "scores = torch.bmm((qT * (1.0 / math.sqrt(d_k))).transpose(1, 2), kT, out=out).view(B, nh, T, T)",
    "scale": "scores = torch.bmm((qT * (1.0 / math.sqrt(d_k))).transpose(1, 2), kT, out=out).view(B, nh, T, T)",
    "mask": "value = torch.finfo(scores.dtype).min if fill is None else fill\n"
    "scores = scores.masked_fill(~keep, value) if record is not None else scores.masked_fill_(~keep, value)",
    "softmax": "probs = torch.softmax(scores, dim=-1, dtype=torch.float32, out=probs_out)  # (B, nh, q_pos, k_pos)",
    "weighted_sum": "ctxT = torch.bmm(vT, probs.to(vT.dtype).view(B * nh, T, T).transpose(1, 2)).view(B, nh, d_k, T)",
    "concat": "return ctxT.view(B, C, T).transpose(0, 1).reshape(C, B * T), probs",
    "w_o": "h = attn_out.LayerNorm(x.reshape(B * T, C) + linear_t(attn_out.dense, ctxT).t())  # (B·T, d_model)",
}
# The steps whose SOURCE line holds feature-major tensors (the page says so under those lines, and only those):
# the layer's input, the mask and the softmax act on the same (batch, seq, …) tensors as the tutorial's code.
TRANSPOSED = frozenset(SOURCE) - {"input", "mask", "softmax"}

# A decoder's steps (GPT-2): the same path, with its own modules. The attention's input is ln_1 of the layer
# input (pre-LN); Q, K, V come from one c_attn split three ways; the mask step uses the model's own tril buffer.
DECODER_CODE = {
    **CODE,
    "input": "x = lay.ln_1(out.layer_inputs[layer].unsqueeze(0))",
    "project": "q, k, v = attn.c_attn(x).split(C, dim=2)",
    "scale": "scores = torch.matmul(q * attn.scale, k.transpose(-2, -1))",
    "mask": "masked = scores.masked_fill(~(attn.bias[:T, :T] & keep), torch.finfo(scores.dtype).min)",
    "w_o": "output = attn.c_proj(merged)",
}
# The same tensors inside models/gpt2.py (tests check these lines are there, whitespace aside).
DECODER_SOURCE = {
    "input": "B, T, C = x.size()  # batch, new positions, d_model",
    "project": "q, k, v = self.c_attn(x).split(self.d_model, dim=2)  # 3 × (B, T, d_model)",
    "split": "q = q.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, nh, T, d_k)",
    "transpose": "q = q.view(B, T, self.n_heads, self.d_k).transpose(1, 2)  # (B, nh, T, d_k)",
    "dot": "scores = torch.matmul(q * self.scale, k.transpose(-2, -1), out=probs_out if in_place else None)",
    "scale": "scores = torch.matmul(q * self.scale, k.transpose(-2, -1), out=probs_out if in_place else None)",
    "mask": "allowed = self.bias[start : start + T, :S] if causal is None else causal[start : start + T, :S]\n"
    "scores = scores.masked_fill(~allowed, value) if record is not None else scores.masked_fill_(~allowed, value)",
    "softmax": "probs = torch.softmax(scores, dim=-1, dtype=torch.float32, out=probs_out)  # (B, nh, T, S)",
    "weighted_sum": "context = torch.matmul(probs.to(v.dtype), v)  # (B, nh, T, d_k)",
    "concat": "out = context.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, d_model): heads concatenated",
    "w_o": "return self.c_proj(out), probs",
}


@dataclass(frozen=True)
class Step:
    """One step: its key, the shape of the whole tensor it makes for this input, and the code that makes it."""

    key: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]  # the names of shape's axes
    code: str  # as executed by head_steps
    source: str  # the line(s) of models/bert.py that make the same tensor
    transposed: bool = False  # source computes it feature-major (Qᵀ where code has Q): see TRANSPOSED


@dataclass
class HeadSteps:
    """The tensors of one head for one query token (numpy float32 on the CPU), and the steps that made them."""

    layer: int
    head: int
    query: int  # q_pos of the chosen query token
    tokens: list[str]
    n_heads: int
    d_model: int
    d_k: int
    steps: list[Step]
    x: np.ndarray  # [seq, d_model] the layer's input
    q_row: np.ndarray  # [d_model] W_q·x of the chosen query, all heads side by side (before view)
    q: np.ndarray  # [seq, d_k] this head's queries
    k: np.ndarray  # [seq, d_k]
    v: np.ndarray  # [seq, d_k]
    dots: np.ndarray  # [k_pos] q·k_j for the chosen query, unscaled
    scores: np.ndarray  # [k_pos] dots / √d_k (computed as (q / √d_k)·k, as the encoder does)
    probs_unscaled: np.ndarray  # [k_pos] softmax(dots) with the mask, i.e. without the /√d_k
    keep: np.ndarray  # [k_pos] bool, True = the query may attend to the key
    masked: np.ndarray  # [k_pos] scores after masked_fill (finfo.min where hidden)
    probs: np.ndarray  # [k_pos] the attention row
    weighted: np.ndarray  # [k_pos, d_k] probs_j · v_j, the rows that the weighted sum adds up
    context: np.ndarray  # [d_k] this head's output for the query
    merged: np.ndarray  # [d_model] all heads' context for the query, concatenated
    output: np.ndarray  # [d_model] after W_o (with its bias), before residual and LayerNorm
    head_share: np.ndarray  # [d_model] this head's part of output: context @ W_o[:, head's columns]ᵀ
    head_map: np.ndarray  # [q_pos, k_pos] this head's whole map
    keep_map: np.ndarray  # [q_pos, k_pos] bool, the mask the encoder applied (True = may attend)
    entropy: float  # of the query's attention row (probs), nats
    entropy_unscaled: float  # of the same row without the /√d_k (probs_unscaled), nats
    errors: dict[str, float] = field(default_factory=dict)  # max |ours − encoder's| per checked tensor
    kind: str = "encoder"  # "decoder": the steps of a GPT-2 block (DECODER_CODE / DECODER_SOURCE, models/gpt2.py)

    def step(self, key: str) -> Step:
        return next(s for s in self.steps if s.key == key)

    @property
    def head_slice(self) -> slice:
        """Return the columns of d_model that belong to this head (after concatenation)."""
        return slice(self.head * self.d_k, (self.head + 1) * self.d_k)


def _layer_on_cpu(encoder: Encoder, layer: int) -> Layer:
    """Return the layer's module in float32 on the CPU (a copy when the model lives elsewhere or in half)."""
    module = encoder.model.layers[layer]
    assert isinstance(module, Layer)
    if encoder.device.type == "cpu" and encoder.dtype == torch.float32:
        return module
    return copy.deepcopy(module).to(device="cpu", dtype=torch.float32)


def _block_on_cpu(encoder: Encoder, layer: int) -> Block:
    """Return a decoder's block in float32 on the CPU (a copy when the model lives elsewhere or in half)."""
    module = encoder.model.layers[layer]
    assert isinstance(module, Block)
    if encoder.device.type == "cpu" and encoder.dtype == torch.float32:
        return module
    return copy.deepcopy(module).to(device="cpu", dtype=torch.float32)


def _check_indices(out: EncoderOutput, layer: int, head: int | None = None, query: int | None = None) -> None:
    if out.is_batch:
        raise InputError("one head step by step takes a single-text result (use encode, or item(i) of a batch)")
    if out.layer_inputs is None:
        raise InputError("the steps need the encoder's internals: encode(..., internals=True)")
    if not 0 <= layer < out.n_layers:
        raise InputError(f"layer {layer} does not exist: this model has layers 0–{out.n_layers - 1}")
    if head is not None and not 0 <= head < out.n_heads:
        raise InputError(f"head {head} does not exist: this model has heads 0–{out.n_heads - 1}")
    if query is not None and not 0 <= query < out.seq:
        raise InputError(f"query position {query} does not exist: this input has positions 0–{out.seq - 1}")


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy().copy()


def _pack(
    out: EncoderOutput,
    layer: int,
    hd: int,
    i: int,
    *,
    tokens: list[str],
    n_heads: int,
    d_k: int,
    steps: list[Step],
    x: torch.Tensor,  # (1, seq, d_model): the layer's input
    q_row: torch.Tensor,
    q: torch.Tensor,  # q, k, v, context: (1, heads, seq, d_k)
    k: torch.Tensor,
    v: torch.Tensor,
    dots: torch.Tensor,  # dots, scores, unscaled, masked, probs: (1, heads, q_pos, k_pos)
    scores: torch.Tensor,
    unscaled: torch.Tensor,
    keep_map: np.ndarray,  # (q_pos, k_pos) bool: the mask this layer applied
    masked: torch.Tensor,
    probs: torch.Tensor,
    context: torch.Tensor,
    merged: torch.Tensor,  # merged, output: (1, seq, d_model)
    output: torch.Tensor,
    w_o: torch.Tensor,  # (d_model, d_k): this head's columns of the output projection
    errors: dict[str, float],
    kind: str,
) -> HeadSteps:
    """Return the HeadSteps of head `hd`, query `i`, from one family's recomputed tensors; adds the per-tensor
    differences from the encoder's own internals to `errors`."""
    for name, ours in (("queries", q), ("keys", k), ("values", v), ("context", context)):
        theirs = getattr(out, name)
        if theirs is not None:
            errors[name] = float((ours[0, hd] - theirs[layer, hd]).abs().max())
    return HeadSteps(
        layer=layer,
        head=hd,
        query=i,
        tokens=tokens,
        n_heads=n_heads,
        d_model=int(x.shape[-1]),
        d_k=d_k,
        steps=steps,
        x=_np(x[0]),
        q_row=_np(q_row),
        q=_np(q[0, hd]),
        k=_np(k[0, hd]),
        v=_np(v[0, hd]),
        dots=_np(dots[0, hd, i]),
        scores=_np(scores[0, hd, i]),
        probs_unscaled=_np(unscaled[0, hd, i]),
        keep=keep_map[i].copy(),
        masked=_np(masked[0, hd, i]),
        probs=_np(probs[0, hd, i]),
        weighted=_np(probs[0, hd, i, :, None] * v[0, hd]),
        context=_np(context[0, hd, i]),
        merged=_np(merged[0, i]),
        output=_np(output[0, i]),
        head_share=_np(context[0, hd, i] @ w_o.T),
        head_map=_np(probs[0, hd]),
        keep_map=keep_map,
        entropy=float(row_entropy(probs[0, hd, i])),
        entropy_unscaled=float(row_entropy(unscaled[0, hd, i])),
        errors=errors,
        kind=kind,
    )


@torch.no_grad()
def head_steps(encoder: Encoder, out: EncoderOutput, layer: int, head: int, query: int) -> HeadSteps:
    """Return every tensor of `head` in `layer` for query position `query`, recomputed from the real internals.

    out: the encoder's result for one text with internals=True (it supplies the layer input and the mask).
    Each line that makes a step's tensor is the CODE entry of that step, verbatim.
    """
    _check_indices(out, layer, head, query)
    if encoder.is_decoder:
        return _decoder_head_steps(encoder, out, layer, head, query)
    lay = _layer_on_cpu(encoder, layer)
    attn = lay.attention.self  # SelfAttention: W_q, W_k, W_v (attn.query, attn.key, attn.value)
    W_o = lay.attention.output.dense
    keep = out.keep.to(torch.bool)[None, None]  # (1, 1, q_pos, k_pos): the mask the encoder applied
    assert out.layer_inputs is not None  # _check_indices raised otherwise
    shapes: dict[str, tuple[int, ...]] = {}

    x = out.layer_inputs[layer].unsqueeze(0)
    B, T, C = x.size()  # batch, seq, d_model
    shapes["input"] = tuple(x.shape)
    q, k, v = attn.query(x), attn.key(x), attn.value(x)
    shapes["project"] = tuple(q.shape)
    q_row = q[0, query]
    q = q.view(B, T, attn.n_heads, attn.d_k)
    k, v = k.view(B, T, attn.n_heads, attn.d_k), v.view(B, T, attn.n_heads, attn.d_k)
    shapes["split"] = tuple(q.shape)
    q = q.transpose(1, 2)
    k, v = k.transpose(1, 2), v.transpose(1, 2)
    shapes["transpose"] = tuple(q.shape)
    dots = torch.matmul(q, k.transpose(-2, -1))
    shapes["dot"] = tuple(dots.shape)
    # = dots / √d_k. Scaled on q as the encoder does (seq·d_k multiplications, not seq²): the same rounding, so
    # the map below is the encoder's to ~1e-7 at any length (dividing the dots differs by ~3e-6 at 300 tokens).
    scores = torch.matmul(q * (1.0 / math.sqrt(attn.d_k)), k.transpose(-2, -1))
    shapes["scale"] = tuple(scores.shape)
    masked = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    shapes["mask"] = tuple(masked.shape)
    probs = torch.softmax(masked, dim=-1)
    shapes["softmax"] = tuple(probs.shape)
    context = torch.matmul(probs, v)
    shapes["weighted_sum"] = tuple(context.shape)
    merged = context.transpose(1, 2).contiguous().view(B, T, C)
    shapes["concat"] = tuple(merged.shape)
    output = W_o(merged)
    shapes["w_o"] = tuple(output.shape)

    # Side by side with step "scale": the same logits without the division, same mask.
    unscaled = torch.softmax(dots.masked_fill(~keep, torch.finfo(dots.dtype).min), dim=-1)
    # The rest of the layer, only to check that these tensors are the encoder's: residual + LN, then FFN.
    h = lay.attention.output.LayerNorm(output + x)
    next_input = lay.output(lay.intermediate(h), h)[0]

    i, hd = query, head
    cols = slice(hd * attn.d_k, (hd + 1) * attn.d_k)
    errors = {
        "attention": float((probs[0, hd] - out.attentions[layer, hd]).abs().max()),
        "next_layer": float((next_input - out.layer_inputs[layer + 1]).abs().max()),
    }
    return _pack(
        out,
        layer,
        hd,
        i,
        tokens=list(out.tokens),
        n_heads=int(attn.n_heads),
        d_k=int(attn.d_k),
        steps=[Step(key, shapes[key], AXES[key], CODE[key], SOURCE[key], key in TRANSPOSED) for key in STEP_KEYS],
        x=x,
        q_row=q_row,
        q=q,
        k=k,
        v=v,
        dots=dots,
        scores=scores,
        unscaled=unscaled,
        keep_map=out.keep.numpy().astype(bool).copy(),
        masked=masked,
        probs=probs,
        context=context,
        merged=merged,
        output=output,
        w_o=W_o.weight[:, cols],
        errors=errors,
        kind="encoder",
    )


@torch.no_grad()
def _decoder_head_steps(encoder: Encoder, out: EncoderOutput, layer: int, head: int, query: int) -> HeadSteps:
    """head_steps for a GPT-2 block: ln_1, c_attn split, the model's own tril buffer, c_proj (DECODER_CODE)."""
    lay = _block_on_cpu(encoder, layer)
    assert out.layer_inputs is not None  # _check_indices raised otherwise
    attn = lay.attn  # CausalSelfAttention: c_attn (W_q, W_k, W_v side by side), c_proj (W_o), bias (the tril)
    keep = out.keep.to(torch.bool)[None, None]  # (1, 1, q_pos, k_pos): the mask applied (the causal one included)
    shapes: dict[str, tuple[int, ...]] = {}

    x = lay.ln_1(out.layer_inputs[layer].unsqueeze(0))
    B, T, C = x.size()  # batch, seq, d_model
    shapes["input"] = tuple(x.shape)
    q, k, v = attn.c_attn(x).split(C, dim=2)
    shapes["project"] = tuple(q.shape)
    q_row = q[0, query]
    q = q.view(B, T, attn.n_heads, attn.d_k)
    k, v = k.view(B, T, attn.n_heads, attn.d_k), v.view(B, T, attn.n_heads, attn.d_k)
    shapes["split"] = tuple(q.shape)
    q = q.transpose(1, 2)
    k, v = k.transpose(1, 2), v.transpose(1, 2)
    shapes["transpose"] = tuple(q.shape)
    dots = torch.matmul(q, k.transpose(-2, -1))
    shapes["dot"] = tuple(dots.shape)
    scores = torch.matmul(q * attn.scale, k.transpose(-2, -1))
    shapes["scale"] = tuple(scores.shape)
    masked = scores.masked_fill(~(attn.bias[:T, :T] & keep), torch.finfo(scores.dtype).min)
    shapes["mask"] = tuple(masked.shape)
    probs = torch.softmax(masked, dim=-1)
    shapes["softmax"] = tuple(probs.shape)
    context = torch.matmul(probs, v)
    shapes["weighted_sum"] = tuple(context.shape)
    merged = context.transpose(1, 2).contiguous().view(B, T, C)
    shapes["concat"] = tuple(merged.shape)
    output = attn.c_proj(merged)
    shapes["w_o"] = tuple(output.shape)

    applied = attn.bias[:T, :T] & keep
    unscaled = torch.softmax(dots.masked_fill(~applied, torch.finfo(dots.dtype).min), dim=-1)
    # The rest of the block, only to check these tensors are the model's: residual, then ln_2 and the MLP.
    h = out.layer_inputs[layer].unsqueeze(0) + output
    next_input = (h + lay.mlp(lay.ln_2(h)))[0]

    i, hd = query, head
    cols = slice(hd * attn.d_k, (hd + 1) * attn.d_k)
    errors = {
        "attention": float((probs[0, hd] - out.attentions[layer, hd]).abs().max()),
        "next_layer": float((next_input - out.layer_inputs[layer + 1]).abs().max()),
    }
    return _pack(
        out,
        layer,
        hd,
        i,
        tokens=list(out.display_tokens or out.tokens),
        n_heads=int(attn.n_heads),
        d_k=int(attn.d_k),
        steps=[Step(key, shapes[key], AXES[key], DECODER_CODE[key], DECODER_SOURCE[key]) for key in STEP_KEYS],
        x=x,
        q_row=q_row,
        q=q,
        k=k,
        v=v,
        dots=dots,
        scores=scores,
        unscaled=unscaled,
        keep_map=applied[0, 0].numpy().astype(bool).copy(),
        masked=masked,
        probs=probs,
        context=context,
        merged=merged,
        output=output,
        w_o=attn.c_proj.weight[:, cols],
        errors=errors,
        kind="decoder",
    )


@dataclass
class OneVsMany:
    """A layer as its h heads and as one head of width d_model with the same weights; parameters of both."""

    layer: int
    n_heads: int
    d_model: int
    d_k: int
    maps: np.ndarray  # [heads, q_pos, k_pos] the encoder's heads
    single_map: np.ndarray  # [q_pos, k_pos] one head of width d_model: softmax(Q·Kᵀ/√d_model) with the same W_q, W_k
    params_heads: int  # counted from the tensors: h × (W_q, W_k, W_v rows of one head) + W_o
    params_single: int  # the same tensors read as one head
    params_per_head: int  # W_q, W_k, W_v rows (and biases) of one head: 3·(d_model·d_k + d_k)
    params_w_o: int  # d_model² + d_model
    output_change: float  # ‖single-head output − h-head output‖ / ‖h-head output‖, after W_o, all tokens
    single_entropy: float  # mean row entropy of the single head's map, nats
    heads_entropy: np.ndarray  # [heads] mean row entropy of each head's map, nats


def _row_view(linear: torch.nn.Linear, rows: slice) -> torch.nn.Linear:
    """Return a Linear whose weight and bias are `rows` of another's (views: W_q, W_k or W_v out of c_attn)."""
    part = torch.nn.Linear(linear.in_features, rows.stop - rows.start, device="meta")
    part.weight = torch.nn.Parameter(linear.weight[rows], requires_grad=False)
    part.bias = torch.nn.Parameter(linear.bias[rows], requires_grad=False)
    return part


@torch.no_grad()
def one_vs_many(encoder: Encoder, out: EncoderOutput, layer: int) -> OneVsMany:
    """Return `layer` as its h heads and as a single head of width d_model built from the same four matrices.

    The single head computes softmax(Q·Kᵀ/√d_model)·V with the full-width Q, K, V: its logits are the sum of the
    h heads' unscaled dot products, so one softmax replaces h of them. Not what the model was trained with:
    a what-if with the same parameters, to show that splitting into heads costs no parameters.
    """
    _check_indices(out, layer)
    keep = out.keep.to(torch.bool)[None]  # (1, q_pos, k_pos)
    assert out.layer_inputs is not None  # _check_indices raised otherwise
    attn: CausalSelfAttention | SelfAttention
    if encoder.is_decoder:
        block = _block_on_cpu(encoder, layer)
        attn, W_o = block.attn, block.attn.c_proj
        x = block.ln_1(out.layer_inputs[layer].unsqueeze(0))  # (1, T, d_model): pre-LN
        C = x.size(-1)
        # W_q, W_k, W_v as three (d_model, d_model) Linear layers, views of c_attn's rows
        w_qkv = [_row_view(block.attn.c_attn, slice(i * C, (i + 1) * C)) for i in range(3)]
    else:
        lay = _layer_on_cpu(encoder, layer)
        attn, W_o = lay.attention.self, lay.attention.output.dense
        x = out.layer_inputs[layer].unsqueeze(0)  # (1, T, d_model)
        w_qkv = [attn.query, attn.key, attn.value]
    B, T, C = x.size()  # batch, seq, d_model
    H, d_k = attn.n_heads, attn.d_k

    # One head of width d_model: no view, no transpose.
    q, k, v = (m(x) for m in w_qkv)  # (1, T, d_model)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(C)  # (1, T, T)
    single = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1)
    out_single = W_o(torch.matmul(single, v))  # (1, T, d_model)
    # h heads: the encoder's own maps and context, through the same W_o.
    merged = out.context[layer].transpose(0, 1).reshape(1, T, C) if out.context is not None else None
    if merged is None:
        raise InputError("one head vs many needs the encoder's internals: encode(..., internals=True)")
    out_heads = W_o(merged)

    def count(linear: torch.nn.Linear, rows: slice = slice(None)) -> int:
        return linear.weight[rows].numel() + (linear.bias[rows].numel() if linear.bias is not None else 0)

    per_head = [sum(count(m, slice(h * d_k, (h + 1) * d_k)) for m in w_qkv) for h in range(H)]
    w_o = count(W_o)
    maps = out.attentions[layer].float()
    return OneVsMany(
        layer=layer,
        n_heads=int(H),
        d_model=int(C),
        d_k=int(d_k),
        maps=_np(maps),
        single_map=_np(single[0]),
        params_heads=sum(per_head) + w_o,
        params_single=sum(count(m) for m in w_qkv) + w_o,
        params_per_head=per_head[0],
        params_w_o=w_o,
        output_change=float((out_single - out_heads).norm() / out_heads.norm().clamp_min(1e-12)),
        single_entropy=float(row_entropy(single[0]).mean(-1)),
        heads_entropy=_np(row_entropy(maps).mean(-1)),
    )
