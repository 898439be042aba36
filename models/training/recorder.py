"""What the trainer writes down every N steps: the losses, the §8.3 diagnostics, every head's map on a fixed probe,
and the flags that name a §7 symptom. Torch in, numpy and floats out (a Record pickles and crosses threads).

Definitions (docs/METRICS.md, "Training diagnostics"): per-head entropy, max weight, previous-token and
first-token shares are `models.analysis.heads.sentence_stats` on the validation batches; the induction score is
`models.analysis.induction.induction_from_maps` on held-out segment lengths; ‖∇W_q‖ and ‖∇W_k‖ are Frobenius
norms of this step's gradients; the score scale is read from the scores the attention computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..analysis.heads import Roles, sentence_stats
from ..analysis.induction import induction_from_maps
from ..attention import repeat_kv
from ..masks import predicates
from ..network import Network
from .arch import Arch
from .tasks import Batch, Task

INDUCTION_THRESHOLD = 0.5  # a head counts as an induction head from this score on (the target)
DETERMINED_LOSS_TARGET = 0.3  # nats per token on the copy at held-out lengths: "formed" only when the copy works
# Flags: the §7 symptom each one names, and what trips it.
FLAGS = {
    "unscaled": "scores are not divided by √d_k: the effective scale is off 1/√d_k by more than 2×",
    "large_scores": "pre-softmax scores had a standard deviation above 5 early in training: softmax saturated before anything was learned (§8.3: check the scaling and the initialisation)",
    "uniform": "every head is still near uniform (normalised entropy > 0.95) a fifth of the way in: nothing learned",
    "leak": "the loss on tokens drawn afresh is below chance (ln V): the model sees the future (causal mask)",
    "nan": "the loss is not a finite number (§7: check the learning rate and the initialisation)",
}
SCALE_TOLERANCE = 2.0
LARGE_SCORE_STD = 5.0
EARLY_STEPS = 100  # "early": the first 100 steps or the first 5 % of the run, whichever is longer
UNIFORM_ENTROPY = 0.95
UNIFORM_AFTER = 500  # steps: before that, near-uniform heads are normal
LEAK_MARGIN = 0.5  # nats below ln V


@dataclass
class Record:
    """One record: step, losses (nats per token), diagnostics per layer or head, the probe's maps, flags."""

    step: int
    seconds: float  # since training started
    lr: float
    train_loss: float  # this step's batch, over the targets the task trains on
    train_determined: float  # this step's batch, targets the context decides (nan: none)
    train_chance: float  # this step's batch, targets drawn afresh (nan: none)
    val_loss: float  # the validation batches, every target
    val_determined: float  # the validation batches, targets the context decides: "loss on the repeated half"
    val_chance: float  # the validation batches, targets drawn afresh; ≈ ln V unless the model sees the future
    induction: np.ndarray  # (layers, heads): the smallest over held-out lengths of the induction score
    induction_by: dict[str, np.ndarray]  # held-out batch name → (layers, heads) induction score
    prev: np.ndarray  # (layers, heads) attention on the previous token
    first: np.ndarray  # (layers, heads) attention on position 0 (BOS, the sink)
    entropy: np.ndarray  # (layers, heads) normalised entropy, 1 = uniform over the keys a row sees
    max_weight: np.ndarray  # (layers, heads) mean over rows of the largest weight
    grad_q: np.ndarray  # (layers,) ‖∇W_q‖_F of this step
    grad_k: np.ndarray  # (layers,) ‖∇W_k‖_F of this step
    score_std: np.ndarray  # (layers,) std of pre-softmax scores over the cells a query may see
    score_max: np.ndarray  # (layers,) largest |score| over those cells
    score_scale: np.ndarray  # (layers,) effective scale × √d_k: 1 when scores are Q·Kᵀ/√d_k
    norms: dict[str, tuple[float, float, float, float]]  # norm layer → (in mean, in std, out mean, out std)
    maps: np.ndarray  # (layers, heads, seq, seq) float16: every head on the fixed probe
    flags: list[str] = field(default_factory=list)

    @property
    def best_induction(self) -> tuple[int, int, float]:
        """Return (layer, head, score) of the best induction head above the first layer (layer 0 when only one)."""
        ind = self.induction
        low = 1 if ind.shape[0] > 1 else 0
        sub = ind[low:]
        if not sub.size or not np.isfinite(sub).any():
            return low, 0, float("nan")
        layer, head = np.unravel_index(int(np.nanargmax(sub)), sub.shape)
        return int(layer) + low, int(head), float(sub[layer, head])

    @property
    def induction_formed(self) -> bool:
        """Return whether a head above layer 0 scores ≥ 0.5 on every held-out length and the copy's loss is ≤ 0.3 nat."""
        _, _, score = self.best_induction
        return score >= INDUCTION_THRESHOLD and self.val_determined <= DETERMINED_LOSS_TARGET

    def summary(self) -> dict[str, Any]:
        layer, head, score = self.best_induction
        return {
            "step": self.step,
            "seconds": round(self.seconds, 3),
            "train_loss": _num(self.train_loss),
            "val_loss": _num(self.val_loss),
            "val_determined": _num(self.val_determined),
            "val_chance": _num(self.val_chance),
            "best_induction": {"layer": layer, "head": head, "score": _num(score)},
            "flags": list(self.flags),
        }


