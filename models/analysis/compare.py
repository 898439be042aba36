"""Compare two runs, A and B (another text, model, mask or checkpoint): which heads changed, and how.

Three cases (docs/METRICS.md, "Comparing two runs"):

- "maps": both runs have the same number of tokens, layers and heads and the same causality, so head (l, h) and
  position i mean the same thing in both. Per head: Δ = B − A (a diverging map centred on 0) and the
  Jensen–Shannon distance between A's and B's rows, `distance = √(Σ_i JS(A_i, B_i) / n)`; heads ranked by it.
  A minimal pair ("The keys to the cabinet are / is") is this case: the positions whose tokens differ are listed.
- "statistics": the same layers × heads, but the texts have different lengths: no map lines up with the other,
  so each head's statistics (docs/METRICS.md) sit side by side, and heads are ranked by the largest change of
  any of them.
- "separate": different shapes or causality (two different models): heads do not correspond; statistics and
  labels of each run, no ranking.

Torch in, numpy out; every map is read one layer at a time (`out.attentions[layer]`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .. import settings
from ..encoder import EncoderOutput
from .heads import DECODER_COLUMNS, ENCODER_COLUMNS, Roles, label_heads, paired_js, sentence_stats

MODES = ("maps", "statistics", "separate")
DEFINITIONS = "docs/METRICS.md#comparing-two-runs"


def _readable(out: EncoderOutput) -> list[str]:
    return list(out.display_tokens or out.tokens)


def _shape(out: EncoderOutput, maps: Any = None) -> tuple[int, ...]:
    return tuple(int(s) for s in (out.attentions if maps is None else maps).shape[-4:])


def mode_of(a: EncoderOutput, b: EncoderOutput) -> str:
    """Return which comparison two runs allow: "maps", "statistics" or "separate" (see the module's docstring)."""
    La, Ha, Ta, _ = _shape(a)
    Lb, Hb, Tb, _ = _shape(b)
    if (La, Ha) != (Lb, Hb) or a.capabilities.causal != b.capabilities.causal:
        return "separate"
    return "maps" if Ta == Tb else "statistics"


@dataclass
class Comparison:
    """What changed from run A to run B, per head; numpy and lists only (pickles, caches)."""

    mode: str  # one of MODES
    n_layers: int  # run A's (run B's may differ in "separate")
    n_heads: int
    tokens_a: list[str]  # readable tokens of each run
    tokens_b: list[str]
    columns: tuple[str, ...]  # the statistics compared (shares in [0, 1], and entropy_norm)
    stats_a: dict[str, np.ndarray]  # name → (layers, heads) of run A
    stats_b: dict[str, np.ndarray]
    labels_a: np.ndarray  # (layers, heads) str
    labels_b: np.ndarray
    causal: bool = False  # run A's causality (B's is the same unless "separate")
    causal_b: bool = False
    differs: list[int] = field(default_factory=list)  # "maps": positions whose tokens differ
    rows: int = 0  # "maps": query rows summed over
    js: np.ndarray | None = None  # "maps": (layers, heads) Σ_i JS(A_i, B_i), nats
    row_js: np.ndarray | None = None  # "maps": (layers, heads, q_pos) JS of each row, nats (float64)
    max_delta: np.ndarray | None = None  # "maps": (layers, heads) max_ij |B − A|
    distance: np.ndarray | None = None  # (layers, heads): "maps" √(js / rows); "statistics" max |Δ statistic|
    moved: np.ndarray | None = None  # (layers, heads) str: the statistic that moved the most

    @property
    def ranked(self) -> list[tuple[int, int]]:
        """Return (layer, head) pairs, the most changed first (by distance; layer-major order breaks ties)."""
        if self.distance is None:
            return []
        flat = np.nan_to_num(self.distance.ravel(), nan=-1.0)
        order = np.argsort(-flat, kind="stable")
        return [(int(i) // self.n_heads, int(i) % self.n_heads) for i in order]

    def js_per_row(self) -> np.ndarray | None:
        """Return js divided by the rows: nats per query row, in [0, ln 2]."""
        return None if self.js is None else self.js / max(self.rows, 1)

    def head_json(self, layer: int, head: int) -> dict[str, Any]:
        """Return one head's entry of `to_json()["heads"]`."""
        row: dict[str, Any] = {"layer": layer, "head": head}
        if self.distance is not None:
            row["distance"] = _num(self.distance[layer, head])
        if self.js is not None and self.max_delta is not None:
            row["js"] = _num(self.js[layer, head])
            row["js_per_row"] = _num(self.js[layer, head] / max(self.rows, 1))
            row["max_delta"] = _num(self.max_delta[layer, head])
        if self.moved is not None:
            row["moved"] = str(self.moved[layer, head])
        row["a"] = {k: _num(self.stats_a[k][layer, head]) for k in self.columns}
        row["b"] = {k: _num(self.stats_b[k][layer, head]) for k in self.columns}
        row["label_a"] = str(self.labels_a[layer, head])
        row["label_b"] = str(self.labels_b[layer, head])
        return row

    def to_json(self) -> dict[str, Any]:
        """Return the document `python -m models compare --json` prints: every head, the most changed first."""
        doc: dict[str, Any] = {
            "mode": self.mode,
            "layers": self.n_layers,
            "heads_per_layer": self.n_heads,
            "tokens_a": self.tokens_a,
            "tokens_b": self.tokens_b,
            "columns": list(self.columns),
            "definitions": DEFINITIONS,
        }
        if self.mode == "maps":
            doc["rows"] = self.rows
            doc["differs"] = [{"position": i, "a": self.tokens_a[i], "b": self.tokens_b[i]} for i in self.differs]
        if self.mode == "separate":
            doc["heads"] = []
            doc["separate"] = {
                "a": _stat_rows(self.stats_a, self.labels_a, self.columns),
                "b": _stat_rows(self.stats_b, self.labels_b, columns_for(self.causal_b)),
            }
        else:
            doc["heads"] = [self.head_json(la, h) for la, h in self.ranked]
        return doc


def _num(x: Any) -> float | None:
    x = float(x)
    return None if math.isnan(x) else round(x, 6)


def _stat_rows(stats: dict[str, np.ndarray], labels: np.ndarray, columns: Sequence[str]) -> list[dict[str, Any]]:
    L, H = labels.shape
    return [
        {"layer": la, "head": h, **{k: _num(stats[k][la, h]) for k in columns}, "label": str(labels[la, h])}
        for la in range(L)
        for h in range(H)
    ]


def columns_for(causal: bool) -> tuple[str, ...]:
    """Return the statistics compared: the Heads table's columns for the model's kind, and entropy_norm."""
    return ("entropy_norm", *(DECODER_COLUMNS if causal else ENCODER_COLUMNS))


def statistics(out: EncoderOutput, maps: Any = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Return per-head statistics (name → (layers, heads)) and labels of one run, layer by layer.

    maps: (layers, heads, q_pos, k_pos) to read instead of out.attentions (value-weighted shares, say).
    A causal run's entropy_norm is the causal form (docs/METRICS.md). Labels without induction (it needs a
    separate pass on a repeated random sequence: the Heads page has it). Without 'distance', which no comparison
    shows (a product as large as the maps).
    """
    source = out.attentions if maps is None else maps
    roles = Roles.of_output(out)
    per_layer = []
    for layer in range(_shape(out, maps)[0]):
        a = torch.as_tensor(np.asarray(source[layer]), dtype=torch.float32)  # (heads, q_pos, k_pos)
        per_layer.append(sentence_stats(a[None, None], roles, distance=False))  # each (1, 1, heads)
    stats = {k: torch.cat([p[k][0] for p in per_layer]).double().numpy() for k in per_layer[0]}
    causal = out.capabilities.causal
    if causal:
        stats["entropy_norm"] = stats["entropy_norm_causal"]
    pairs = bool(out.token_type_ids.bool().any())
    return stats, label_heads(stats, pairs=pairs, causal=causal)


def check_budget(a: EncoderOutput, b: EncoderOutput, what: str = "comparing these two runs") -> None:
    """Refuse (BudgetError) before any Δ map or distance is computed when either run holds too many values."""
    for out in (a, b):
        L, H, Q, K = _shape(out)
        settings.require("max_derived_values", L * H * Q * K, what)


def compare(a: EncoderOutput, b: EncoderOutput, maps_a: Any = None, maps_b: Any = None) -> Comparison:
    """Return what changed from run A to run B, per head (single runs: encode(...), not encode_batch).

    maps_a, maps_b: (layers, heads, q_pos, k_pos) to compare instead of the runs' attentions (the same lens on
    both, e.g. value-weighted shares); tokens, roles and the mode still come from the runs.
    """
    if a.is_batch or b.is_batch:
        raise ValueError("compare() takes single runs; use item(i) of a batch")
    check_budget(a, b)
    mode = mode_of(a, b)
    causal = a.capabilities.causal
    stats_a, labels_a = statistics(a, maps_a)
    stats_b, labels_b = statistics(b, maps_b)
    L, H = labels_a.shape
    cmp = Comparison(
        mode=mode,
        n_layers=L,
        n_heads=H,
        tokens_a=_readable(a),
        tokens_b=_readable(b),
        columns=columns_for(causal),
        stats_a=stats_a,
        stats_b=stats_b,
        labels_a=labels_a,
        labels_b=labels_b,
        causal=causal,
        causal_b=b.capabilities.causal,
    )
    if mode == "separate":
        return cmp
    change = np.stack([np.abs(stats_b[k] - stats_a[k]) for k in cmp.columns])  # (columns, L, H)
    cmp.moved = np.asarray(cmp.columns, dtype=object)[np.nan_to_num(change, nan=-1.0).argmax(0)].astype(str)
    if mode == "statistics":
        cmp.distance = np.nanmax(change, axis=0)
        return cmp

    src_a = a.attentions if maps_a is None else maps_a
    src_b = b.attentions if maps_b is None else maps_b
    real = (a.padding & b.padding).bool()
    cmp.row_js, cmp.max_delta = row_distances(src_a, src_b, real)
    cmp.rows = int(real.sum())
    cmp.js = cmp.row_js.sum(-1, dtype=np.float64)
    cmp.distance = np.sqrt(cmp.js / max(cmp.rows, 1))
    cmp.differs = [i for i, (x, y) in enumerate(zip(a.tokens, b.tokens, strict=True)) if x != y]
    return cmp


# One piece of row_distances' work: this many values of each run's maps (two heads at 512 tokens). P, Q, M and the
# scratch are four float64 arrays of this size (16 MB together) made once and reused by every piece. Slices of 12
# heads with fresh arrays (100 MB a slice) spent more on page faults and memory traffic than on the logs (0.65 s
# against 0.25 s of CPU for minilm's 72 heads at 512 tokens, one thread). One head a piece is as cheap but makes
# twice the parallel regions (19 a piece), and each can cost a scheduler slice of OpenMP spinning when the other
# core is busy (bench/NOTES.md, issue 35).
PIECE_VALUES = 1 << 19


def row_distances(a: Any, b: Any, real: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Return (JS of each row (layers, heads, q_pos) float64, max |B − A| per head (layers, heads)).

    a, b: (layers, heads, q_pos, k_pos) maps of two runs whose positions line up; real: (seq,) bool (padded rows
    count 0; n for the smoothing is the number of real tokens). Dense maps (the runs' own tensors, read in place,
    never copied) are taken as one stack of (layers · heads · q_pos) rows; maps made on demand (a long text) are
    read a layer at a time. Either way the rows go through `paired_js` in pieces of PIECE_VALUES values on
    buffers made once: every head's distance in one vectorised loop, its working set near the CPU's cache.
    """
    L, H, T, _ = (int(s) for s in a.shape[-4:])
    n = int(real.sum())
    dense = isinstance(a, torch.Tensor | np.ndarray) and isinstance(b, torch.Tensor | np.ndarray)
    row_js = torch.empty(L * H * T, dtype=torch.float64)
    row_max = torch.empty(L * H * T, dtype=torch.float32)  # max |B − A| of each row
    rows = max(1, PIECE_VALUES // max(T, 1))
    work = [torch.empty(rows * T, dtype=torch.float64) for _ in range(4)]
    diff = torch.empty(rows * T, dtype=torch.float32)
    sources: Any  # (first row, that many rows of A, of B) per block of rows read at once
    if dense:
        sources = [(0, torch.as_tensor(a).reshape(-1, T), torch.as_tensor(b).reshape(-1, T))]  # views
    else:  # on demand: one layer's heads at a time
        sources = (
            (
                layer * H * T,
                torch.as_tensor(np.asarray(a[layer]), dtype=torch.float32).reshape(-1, T),
                torch.as_tensor(np.asarray(b[layer]), dtype=torch.float32).reshape(-1, T),
            )
            for layer in range(L)
        )
    for first, fa, fb in sources:
        for r0 in range(0, fa.shape[0], rows):
            la, lb = fa[r0 : r0 + rows].float(), fb[r0 : r0 + rows].float()
            at = slice(first + r0, first + r0 + la.shape[0])
            paired_js(la, lb, n, work, out=row_js[at])
            delta = torch.sub(lb, la, out=diff[: la.numel()].view(la.shape)).abs_()
            torch.amax(delta, -1, out=row_max[at])
    row_js = row_js.view(L * H, T)
    row_js[:, ~real] = 0.0
    return row_js.view(L, H, T).numpy(), row_max.view(L, H, T).amax(-1).numpy()


def delta_layer(a: Any, b: Any, layer: int) -> np.ndarray:
    """Return B − A of one layer, (heads, q_pos, k_pos) float32: a and b are (layers, heads, q_pos, k_pos) maps."""
    return np.asarray(b[layer], dtype=np.float32) - np.asarray(a[layer], dtype=np.float32)


def delta_maps(a: Any, b: Any) -> np.ndarray:
    """Return B − A of every head, (layers, heads, q_pos, k_pos) float32, within the max_derived_values budget."""
    L, H, Q, K = (int(s) for s in a.shape[-4:])
    if tuple(int(s) for s in b.shape[-4:]) != (L, H, Q, K):
        raise ValueError(f"the runs' maps are {tuple(a.shape)} and {tuple(b.shape)}: Δ needs the same shape")
    settings.require("max_derived_values", L * H * Q * K, "the Δ maps of every head")
    out = np.empty((L, H, Q, K), dtype=np.float32)
    for layer in range(L):
        out[layer] = delta_layer(a, b, layer)
    return out
