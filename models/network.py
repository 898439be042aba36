"""What every family's network shares: the forward skeleton, its result, the per-forward layer inputs, the KV cache.

    x = embed(input_ids)                      (batch, seq, d_model)
    inputs = prepare(...)                     the masks (one per kind of layer) and rotary tables, once per forward
    for each layer: x, probs = layer(x, inputs.keeps[i], Options(...), inputs)
    hidden = finish(x)                        the last hidden state (BERT: x itself; decoders: the final norm)

A family (bert.py, gpt2.py, llama.py) writes its modules with the checkpoint's names and fills in `embed`,
`prepare`, `finish` and its layers; the loop, the maps buffer, the recorder and maps-only live here once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .attention import RECORDED, Options, Recorder, no_hook
from .maps import FORWARD_ROWS, LayerStore, OnDemandMaps, Pooled
from .masks import predicates
from .masks.conventions import combine
from .masks.predicates import Predicate

# Activations checkpoints name in `hidden_act` / `activation_function`, as torch functions.
ACTIVATIONS = {
    "gelu": F.gelu,  # exact erf form, as BERT was trained
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,  # SwiGLU's gate (Llama, Mistral, Qwen)
    "swish": F.silu,
}


@dataclass
class KVCache:
    """Keys and values of every position seen so far, per layer: what a decoder keeps instead of recomputing.

    keys[i], values[i]: (batch, kv_heads, seq, d_k) for layer i, after rotation for rotary families. Grouped
    families keep kv_heads, not heads: the cache's bytes are 2 · layers · batch · kv_heads · seq · d_k · bytes
    per element, the Memory page's formula.
    """

    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)

    @property
    def seq(self) -> int:
        """Return how many positions the cache holds (0 when empty)."""
        return int(self.keys[0].shape[2]) if self.keys else 0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def shape(self) -> tuple[int, ...]:
        """Return one layer's key tensor shape (batch, kv_heads, seq, d_k); () when empty."""
        return tuple(self.keys[0].shape) if self.keys else ()

    @property
    def position(self) -> int:
        """Return the position of the next new token: every token seen so far (a bounded cache holds fewer keys)."""
        return self.seq

    def begin(self, new: int) -> int:
        """Get ready for `new` tokens (a bounded cache drops the keys they will not see); return the keys they
        will attend over: those held and their own."""
        return self.seq + new

    def keeps_for(
        self, keeps: list[torch.Tensor | None], new: int, windows: tuple[int | None, ...], keep: torch.Tensor | None
    ) -> list[torch.Tensor | None]:
        """Return each layer's keep for `new` tokens over the keys this cache will hold once they are added.

        A full cache holds every position, so the model's own masks (`keeps`, made by prepare) are right as they
        are; a cache that evicts keys (models.analysis.cache.BoundedCache) makes them from its keys' positions.
        """
        return keeps

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new positions' k and v (batch, kv_heads, new, d_k) to `layer`; return all of that layer's."""
        if layer < len(self.keys):
            self.keys[layer] = torch.cat([self.keys[layer], k], dim=2)  # (B, n_kv, start + T, d_k)
            self.values[layer] = torch.cat([self.values[layer], v], dim=2)
        else:
            self.keys.append(k)
            self.values.append(v)
        return self.keys[layer], self.values[layer]


@dataclass
class LayerInputs:
    """What every layer of one forward reads besides x, made once per forward (not per layer)."""

    keeps: list[torch.Tensor | None]  # per layer: bool (…, q_pos, k_pos), True = may attend; layers of a kind share
    start: int = 0  # position of the first new token (the cache's length before this pass)
    cache: KVCache | None = None
    rope: tuple[torch.Tensor, torch.Tensor] | None = None  # rotary families: cos, sin (batch, seq, d_k)
    causal: bool = False  # the keeps above include the model's causal mask (a block of rows sees keys ≤ its last)
    windows: tuple[int | None, ...] = ()  # causal models: each layer's sliding window (() = none)


@dataclass(frozen=True)
class FrozenNorm:
    """A norm with each token's statistics frozen: an affine map, so a sum of parts goes through it part by part.

    part(c) = (c − mean(c) when centred) · gain, and the norm's bias (if any) is added once: LayerNorm with its
    mean and std frozen (the mean of a sum is the sum of the parts' means, so centring each part is exact), RMSNorm
    with its RMS frozen. Analyses that split the residual stream (models.analysis.explain) use it.
    """

    gain: torch.Tensor  # (..., d): the norm's weight divided by each token's frozen scale
    bias: torch.Tensor | None  # (d,): added once (LayerNorm's β), None for RMSNorm
    centred: bool  # LayerNorm subtracts each part's own mean; RMSNorm does not

    def part(self, c: torch.Tensor) -> torch.Tensor:
        """Return what part c (..., d) of the norm's input becomes (without the bias)."""
        return ((c - c.mean(-1, keepdim=True)) if self.centred else c) * self.gain


def freeze_norm(norm: nn.Module, x: torch.Tensor) -> FrozenNorm:
    """Return `norm` linearised at input x (..., d): nn.LayerNorm here, any other norm by its own `frozen(x)`."""
    if isinstance(norm, nn.LayerNorm):
        xd = x.double()
        std = torch.sqrt(xd.var(-1, unbiased=False, keepdim=True) + norm.eps)  # (..., 1)
        weight = norm.weight.double() if norm.weight is not None else torch.ones_like(xd[..., 0, None])
        bias = norm.bias.double() if norm.bias is not None else None
        return FrozenNorm(gain=weight / std, bias=bias, centred=True)
    frozen = getattr(norm, "frozen", None)
    if not callable(frozen):
        raise TypeError(f"{type(norm).__name__} cannot be linearised: give it a frozen(x) method")
    result: FrozenNorm = frozen(x)
    return result


@dataclass(frozen=True)
class BlockParts:
    """How one block writes to the residual stream, for analyses that split it into parts (models.analysis.explain).

    The modules themselves: their own forwards run, and hooks on them see what they compute.
    """

    attention: Any  # the attention module: projections() (W_q, W_k, W_v, W_o), scale
    attn_norm: nn.Module | None  # pre-norm: normalises the stream before the attention reads it; None: read as is
    mlp: nn.Module  # its output is the MLP's whole contribution to the stream (its output bias included)
    # post-LN: the norm after the attention's sum, then the one after the MLP's (what the next layer reads)
    post_norms: tuple[nn.Module, ...] = ()
    qk_norms: tuple[nn.Module, nn.Module] | None = None  # per-head norms of q and k before rotation (Qwen3)


@dataclass(frozen=True)
class ForwardOptions:
    """How one forward runs and what it lets out, besides its inputs (Network.forward's `options`).

    None of it changes a number the model computes, except `causal`, a demonstration.
    record: the keeper of hooked tensors (Network.run_with_cache makes it; None = keep nothing).
    maps_only: only the maps are wanted: the last layer stops at its probs (no V, context, W_o or MLP) and
        last_hidden is None. Ignored with record or a cache.
    fill: the score hidden keys get; None = finfo.min (the mask checker passes -inf to show what it does).
    on_demand: long inputs (one text): no map is kept whole; the "blocks" attention runs the rows in blocks and
        each kept layer keeps its queries, keys and log-sum-exps, so attentions is an OnDemandMaps (models.maps)
        that makes any map exactly when asked. layers: only these layers' maps can be read later (all when None);
        progress: called with the fraction of layers done.
    causal: a bool (seq, seq) mask used INSTEAD of a causal model's own, only to show what a wrong causal mask
        does (the troubleshooting page); None in every real use.
    stop_at_layer: run layers 0 … stop_at_layer only (TransformerLens' stop_at_layer, but that layer included),
        which stops at its probs (maps only): no map is kept but that layer's, and a long input (over
        FORWARD_ROWS tokens) runs the "blocks" attention, so no layer's whole maps exist (attentions is then
        None). last_hidden is None. What one cell's explanation needs (models.analysis.explain).
    """

    record: Recorder | None = None
    maps_only: bool = False
    fill: float | None = None
    on_demand: bool = False
    layers: Collection[int] | None = None
    progress: Callable[[float], None] | None = None
    causal: torch.Tensor | None = None
    stop_at_layer: int | None = None


PLAIN = ForwardOptions()


@dataclass
class ForwardResult:
    last_hidden: torch.Tensor | None  # [batch, seq, d_model]; None when the forward ran with maps_only
    # [batch, layers, heads, q_pos, k_pos], float32 (layers lead in memory); an on-demand forward (one text):
    # OnDemandMaps of (layers, heads, q_pos, k_pos), read like that tensor without the batch axis.
    attentions: Any
    record: Recorder | None = None

    @property
    def hidden(self) -> torch.Tensor:
        """Return last_hidden, which every forward without maps_only has."""
        if self.last_hidden is None:
            raise RuntimeError("this forward ran with maps_only=True: it has no last hidden state")
        return self.last_hidden


def causal_keeps(
    n_layers: int,
    T: int,
    S: int,
    start: int,
    windows: tuple[int | None, ...],
    keep: torch.Tensor | None,
    device: torch.device,
    causal: torch.Tensor | None = None,
) -> list[torch.Tensor | None]:
    """Return each layer's keep for a causal model: its causal (or sliding-window) mask AND the caller's keep.

    One tensor per kind of layer (full causal, or each window size), shared by the layers of that kind. Rows
    are the new positions start … start + T − 1, columns the keys 0 … S − 1. `causal` replaces the model's own
    causal mask (full (S, S), the troubleshooting page's planted bug) and is never used otherwise.
    """
    made: dict[int | None, torch.Tensor | None] = {}
    out: list[torch.Tensor | None] = []
    for i in range(n_layers):
        w = windows[i] if i < len(windows) else None
        if w not in made:
            if causal is None:  # rows: the new positions start … S − 1; keys: every position
                own = predicates.materialise(predicates.causal_window(w), (start, S), S, device=device)[0, 0]
            else:
                own = causal[start:S, :S]
            made[w] = combine(own, keep)
        out.append(made[w])
    return out


class Network(nn.Module):
    """The forward every family shares. Subclasses name their modules as the checkpoint does and define
    `layers`, `embed`, `prepare`, `finish` and `max_positions`."""

    config: Any

    @property
    def layers(self) -> nn.ModuleList:
        raise NotImplementedError

    @property
    def max_positions(self) -> int:
        """Return how many positions one sequence (the cache included) may have."""
        return int(self.config.max_positions)

    def input_embeddings(self) -> nn.Embedding:
        """Return the token embedding table (vocab, d_model): tied LM heads read it."""
        raise NotImplementedError

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Return next-token logits (..., vocab) from last hidden states (decoders; capabilities.lm_head)."""
        raise NotImplementedError(f"{type(self).__name__} has no next-token head")

    def block_parts(self, layer: int) -> BlockParts:
        """Return how layer `layer` writes to the residual stream (its norms, attention and MLP modules)."""
        raise NotImplementedError(f"{type(self).__name__} does not describe its blocks")

    def embedding_norm(self) -> nn.Module | None:
        """Return the norm applied to the embeddings before the first layer (post-LN encoders), or None."""
        return None

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Return cos, sin (1, len(positions), d_k) that rotate q and k at those positions; None: no rotary."""
        return None

    def embed(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None, start: int) -> torch.Tensor:
        """Return (batch, seq, d_model): the first layer's input."""
        raise NotImplementedError

    def prepare(
        self,
        input_ids: torch.Tensor,
        keep: torch.Tensor | None,
        start: int,
        cache: KVCache | None,
        causal: torch.Tensor | None,
    ) -> LayerInputs:
        """Return what every layer reads besides x, made once for this forward (masks, rotary tables)."""
        raise NotImplementedError

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last hidden state from the last layer's output."""
        raise NotImplementedError

    def iter_layers(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        keep: torch.Tensor | Predicate | None = None,
        *,
        cache: KVCache | None = None,
        causal: torch.Tensor | None = None,
        options: Callable[[int], Options] = lambda i: Options(),
        record: Recorder | None = None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Yield (layer output (batch, seq, d_model), probs (batch, heads, q_pos, k_pos)) for each layer in turn.

        The forward's own loop, for callers that need every layer's output (the mask checker) or options per
        layer: options(i) gives layer i's (hook, gates, fill, probs buffer, maps-only). Arguments as forward's.
        """
        B, T = input_ids.shape  # batch, new positions
        start = cache.position if cache is not None else 0
        if start + T > self.max_positions:
            raise ValueError(f"{start + T} positions, but this model has {self.max_positions}")
        first = options(0)
        # A predicate keep (a user's mask_mod or expression) goes to the long loop as it is, made one block of rows
        # at a time there; any other forward makes it whole here, once, with the axes it depends on.
        user = keep if isinstance(keep, Predicate) else None
        if user is not None and (first.implementation != "blocks" or causal is not None):
            heads, dev = self.config.n_heads, input_ids.device
            keep, user = predicates.materialise(user, (start, start + T), start + T, B, heads, device=dev), None
        tensor_keep = None if isinstance(keep, Predicate) else keep
        x = self.embed(input_ids, token_type_ids, start)  # (B, T, d_model)
        inputs = self.prepare(input_ids, tensor_keep, start, cache, causal)
        if cache is not None:
            inputs.keeps = cache.keeps_for(inputs.keeps, T, inputs.windows, tensor_keep)
        for i, layer in enumerate(self.layers):
            if record is not None:
                record.layer_input(x)
            opts = first if i == 0 else options(i)
            layer_keep = inputs.keeps[i]
            if opts.implementation == "blocks" and causal is None and (inputs.causal or user is not None):
                # The long loop: the layer's own mask (and a user's predicate) go as predicates, made one block of
                # rows at a time (a block reads only the keys they allow); the layer's keep is the caller's alone.
                if inputs.causal:
                    opts.mask = predicates.causal_window(inputs.windows[i] if inputs.windows else None)
                opts.user = user
                opts.start = inputs.start
                layer_keep = tensor_keep
            x, probs = layer(x, layer_keep, opts, inputs)
            yield x, probs
        if record is not None:
            record.layer_input(x)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        keep: torch.Tensor | Predicate | None = None,
        head_gates: torch.Tensor | None = None,
        cache: KVCache | None = None,
        options: ForwardOptions = PLAIN,
    ) -> ForwardResult:
        """Run the network.

        input_ids, token_type_ids: (batch, seq) long (token types: segments of a pair; None = all 0).
        keep: bool broadcastable to (batch, heads, q_pos, k_pos), True = may attend; a causal model ANDs it with
            its own mask, which no keep can lift. None = the model's own mask alone. Or a predicate
            (models.masks.predicates.Predicate, rows = positions): made whole for a short forward, one block of
            rows at a time in the long loop (on_demand) and one window at a time by its OnDemandMaps.
        head_gates: (layers, heads), or (batch, layers, heads) for per-item gates: multipliers on each head's
            context (Michel et al.'s ξ; 1 = unchanged, 0 = removed).
        cache: a KVCache to extend (decoders): input_ids are the new positions only, and attentions are
            (batch, layers, heads, new positions, all positions).
        options: what the forward lets out and how (ForwardOptions: maps only, maps on demand, the fill, …);
            to keep Q, K, V, scores or any hook point, call run_with_cache.
        """
        if options.on_demand:
            return self._forward_on_demand(input_ids, token_type_ids, keep, head_gates, options)
        if options.stop_at_layer is not None:
            return self._forward_to(options.stop_at_layer, input_ids, token_type_ids, keep, head_gates, options)
        rec = options.record
        causal = options.causal
        B, T = input_ids.shape  # batch, new positions
        S = cache.begin(T) if cache is not None else T  # keys
        cfg = self.config
        # Without autograd, softmax writes each layer's map straight into the result: no copy at the end. Layers
        # lead in memory so each layer's slot (batch, heads, q, k) is contiguous; the result is a (batch, layers,
        # …) view of it.
        direct = not torch.is_grad_enabled() and S <= self.max_positions
        attn = (
            torch.empty(cfg.n_layers, B, cfg.n_heads, T, S, dtype=torch.float32, device=input_ids.device)
            if direct
            else None
        )
        last = cfg.n_layers - 1
        skip_tail = options.maps_only and rec is None and cache is None
        fill = options.fill

        def layer_options(i: int) -> Options:
            return Options(
                hook=rec.at(i) if rec is not None else no_hook,
                head_gates=None if head_gates is None else head_gates[..., i, :],  # (heads,) or (batch, heads)
                probs_out=None if attn is None else attn[i],
                fill=fill,
                maps_only=skip_tail and i == last,
            )

        per_layer, outputs = [], []
        for x, probs in self.iter_layers(
            input_ids, token_type_ids, keep, cache=cache, causal=causal, options=layer_options, record=rec
        ):
            per_layer.append(probs)
            outputs = [x]  # only the last layer's output is needed
        attentions = attn.transpose(0, 1) if attn is not None else torch.stack(per_layer, dim=1)
        hidden = None if skip_tail else self.finish(outputs[0])
        return ForwardResult(last_hidden=hidden, attentions=attentions, record=rec)

    def run_with_cache(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        keep: torch.Tensor | Predicate | None = None,
        *,
        names: Collection[str] | None = RECORDED,
        layers: Collection[int] | None = None,
        rows: Sequence[int] | torch.Tensor | None = None,
        watch: Mapping[str, tuple[nn.Module, str]] | None = None,
        head_gates: torch.Tensor | None = None,
        cache: KVCache | None = None,
        options: ForwardOptions = PLAIN,
    ) -> tuple[ForwardResult, Recorder]:
        """Run the network and keep the hooked tensors (TransformerLens' run_with_cache(names_filter=…)).

        names: the hook points kept (attention.HOOK_POINTS; None = all of them); layers: the layers they are
        kept from (None = all). Every layer's input is kept too (recorder.hidden_states). rows: keep only these
        token positions on every sequence axis (Recorder.rows). watch: name → (module, "input" or "output"),
        also kept (recorder.modules[name]) for this forward, from this thread only. Returns the forward's result
        and the recorder: rec["queries", 3], rec.stacked("context") (batch, layers, …).
        """
        picked = None if rows is None else torch.as_tensor(rows, dtype=torch.long, device=input_ids.device)
        rec = Recorder(names=names, layers=layers, rows=picked)
        try:
            for name, (module, what) in (watch or {}).items():
                rec.watch(module, name, what)
            res = self.forward(input_ids, token_type_ids, keep, head_gates, cache, replace(options, record=rec))
        finally:
            rec.close()
        return res, rec

    def _forward_to(
        self,
        stop: int,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        keep: torch.Tensor | Predicate | None,
        head_gates: torch.Tensor | None,
        options: ForwardOptions,
    ) -> ForwardResult:
        """The forward of layers 0 … stop (ForwardOptions.stop_at_layer): attentions is layer stop's probs
        (batch, heads, q_pos, k_pos), or None for a long input (the "blocks" attention)."""
        if not 0 <= stop < self.config.n_layers:
            raise ValueError(f"stop_at_layer must be among 0–{self.config.n_layers - 1}, got {stop}")
        if options.on_demand or options.causal is not None:
            raise ValueError("a forward that stops at a layer runs the model's own mask, not on demand")
        rec = options.record
        how = "blocks" if input_ids.size(1) > FORWARD_ROWS else "eager"  # long: rows in blocks, as the app's

        def layer_options(i: int) -> Options:
            return Options(
                hook=rec.at(i) if rec is not None else no_hook,
                head_gates=None if head_gates is None else head_gates[..., i, :],
                fill=options.fill,
                maps_only=i == stop,
                implementation=how,
                rows=FORWARD_ROWS,
            )

        probs = None
        for i, (_, p) in enumerate(
            self.iter_layers(input_ids, token_type_ids, keep, options=layer_options, record=rec)
        ):
            if i == stop:
                probs = p
                break
        return ForwardResult(last_hidden=None, attentions=probs, record=rec)

    def _forward_on_demand(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        keep: torch.Tensor | Predicate | None,
        head_gates: torch.Tensor | None,
        options: ForwardOptions,
    ) -> ForwardResult:
        """The forward of one long text: the "blocks" attention (rows in blocks of FORWARD_ROWS), the maps of
        kept layers on demand from the queries and keys a Recorder keeps."""
        B, T = input_ids.shape  # batch, seq
        if B != 1:
            raise ValueError("maps on demand are for one text at a time")
        if options.record is not None or options.causal is not None:
            raise ValueError("maps on demand keep no recorded tensors and use the model's own mask")
        cfg = self.config
        maps_only, progress = options.maps_only, options.progress
        kept = set(range(cfg.n_layers)) if options.layers is None else {int(i) for i in options.layers}
        if not kept or not kept <= set(range(cfg.n_layers)):
            raise ValueError(f"layers to keep must be among 0–{cfg.n_layers - 1}, got {sorted(kept)}")
        lse = {i: torch.empty(1, cfg.n_heads, T, dtype=torch.float32, device=input_ids.device) for i in kept}
        rec = Recorder(names=("queries", "keys"), layers=kept)  # what a map is made from later
        tiles = {i: Pooled(cfg.n_heads, T, T) for i in kept}  # the overview's tiles, pooled as the rows go by

        def layer_options(i: int) -> Options:
            return Options(
                hook=rec.at(i),
                head_gates=None if head_gates is None else head_gates[..., i, :],
                implementation="blocks",
                rows=FORWARD_ROWS,
                lse_out=lse.get(i),
                pool=tiles.get(i),
                maps_only=maps_only and i == cfg.n_layers - 1,
            )

        outputs = []
        windows: tuple[int | None, ...] = ()
        causal = False
        for i, (x, _) in enumerate(self.iter_layers(input_ids, token_type_ids, keep, options=layer_options)):
            outputs = [x]
            if progress is not None:
                progress((i + 1) / cfg.n_layers)
            if i == 0:
                inputs = self.prepare(input_ids[:, :1], None, 0, None, None)  # tells causality and windows
                causal, windows = inputs.causal, inputs.windows
        stores = {
            i: LayerStore(
                queries=rec["queries", i][0],
                keys=rec["keys", i][0],
                lse=lse[i][0],
                scale=float(attention_module(self.layers[i]).scale),
                window=windows[i] if windows else None,
            )
            for i in sorted(kept)
        }
        user: torch.Tensor | Predicate | None = keep if isinstance(keep, Predicate) else None
        if isinstance(keep, torch.Tensor):
            k4 = keep if keep.dim() == 4 else keep.view(*([1] * (4 - keep.dim())), *keep.shape)
            per_head = torch.broadcast_to(k4, (1, k4.shape[1], T, T))[0]  # (heads or 1, T, T)
            user = per_head if per_head.shape[0] > 1 else per_head[0]
        maps = OnDemandMaps(stores, cfg.n_layers, user, causal, tiles=tiles)
        hidden = None if maps_only else self.finish(outputs[0])
        return ForwardResult(last_hidden=hidden, attentions=maps)


def attention_module(layer: nn.Module) -> Any:
    """Return a layer's attention module (the one that names its projections: W_q, W_k, W_v, W_o)."""
    for sub in layer.modules():
        if callable(getattr(sub, "projections", None)):
            return sub
    raise LookupError("this layer has no attention module with projections()")
