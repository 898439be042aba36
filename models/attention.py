"""The one attention core every family calls, written the way the tutorial teaches it:

    scores = (Q / √d_k)·Kᵀ  →  masked_fill(~keep, finfo.min)  →  softmax (float32)  →  ·V

q: (batch, heads, q_pos, d_k); k, v: (batch, kv_heads, k_pos, d_k). Grouped key/value heads (GQA, MQA) are
expanded in one place, `repeat_kv`: query head h reads key/value head h // (heads / kv_heads). Rotary positions
are the family's business and are applied to q and k before they get here.

Instrumentation is one `Options` object per layer call, not a row of positional arguments: a hook called at
every named point (`hook(name, tensor)` returns the tensor unchanged; the recorder and the lecture keep what
they need, and the lecture shows the line that made each tensor), head gates, the fill value, a buffer for the
probabilities and maps-only. No transformers forward, no nn.MultiheadAttention, no scaled_dot_product_attention:
we need the weights themselves, and we want to show the code that makes them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

Hook = Callable[[str, torch.Tensor], torch.Tensor]


def no_hook(name: str, t: torch.Tensor) -> torch.Tensor:
    """The default hook: keeps nothing, returns the tensor."""
    return t


@dataclass
class Options:
    """How one layer's attention runs and what it lets out; the defaults are a plain forward."""

    hook: Hook = no_hook  # called at every named point (HOOK_POINTS) with the tensor made there
    head_gates: torch.Tensor | None = None  # (heads,) or (batch, heads): multipliers on each head's context
    probs_out: torch.Tensor | None = None  # float32 (batch, heads, q_pos, k_pos): the probs are written here
    fill: float | None = None  # the score a hidden key gets; None = finfo(dtype).min (never a NaN row)
    maps_only: bool = False  # the probs are all that is wanted: no V, no context (the last layer of a maps run)


# The named points of a layer's attention, in the order they happen, with their axes. `heads` is the number of
# query heads, `kv_heads` of key/value heads (equal without grouping); `d_k` is the width of one head.
HOOK_POINTS: dict[str, tuple[str, ...]] = {
    "attn_in": ("batch", "seq", "d_model"),  # what the attention reads (after the norm in a pre-norm block)
    "q_proj": ("batch", "seq", "heads·d_k"),  # W_q·x, every head side by side
    "q_split": ("batch", "seq", "heads", "d_k"),  # .view: the last axis cut into heads
    "q_heads": ("batch", "heads", "seq", "d_k"),  # .transpose(1, 2): one (seq, d_k) matrix per head
    "q_rot": ("batch", "heads", "seq", "d_k"),  # rotary families: q after rotation by its position
    "queries": ("batch", "heads", "q_pos", "d_k"),  # what the scores are made of (after rotation)
    "keys": ("batch", "kv_heads", "k_pos", "d_k"),  # per key/value head, after rotation (the KV cache's)
    "values": ("batch", "kv_heads", "k_pos", "d_k"),
    "keys_rep": ("batch", "heads", "k_pos", "d_k"),  # repeat_kv: one key matrix per query head
    "scores": ("batch", "heads", "q_pos", "k_pos"),  # Q·Kᵀ/√d_k, before the mask
    "masked": ("batch", "heads", "q_pos", "k_pos"),  # hidden keys at finfo.min
    "probs": ("batch", "heads", "q_pos", "k_pos"),  # softmax: each row sums to 1
    "context": ("batch", "heads", "q_pos", "d_k"),  # probs·V per head
    "merged": ("batch", "seq", "d_model"),  # .transpose(1, 2).contiguous().view: heads concatenated
    "attn_out": ("batch", "seq", "d_model"),  # W_o·merged: the attention block's output
}


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Return (batch, kv_heads·n_rep, seq, d_k) from (batch, kv_heads, seq, d_k): each key/value head n_rep times.

    Query head h then reads the copy at h, which is key/value head h // n_rep (the heads of a group sit next to
    each other, as in transformers' repeat_kv). n_rep 1 (multi-head attention) returns x itself.
    """
    if n_rep == 1:
        return x
    B, n_kv, S, d_k = x.shape  # batch, kv_heads, seq, d_k
    return x[:, :, None, :, :].expand(B, n_kv, n_rep, S, d_k).reshape(B, n_kv * n_rep, S, d_k)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor | None,
    keep: torch.Tensor | None,
    scale: float,
    opts: Options,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Return each head's context (batch, heads, q_pos, d_k) and the probs (batch, heads, q_pos, k_pos).

    q: (batch, heads, q_pos, d_k); k, v: (batch, kv_heads, k_pos, d_k), kv_heads dividing heads; v None (with
    opts.maps_only) returns (None, probs). keep: bool broadcastable to (batch, heads, q_pos, k_pos), True = the
    query may attend to the key; None = every key. scale: 1/√d_k for every family here (GPT-2 checkpoints may
    add 1/(layer + 1)).
    """
    hook = opts.hook
    q, k = hook("queries", q), hook("keys", k)
    n_rep = q.size(1) // k.size(1)  # query heads per key/value head
    k = hook("keys_rep", repeat_kv(k, n_rep))  # (B, nh, S, d_k)
    # Q·Kᵀ/√d_k, the scale put on q (q_pos·d_k products rather than q_pos·k_pos).
    scores = hook("scores", torch.matmul(q * scale, k.transpose(-2, -1)))  # (B, nh, T, S)
    if keep is not None:
        # finfo.min, not -inf: a row with every key hidden becomes uniform instead of NaN.
        fill = torch.finfo(scores.dtype).min if opts.fill is None else opts.fill
        scores = hook("masked", scores.masked_fill(~keep, fill))
    # Softmax in float32 whatever the model's dtype: the maps we show are float32 probabilities.
    probs = hook("probs", torch.softmax(scores, dim=-1, dtype=torch.float32, out=opts.probs_out))  # (B, nh, T, S)
    if v is None:
        return None, probs
    v = repeat_kv(hook("values", v), n_rep)  # (B, nh, S, d_k)
    context = hook("context", torch.matmul(probs.to(v.dtype), v))  # (B, nh, T, d_k): Σ_j p_ij v_j per head
    if opts.head_gates is not None:
        context = context * opts.head_gates.to(context.dtype).view(-1, q.size(1), 1, 1)  # (1 or B, nh, 1, 1)
    return context, probs


