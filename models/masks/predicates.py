"""The mask vocabulary: a mask is a predicate `(b, h, q_idx, kv_idx) → bool`, True = the query may attend to the key.

This is how FlexAttention's `mask_mod` and transformers' `masking_utils` (`causal_mask_function`,
`sliding_window_overlay`, `and_masks`, `or_masks`) write masks, and the one place this codebase states what a
mask is. Every builder asks it: the causal (and sliding-window) mask of a forward (`network.causal_keeps`), the
long-text block loop (`attention.attend_in_blocks`, one block of rows at a time), the maps made on demand
(`maps.OnDemandMaps`, one window at a time), the named masks and expectations (`masks.expectations`), the
training recorder and the checker.

    causal()            kv ≤ q (+ diagonal)
    sliding_window(w)   q − kv < w: transformers' sliding_window_overlay(w); with causal(), Mistral's window
    band(w)             |q − kv| ≤ w, both sides (the expectation window:W)
    prefix(p)           prefix-LM: causal, and everyone sees the first p positions
    sinks(n)            kv < n: the first n keys (attention sinks), to OR with a window
    chunk(c)            ⌊q/c⌋ = ⌊kv/c⌋: blocks of c positions (Llama 4's chunked attention with causal())
    documents(lengths)  packed documents: q and kv in the same document
    padding(mask)       the tokenizer's (batch, seq) 1 = real token: padded keys hidden
    and_masks, or_masks, not_mask   composition, as transformers' masking_utils

`materialise(pred, rows, keys, batch, heads)` is the ONE function that turns a predicate into a bool keep tensor
(batch or 1, heads or 1, rows, keys) for the query positions `rows` and key positions `keys` (absolute positions,
[start, end)): the whole (seq, seq) square for a short text, a block of rows for the long loop, a window for a
map made on demand. A `Predicate` may also say which keys a block of rows can see at all (`keys`), so the long
loop skips the rest; a user's function says nothing and every key is computed.

Any callable taking four index tensors is a predicate (a FlexAttention mask_mod, a transformers mask function,
a BlockMask's `.mask_mod`): it is called once with broadcasting index tensors (b: (B,1,1,1), h: (1,H,1,1),
q_idx: (1,1,Q,1), kv_idx: (1,1,1,K)), and with torch.vmap over scalars when it cannot broadcast. Torch only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import AttnVizError, MaskError

CALL_CELLS = 1 << 20  # cells per call of a predicate: a long square is made a band of rows at a time
MaskFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], Any]
Span = Callable[[int, int, int], tuple[int, int]]  # (q0, q1, n_keys) → keys [k0, k1) rows [q0, q1) may see


def _all_keys(q0: int, q1: int, n: int) -> tuple[int, int]:
    return 0, n


@dataclass(frozen=True)
class Predicate:
    """A mask as a function of (batch, head, query position, key position) → bool, with a name and a key span.

    span(q0, q1, n_keys) bounds the keys that query rows [q0, q1) may see, [k0, k1): outside it the predicate is
    False everywhere (the long loop never computes those scores). None: any key may be visible.
    """

    fn: MaskFn
    name: str = "custom"
    span: Span | None = None

    def __call__(self, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> Any:
        return self.fn(b, h, q_idx, kv_idx)

    def keys(self, q0: int, q1: int, n_keys: int) -> tuple[int, int]:
        """Return the keys [k0, k1) query rows [q0, q1) can see at most (clipped to 0 … n_keys)."""
        k0, k1 = (self.span or _all_keys)(q0, q1, n_keys)
        k0, k1 = max(0, min(k0, n_keys)), max(0, min(k1, n_keys))
        return k0, max(k0, k1)

    def __and__(self, other: Any) -> Predicate:
        return and_masks(self, other)

    def __or__(self, other: Any) -> Predicate:
        return or_masks(self, other)

    def __invert__(self) -> Predicate:
        return not_mask(self)


def as_predicate(mask: Any, name: str | None = None) -> Predicate:
    """Return a Predicate for a Predicate, a mask_mod / transformers mask function, or a BlockMask (its mask_mod).

    MaskError for anything else (a tensor is not a predicate: give it as a tensor mask instead).
    """
    if isinstance(mask, Predicate):
        return mask
    mod = getattr(mask, "mask_mod", None)  # torch.nn.attention.flex_attention.BlockMask
    if mod is not None and callable(mod) and not isinstance(mask, torch.Tensor):
        return Predicate(mod, str(name or getattr(mod, "__name__", "block_mask")))
    if isinstance(mask, torch.Tensor) or not callable(mask):
        raise MaskError(
            f"a predicate mask is a function (b, h, q_idx, kv_idx) → bool, a transformers mask function or a "
            f"BlockMask; got {type(mask).__name__}"
        )
    return Predicate(mask, str(name or getattr(mask, "__name__", "custom")))


# ---- the vocabulary --------------------------------------------------------------------------------------


def everything() -> Predicate:
    """Every key visible (bidirectional)."""
    return Predicate(lambda b, h, q, kv: torch.ones_like(q - kv, dtype=torch.bool), "bidirectional", _all_keys)


def causal(diagonal: int = 0) -> Predicate:
    """kv ≤ q + diagonal: each position sees itself and the positions to its left (diagonal 0, torch.tril's)."""

    def span(q0: int, q1: int, n: int) -> tuple[int, int]:
        return 0, q1 + diagonal

    name = "causal" if diagonal == 0 else f"causal(diagonal={diagonal})"
    return Predicate(lambda b, h, q, kv: kv <= q + diagonal, name, span)


def sliding_window(window: int) -> Predicate:
    """q − kv < window: the key is one of the `window` positions ending at the query (transformers'
    sliding_window_overlay); and_masks(causal(), sliding_window(W)) is Mistral's sliding-window causal mask."""
    w = int(window)

    def span(q0: int, q1: int, n: int) -> tuple[int, int]:
        return q0 - w + 1, n

    return Predicate(lambda b, h, q, kv: q - kv < w, f"sliding_window:{w}", span)


def band(width: int) -> Predicate:
    """|q − kv| ≤ width: a band on both sides of the diagonal (the expectation window:W)."""
    w = int(width)

    def span(q0: int, q1: int, n: int) -> tuple[int, int]:
        return q0 - w, q1 + w

    return Predicate(lambda b, h, q, kv: (q - kv).abs() <= w, f"window:{w}", span)


def sinks(n: int) -> Predicate:
    """kv < n: the first n keys, visible to everyone (attention sinks; OR it with a window)."""
    n = int(n)
    return Predicate(lambda b, h, q, kv: kv < n, f"sinks:{n}", lambda q0, q1, k: (0, n))


def prefix(p: int) -> Predicate:
    """Prefix-LM: causal, and every position sees the first p (which therefore see each other)."""
    m = or_masks(causal(), sinks(p))
    return Predicate(m.fn, f"prefix:{int(p)}", m.span)


def chunk(size: int, offset: int = 0) -> Predicate:
    """⌊(q − offset)/size⌋ = ⌊(kv − offset)/size⌋: blocks of `size` positions starting at `offset` (0)."""
    c, o = int(size), int(offset)
    if c < 1:
        raise MaskError("chunk:C needs C ≥ 1 positions per block")

    def fn(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return torch.div(q - o, c, rounding_mode="floor") == torch.div(kv - o, c, rounding_mode="floor")

    def span(q0: int, q1: int, n: int) -> tuple[int, int]:
        return ((q0 - o) // c) * c + o, ((q1 - 1 - o) // c + 1) * c + o

    return Predicate(fn, f"chunk:{c}" if o == 0 else f"chunk:{c}@{o}", span)


def documents(lengths: Sequence[int]) -> Predicate:
    """Packed documents of these lengths, one after another: q and kv in the same document.

    Positions past the last document form a document of their own (materialise refuses nothing here; the
    expectation docs:… checks that the lengths sum to the sequence).
    """
    lengths = tuple(int(n) for n in lengths)
    if not lengths or min(lengths) < 1:
        raise MaskError("docs:L1,L2,…: every document has at least one position")
    ends = torch.tensor(lengths).cumsum(0)  # exclusive end of each document

    def doc(idx: torch.Tensor) -> torch.Tensor:
        return torch.bucketize(idx, ends.to(idx.device), right=True)

    def fn(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return doc(q) == doc(kv)

    starts = [0, *ends.tolist()]

    def span(q0: int, q1: int, n: int) -> tuple[int, int]:
        d0 = int(doc(torch.tensor(q0)))
        d1 = int(doc(torch.tensor(max(q0, q1 - 1))))
        return starts[min(d0, len(starts) - 1)], starts[d1 + 1] if d1 + 1 < len(starts) else n

    return Predicate(fn, "docs:" + ",".join(str(n) for n in lengths), span)


def padding(attention_mask: torch.Tensor) -> Predicate:
    """Padded keys hidden: attention_mask is the tokenizer's (batch, seq), 1 = real token (either side)."""
    if attention_mask.dim() != 2:
        raise MaskError(f"a padding mask is (batch, seq); got shape {tuple(attention_mask.shape)}")
    real = attention_mask.bool()

    def fn(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return real.to(kv.device)[b, kv]

    return Predicate(fn, "padding")


def and_masks(*preds: Any) -> Predicate:
    """All of them: the intersection (transformers' and_masks). Key spans intersect."""
    ps = [as_predicate(p) for p in preds]
    if not ps:
        return everything()
    if len(ps) == 1:
        return ps[0]

    def fn(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        out = _as_bool(ps[0](b, h, q, kv), ps[0].name)
        for p in ps[1:]:
            out = out & _as_bool(p(b, h, q, kv), p.name)
        return out

    def span(q0: int, q1: int, n: int) -> tuple[int, int]:
        ks = [p.keys(q0, q1, n) for p in ps]
        return max(k[0] for k in ks), min(k[1] for k in ks)

    return Predicate(fn, "+".join(p.name for p in ps), span)


def or_masks(*preds: Any) -> Predicate:
    """Any of them: the union (transformers' or_masks). Key spans join."""
    ps = [as_predicate(p) for p in preds]
    if len(ps) == 1:
        return ps[0]

    def fn(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        out = _as_bool(ps[0](b, h, q, kv), ps[0].name)
        for p in ps[1:]:
            out = out | _as_bool(p(b, h, q, kv), p.name)
        return out

    def span(q0: int, q1: int, n: int) -> tuple[int, int]:
        ks = [p.keys(q0, q1, n) for p in ps]
        return min(k[0] for k in ks), max(k[1] for k in ks)

    return Predicate(fn, "|".join(p.name for p in ps), span)


def not_mask(pred: Any) -> Predicate:
    """The complement (transformers' not_mask)."""
    p = as_predicate(pred)
    return Predicate(lambda b, h, q, kv: ~_as_bool(p(b, h, q, kv), p.name), f"~{p.name}")


def causal_window(window: int | None = None) -> Predicate:
    """A causal layer's own mask: causal, narrowed to a sliding window of `window` positions when one is given."""
    return causal() if window is None else and_masks(causal(), sliding_window(window))


# ---- making tensors --------------------------------------------------------------------------------------


def _as_bool(out: Any, name: str) -> torch.Tensor:
    if isinstance(out, bool):
        return torch.tensor(out)
    if not isinstance(out, torch.Tensor):
        raise MaskError(f"the mask predicate {name} returned {type(out).__name__}, not a bool tensor")
    if out.dtype == torch.bool:
        return out
    if out.is_floating_point() or out.is_complex():
        raise MaskError(f"the mask predicate {name} returned {str(out.dtype).replace('torch.', '')}: it returns bool")
    return out != 0


def _range(r: int | tuple[int, int] | range) -> tuple[int, int]:
    if isinstance(r, int):
        return 0, r
    if isinstance(r, range):
        return r.start, r.stop
    return int(r[0]), int(r[1])


def materialise(
    pred: Any,
    rows: int | tuple[int, int] | range,
    keys: int | tuple[int, int] | range | None = None,
    batch: int = 1,
    heads: int = 1,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Return the predicate's bool keep tensor (batch or 1, heads or 1, rows, keys): True = may attend.

    rows, keys: the query and key positions, [start, end) or a count from 0 (keys = rows when None). The batch
    and heads axes are 1 unless the predicate depends on them. The one place a predicate becomes a tensor:
    dense (seq, seq) for a short text, a block of rows in the long loop, a window of a map made on demand.
    """
    p = as_predicate(pred)
    q0, q1 = _range(rows)
    k0, k1 = _range(rows if keys is None else keys)
    nq, nk = max(0, q1 - q0), max(0, k1 - k0)
    step = max(1, CALL_CELLS // max(1, nk * batch * heads))  # query rows per call of the predicate
    if nq <= step:
        return _made(p, q0, nq, k0, nk, batch, heads, device)
    parts = [_made(p, r, min(step, q0 + nq - r), k0, nk, batch, heads, device) for r in range(q0, q0 + nq, step)]
    lead = (max(t.shape[0] for t in parts), max(t.shape[1] for t in parts))
    return torch.cat([t.expand(*lead, -1, -1) for t in parts], dim=2)


def _made(
    p: Predicate, q0: int, nq: int, k0: int, nk: int, batch: int, heads: int, device: torch.device | str | None
) -> torch.Tensor:
    """Return materialise's tensor for rows q0 … q0 + nq − 1 from one call of the predicate."""
    b = torch.arange(batch, device=device).view(-1, 1, 1, 1)
    h = torch.arange(heads, device=device).view(1, -1, 1, 1)
    q = torch.arange(q0, q0 + nq, device=device).view(1, 1, -1, 1)
    kv = torch.arange(k0, k0 + nk, device=device).view(1, 1, 1, -1)
    try:
        out = _as_bool(p(b, h, q, kv), p.name)
    except AttnVizError:  # our own refusals (a budget, a refused expression) are the message
        raise
    except Exception as err:  # noqa: BLE001 — a user's function written for scalars (FlexAttention's vmap)
        out = _vmapped(p, b, h, q, kv, err)
    if out.dim() > 4:
        raise MaskError(f"the mask predicate {p.name} returned {out.dim()} axes; it returns one bool per cell")
    out = out.reshape((1,) * (4 - out.dim()) + tuple(out.shape))
    target = (out.shape[0] if out.shape[0] == batch else 1, out.shape[1] if out.shape[1] == heads else 1, nq, nk)
    try:
        return torch.broadcast_to(out, target).to(device) if nq and nk else out.new_zeros(target)
    except RuntimeError:
        raise MaskError(
            f"the mask predicate {p.name} returned shape {tuple(out.shape)}, which does not fit (batch, heads, "
            f"q_pos, k_pos) = {(batch, heads, nq, nk)}"
        ) from None


def _vmapped(p: Predicate, b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor, err: Exception) -> Any:
    """Call a predicate written for scalars over every cell with torch.vmap, as FlexAttention does."""
    fn: Any = p.fn
    for dims in ((None, None, None, 0), (None, None, 0, None), (None, 0, None, None), (0, None, None, None)):
        fn = torch.vmap(fn, in_dims=dims, out_dims=0)
    try:
        out = fn(b.flatten(), h.flatten(), q.flatten(), kv.flatten())
    except Exception as again:  # noqa: BLE001 — user code
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise MaskError(
            f"the mask predicate {p.name} raised {type(err).__name__}: {first[:200]} "
            f"(and under torch.vmap: {type(again).__name__})"
        ) from None
    return _as_bool(out, p.name)


def dense(pred: Any, seq: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Return the (seq, seq) keep of a predicate that depends on positions only (batch 0, head 0)."""
    return materialise(pred, seq, seq, device=device)[0, 0]
