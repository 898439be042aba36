"""What a bounded KV cache costs: a cache that evicts keys, and the per-token loss of a text read through it.

A cache spec says which keys a decoder keeps while it reads a long text (StreamingLLM, Xiao et al. 2023):

    full               every key (the plain KVCache: its bytes grow with the text)
    window:W           each query sees the W most recent keys, itself included
    sink:S+window:W    the first S tokens ("attention sinks") plus the W most recent

`BoundedCache` is a real cache: after each pass it drops every key no later query may see, so it holds at most
S + W − 1 keys between passes (S + W − 1 + T during a pass of T tokens), whatever the text's length. Positions stay
the tokens' own: a key was rotated (or given its learned position) at its own position when it was made, and the
queries of a later pass sit at their own positions too. So reading a text through the cache, in chunks of any size,
equals one pass of the whole text under the matching mask (`CacheSpec.keep`, from
models.masks.conventions.sink_window_keep): query i sees key j when j ≤ i and (j < S or i − j < W).

`perplexity` reads a text chunk by chunk and returns −log p(token t+1 | tokens ≤ t) for every t, the perplexity
exp(mean), and the cache's largest size in bytes.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..encoder import Encoder
from ..errors import InputError
from ..masks.conventions import sink_window_keep
from ..network import ForwardOptions, KVCache
from ..settings import require

CACHE_HELP = "full, window:W (the W most recent keys, itself included) or sink:S+window:W (the first S tokens too)"
CHUNK = 256  # tokens per pass when reading a text: bounds the scores of one pass (heads · CHUNK · keys)
MAX_SPEC = 1 << 20  # S and W: beyond any model's positions
_SPEC = re.compile(r"^(?:sink:(\d{1,8})\+)?window:(\d{1,8})$")


@dataclass(frozen=True)
class CacheSpec:
    """Which keys a cache keeps: `sink` first tokens and the `window` most recent (None = every key)."""

    window: int | None = None
    sink: int = 0

    @property
    def name(self) -> str:
        if self.window is None:
            return "full"
        return f"sink:{self.sink}+window:{self.window}" if self.sink else f"window:{self.window}"

    @property
    def bounded(self) -> bool:
        return self.window is not None

    def keep(self, seq: int, device: torch.device | str | None = None) -> torch.Tensor:
        """Return the (seq, seq) bool mask one pass needs to see what this cache lets each query see."""
        return sink_window_keep(seq, None, self.window, self.sink).to(device)

    def make(self) -> KVCache:
        """Return an empty cache of this kind: the plain KVCache for full, else a BoundedCache."""
        return KVCache() if self.window is None else BoundedCache(window=self.window, sink=self.sink)

    def held(self, seen: int) -> int:
        """Return how many keys the cache holds between passes after `seen` tokens (what the next query needs)."""
        if self.window is None:
            return seen
        return min(seen, self.sink + self.window - 1)


def parse_cache(spec: str | CacheSpec | None) -> CacheSpec:
    """Return the CacheSpec of `full`, `window:W` or `sink:S+window:W`; InputError naming the three otherwise."""
    if isinstance(spec, CacheSpec):
        return spec
    text = (spec or "full").strip().lower().replace(" ", "")
    if text == "full":
        return CacheSpec()
    m = _SPEC.match(text)
    if m is None:
        raise InputError(f"cache {str(spec)[:40]!r} is not one of: {CACHE_HELP}")
    sink, window = int(m.group(1) or 0), int(m.group(2))
    if not 1 <= window <= MAX_SPEC or sink > MAX_SPEC:
        raise InputError(f"cache {text}: the window is 1 … {MAX_SPEC:,} keys and the sink 0 … {MAX_SPEC:,}")
    return CacheSpec(window=window, sink=sink)


@dataclass
class BoundedCache(KVCache):
    """A KVCache that evicts keys: it keeps the first `sink` positions and the `window` most recent.

    positions: the positions of the keys held (shared by every layer), in order. Before a pass of new tokens at
    positions p … p + T − 1 it drops every key that query p cannot see (no later query sees it either), then each
    layer appends its T new keys; the pass's queries see the held keys through `sink_window_keep` (one token at a
    time they see exactly what the cache holds: no mask at all). peak_bytes: the most bytes it ever held.
    """

    window: int = 1
    sink: int = 0
    positions: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    seen: int = 0  # tokens read so far: the position of the next one
    peak_bytes: int = 0

    @property
    def position(self) -> int:
        return self.seen

    def evict(self) -> None:
        """Drop every key the next query (at position `seen`) may not see: all but the sinks and the W − 1 last."""
        if not self.keys:
            return
        kept = (self.positions < self.sink) | (self.positions > self.seen - self.window)
        if bool(kept.all()):
            return
        idx = kept.nonzero().flatten()
        self.positions = self.positions[idx]
        on = idx.to(self.keys[0].device)
        self.keys = [k.index_select(2, on) for k in self.keys]
        self.values = [v.index_select(2, on) for v in self.values]

    def begin(self, new: int) -> int:
        self.evict()
        return self.seq + new

    def keeps_for(
        self, keeps: list[torch.Tensor | None], new: int, windows: tuple[int | None, ...], keep: torch.Tensor | None
    ) -> list[torch.Tensor | None]:
        """Return each layer's keep for the `new` tokens over the held keys and their own, from positions."""
        if keep is not None:
            raise InputError("a bounded cache takes no other mask: its keys' positions make the mask")
        self.evict()
        device = self.keys[0].device if self.keys else None
        queries = torch.arange(self.seen, self.seen + new)
        self.positions = torch.cat([self.positions, queries])
        self.seen += new
        out: list[torch.Tensor | None] = []
        made: dict[int | None, torch.Tensor | None] = {}
        for i in range(len(keeps)):
            w = windows[i] if i < len(windows) else None  # the model's own sliding window, if it has one
            if w not in made:
                if new == 1 and w is None:
                    made[w] = None  # one query: it sees exactly what the cache holds
                else:
                    k = sink_window_keep(queries, self.positions, self.window, self.sink)
                    if w is not None:
                        k &= sink_window_keep(queries, self.positions, w)
                    made[w] = k.to(device)
            out.append(made[w])
        return out

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = super().update(layer, k, v)
        if layer == len(self.keys) - 1:
            self.peak_bytes = max(self.peak_bytes, self.nbytes)
        return out


