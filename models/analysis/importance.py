"""Head importance (Michel et al. 2019): gate every head's context with ξ_h and ask how much the loss cares.

`I_h = Σ_x |∂L(x)/∂ξ_h|` at ξ = 1, with L(x) the masked-LM loss of input x summed over its masked tokens,
where the checkpoint has a masked-LM head; for a decoder, L(x) is the next-token loss summed over the input's
positions, through GPT-2's LM head (tied to the token embeddings), on the input itself (no copies). Each input is expanded into up to 7 copies (every 7th maskable
token masked in each, so every token is masked exactly once, ≈ BERT's 15 %); the copies are the x of the
sum. Without a masked-LM head (the bundled all-MiniLM-L6-v2 is a sentence encoder) the stated proxy is used:
`I_h = Σ_x Σ_tokens ‖h_last(x) − h_last(x; ξ_h = 0)‖₂`, the change of the last hidden state when the head
alone is removed (an ablation: its gradient at ξ = 1 would be 0). Either way the raw figures are divided by
their layer's l2 norm and min–max scaled to [0, 1] over all heads (docs/METRICS.md).

Per-item gates (batch, layers, heads) let one forward pass give every copy its own set of heads: the
gradient with respect to copy c's gates is ∂L_c/∂ξ, because items of a batch never see each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import Options
from ..encoder import Encoder, EncoderOutput

MASK_EVERY = 7  # every 7th maskable token per copy: ≈ 15 % masked, as in BERT's pre-training
MEASURES = {
    "mlm": "masked-LM loss (Michel et al. 2019): |∂L/∂ξ_h| summed over 7 masked copies of each input",
    "lm": "next-token loss (Michel et al. 2019 with a decoder's own objective): |∂L/∂ξ_h|, L summed over every "
    "position's prediction of the token after it",
    "proxy": "proxy, no masked-LM head in this checkpoint: Σ over tokens of ‖Δ last hidden state‖₂ when the head "
    "alone is removed (ξ_h = 0)",
}
CURVE_UNITS = {
    "mlm": "masked-LM loss, nats per masked token",
    "proxy": "change of the last hidden state, % of its norm",
    "lm": "next-token loss, nats per predicted token",
}
# Elements one chunk of copies may hold (attention maps and activations, forward + backward): ~0.5 GB fp32.
CHUNK_ELEMENTS_CPU = 1 << 27
CHUNK_ELEMENTS_GPU = 1 << 29


@dataclass
class Batch:
    """Model inputs on the device: a padded batch of token ids with its masks."""

    input_ids: torch.Tensor  # (batch, seq) long
    token_type_ids: torch.Tensor  # (batch, seq) long
    real: torch.Tensor  # (batch, seq) bool, True = not [PAD]
    keep: torch.Tensor | None  # (batch, 1, q_pos, k_pos) bool, True = may attend (padding included); None = all

    @classmethod
    def from_output(cls, out: EncoderOutput, device: torch.device | str) -> Batch:
        """Return the inputs of an EncoderOutput (single or batched), with the mask the encoder applied."""
        single = not out.is_batch
        keep = out.keep[None] if single else out.keep  # (B, q, k)
        return cls(
            input_ids=(out.input_ids[None] if single else out.input_ids).to(device),
            token_type_ids=(out.token_type_ids[None] if single else out.token_type_ids).to(device),
            real=(out.padding[None] if single else out.padding).bool().to(device),
            keep=None if bool(keep.all()) else keep[:, None].to(device),
        )

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def take(self, idx: torch.Tensor) -> Batch:
        """Return the items at idx (repeats allowed: copies of an input)."""
        return Batch(
            self.input_ids[idx], self.token_type_ids[idx], self.real[idx], None if self.keep is None else self.keep[idx]
        )


@dataclass
class RemovalCurve:
    """The loss (or proxy) after removing the k least (and, for contrast, the k most) important heads."""

    ks: list[int]
    least_first: list[float]
    most_first: list[float]
    measure: str

    @property
    def unit(self) -> str:
        return CURVE_UNITS[self.measure]


@dataclass
class Importance:
    """Raw importance per head and how it was measured; numpy and lists only."""

    raw: np.ndarray  # (layers, heads): Σ |∂L/∂ξ_h| (mlm) or Σ ‖Δh‖ (proxy)
    measure: str  # "mlm" or "proxy"
    sentences: int
    curve: RemovalCurve | None = None
    notes: list[str] = field(default_factory=list)
    given: np.ndarray | None = None  # (layers, heads): scores already scaled, as a statistics file holds them

    @property
    def scores(self) -> np.ndarray:
        """Importance as docs/METRICS.md shows it: per-layer l2 normalised, then min–max scaled to [0, 1]."""
        return self.given if self.given is not None else normalise(self.raw)

    @property
    def description(self) -> str:
        return MEASURES[self.measure]


def normalise(raw: np.ndarray) -> np.ndarray:
    """Return raw importance (layers, heads) divided by each layer's l2 norm, then min–max scaled over all heads."""
    raw = np.asarray(raw, dtype=float)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    x = np.divide(raw, norms, out=np.zeros_like(raw), where=norms > 0)
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def measure_of(encoder: Encoder) -> str:
    """Return 'lm' for a decoder, 'mlm' when the checkpoint has a masked-LM head, else 'proxy'."""
    if encoder.capabilities.lm_head == "next_token":
        return "lm"
    return "mlm" if getattr(encoder, "mlm_head", None) is not None else "proxy"


