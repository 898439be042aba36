"""What if: remove heads (or every query head of a key/value group) and measure what the next-token prediction loses.

Ablating a head multiplies its context by 0 before the output projection (`Options.head_gates`, the same gates as
head importance): the head then writes nothing to the residual stream. For a key/value group (grouped-query
models), every query head that reads that key/value head is removed at once. The measures (docs/METRICS.md, "What
if"): the KL divergence KL(original ‖ ablated) of the next-token distribution at the last position, in nats; the
change of the original top token's logit; the KL at every position. Over several prompts: the mean KL and its 95 %
percentile-bootstrap interval over prompts (BOOTSTRAP resamples, seeded).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import settings
from ..encoder import Encoder
from ..errors import InputError
from ..network import PLAIN, ForwardOptions
from ..tokens import display_tokens

BOOTSTRAP = 1000  # resamples of the prompts for the interval
SEED = 0  # the bootstrap's seed: the same prompts give the same interval


@dataclass
class Ablation:
    """One text with some heads removed: what the next-token prediction lost."""

    heads: list[tuple[int, int]]  # (layer, head) removed, key/value groups expanded to their query heads
    tokens: list[str]
    kl: float  # KL(original ‖ ablated) at the last position, nats
    logit_diff: float  # ablated − original logit of the original top token at the last position
    top_token: str  # the original top next token
    per_position_kl: np.ndarray  # (seq,): the same KL at every position's next-token distribution

    def to_json(self) -> dict[str, Any]:
        return {
            "heads": [f"{la}.{h}" for la, h in self.heads],
            "tokens": self.tokens,
            "kl": self.kl,
            "logit_diff": self.logit_diff,
            "top_token": self.top_token,
            "per_position_kl": self.per_position_kl.tolist(),
        }


@dataclass
class Over:
    """The last-position KL of the same ablation over several prompts, with its bootstrap interval."""

    kls: np.ndarray  # (prompts,)
    mean_kl: float
    ci95: tuple[float, float]

    def to_json(self) -> dict[str, Any]:
        return {"mean_kl": self.mean_kl, "ci95": list(self.ci95), "per_text_kl": self.kls.tolist()}


def heads_of(enc: Encoder, heads: Sequence[tuple[int, int]] = (), kv_groups: Sequence[tuple[int, int]] = ()) -> list:
    """Return the (layer, query head) pairs to remove: `heads` and every query head of each (layer, kv group)."""
    c, caps = enc.config, enc.capabilities
    n_kv = caps.kv_heads or c.n_heads
    out: list[tuple[int, int]] = []
    for la, h in heads:
        if not 0 <= la < c.n_layers or not 0 <= h < c.n_heads:
            raise InputError(f"head {la}.{h} is outside 0…{c.n_layers - 1}.0…{c.n_heads - 1}")
        out.append((la, h))
    for la, g in kv_groups:
        if not 0 <= la < c.n_layers or not 0 <= g < n_kv:
            raise InputError(f"key/value group {la}.{g} is outside 0…{c.n_layers - 1}.0…{n_kv - 1}")
        out += [(la, h) for h in range(c.n_heads) if (caps.kv_head(h) if caps.grouped else h) == g]
    if not out:
        raise InputError("nothing to ablate: name heads (L.H) or key/value groups (L.G)")
    return sorted(set(out))


def gates_for(enc: Encoder, heads: Sequence[tuple[int, int]]) -> torch.Tensor:
    """Return (layers, heads) gates: 0 for the heads removed, 1 elsewhere."""
    c = enc.config
    gates = torch.ones(c.n_layers, c.n_heads, device=enc.device)
    for la, h in heads:
        gates[la, h] = 0.0
    return gates


@torch.inference_mode()
def _logits(enc: Encoder, ids: torch.Tensor, gates: torch.Tensor | None) -> torch.Tensor:
    """Return (seq, vocab) float64 next-token logits of one text (1, seq), the heads gated (None: none).

    A text whose maps would not be kept whole runs as the app's long texts do (rows in blocks, maps on demand).
    """
    c, T = enc.config, ids.shape[1]
    dense = 4 * c.n_layers * c.n_heads * T * T <= settings.limit("dense_maps_mb") * (1 << 20)
    how = PLAIN if dense else ForwardOptions(on_demand=True, layers=[0])
    res = enc.model(ids, head_gates=gates, options=how)
    return enc.model.logits(res.hidden)[0].double()


def _ids(enc: Encoder, text: str) -> tuple[torch.Tensor, list[str]]:
    if enc.capabilities.lm_head != "next_token":
        raise InputError(
            f"ablate measures the next-token prediction: {enc.name} has no next-token head (an encoder); "
            "use a decoder such as smollm2"
        )
    batch = enc.tokenize([text])
    return batch.input_ids.to(enc.device), display_tokens(batch.tokens[0], enc.capabilities.token_display)


def kl_rows(base: torch.Tensor, cut: torch.Tensor) -> torch.Tensor:
    """Return KL(softmax(base) ‖ softmax(cut)) per row of two (…, vocab) logit tensors, nats."""
    lp, lq = torch.log_softmax(base.double(), -1), torch.log_softmax(cut.double(), -1)
    return (lp.exp() * (lp - lq)).sum(-1).clamp_min(0.0)


def ablate(enc: Encoder, text: str, heads: Sequence[tuple[int, int]]) -> Ablation:
    """Return what removing `heads` ((layer, query head) pairs, from heads_of) does to one text's prediction."""
    ids, tokens = _ids(enc, text)
    base = _logits(enc, ids, None)
    cut = _logits(enc, ids, gates_for(enc, heads))
    per_pos = kl_rows(base, cut)
    top = int(base[-1].argmax())
    raw = enc.tokenizer.convert_ids_to_tokens([top])
    return Ablation(
        heads=list(heads),
        tokens=tokens,
        kl=float(per_pos[-1]),
        logit_diff=float(cut[-1, top] - base[-1, top]),
        top_token=display_tokens(raw, enc.capabilities.token_display)[0],
        per_position_kl=per_pos.cpu().numpy(),
    )


