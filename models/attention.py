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
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .masks import predicates
from .masks.predicates import Predicate

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
    # Which implementation of ATTENTION_FUNCTIONS runs: "eager" (attend_rows, what the lecture shows) or
    # "blocks" (attend_in_blocks, the long-text loop the network picks for maps on demand).
    implementation: str = "eager"
    # "blocks": query rows are processed `rows` at a time, so heads · q_pos · k_pos numbers never exist at once,
    # and no probs are returned. Either implementation writes each row's log-sum-exp to lse_out (batch, heads,
    # q_pos), from which any map is exact again later (models.maps).
    rows: int = 128  # models.maps.FORWARD_ROWS
    lse_out: torch.Tensor | None = None
    pool: Any = None  # models.maps.Pooled: each block's probs also pooled into overview tiles (rows(), add())
    # The layer's own mask as a predicate (models.masks.predicates) over absolute positions, the query rows being
    # positions start, start + 1, …: made into a tensor only where it is needed (whole for "eager", a block of
    # rows at a time for "blocks", which also reads only the keys it allows). `keep` then carries only the
    # caller's mask.
    mask: Predicate | None = None
    start: int = 0
    # The caller's mask as a predicate (a user's mask_mod or expression) instead of a keep tensor, ANDed with
    # `mask` where that is made: a long text's user mask never exists as (seq, seq). It may depend on the batch
    # and head (made with those axes); the model's own `mask` is positions only.
    user: Predicate | None = None


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
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Return each head's context (batch, heads, q_pos, d_k) and the probs (batch, heads, q_pos, k_pos).

    q: (batch, heads, q_pos, d_k); k, v: (batch, kv_heads, k_pos, d_k), kv_heads dividing heads; v None (with
    opts.maps_only) returns (None, probs). keep: bool broadcastable to (batch, heads, q_pos, k_pos), True = the
    query may attend to the key; None = every key. scale: the layer's own (1/√d_k for most checkpoints; GPT-2's
    may drop it or add 1/(layer + 1)). The work is done by ATTENTION_FUNCTIONS[opts.implementation]; "blocks"
    returns no probs (None).
    """
    hook = opts.hook
    q, k = hook("queries", q), hook("keys", k)
    v = None if v is None else hook("values", v)
    context, probs = ATTENTION_FUNCTIONS[opts.implementation](q, k, v, keep, scale, opts)
    if context is not None and opts.head_gates is not None:
        context = context * opts.head_gates.to(context.dtype).view(-1, q.size(1), 1, 1)  # (1 or B, nh, 1, 1)
    return context, probs


def eager_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor | None,
    keep: torch.Tensor | None,
    scale: float,
    opts: Options,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """The "eager" implementation (transformers' eager_attention_forward): the layer's predicate made whole,
    K and V repeated per query head, then `attend_rows`. Arguments as `attend`'s (k, v not repeated)."""
    if opts.mask is not None or opts.user is not None:
        own = _made(opts, 0, q.size(2), 0, k.size(2), q.size(0), q.size(1), q.device)
        if own is not None:
            keep = own if keep is None else own & keep
    n_rep = q.size(1) // k.size(1)  # query heads per key/value head
    k = opts.hook("keys_rep", repeat_kv(k, n_rep))  # (B, nh, S, d_k)
    if v is not None:
        v = repeat_kv(v, n_rep)  # (B, nh, S, d_k)
    return attend_rows(q, k, v, keep, scale, opts)


def attend_rows(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor | None,
    keep: torch.Tensor | None,
    scale: float,
    opts: Options,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Return (context, probs) of query rows q (batch, heads, rows, d_k) over keys and values with one per head."""
    hook = opts.hook
    # Q·Kᵀ/√d_k, the scale put on q (q_pos·d_k products rather than q_pos·k_pos).
    scores = hook("scores", torch.matmul(q * scale, k.transpose(-2, -1)))  # (B, nh, T, S)
    if keep is not None:
        # finfo.min, not -inf: a row with every key hidden becomes uniform instead of NaN.
        fill = torch.finfo(scores.dtype).min if opts.fill is None else opts.fill
        scores = hook("masked", scores.masked_fill(~keep, fill))
    # Softmax in float32 whatever the model's dtype: the maps we show are float32 probabilities.
    probs = hook("probs", torch.softmax(scores, dim=-1, dtype=torch.float32, out=opts.probs_out))  # (B, nh, T, S)
    if opts.lse_out is not None:
        # log Σ_j exp(s_ij) = s_ij* − log p_ij* at the row's largest score: no second pass of exp over the row.
        torch.sub(scores.amax(-1).float(), probs.amax(-1).log(), out=opts.lse_out)
    if v is None:
        return None, probs
    context = hook("context", torch.matmul(probs.to(v.dtype), v))  # (B, nh, T, d_k): Σ_j p_ij v_j per head
    return context, probs


def block_keep(
    keep: torch.Tensor | None,
    opts: Options,
    r0: int,
    r1: int,
    k0: int,
    k1: int,
    device: torch.device,
    batch: int = 1,
    heads: int = 1,
) -> torch.Tensor | None:
    """Return the keep of query rows r0:r1 and keys k0:k1: the layer's predicate (opts.mask) AND the caller's
    (opts.user, made with `batch` and `heads` axes when it depends on them) made for this block, rows from
    opts.start, AND the caller's keep tensor cut to it; None when none of them hides anything."""
    own = _made(opts, r0, r1, k0, k1, batch, heads, device)
    user = None if keep is None else _cut(keep, r0, r1, k0, k1)
    if own is None:
        return user
    return own if user is None else own & user


def _made(
    opts: Options, r0: int, r1: int, k0: int, k1: int, batch: int, heads: int, device: torch.device
) -> torch.Tensor | None:
    """Return opts.mask AND opts.user made for query rows r0:r1 (positions opts.start + r) and keys k0:k1."""
    rows = (opts.start + r0, opts.start + r1)
    own = None if opts.mask is None else predicates.materialise(opts.mask, rows, (k0, k1), device=device)
    if opts.user is None:
        return own
    user = predicates.materialise(opts.user, rows, (k0, k1), batch=batch, heads=heads, device=device)
    return user if own is None else own & user


def key_range(opts: Options, r0: int, r1: int, n_keys: int) -> tuple[int, int]:
    """Return the keys [k0, k1) query rows r0:r1 may see: the span of the layer's predicate and of the caller's
    (all keys without either; a user's function says nothing, so it spans every key)."""
    k0, k1 = 0, n_keys
    for pred in (opts.mask, opts.user):
        if pred is not None:
            a, b = pred.keys(opts.start + r0, opts.start + r1, n_keys)
            k0, k1 = max(k0, a), min(k1, b)
    return k0, max(k0, k1)


def _cut(keep: torch.Tensor, r0: int, r1: int, k0: int, k1: int) -> torch.Tensor:
    """Return keep's rows r0:r1 and keys k0:k1, where those axes are not broadcast (size 1)."""
    rows = slice(r0, r1) if keep.size(-2) > 1 else slice(None)
    cols = slice(k0, k1) if keep.size(-1) > 1 else slice(None)
    return keep[..., rows, cols]


def attend_in_blocks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor | None,
    keep: torch.Tensor | None,
    scale: float,
    opts: Options,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The "blocks" implementation: `eager_attention` when the rows fit in one block, else `_blocks`."""
    if q.size(2) <= opts.rows:
        return eager_attention(q, k, v, keep, scale, opts)
    return _blocks(q, k, v, keep, scale, opts)


def _blocks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor | None,
    keep: torch.Tensor | None,
    scale: float,
    opts: Options,
) -> tuple[torch.Tensor | None, None]:
    """Return (context, None): the steps of `attend_rows`, opts.rows query rows at a time, over the keys they see.

    q: (batch, heads, q_pos, d_k); k, v: (batch, kv_heads, k_pos, d_k), not repeated. Memory holds heads · rows ·
    k_pos scores instead of heads · q_pos · k_pos. A causal layer's block reads only keys up to its last row (and
    from its first row's window start): the keys it skips would get weight exactly 0. Each row's log-sum-exp goes
    to opts.lse_out, so any map is exact again later without having been kept (models.maps).

    The same numbers as `attend_rows` block by block (`attend_in_blocks_plain` in tests/core/reference.py, the
    reference tests/core/test_long.py compares it with), arranged for long rows, where every pass over the scores costs: one
    scores buffer for all blocks (a fresh 75 MB tensor per block at 4,096 tokens is page faults, not
    arithmetic), the softmax written over the scores, the mask filled only in the columns where it hides a key
    (a causal block's last rows × rows square), and each group's query heads stacked against their one key/value
    head instead of repeating K and V. opts.pool (models.maps.Pooled) also pools each block's probs into tiles.
    """
    B, nh, T, _ = q.shape  # batch, heads, q_pos, d_k
    n_kv, S = k.size(1), k.size(2)  # key/value heads, keys
    g = nh // n_kv  # query heads per key/value head
    R = opts.rows if opts.pool is None else opts.pool.rows(opts.rows)
    fill = opts.fill
    context = None if v is None else q.new_empty(B, nh, T, v.size(-1))
    if opts.lse_out is not None:
        opts.lse_out.fill_(0.0)
    qs = q * scale  # the scale on q, as in attend_rows
    kt = k.transpose(-2, -1)  # (B, n_kv, d_k, S)
    work = q.new_empty(B * nh * min(R, T) * S)  # every block's scores, then its probs (in place when float32)
    pwork = work if q.dtype == torch.float32 else torch.empty(work.numel(), dtype=torch.float32, device=q.device)
    for r0 in range(0, T, R):
        r1 = min(T, r0 + R)
        n = r1 - r0
        k0, k1 = key_range(opts, r0, r1, S)
        m = k1 - k0
        scores = work[: B * nh * n * m].view(B, n_kv, g * n, m)  # a group's heads' rows one after another
        torch.matmul(qs[:, :, r0:r1].reshape(B, n_kv, g * n, -1), kt[..., k0:k1], out=scores)
        scores = scores.view(B, nh, n, m)
        hidden = block_keep(keep, opts, r0, r1, k0, k1, q.device, B, nh)
        if hidden is not None:
            _fill_hidden(scores, ~hidden, torch.finfo(scores.dtype).min if fill is None else fill)
        top = scores.amax(-1) if opts.lse_out is not None else None  # each row's largest score
        probs = pwork[: B * nh * n * m].view(B, nh, n, m)
        torch.softmax(scores, dim=-1, dtype=torch.float32, out=probs)
        if opts.lse_out is not None and top is not None:
            # log Σ_j exp(s_ij) = s_ij* − log p_ij* at the row's largest score, as in attend_rows.
            torch.sub(top.float(), probs.amax(-1).log(), out=opts.lse_out[:, :, r0:r1])
        if opts.pool is not None:
            opts.pool.add(probs, r0, k0)
        if context is not None and v is not None:
            grouped = probs.view(B, n_kv, g * n, m).to(v.dtype)
            context[:, :, r0:r1] = torch.matmul(grouped, v[:, :, k0:k1]).view(B, nh, n, -1)
    return context, None


def _fill_hidden(scores: torch.Tensor, hidden: torch.Tensor, fill: float) -> None:
    """Set scores to fill where hidden (broadcastable), touching only the columns where something is hidden."""
    if hidden.size(-1) == 1:
        scores.masked_fill_(hidden, fill)
        return
    cols = hidden.reshape(-1, hidden.size(-1)).any(0).nonzero()
    if cols.numel() == 0:
        return
    c0, c1 = int(cols[0]), int(cols[-1]) + 1
    scores[..., c0:c1].masked_fill_(hidden[..., c0:c1], fill)


# The attention implementations a layer can run, by name (transformers' ALL_ATTENTION_FUNCTIONS): the same
# signature (q, k, v, keep, scale, opts) → (context, probs); opts.implementation picks one. To add one, write it
# with that signature and register it here; tests/core/test_long.py holds each to attend_rows' numbers.
ATTENTION_FUNCTIONS: dict[str, Callable[..., tuple[torch.Tensor | None, torch.Tensor | None]]] = {
    "eager": eager_attention,
    "blocks": attend_in_blocks,
}


# ---- what the hooks keep -------------------------------------------------------------------------------

# The tensors Network.run_with_cache keeps per layer by default (EncoderOutput's internals), by hook point.
RECORDED = ("queries", "keys", "values", "scores", "context")


@dataclass(frozen=True)
class Site:
    """Where a hooked tensor was made: the file and line of the hook call (the line that made it)."""

    filename: str
    lineno: int
    function: str


@dataclass
class Recorder:
    """The one keeper of hooked tensors (TransformerLens' ActivationCache): Network.run_with_cache fills it.

    names: the hook points kept (HOOK_POINTS; None = every one); layers: the layers kept (None = all); sites:
    also keep the file and line that made each tensor (the lecture's view of a layer). Every layer's input is
    kept in hidden_states when the network runs it (references, no copies).

    rows: keep only these token positions (a long text's two cells, models.analysis.explain): every sequence
    axis of a hook point (seq, q_pos, k_pos in HOOK_POINTS), of the layer inputs and of the watched modules (axis
    1) is cut to them, in this order, as the tensors are made. `watch(module, name, "input" or "output")` also
    keeps a module's input or output under `modules[name]` (forward hooks, removed by `close`); a model is shared
    between threads (the app), so a watched module keeps only what the recorder's own thread computes.
    """

    names: Collection[str] | None = RECORDED
    layers: Collection[int] | None = None
    sites: bool = False
    tensors: list[dict[str, torch.Tensor]] = field(default_factory=list)  # per layer, by hook point
    where: list[dict[str, Site]] = field(default_factory=list)  # per layer, by hook point (with sites=True)
    hidden_states: list[torch.Tensor] = field(default_factory=list)  # [batch, seq, d_model]: layer inputs + last
    rows: torch.Tensor | None = None  # long: positions kept on every sequence axis (None = all)
    modules: dict[str, torch.Tensor] = field(default_factory=dict)  # watched modules' inputs and outputs, by name
    thread: int = field(default_factory=threading.get_ident)
    handles: list[Any] = field(default_factory=list, repr=False)

    def cut(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """Return t (hook point `name`'s, or (batch, seq, …) for other names) on the kept rows only."""
        if self.rows is None:
            return t
        rows = self.rows.to(t.device)
        for axis, what in enumerate(HOOK_POINTS.get(name, ("batch", "seq"))):
            if what in ("seq", "q_pos", "k_pos"):
                t = t.index_select(axis, rows)
        return t

    def layer_input(self, x: torch.Tensor) -> None:
        """Keep a layer's input (the network calls it before each layer, and with the last layer's output)."""
        self.hidden_states.append(x if self.rows is None else self.cut("", x))

    def watch(self, module: nn.Module, name: str, what: str = "output") -> None:
        """Keep `module`'s first input ("input") or its output ("output") as modules[name], this thread's only."""
        if what not in ("input", "output"):
            raise ValueError(f"a watched module keeps its input or its output, not {what!r}")

        def keep(t: torch.Tensor) -> None:
            if threading.get_ident() == self.thread:
                self.modules[name] = self.cut("", t)

        if what == "input":
            self.handles.append(module.register_forward_pre_hook(lambda _m, args: keep(args[0])))
        else:
            self.handles.append(module.register_forward_hook(lambda _m, _args, out: keep(out)))

    def close(self) -> None:
        """Remove the watched modules' hooks."""
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def at(self, layer: int) -> Hook:
        """Return the hook for `layer` (no_hook for a layer not kept)."""
        if self.layers is not None and layer not in self.layers:
            return no_hook
        while len(self.tensors) <= layer:
            self.tensors.append({})
            self.where.append({})
        kept, where, names = self.tensors[layer], self.where[layer], self.names

        if self.sites:

            def traced(name: str, t: torch.Tensor) -> torch.Tensor:
                if names is None or name in names:
                    kept[name] = t
                    frame = sys._getframe(1)  # the hook's caller: the line of model code that made t
                    where[name] = Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
                return t

            return traced

        if self.rows is not None:

            def rows(name: str, t: torch.Tensor) -> torch.Tensor:
                if names is None or name in names:
                    kept[name] = self.cut(name, t)
                return t

            return rows

        def hook(name: str, t: torch.Tensor) -> torch.Tensor:
            if names is None or name in names:
                kept[name] = t
            return t

        return hook

    def __getitem__(self, key: tuple[str, int]) -> torch.Tensor:
        """Return one kept tensor: rec["queries", 3] is layer 3's queries."""
        name, layer = key
        return self.tensors[layer][name]

    def stacked(self, name: str) -> torch.Tensor:
        """Return (batch, layers, …) of one recorded point (every layer must have kept it)."""
        return torch.stack([layer[name] for layer in self.tensors], dim=1)