# ---- running copies with their own gates ----------------------------------------------------------


def _per_copy_elements(encoder: Encoder, seq: int, backward: bool) -> int:
    c = encoder.config
    maps = c.n_layers * c.n_heads * seq * seq  # attention maps (and scores) per layer, kept for the result
    acts = c.n_layers * seq * (4 * c.d_model + c.d_ff)  # Q, K, V, context, FFN per layer
    return (maps + acts) * (3 if backward else 1)


def _chunks(encoder: Encoder, n_items: int, seq: int, backward: bool) -> list[slice]:
    budget = CHUNK_ELEMENTS_GPU if encoder.device.type == "cuda" else CHUNK_ELEMENTS_CPU
    size = max(1, budget // _per_copy_elements(encoder, seq, backward))
    return [slice(i, min(n_items, i + size)) for i in range(0, n_items, size)]


def _last_hidden(encoder: Encoder, batch: Batch, gates: torch.Tensor | None) -> torch.Tensor:
    res = encoder.model(batch.input_ids, batch.token_type_ids, keep=batch.keep, head_gates=gates)
    return _float(res.hidden)  # (B, T, d_model)


def gate_gradients(
    encoder: Encoder,
    batch: Batch,
    loss_fn: Callable[[torch.Tensor, slice], torch.Tensor],
) -> torch.Tensor:
    """Return ∂L_b/∂ξ for every item b, (batch, layers, heads), at ξ = 1.

    loss_fn(last_hidden (items, seq, d_model), items) returns Σ_b L_b over the items of a chunk (a slice of
    the batch). Items are run in chunks that fit in memory; the model's weights stay frozen.
    """
    c = encoder.config
    out = torch.empty(len(batch), c.n_layers, c.n_heads, device=encoder.device)
    with torch.enable_grad():
        for part in _chunks(encoder, len(batch), batch.input_ids.shape[1], backward=True):
            sub = batch.take(torch.arange(part.start, part.stop, device=encoder.device))
            gates = torch.ones(len(sub), c.n_layers, c.n_heads, device=encoder.device, requires_grad=True)
            loss = loss_fn(_last_hidden(encoder, sub, gates), part)
            (grad,) = torch.autograd.grad(loss, gates)
            out[part] = grad
    return out


# ---- masked-LM loss ---------------------------------------------------------------------------------


def masked_copies(encoder: Encoder, batch: Batch, every: int = MASK_EVERY) -> tuple[Batch, torch.Tensor, torch.Tensor]:
    """Return copies of each input with every `every`-th maskable token replaced by [MASK].

    Returns (copies, targets (copies, seq) long with -100 where nothing is predicted, source item per copy).
    Maskable: real tokens that are not special ([CLS], [SEP], [UNK], …). An input with m < every maskable
    tokens gets m copies; every maskable token is masked in exactly one copy.
    """
    tok = encoder.tokenizer
    special = torch.tensor(sorted(set(tok.all_special_ids)), device=batch.input_ids.device)
    maskable = batch.real & ~torch.isin(batch.input_ids, special)  # (B, T)
    rank = maskable.long().cumsum(1) - 1  # position among the item's maskable tokens
    ids, targets, source = [], [], []
    for b in range(len(batch)):
        m = int(maskable[b].sum())
        for r in range(min(every, m)):
            hit = maskable[b] & (rank[b] % min(every, m) == r)
            ids.append(torch.where(hit, torch.full_like(batch.input_ids[b], tok.mask_token_id), batch.input_ids[b]))
            targets.append(torch.where(hit, batch.input_ids[b], torch.full_like(batch.input_ids[b], -100)))
            source.append(b)
    if not ids:
        empty = torch.empty(0, batch.input_ids.shape[1], dtype=torch.long, device=batch.input_ids.device)
        return batch.take(torch.empty(0, dtype=torch.long, device=batch.input_ids.device)), empty, empty[:, 0]
    src = torch.tensor(source, device=batch.input_ids.device)
    copies = batch.take(src)
    copies.input_ids = torch.stack(ids)
    return copies, torch.stack(targets), src


def _mlm_loss(encoder: Encoder, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Return Σ cross-entropy over masked positions; the vocabulary projection runs on those positions only."""
    at = targets != -100
    logits = encoder.mlm_head(hidden[at].to(encoder.dtype)).float()  # type: ignore[misc]
    return F.cross_entropy(logits, targets[at], reduction="sum")


# ---- next-token loss (decoders) ---------------------------------------------------------------------


def next_token_targets(batch: Batch) -> torch.Tensor:
    """Return (batch, seq) targets: the id at t + 1 for every real position t whose next token is real, else -100."""
    targets = torch.full_like(batch.input_ids, -100)
    follows = batch.real[:, :-1] & batch.real[:, 1:]  # (B, T-1)
    targets[:, :-1] = torch.where(follows, batch.input_ids[:, 1:], targets[:, :-1])
    return targets


def _head_logits(encoder: Encoder, hidden: torch.Tensor) -> torch.Tensor:
    """Return float32 logits of the model's own head: GPT-2's LM head, or BERT's masked-LM head."""
    if encoder.capabilities.lm_head == "next_token":
        return encoder.model.logits(hidden.to(encoder.dtype)).float()
    return encoder.mlm_head(hidden.to(encoder.dtype)).float()  # type: ignore[misc]


def _lm_loss(encoder: Encoder, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Return Σ next-token cross-entropy over the positions that have a next token."""
    at = targets != -100
    return F.cross_entropy(_head_logits(encoder, hidden[at]), targets[at], reduction="sum")


# ---- importance -------------------------------------------------------------------------------------


def raw_importance(encoder: Encoder, batch: Batch) -> torch.Tensor:
    """Return raw importance summed over the batch's inputs, (layers, heads): see the module docstring."""
    if measure_of(encoder) == "lm":
        targets = next_token_targets(batch)
        grads = gate_gradients(encoder, batch, lambda hidden, part: _lm_loss(encoder, hidden, targets[part]))
        return grads.abs().sum(0)
    if measure_of(encoder) == "mlm":
        copies, targets, _ = masked_copies(encoder, batch)
        if len(copies) == 0:
            c = encoder.config
            return torch.zeros(c.n_layers, c.n_heads, device=encoder.device)
        grads = gate_gradients(encoder, copies, lambda hidden, part: _mlm_loss(encoder, hidden, targets[part]))
        return grads.abs().sum(0)
    return ablation_effects(encoder, batch).sum(0)


@torch.inference_mode()
def ablation_effects(encoder: Encoder, batch: Batch) -> torch.Tensor:
    """Return Σ_tokens ‖h_last − h_last(head removed)‖₂ per input and head, (batch, layers, heads).

    Removing a head of layer l changes nothing below l: each copy starts from the recorded input of layer
    l, which saves about half of the passes.
    """
    c = encoder.config
    H = c.n_heads
    res, rec = encoder.model.run_with_cache(batch.input_ids, batch.token_type_ids, batch.keep, names=())
    layer_inputs = rec.hidden_states  # [layers + 1] × (B, T, d_model)
    base = _float(res.hidden)  # (B, T, d)
    B = len(batch)
    effects = torch.empty(B, c.n_layers, H, device=encoder.device)
    item = torch.arange(B, device=encoder.device).repeat_interleave(H)  # copy → input
    head = torch.arange(H, device=encoder.device).repeat(B)  # copy → removed head
    for layer in range(c.n_layers):
        for part in _chunks(encoder, B * H, batch.input_ids.shape[1], backward=False):
            idx = item[part]
            sub = batch.take(idx)
            gates = torch.ones(len(idx), H, device=encoder.device)
            gates[torch.arange(len(idx)), head[part]] = 0.0
            x = layer_inputs[layer][idx]
            # The model's own per-forward masks (and rotary tables): the layers below run as in its forward.
            inputs = encoder.model.prepare(sub.input_ids, sub.keep, 0, None, None)
            for i in range(layer, c.n_layers):
                opts = Options(head_gates=gates if i == layer else None)
                x, _ = encoder.model.layers[i](x, inputs.keeps[i], opts, inputs)
            delta = (_float(encoder.model.finish(x)) - base[idx]).norm(
                dim=-1
            ) * sub.real  # (copies, T); padded tokens count 0
            effects[idx, layer, head[part]] = delta.sum(-1)
    return effects


def _float(h: torch.Tensor) -> torch.Tensor:
    return h.to(torch.promote_types(h.dtype, torch.float32))  # half → float32; a float64 model stays float64


# ---- removing the least important heads -------------------------------------------------------------


def removal_ks(n_heads_total: int, points: int = 11) -> list[int]:
    """Return how many heads to remove at each point of the curve: 0 … all, evenly spaced."""
    return sorted({round(i * n_heads_total / (points - 1)) for i in range(points)})


@torch.inference_mode()
def removal_sums(encoder: Encoder, batch: Batch, order: np.ndarray, ks: list[int]) -> np.ndarray:
    """Return (numerator, denominator) sums of the curve's measure, (2 orders, len(ks), 2).

    order: heads (layer-major indices) from least to most important. Order 0 removes the first k, order 1
    the last k. For 'mlm' the figure is Σ cross-entropy / masked tokens; for 'proxy' Σ ‖Δh‖ / Σ ‖h‖.
    Sums add up over batches; divide at the end.
    """
    c = encoder.config
    N = c.n_layers * c.n_heads
    configs = []
    for reverse in (False, True):
        seq = np.asarray(order)[::-1] if reverse else np.asarray(order)
        for k in ks:
            g = torch.ones(N)
            g[torch.as_tensor(seq[:k].copy(), dtype=torch.long)] = 0.0
            configs.append(g)
    gates_all = torch.stack(configs).to(encoder.device)  # (configs, N)
    sums = torch.zeros(len(configs), 2, dtype=torch.float64)

    if measure_of(encoder) == "lm":
        items, targets, base = batch, next_token_targets(batch), None
    elif measure_of(encoder) == "mlm":
        items, targets, _ = masked_copies(encoder, batch)
        if len(items) == 0:
            return sums.view(2, len(ks), 2).numpy()
        base = None
    else:
        items, targets = batch, None
        base = _last_hidden(encoder, batch, None)
    M = len(items)
    cfg = torch.arange(len(configs), device=encoder.device).repeat_interleave(M)  # copy → config
    item = torch.arange(M, device=encoder.device).repeat(len(configs))  # copy → item
    for part in _chunks(encoder, len(cfg), batch.input_ids.shape[1], backward=False):
        idx, which = item[part], cfg[part]
        hidden = _last_hidden(encoder, items.take(idx), gates_all[which].view(-1, c.n_layers, c.n_heads))
        if targets is not None:
            t = targets[idx]
            at = t != -100
            ce = F.cross_entropy(_head_logits(encoder, hidden[at]), t[at], reduction="none")
            per_copy = torch.zeros(len(idx), device=encoder.device).index_add_(0, at.nonzero()[:, 0], ce)
            num, den = per_copy, at.sum(-1).float()
        else:
            real = items.real[idx]
            num = ((hidden - base[idx]).norm(dim=-1) * real).sum(-1)  # type: ignore[index]
            den = (base[idx].norm(dim=-1) * real).sum(-1)  # type: ignore[index]
        sums[:, 0].index_add_(0, which.cpu(), num.double().cpu())
        sums[:, 1].index_add_(0, which.cpu(), den.double().cpu())
    return sums.view(2, len(ks), 2).numpy()


def curve_from_sums(sums: np.ndarray, ks: list[int], measure: str) -> RemovalCurve:
    """Return the RemovalCurve of (2, len(ks), 2) numerator/denominator sums."""
    scale = 100.0 if measure == "proxy" else 1.0
    vals = np.divide(sums[..., 0], sums[..., 1], out=np.full(sums.shape[:2], math.nan), where=sums[..., 1] > 0) * scale
    return RemovalCurve(ks=list(ks), least_first=vals[0].tolist(), most_first=vals[1].tolist(), measure=measure)


def work_estimate(encoder: Encoder, seq: int, curve: bool = True) -> float:
    """Return roughly how many multiply-adds `head_importance` needs for one input of seq tokens.

    Passes of the model: one per head with the proxy (half of them on average, thanks to the recorded layer
    inputs) or 7 masked copies forward and backward (≈ 3 passes each) with the masked-LM loss; then the
    removal curve's 2 × 11 sets of heads, once per item. A pass costs about layers · seq · 12·d_model²
    multiply-adds (the linear layers; attention's seq² terms are small next to them below 512 tokens).
    """
    c = encoder.config
    measure = measure_of(encoder)
    items = MASK_EVERY if measure == "mlm" else 1
    passes = 3 * items if measure != "proxy" else c.n_layers * c.n_heads / 2
    if curve:
        passes += 2 * len(removal_ks(c.n_layers * c.n_heads)) * items  # both orders, every k
    return passes * c.n_layers * seq * 12 * c.d_model**2


def head_importance(encoder: Encoder, out: EncoderOutput, curve: bool = True) -> Importance:
    """Return the importance of every head for one encoded input (or a batched EncoderOutput)."""
    batch = Batch.from_output(out, encoder.device)
    raw = raw_importance(encoder, batch).cpu().numpy().astype(float)
    measure = measure_of(encoder)
    result = Importance(raw=raw, measure=measure, sentences=len(batch))
    if curve:
        order = np.argsort(normalise(raw).ravel(), kind="stable")
        ks = removal_ks(raw.size)
        result.curve = curve_from_sums(removal_sums(encoder, batch, order, ks), ks, measure)
    return result