def _num(x: float) -> float | None:
    return round(float(x), 6) if math.isfinite(float(x)) else None


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    """Return the mean of values where mask is True, nan when it is True nowhere."""
    n = int(mask.sum())
    return float((values * mask).sum() / n) if n else float("nan")


def target_losses(
    arch: Arch, model: nn.Module, batch: Batch, causal: bool, record: bool = False
) -> tuple[torch.Tensor, Any]:
    """Return the per-target cross-entropy (batch, seq − 1) in nats, and the forward's result."""
    out = arch.forward(model, batch.ids, causal=causal, record=record)
    logits = arch.logits(model, out.hidden)[:, :-1]  # (B, T-1, vocab): position t predicts t + 1
    ce = F.cross_entropy(logits.transpose(1, 2), batch.ids[:, 1:], reduction="none")  # (B, T-1)
    return ce, out


def _roles(B: int, T: int, device: torch.device) -> Roles:
    """Roles of a synthetic batch: every position real, no [SEP], no punctuation, one segment."""
    zeros = torch.zeros(B, T, dtype=torch.bool, device=device)
    return Roles(
        real=~zeros,
        sep=zeros,
        punct=zeros,
        segment=torch.zeros(B, T, dtype=torch.long, device=device),
        pair=torch.zeros(B, dtype=torch.bool, device=device),
    )


def _hook_norms(norms: list[tuple[str, nn.Module]]) -> tuple[dict[str, list[torch.Tensor]], Callable[[], None]]:
    """Collect each norm layer's input and output during the next forward; return them and an undo."""
    seen: dict[str, list[torch.Tensor]] = {}
    handles = []
    for name, module in norms:

        def hook(_m: nn.Module, args: tuple[Any, ...], output: torch.Tensor, name: str = name) -> None:
            seen[name] = [args[0].detach(), output.detach()]

        handles.append(module.register_forward_hook(hook))

    def undo() -> None:
        for h in handles:
            h.remove()

    return seen, undo