@dataclass
class Perplexity:
    """A text read through a cache: the loss of every next token and what the cache held."""

    spec: str
    token_ids: list[int]
    nll: np.ndarray  # (tokens − 1,) float64: −log p(token t + 1 | tokens ≤ t)
    cache_bytes: list[int]  # after each pass, between passes (what the cache holds while it waits)
    cache_bytes_max: int  # the most the cache held at once (during a pass, with that pass's keys)
    chunk: int
    seconds: float

    @property
    def tokens(self) -> int:
        return len(self.token_ids)

    @property
    def mean_nll(self) -> float:
        return float(self.nll.mean()) if self.nll.size else float("nan")

    @property
    def perplexity(self) -> float:
        return math.exp(self.mean_nll) if self.nll.size else float("nan")

    def to_json(self) -> dict:
        return {
            "cache": self.spec,
            "tokens": self.tokens,
            "nll": [round(float(x), 6) for x in self.nll],
            "perplexity": self.perplexity,
            "cache_bytes_max": self.cache_bytes_max,
        }


def text_ids(encoder: Encoder, text: str) -> list[int]:
    """Return the text's token ids as the model reads it (the tokenizer's special tokens included, uncut)."""
    clean = Encoder._required(text, "text")
    return [int(i) for i in encoder.tokenizer(clean, verbose=False)["input_ids"]]


def check_long(encoder: Encoder, n: int, what: str) -> None:
    """Refuse a text the model cannot read or the budgets do not allow, before anything is allocated."""
    if not (encoder.capabilities.causal and encoder.capabilities.lm_head):
        raise InputError(f"{what} needs a model that predicts the next token (a decoder such as smollm2)")
    if n < 2:
        raise InputError(f"{what} needs at least 2 tokens; the text has {n}")
    limit = encoder.config.max_positions
    if n > limit:
        raise InputError(f"the text has {n:,} tokens; this model has {limit:,} positions")
    cfg = encoder.config
    require(
        "max_token_heads",
        n * cfg.n_layers * cfg.n_heads,
        f"{what} ({n:,} tokens × {cfg.n_layers} layers × {cfg.n_heads} heads)",
    )


def last_hidden(encoder: Encoder, ids: torch.Tensor, **kw: Any) -> torch.Tensor:
    """Return the last hidden state (batch, new, d_model) of a forward, without keeping any layer's map."""
    last = deque(encoder.model.iter_layers(ids, **kw), maxlen=1)  # each layer's probs dropped as the next runs
    return encoder.model.finish(last[0][0])