def bootstrap(values: np.ndarray, resamples: int = BOOTSTRAP, seed: int = SEED) -> tuple[float, float]:
    """Return the 95 % percentile-bootstrap interval of the mean of values (resampled with replacement)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(resamples, len(values)))
    means = values[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def ablate_over(enc: Encoder, texts: Sequence[str], heads: Sequence[tuple[int, int]]) -> Over:
    """Return the last-position KL of removing `heads` on each text, its mean and bootstrap interval.

    The prompts' tokens together are held to ATTENTION_LENS_MAX_CORPUS_TOKENS before any forward runs.
    """
    if not texts:
        raise InputError("no prompts to average over")
    prompts = [_ids(enc, t)[0] for t in texts]
    settings.require("max_corpus_tokens", sum(p.shape[1] for p in prompts), f"{len(prompts)} prompts")
    gates = gates_for(enc, heads)
    kls = np.array([float(kl_rows(_logits(enc, p, None)[-1], _logits(enc, p, gates)[-1])) for p in prompts])
    return Over(kls=kls, mean_kl=float(kls.mean()), ci95=bootstrap(kls))


@dataclass
class Sweep:
    """Each unit (one head, or one key/value group's query heads) removed alone from one text: the KL of every
    position's next-token distribution, its mean over positions and a 95 % bootstrap interval over positions."""

    names: list[str]  # "L.H" per head, then "KV L.G" per key/value group (grouped models)
    units: list[list[tuple[int, int]]]  # the query heads each unit removes
    mean_kl: np.ndarray  # (units,): KL averaged over positions
    ci95: np.ndarray  # (units, 2)
    last_kl: np.ndarray  # (units,): at the last position (the CLI's "kl")
    logit_diff: np.ndarray  # (units,): ablated − original logit of the original top token, last position (the CLI's)


def sweep_units(enc: Encoder) -> tuple[list[str], list[list[tuple[int, int]]]]:
    """Return every head as a unit, and on grouped models every key/value group (its query heads together)."""
    c, caps = enc.config, enc.capabilities
    names = [f"{la}.{h}" for la in range(c.n_layers) for h in range(c.n_heads)]
    units = [[(la, h)] for la in range(c.n_layers) for h in range(c.n_heads)]
    if caps.grouped:
        for la in range(c.n_layers):
            for g in range(caps.kv_heads):
                names.append(f"KV {la}.{g}")
                units.append(heads_of(enc, (), [(la, g)]))
    return names, units


@torch.inference_mode()
def sweep(enc: Encoder, text: str) -> Sweep:
    """Return what removing each head (and each key/value group) alone does to every next-token distribution.

    Items of a batch carry their own gates (head_gates (batch, layers, heads)): one forward serves many units.
    The batch is held to ATTENTION_LENS_DENSE_MAPS_MB (its maps are kept whole) and ATTENTION_LENS_MAX_BATCH.
    """
    ids, _ = _ids(enc, text)
    names, units = sweep_units(enc)
    c, T = enc.config, ids.shape[1]
    per_item = 4 * c.n_layers * c.n_heads * T * T
    budget = settings.limit("dense_maps_mb") * (1 << 20)
    settings.require("dense_maps_mb", math.ceil(per_item / (1 << 20)), f"the maps of one forward of {T:,} tokens")
    B = max(1, min(int(settings.limit("max_batch")), int(budget // per_item)))
    base = _logits(enc, ids, None)  # (T, V)
    top = int(base[-1].argmax())
    kls, tops = [], []
    for start in range(0, len(units), B):
        chunk = units[start : start + B]
        gates = torch.stack([gates_for(enc, u) for u in chunk])  # (b, layers, heads)
        res = enc.model(ids.expand(len(chunk), T), head_gates=gates)
        cut = enc.model.logits(res.hidden).double()  # (b, T, V)
        kls.append(kl_rows(base[None], cut))  # (b, T)
        tops.append(cut[:, -1, top] - base[-1, top])  # (b,)
    per = torch.cat(kls).cpu().numpy()  # (units, T)
    ci = np.array([bootstrap(row) for row in per])
    diff = torch.cat(tops).cpu().numpy()
    return Sweep(names=names, units=units, mean_kl=per.mean(1), ci95=ci, last_kl=per[:, -1], logit_diff=diff)