def score_stats(record: Any, causal: bool, d_k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return per layer (std, max |·|, scale × √d_k) of the scores the attention computed, over visible cells.

    scale × √d_k = std(scores) / std(Q·Kᵀ/√d_k): 1 when the code divides by √d_k, √d_k when it does not.
    """
    stds, maxes, scales = [], [], []
    for layer in record.tensors:
        q, k, scores = layer["queries"], layer["keys"], layer["scores"]
        k = repeat_kv(k, q.shape[1] // k.shape[1])  # grouped keys: one per query head
        T = scores.shape[-1]
        visible = predicates.dense(predicates.causal() if causal else predicates.everything(), T, scores.device)
        s = scores.float()[..., visible]  # (B, H, cells)
        reference = (q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_k))[..., visible]
        std = float(s.std())
        stds.append(std)
        maxes.append(float(s.abs().max()))
        ref = float(reference.std())
        scales.append(std / ref if ref > 0 else float("nan"))
    return np.array(stds), np.array(maxes), np.array(scales)


@torch.no_grad()
def measure(
    arch: Arch,
    model: Network,
    task: Task,
    validation: dict[str, Batch],
    probe: Batch,
    causal: bool,
    mlp: bool,
    d_k: int,
) -> dict[str, Any]:
    """Return every field of a Record that the model alone decides (losses on validation, maps, statistics)."""
    was_training = model.training
    model.eval()
    seen, undo = _hook_norms(arch.norms(model, mlp))
    try:
        names = list(validation)
        batches = [validation[n] for n in names]
        ids = torch.cat([b.ids for b in batches])
        joined = Batch(
            ids,
            torch.cat([b.determined for b in batches]),
            torch.cat([b.chance for b in batches]),
            torch.cat([b.start for b in batches]),
            torch.cat([b.length for b in batches]),
        )
        ce, out = target_losses(arch, model, joined, causal, record=True)
    finally:
        undo()
    attn = out.attentions.float()  # (B, L, H, T, T)
    B, L, H, T, _ = attn.shape
    stats = sentence_stats(attn, _roles(B, T, attn.device))
    by: dict[str, np.ndarray] = {}
    row = 0
    for name, b in zip(names, batches, strict=True):
        n = int(b.length[0]) if b.size else 0
        if n >= 2:  # a batch with one copied segment length per batch: induction on it
            by[name] = induction_from_maps(attn[row : row + b.size], b.start.to(attn.device), n).cpu().numpy()
        row += b.size
    induction = np.min(np.stack(list(by.values())), axis=0) if by else np.full((L, H), np.nan)
    std, mx, scale = score_stats(out.record, causal, d_k)
    norms = {}
    for name, (x, y) in seen.items():
        x, y = x.float(), y.float()
        norms[name] = (float(x.mean()), float(x.std()), float(y.mean()), float(y.std()))
    probe_out = arch.forward(model, probe.ids, causal=causal)
    model.train(was_training)
    return {
        "val_loss": float(ce.mean()),
        "val_determined": masked_mean(ce, joined.determined),
        "val_chance": masked_mean(ce, joined.chance),
        "induction": induction,
        "induction_by": by,
        "prev": stats["prev"].mean(0).cpu().numpy(),
        "first": stats["first"].mean(0).cpu().numpy(),
        "entropy": stats["entropy_norm_causal"].mean(0).cpu().numpy(),
        "max_weight": stats["confidence"].mean(0).cpu().numpy(),
        "score_std": std,
        "score_max": mx,
        "score_scale": scale,
        "norms": norms,
        "maps": probe_out.attentions[0].float().cpu().numpy().astype(np.float16),
    }


def grad_norms(arch: Arch, model: Network) -> tuple[np.ndarray, np.ndarray]:
    """Return per layer ‖∇W_q‖_F and ‖∇W_k‖_F of the gradients the last backward left."""
    grads = arch.qk_weights(model)
    return np.array([float(gq.norm()) for gq, _ in grads]), np.array([float(gk.norm()) for _, gk in grads])


def progress_steps(rec: Record, progress: float) -> float:
    """Return the run's planned steps from a record's step and the share of the run it marks."""
    return rec.step / progress if progress > 0 else float(rec.step)


def flags(rec: Record, task: Task, progress: float) -> list[str]:
    """Return the names of the FLAGS this record trips (progress: the share of the planned steps done)."""
    out = []
    if np.any(np.abs(np.log(rec.score_scale[np.isfinite(rec.score_scale)])) > math.log(SCALE_TOLERANCE)):
        out.append("unscaled")
    if rec.step <= max(EARLY_STEPS, progress_steps(rec, progress) * 0.05) and np.any(rec.score_std > LARGE_SCORE_STD):
        out.append("large_scores")  # later, a sharp head that has learned its pattern has large scores too
    if progress >= 0.2 and rec.step >= UNIFORM_AFTER and np.all(rec.entropy > UNIFORM_ENTROPY):
        out.append("uniform")
    if math.isfinite(rec.val_chance) and rec.val_chance < task.chance_loss - LEAK_MARGIN:
        out.append("leak")
    if not math.isfinite(rec.train_loss):
        out.append("nan")
    return out
