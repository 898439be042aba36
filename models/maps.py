"""Attention maps on demand: what one forward keeps so that any map is exact later, and reading it like a tensor.

A long input's maps do not fit (SmolLM2's 270 heads at 4,096 tokens are 18 GB of float32, the tutorial's §6.2
warning). Per layer, the forward keeps what the scores are made of — the queries after rotation, the keys per
key/value head — and each row's log-sum-exp (models.attention.attend_in_blocks): O(layers · seq · d) instead of
O(layers · heads · seq²). A map is then, for any head and any block of rows,

    A[i, j] = exp((q_i / √d_k)·k_j − lse_i)   where the layer's mask lets i see j, else 0

the same numbers as the softmax of the forward (to ~1e-7). `OnDemandMaps` reads like the dense
(layers, heads, q_pos, k_pos) tensor — `maps[layer, head]`, `maps[layer, head, rows]`, `maps[layer, head, rows,
cols]`, `.shape` — and adds `rows(layer, r0, r1)` (every head's block of rows, for statistics that stream) and
`pooled(layer, head, size)`. Asking for more than `ATTENTION_LENS_MAX_MAP_MB` at once is a BudgetError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from . import settings
from .attention import repeat_kv
from .errors import BudgetError
from .masks import predicates
from .masks.predicates import Predicate

ROW_BLOCK = 512  # query rows per block when maps are recomputed
FORWARD_ROWS = 128  # query rows per block in the long forward (smaller blocks stay in cache; timed by hand)
OVERVIEW_CELLS = 128  # cells per side of the max-pooled tiles of every head the long forward makes as it goes


class Pooled:
    """One layer's maps of every head pooled to ≤ size × size cells as the forward's row blocks go by.

    models.attention.attend_in_blocks calls `rows` (blocks of whole pooled rows) and `add` (a block's probs);
    `out` is then what `OnDemandMaps.pooled(layer, None, size, how)` would make, without making the maps twice.
    """

    def __init__(self, heads: int, n_q: int, n_k: int, size: int = OVERVIEW_CELLS, how: str = "max"):
        self.f = pool_factor(n_q, n_k, size)
        self.size, self.how = size, how
        self.out = torch.zeros(heads, -(-n_q // self.f), -(-n_k // self.f), dtype=torch.float32)

    def rows(self, rows: int) -> int:
        """Return the query rows per block: about `rows`, a whole number of pooled rows."""
        return max(self.f, (rows // self.f) * self.f)

    def add(self, probs: torch.Tensor, r0: int, k0: int) -> None:
        """Pool a block of probs (1, heads, rows, keys), rows from r0 and keys from k0 (r0 a multiple of f)."""
        f = self.f
        block = probs[0]
        a0 = (k0 // f) * f  # the pooled column the block's first key falls in
        if a0 != k0:  # a window's block: line its keys up with the pooled columns
            block = torch.nn.functional.pad(block, (k0 - a0, 0))
        tiles = pool_block(block, f, self.how).cpu()  # (heads, rows / f, ⌈keys / f⌉)
        self.out[:, r0 // f : r0 // f + tiles.shape[1], a0 // f : a0 // f + tiles.shape[2]] = tiles


@dataclass
class LayerStore:
    """What one layer's forward kept: enough to make any of its maps again, exactly."""

    queries: torch.Tensor  # (heads, q_pos, d_k), after rotation: what the scores were made of (before the scale)
    keys: torch.Tensor  # (kv_heads, k_pos, d_k), per key/value head
    lse: torch.Tensor  # (heads, q_pos) float32: log Σ_j exp(score_ij) over the keys row i could see
    scale: float  # 1/√d_k (the layer's own)
    window: int | None  # the layer's sliding window, or None

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.queries, self.keys, self.lse))