@torch.inference_mode()
def perplexity(
    encoder: Encoder, text: str | list[int], cache: str | CacheSpec = "full", chunk: int = CHUNK
) -> Perplexity:
    """Return the per-token loss of `text` (or token ids) read through `cache`, `chunk` tokens per pass.

    The logits of each pass are turned into losses at once (never the whole text's logits), and no attention map
    is kept: only the cache grows (full) or stays bounded. InputError for a model without a next-token head, a text
    of fewer than 2 tokens or more than the model's positions; BudgetError over ATTENTION_LENS_MAX_TOKEN_HEADS.
    """
    spec = parse_cache(cache)
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise InputError(f"the chunk is a whole number of tokens ≥ 1, got {chunk!r}")
    ids = list(text) if isinstance(text, list) else text_ids(encoder, text)
    check_long(encoder, len(ids), "the perplexity of a text")
    model, dev = encoder.model, encoder.device
    kv = spec.make()
    all_ids = torch.tensor([ids], dtype=torch.long, device=dev)
    nll = np.zeros(len(ids) - 1, dtype=np.float64)
    between: list[int] = []
    peak = 0
    t0 = time.perf_counter()
    for a in range(0, len(ids), chunk):
        b = min(a + chunk, len(ids))
        hidden = last_hidden(encoder, all_ids[:, a:b], cache=kv)
        peak = max(peak, kv.nbytes)
        if isinstance(kv, BoundedCache):
            kv.evict()  # between passes it holds only what the next query may see
            peak = max(peak, kv.peak_bytes)
        between.append(kv.nbytes)
        logits = model.logits(hidden)[0].float()  # (b − a, vocab)
        targets = all_ids[0, a + 1 : b + 1]  # the next token of each position (none after the last)
        losses = F.cross_entropy(logits[: len(targets)], targets, reduction="none")
        nll[a : a + len(targets)] = losses.double().cpu().numpy()
    return Perplexity(
        spec=spec.name,
        token_ids=ids,
        nll=nll,
        cache_bytes=between,
        cache_bytes_max=peak,
        chunk=chunk,
        seconds=time.perf_counter() - t0,
    )


@torch.inference_mode()
def one_pass_nll(encoder: Encoder, ids: list[int], cache: str | CacheSpec = "full") -> np.ndarray:
    """Return the per-token loss of one pass over `ids` under the cache's mask (no cache): the reference."""
    spec = parse_cache(cache)
    check_long(encoder, len(ids), "one pass over a text")
    x = torch.tensor([ids], dtype=torch.long, device=encoder.device)
    keep = None if spec.window is None else spec.keep(len(ids), encoder.device)
    logits = encoder.model.logits(last_hidden(encoder, x, keep=keep))[0, :-1].float()
    return F.cross_entropy(logits, x[0, 1:], reduction="none").double().cpu().numpy()


@torch.inference_mode()
def sink_shares(encoder: Encoder, text: str | list[int], sinks: int = 1, chunk: int = CHUNK) -> np.ndarray:
    """Return (layers, heads) float64: each head's mean share of attention on the first `sinks` tokens.

    The mean runs over every query row after the sinks (rows ≤ sinks − 1 can see nothing else). The text is read
    in chunks into a full cache and each layer's rows are summed as they go by: no whole map is kept.
    """
    ids = list(text) if isinstance(text, list) else text_ids(encoder, text)
    check_long(encoder, len(ids), "the sink shares of a text")
    if not isinstance(sinks, int) or isinstance(sinks, bool) or not 1 <= sinks < len(ids):
        raise InputError(f"the sink is the first 1 … {len(ids) - 1} tokens of this text, got {sinks!r}")
    cfg = encoder.config
    total = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.float64)
    kv = KVCache()
    x = torch.tensor([ids], dtype=torch.long, device=encoder.device)
    for a in range(0, len(ids), chunk):
        b = min(a + chunk, len(ids))
        skip = max(0, sinks - a)  # rows of this chunk that are sinks themselves
        for i, (_, probs) in enumerate(encoder.model.iter_layers(x[:, a:b], cache=kv)):
            total[i] += probs[0, :, skip:, :sinks].sum(dim=(-1, -2)).double().cpu()  # (heads,)
    return (total / (len(ids) - sinks)).numpy()


@torch.inference_mode()
def head_map(encoder: Encoder, ids: list[int], layer: int, head: int) -> np.ndarray:
    """Return one head's (seq, seq) float32 map over a short token list (the full model, its own causal mask)."""
    check_long(encoder, len(ids), "a head's map")
    cfg = encoder.config
    if not (0 <= layer < cfg.n_layers and 0 <= head < cfg.n_heads):
        raise InputError(f"layer 0 … {cfg.n_layers - 1} and head 0 … {cfg.n_heads - 1}, got {layer}.{head}")
    res = encoder.model(
        torch.tensor([ids], dtype=torch.long, device=encoder.device), options=ForwardOptions(maps_only=True)
    )
    return res.attentions[0, layer, head].float().cpu().numpy().copy()