def merge_heads(context: torch.Tensor) -> torch.Tensor:
    """Return (batch, seq, heads·d_k) from (batch, heads, seq, d_k): the heads concatenated, in order."""
    B, nh, T, d_k = context.size()  # batch, heads, seq, d_k
    return context.transpose(1, 2).contiguous().view(B, T, nh * d_k)


# ---- what the hooks keep -------------------------------------------------------------------------------

# The tensors `record=True` keeps per layer (EncoderOutput's internals), by hook point.
RECORDED = ("queries", "keys", "values", "scores", "context")


@dataclass
class Recorder:
    """Keeps the RECORDED tensors of every layer during one forward (only when asked: they cost memory)."""

    tensors: list[dict[str, torch.Tensor]] = field(default_factory=list)  # per layer, by hook point
    hidden_states: list[torch.Tensor] = field(default_factory=list)  # [batch, seq, d_model]: layer inputs + last

    def at(self, layer: int) -> Hook:
        """Return the hook for `layer`."""
        while len(self.tensors) <= layer:
            self.tensors.append({})
        kept = self.tensors[layer]

        def hook(name: str, t: torch.Tensor) -> torch.Tensor:
            if name in RECORDED:
                kept[name] = t
            return t

        return hook

    def stacked(self, name: str) -> torch.Tensor:
        """Return (batch, layers, …) of one recorded point."""
        return torch.stack([layer[name] for layer in self.tensors], dim=1)


@dataclass(frozen=True)
class Site:
    """Where a hooked tensor was made: the file and line of the hook call (the line that made it)."""

    filename: str
    lineno: int
    function: str


@dataclass
class StepRecorder:
    """Keeps every hooked tensor of one layer call and the line that made it (the lecture's view of a layer)."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    sites: dict[str, Site] = field(default_factory=dict)

    def __call__(self, name: str, t: torch.Tensor) -> torch.Tensor:
        frame = sys._getframe(1)  # the hook's caller: the line of model code that made t
        self.tensors[name] = t
        self.sites[name] = Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        return t