class OnDemandMaps:
    """Every kept layer's maps of one text, (layers, heads, q_pos, k_pos), made when asked (see the module doc).

    keep: (q_pos, k_pos) bool, the caller's mask as applied (padding, a user mask; (heads, q_pos, k_pos) when it
    differs per head), a predicate (a user's mask
    made one window at a time, per head when it depends on the head), or None; causal: the model's own causal
    mask applies (and each layer's window). Layers not kept (export of a few) raise on access.
    """

    def __init__(
        self,
        layers: dict[int, LayerStore],
        n_layers: int,
        keep: torch.Tensor | Predicate | None,
        causal: bool,
        start: int = 0,
        tiles: dict[int, Pooled] | None = None,
    ):
        any_layer = next(iter(layers.values()))
        self.layers = layers
        self.n_layers = n_layers
        self.n_heads, self.n_q, _ = any_layer.queries.shape
        self.n_k = int(any_layer.keys.shape[1])
        self.keep = keep
        self.causal = causal
        self.start = start
        self.dtype = torch.float32
        self.tiles = tiles or {}  # per layer: every head's pooled maps, made by the forward as it went

    # ---- what a tensor would say -------------------------------------------------------------------

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.n_layers, self.n_heads, self.n_q, self.n_k))

    def dim(self) -> int:
        return 4

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    @property
    def nbytes_dense(self) -> int:
        """Return what the dense float32 maps would take: what this object avoids holding."""
        return 4 * self.n_layers * self.n_heads * self.n_q * self.n_k

    @property
    def nbytes(self) -> int:
        """Return what this object holds (queries, keys and log-sum-exps of every kept layer)."""
        return sum(s.nbytes for s in self.layers.values())

    def cpu(self) -> OnDemandMaps:
        return self

    def float(self) -> OnDemandMaps:
        return self

    # ---- maps -------------------------------------------------------------------------------------------

    def _store(self, layer: int) -> LayerStore:
        if not 0 <= layer < self.n_layers:
            raise IndexError(f"layer {layer} does not exist: this model has layers 0–{self.n_layers - 1}")
        if layer not in self.layers:
            raise KeyError(f"layer {layer}'s maps were not kept (kept: {sorted(self.layers)})")
        return self.layers[layer]

    def _require(self, cells: int, what: str) -> None:
        settings.require("max_map_mb", math.ceil(4 * cells / (1 << 20)), what)

    def block(
        self, layer: int, heads: slice | list[int], r0: int, r1: int, c0: int = 0, c1: int | None = None
    ) -> torch.Tensor:
        """Return (len(heads), r1 − r0, c1 − c0) float32: rows r0:r1, keys c0:c1 of some heads of a layer."""
        s = self._store(layer)
        c1 = self.n_k if c1 is None else c1
        q = s.queries[heads]  # (h, T, d_k)
        n_rep = self.n_heads // s.keys.shape[0]
        k = repeat_kv(s.keys[None], n_rep)[0]  # (heads, S, d_k)
        k = k[heads]
        lse = s.lse[heads]  # (h, T)
        out = torch.zeros(q.shape[0], r1 - r0, c1 - c0, dtype=torch.float32, device=q.device)
        for b0 in range(r0, r1, ROW_BLOCK):
            b1 = min(r1, b0 + ROW_BLOCK)
            k0, k1 = c0, c1
            for pred in (self.layer_mask(s), self.keep if isinstance(self.keep, Predicate) else None):
                if pred is not None:  # the keys these rows can see at all
                    a, b = pred.keys(self.start + b0, self.start + b1, self.n_k)
                    k0, k1 = max(k0, a), min(k1, b)
            if k1 <= k0:
                continue
            scores = torch.matmul(q[:, b0:b1] * s.scale, k[:, k0:k1].transpose(-2, -1)).float()  # (h, rows, keys)
            allowed = self._allowed(s, b0, b1, k0, k1, q.device, heads)
            probs = torch.exp(scores - lse[:, b0:b1, None])
            if allowed is not None:
                probs = probs.masked_fill(~allowed, 0.0)
            out[:, b0 - r0 : b1 - r0, k0 - c0 : k1 - c0] = probs
        return out

    def layer_mask(self, s: LayerStore) -> Predicate | None:
        """Return the layer's own mask as a predicate (causal, narrowed by its window); None for a bidirectional one."""
        return predicates.causal_window(s.window) if self.causal else None

    def _allowed(
        self, s: LayerStore, r0: int, r1: int, k0: int, k1: int, device: torch.device, heads: Any = slice(None)
    ) -> torch.Tensor | None:
        """Return (r1 − r0, k1 − k0) bool, or (len(heads), …) for a user predicate that depends on the head: which
        of these cells the layer's mask and the caller's let through (None: all)."""
        allowed = None
        own = self.layer_mask(s)
        rows = (self.start + r0, self.start + r1)  # the predicates made for this window only
        if own is not None:
            allowed = predicates.materialise(own, rows, (k0, k1), device=device)[0, 0]
        if isinstance(self.keep, Predicate):
            made = predicates.materialise(self.keep, rows, (k0, k1), heads=self.n_heads, device=device)[0]
            user = made[heads] if made.shape[0] > 1 else made[0]  # (h, rows, keys) or (rows, keys)
            allowed = user if allowed is None else allowed & user
        elif self.keep is not None:  # (q_pos, k_pos), or (heads, q_pos, k_pos) for per-head masks
            user = self.keep[..., r0:r1, k0:k1].to(device)
            if user.dim() == 3:
                user = user[heads] if user.shape[0] > 1 else user[0]
            allowed = user if allowed is None else allowed & user
        return allowed

    def head(self, layer: int, head: int, rows: slice = slice(None), cols: slice = slice(None)) -> torch.Tensor:
        """Return one head's map (or a window of it), (rows, cols) float32."""
        r0, r1, _ = rows.indices(self.n_q)
        c0, c1, _ = cols.indices(self.n_k)
        self._require((r1 - r0) * (c1 - c0), f"layer {layer} head {head}'s map window")
        return self.block(layer, [head], r0, r1, c0, c1)[0]

    def rows(self, layer: int, r0: int, r1: int) -> torch.Tensor:
        """Return every head's rows r0:r1 of a layer, (heads, r1 − r0, k_pos): a block for streaming statistics."""
        self._require(self.n_heads * (r1 - r0) * self.n_k, f"rows {r0}–{r1} of layer {layer}")
        return self.block(layer, slice(None), r0, r1)

    def pooled(self, layer: int, head: int | None = None, size: int = 256, how: str = "max") -> torch.Tensor:
        """Return one head's map pooled to at most size × size cells, (qb, kb); every head's, (heads, qb, kb),
        when head is None. Each cell is the max (or mean) of its block of tokens (see `pool_factor`).

        Streamed over row blocks: a whole map never exists at once. "mean" sums each block of keys and averages
        each block of queries, so pooled rows still sum to 1 (a distribution over key blocks).
        """
        f = pool_factor(self.n_q, self.n_k, size)
        made = self.tiles.get(layer)
        if made is not None and (made.size, made.how) == (size, how) and layer in self.layers:
            return made.out.clone() if head is None else made.out[head].clone()
        heads = slice(None) if head is None else [head]
        n_h = self.n_heads if head is None else 1
        qb, kb = -(-self.n_q // f), -(-self.n_k // f)
        out = torch.zeros(n_h, qb, kb, dtype=torch.float32)
        step = max(f, (ROW_BLOCK // f) * f)
        for r0 in range(0, self.n_q, step):
            r1 = min(self.n_q, r0 + step)
            block = self.block(layer, heads, r0, r1).cpu()  # (h, rows, k_pos)
            out[:, r0 // f : r0 // f + -(-(r1 - r0) // f)] = pool_block(block, f, how)
        return out[0] if head is not None else out

    def __getitem__(self, index: Any) -> torch.Tensor:
        """Return maps[layer], maps[layer, head], maps[layer, head, rows] or maps[layer, head, rows, cols]."""
        if not isinstance(index, tuple):
            index = (index,)
        layer = index[0]
        if not isinstance(layer, int):
            raise TypeError("on-demand maps are read one layer at a time: maps[layer, …]")
        head = index[1] if len(index) > 1 else slice(None)
        rows = index[2] if len(index) > 2 else slice(None)
        cols = index[3] if len(index) > 3 else slice(None)
        if isinstance(rows, int):
            rows = slice(rows, rows + 1)
        if isinstance(cols, int):
            cols = slice(cols, cols + 1)
        r0, r1, _ = rows.indices(self.n_q)
        c0, c1, _ = cols.indices(self.n_k)
        heads = [head] if isinstance(head, int) else list(range(self.n_heads))[head]
        self._require(len(heads) * (r1 - r0) * (c1 - c0), f"layer {layer}'s maps")
        out = self.block(layer, heads, r0, r1, c0, c1)
        if isinstance(head, int):
            out = out[0]
        if isinstance(index[2] if len(index) > 2 else None, int):
            out = out[..., 0, :]
        if isinstance(index[3] if len(index) > 3 else None, int):
            out = out[..., 0]
        return out

    def numpy(self) -> Any:
        """Return the dense maps as numpy when the budget allows it (a BudgetError says to ask for less)."""
        return self.dense().numpy()

    def dense(self) -> torch.Tensor:
        """Return every layer's maps, (layers, heads, q_pos, k_pos), when ATTENTION_LENS_MAX_MAP_MB allows it."""
        self._require(self.n_layers * self.n_heads * self.n_q * self.n_k, "every layer's maps at once")
        missing = [i for i in range(self.n_layers) if i not in self.layers]
        if missing:
            raise BudgetError(f"layers {missing[:5]} were not kept: only {sorted(self.layers)} can be read")
        return torch.stack([self[i] for i in range(self.n_layers)])


class KeepOnDemand:
    """A long text's applied mask, (*lead, q_pos, k_pos) bool, kept as its predicate and made only where read.

    EncoderOutput.keep of a long text whose mask is a predicate (a user's mask_mod or expression, ANDed with the
    model's causal mask): a window `keep[r0:r1, c0:c1]` is made alone (models.masks.predicates.materialise);
    the whole square only when asked for (`dense`, `numpy`, `&` with a tensor), within ATTENTION_LENS_MAX_MAP_MB.
    Head 0's mask, as EncoderOutput.keep is for a tensor mask. The leading axes (a batch of one) have size 1.
    """

    dtype = torch.bool

    def __init__(self, pred: Predicate, n: int, lead: tuple[int, ...] = ()):
        self.pred, self.n, self.lead = pred, n, lead

    @property
    def shape(self) -> torch.Size:
        return torch.Size((*self.lead, self.n, self.n))

    def dim(self) -> int:
        return len(self.lead) + 2

    def window(self, r0: int, r1: int, c0: int, c1: int) -> torch.Tensor:
        """Return (r1 − r0, c1 − c0) bool: the mask of query rows r0:r1 over keys c0:c1."""
        settings.require("max_map_mb", math.ceil((r1 - r0) * (c1 - c0) / (1 << 20)), "the mask's window")
        return predicates.materialise(self.pred, (r0, r1), (c0, c1))[0, 0]

    def __getitem__(self, index: Any) -> Any:
        """Return keep[i, rows, cols] (leading axes: 0 or a slice): a window is made, the whole stays lazy."""
        index = index if isinstance(index, tuple) else (index,)
        kept: list[int] = []
        for ax, size in enumerate(self.lead):
            at = index[ax] if ax < len(index) else slice(None)
            if isinstance(at, int):
                if not -size <= at < size:
                    raise IndexError(f"index {at} is out of range for an axis of size {size}")
            elif not isinstance(at, slice) or at.indices(size) != (0, size, 1):
                raise TypeError("a mask on demand takes 0 or : on its batch axis")
            else:
                kept.append(size)
        rows = index[len(self.lead)] if len(index) > len(self.lead) else slice(None)
        cols = index[len(self.lead) + 1] if len(index) > len(self.lead) + 1 else slice(None)
        whole = (0, self.n, 1)
        if all(isinstance(a, slice) and a.indices(self.n) == whole for a in (rows, cols)):
            return KeepOnDemand(self.pred, self.n, tuple(kept))
        r = slice(rows, rows + 1) if isinstance(rows, int) else rows
        c = slice(cols, cols + 1) if isinstance(cols, int) else cols
        r0, r1, rs = r.indices(self.n)
        c0, c1, cs = c.indices(self.n)
        if rs != 1 or cs != 1:
            raise TypeError("a mask on demand is read in windows with step 1")
        out = self.window(r0, max(r0, r1), c0, max(c0, c1))
        if isinstance(cols, int):
            out = out[:, 0]
        if isinstance(rows, int):
            out = out[0]
        return out.view(*kept, *out.shape)

    def dense(self) -> torch.Tensor:
        """Return the whole mask as a tensor (*lead, q_pos, k_pos), within ATTENTION_LENS_MAX_MAP_MB."""
        return self.window(0, self.n, 0, self.n).view(self.shape)

    def numpy(self) -> Any:
        return self.dense().numpy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def cpu(self) -> KeepOnDemand:
        return self

    def all(self) -> torch.Tensor:
        return self.dense().all()

    def __and__(self, other: Any) -> Any:
        """A predicate narrows it and stays lazy (a layer's window); a tensor makes it whole."""
        if isinstance(other, Predicate):
            return KeepOnDemand(predicates.and_masks(self.pred, other), self.n, self.lead)
        return self.dense() & other

    def __or__(self, other: Any) -> torch.Tensor:
        return self.dense() | (other.dense() if isinstance(other, KeepOnDemand) else other)

    def __invert__(self) -> torch.Tensor:
        return ~self.dense()


def pool_factor(n_q: int, n_k: int, size: int) -> int:
    """Return how many tokens one pooled cell covers along each axis so that n_q × n_k fits size × size."""
    return max(1, math.ceil(max(n_q, n_k) / size))


def pool_block(block: torch.Tensor, f: int, how: str = "max") -> torch.Tensor:
    """Return (h, ⌈rows/f⌉, ⌈keys/f⌉) from (h, rows, keys): max of each f × f block, or its key sum / row count."""
    h, R, K = block.shape
    pad_r, pad_k = (-R) % f, (-K) % f
    if pad_r or pad_k:
        block = torch.nn.functional.pad(block, (0, pad_k, 0, pad_r))
    tiles = block.view(h, -1, f, block.shape[-1] // f, f)  # (h, row blocks, f, key blocks, f)
    if how == "max":
        return tiles.amax(dim=(2, 4))
    counts = torch.full((tiles.shape[1],), float(f))
    if pad_r:
        counts[-1] = f - pad_r
    return tiles.sum(dim=(2, 4)) / counts[None, :, None]


def window_mask(n_q: int, n_k: int, window: int | None) -> torch.Tensor:
    """Return (n_q, n_k) bool, the causal (or sliding-window) mask of a layer: the band a window layer draws."""
    return predicates.materialise(predicates.causal_window(window), n_q, n_k)[0, 0]
