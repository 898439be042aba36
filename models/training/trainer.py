"""`train(config)`: a small decoder trained with plain torch (AdamW, seeded), recording every N steps.

Everything random comes from one torch.Generator seeded with `config.seed` (the weights first, then every batch),
never from the global RNG: the same seed gives the same curve (on the same machine and thread count), and a run in
a thread of the app neither disturbs nor is disturbed by other sessions. The run stops at its step count, when
`stop` is set (the page's Stop button), or at ATTENTION_LENS_MAX_TRAIN_SECONDS, whichever comes first.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from .. import families
from ..device import resolve_device
from ..errors import InputError
from ..network import Network
from ..settings import limit
from . import recorder
from .arch import Arch, Shape, arch_for
from .recorder import Record
from .tasks import Task, make_task

BOUNDS = {
    "layers": (1, 4),
    "heads": (1, 16),
    "d_model": (8, 512),
    "steps": (1, 200_000),
    "batch": (1, 512),
    "threads": (1, 256),
}
MAX_RECORDS = 400  # records a run keeps at most: `every` grows to fit (each record holds every head's map)
LR_BY_HEADS = ((4, 3e-3), (256, 1e-3))  # (up to this many heads, peak learning rate), measured (docs/training.md)
DECAY_FLOOR = 0.05  # the cosine decay ends at this share of the peak learning rate


@dataclass(frozen=True)
class TrainConfig:
    """One training run. The defaults are the induction recipe (docs/training.md says how it was chosen)."""

    task: str = "induction"  # induction, reverse or text (models.training.tasks)
    # Which decoder family's modules (a registry entry with a training recipe: models.families.trainable()); the
    # default and why it is Llama: models.families.TRAINING_DEFAULT.
    family: str = families.TRAINING_DEFAULT
    layers: int = 2
    heads: int = 4
    d_model: int = 64  # d_k = d_model / heads
    mlp: bool = False  # False: attention-only (the MLP zero and frozen)
    # The step budget: the run ends earlier when the copy's loss stops falling (`plateau`). 2,000 steps fit the
    # issue's 120 s on two cores at about 20 steps/s of one thread (docs/training.md, "How the recipe was chosen").
    steps: int = 2000
    batch: int = 64  # sequences per step: at 16 the same runs stayed on the plateau (a noisier gradient)
    # AdamW's peak learning rate; None: by head count (LR_BY_HEADS): 3e-3 for 1 to 4 heads, 1e-3 for 8 or more,
    # where 3e-3 left every seed measured on the plateau.
    lr: float | None = None
    warmup: int = 500  # steps of linear warmup from 0: after 100 or 200, 3e-3 left most seeds on the plateau
    decay: bool = True  # after the warmup, cosine decay to DECAY_FLOOR of the peak at `steps`
    weight_decay: float = 0.0  # 0.1 did not help any seed and left 3 of 4 on the plateau at warmup 200
    # Once an induction head has formed (a head above layer 0 ≥ 0.5 on every held-out length, at a record), the
    # loss counts only the targets the context decides (the copy). Before, it counts every target: that is what
    # forms the head (trained on the copy alone from step 1, seed 0 was still on the plateau at step 1,000). After,
    # a model trained on every target hedges: in training a repeated token is often a chance repeat among fresh
    # draws (64 symbols, up to 31 earlier tokens), so it gives the copied token only 0.55-0.85 of its probability
    # and the rest to tokens it has not seen; copy loss from position 0 ~0.9 nat at n = 6 after 2,000 steps.
    # Counting only the copy from there, the same seed copied with 0.19 nat 125 steps later (docs/training.md).
    copy_only_after_head: bool = True
    # Stop when, with an induction head present, the copy's loss on the held-out lengths has fallen less than
    # plateau_delta nats over the last plateau_window steps. 0: run every step.
    plateau_window: int = 300
    plateau_delta: float = 0.02
    seed: int = 0
    every: int = 50  # record every N steps (grows so that a run keeps at most MAX_RECORDS)
    scale: bool = True  # "break it": False drops the 1/√d_k (§7, row 1)
    causal: bool = True  # "break it": False trains without the causal mask (§7, row 3)
    device: str = "cpu"  # auto takes CUDA when there is one
    # CPU threads of this run (set for the training thread only, restored after). One: at these sizes a step is
    # mostly overhead, and two threads on a busy 2-core machine spin at OpenMP barriers (20× slower, measured).
    threads: int = 1
    symbols: int = 64  # induction and reverse: symbols drawn uniformly
    text: str = ""  # text task: the text ("" = the bundled passage)
    task_extra: tuple[tuple[str, Any], ...] = ()  # more task options, as (name, value) pairs (frozen, hashable)

    def check(self) -> None:
        """Raise InputError naming the first setting out of bounds."""
        for name, (lo, hi) in BOUNDS.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InputError(f"{name} must be a whole number from {lo} to {hi}, got {v!r}")
        if self.d_model % self.heads:
            raise InputError(f"d_model {self.d_model} is not a multiple of heads {self.heads}: heads cannot split it")
        if self.lr is not None and (not (0 < self.lr <= 1) or not math.isfinite(self.lr)):
            raise InputError(f"lr must be in (0, 1], got {self.lr!r}")
        if self.plateau_window < 0 or not 0 <= self.plateau_delta < 10:
            raise InputError("plateau_window must be ≥ 0 and plateau_delta in [0, 10)")
        if not 0 <= self.weight_decay <= 1:
            raise InputError(f"weight decay must be in [0, 1], got {self.weight_decay!r}")
        if self.every < 1 or self.warmup < 0:
            raise InputError("every must be ≥ 1 and warmup ≥ 0")
        if not 0 <= self.seed < 2**63:
            raise InputError(f"seed must be a whole number ≥ 0, got {self.seed!r}")

    @property
    def peak_lr(self) -> float:
        """Return the learning rate after the warmup: `lr`, or the head count's (LR_BY_HEADS) when lr is None."""
        if self.lr is not None:
            return self.lr
        return next(lr for most, lr in LR_BY_HEADS if self.heads <= most)

    def task_options(self) -> dict[str, Any]:
        if self.task == "text":
            return {"text": self.text}
        return {"n_symbols": self.symbols, **dict(self.task_extra)}

    def record_every(self) -> int:
        return max(self.every, math.ceil(self.steps / MAX_RECORDS))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lr"] = self.peak_lr
        if self.task == "text":
            d["text"] = f"{len(self.text)} characters" if self.text else "the bundled passage"
        else:
            d.pop("text")
        return d


@dataclass
class TrainResult:
    """A finished (or stopped) run: the model, its task, every record and why it ended."""

    config: TrainConfig
    task: Task
    arch: Arch
    shape: Shape
    model: Network
    records: list[Record] = field(default_factory=list)
    steps_done: int = 0
    seconds: float = 0.0
    stop_reason: str = "steps"  # steps | plateau (the copy's loss stopped falling) | stopped | budget | nan
    formed_step: int | None = None  # first record where an induction head had formed (Record.induction_formed)
    formed_seconds: float | None = None
    crossings: dict[tuple[int, int], int] = field(default_factory=dict)  # (layer, head) → first step ≥ 0.5
    copy_only_step: int | None = None  # the step from which the loss counted only the copy (copy_only_after_head)

    @property
    def last(self) -> Record | None:
        return self.records[-1] if self.records else None

    def steps_per_second(self) -> float:
        return self.steps_done / self.seconds if self.seconds > 0 else float("nan")

    def verdict(self) -> dict[str, Any]:
        """Return what the run achieved, for the page and `train --json`: state "formed" (a head above layer 0 ≥ 0.5
        on every held-out length and the copy's loss ≤ DETERMINED_LOSS_TARGET), "weak_copy" (such a head, but the
        copy's loss above the target), "no_head" (no such head: the loss plateau) or "none" (no copy to measure),
        with the head, its score, the copy's loss, how the run ended and the advice for the next run."""
        last = self.last
        if last is None or not math.isfinite(last.val_determined):
            return {"state": "none", "stop": self.stop_reason}
        layer, head, score = last.best_induction
        formed = last.induction_formed
        state = "formed" if formed else ("weak_copy" if score >= recorder.INDUCTION_THRESHOLD else "no_head")
        advice = {
            "formed": "",
            "weak_copy": "train longer (more steps), or keep the default learning rate and warmup",
            "no_head": "the loss is still on the plateau: try another seed, more steps, or a lower learning rate "
            "(the default for this head count) with a longer warmup",
        }[state]
        return {
            "state": state,
            "formed": formed,
            "head": f"L{layer}H{head}",
            "score": round(score, 4) if math.isfinite(score) else None,
            "copy_loss": round(last.val_determined, 4),
            "copy_target": recorder.DETERMINED_LOSS_TARGET,
            "formed_step": self.formed_step,
            "stop": self.stop_reason,
            "step": last.step,
            "advice": advice,
        }

    def summary(self) -> dict[str, Any]:
        """Return the run's summary as plain data (the CLI's --json, the bench)."""
        last = self.last
        return {
            "verdict": self.verdict(),
            "phase_change": phase_change(self.records),
            "config": self.config.to_dict(),
            "task": self.task.describe(),
            "parameters": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
            "steps": self.steps_done,
            "seconds": round(self.seconds, 3),
            "steps_per_second": round(self.steps_per_second(), 2),
            "stop": self.stop_reason,
            "copy_only_from_step": self.copy_only_step,
            "induction_formed_step": self.formed_step,
            "induction_formed_seconds": None if self.formed_seconds is None else round(self.formed_seconds, 3),
            "first_crossing": {f"L{layer}H{head}": step for (layer, head), step in sorted(self.crossings.items())},
            "final": last.summary() if last else None,
            "induction": None if last is None else np.round(last.induction, 4).tolist(),
            "induction_by_length": None
            if last is None
            else {k: np.round(v, 4).tolist() for k, v in last.induction_by.items()},
            "prev": None if last is None else np.round(last.prev, 4).tolist(),
            "chance_loss": round(self.task.chance_loss, 6),
        }


def lr_at(config: TrainConfig, step: int) -> float:
    """Return the learning rate of step (1-based): linear warmup over `warmup` steps, then constant, or with
    `decay` a cosine from the peak down to DECAY_FLOOR of it at the last step."""
    peak = config.peak_lr
    if config.warmup and step <= config.warmup:
        return peak * step / config.warmup
    if not config.decay or config.steps <= config.warmup:
        return peak
    done = (step - config.warmup) / (config.steps - config.warmup)
    return peak * (DECAY_FLOOR + (1 - DECAY_FLOOR) * 0.5 * (1 + math.cos(math.pi * min(1.0, done))))


def on_plateau(config: TrainConfig, records: list[Record]) -> bool:
    """Return whether the run may stop: a head above layer 0 scores ≥ 0.5 on every held-out length and the copy's
    loss (held-out lengths) fell less than plateau_delta over the last plateau_window steps."""
    if not config.plateau_window or not records:
        return False
    last = records[-1]
    if not math.isfinite(last.val_determined) or not last.best_induction[2] >= recorder.INDUCTION_THRESHOLD:
        return False
    before = [r.val_determined for r in records if r.step <= last.step - config.plateau_window]
    if not before:
        return False
    since = min(r.val_determined for r in records if r.step > last.step - config.plateau_window)
    return min(before) - since < config.plateau_delta


def build(config: TrainConfig, gen: torch.Generator) -> tuple[Task, Arch, Shape, Network]:
    """Return the task, family, shape and freshly initialised model of a config (weights drawn from gen)."""
    config.check()
    task = make_task(config.task, **config.task_options())
    arch = arch_for(config.family)
    shape = Shape(
        layers=config.layers,
        heads=config.heads,
        d_model=config.d_model,
        vocab_size=task.vocab_size,
        positions=task.seq,
        mlp=config.mlp,
        scale=config.scale,
        bos_id=task.bos_id if task.bos_id is not None else task.vocab_size - 1,
    )
    return task, arch, shape, arch.build(shape, gen)


def train(
    config: TrainConfig,
    on_record: Callable[[Record], None] | None = None,
    stop: threading.Event | None = None,
    max_seconds: float | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Train, calling on_record(record) after each record and on_step(step, seconds) after every step; return the
    result (the model on the CPU).

    max_seconds: None = ATTENTION_LENS_MAX_TRAIN_SECONDS. Raises InputError / BudgetError for a bad config.
    """
    budget = float(limit("max_train_seconds")) if max_seconds is None else max_seconds
    threads = torch.get_num_threads()  # OpenMP's count is per thread: this changes the calling thread's only
    torch.set_num_threads(config.threads)
    try:
        return _train(config, on_record, stop, budget, on_step)
    finally:
        torch.set_num_threads(threads)


def _train(
    config: TrainConfig,
    on_record: Callable[[Record], None] | None,
    stop: threading.Event | None,
    budget: float,
    on_step: Callable[[int, float], None] | None,
) -> TrainResult:
    device = resolve_device(config.device)
    gen = torch.Generator().manual_seed(config.seed)
    task, arch, shape, model = build(config, gen)
    model.to(device)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.peak_lr, betas=(0.9, 0.99), weight_decay=config.weight_decay)
    validation = {k: b.to(device) for k, b in task.validation().items()}
    probe = task.probe().to(device)
    every = config.record_every()
    result = TrainResult(config, task, arch, shape, model)
    d_k = config.d_model // config.heads
    t0 = time.perf_counter()
    step = 0
    copy_only = False  # set at the first record with an induction head (config.copy_only_after_head)
    for step in range(1, config.steps + 1):
        lr = lr_at(config, step)
        for group in opt.param_groups:
            group["lr"] = lr
        batch = task.sample(gen, config.batch).to(device)
        ce, _ = recorder.target_losses(arch, model, batch, config.causal)
        trained = batch.determined if copy_only or task.train_on == "determined" else torch.ones_like(batch.determined)
        loss = (ce * trained).sum() / trained.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        is_record = step % every == 0 or step == config.steps or step == 1
        finite = bool(torch.isfinite(loss))
        elapsed = time.perf_counter() - t0
        out_of_time = elapsed >= budget
        stopping = (stop is not None and stop.is_set()) or out_of_time or not finite
        if is_record or stopping:
            gq, gk = recorder.grad_norms(arch, model)
        opt.step()
        if is_record or stopping:
            ce_d = ce.detach()
            fields = recorder.measure(arch, model, task, validation, probe, config.causal, config.mlp, d_k)
            rec = Record(
                step=step,
                seconds=time.perf_counter() - t0,
                lr=lr,
                train_loss=float(loss.detach()),
                train_determined=recorder.masked_mean(ce_d, batch.determined),
                train_chance=recorder.masked_mean(ce_d, batch.chance),
                grad_q=gq,
                grad_k=gk,
                **fields,
            )
            rec.flags = recorder.flags(rec, task, step / config.steps)
            _note(result, rec)
            result.records.append(rec)
            if config.copy_only_after_head and not copy_only and bool(batch.determined.any()):
                copy_only = rec.best_induction[2] >= recorder.INDUCTION_THRESHOLD
                if copy_only:
                    result.copy_only_step = step
            if on_record is not None:
                on_record(rec)
            if not stopping and step < config.steps and on_plateau(config, result.records):
                result.stop_reason = "plateau"
                break
        if on_step is not None:
            on_step(step, time.perf_counter() - t0)
        if stopping:
            result.stop_reason = "nan" if not finite else ("budget" if out_of_time else "stopped")
            break
    result.steps_done = step
    result.seconds = time.perf_counter() - t0
    model.to("cpu")
    model.eval()
    return result


def phase_change(records: list[Record]) -> dict[str, int] | None:
    """Return the induction phase change (Olsson et al. 2022) in a run's records, or None when no head above layer
    0 reached INDUCTION_THRESHOLD: `start` (the last record before it with the best score < 0.2), `end` (the first
    record ≥ the threshold), `jump` (the record where the best induction score rose most since the one before)
    and `bump` (the record, from `start` back by the window's width to `end`, where the validation loss peaks: the
    top of the loss bump before the fall)."""
    steps = [r.step for r in records]
    score = np.array([r.best_induction[2] for r in records], dtype=np.float64)
    loss = np.array([r.val_loss for r in records], dtype=np.float64)
    crossed = np.flatnonzero(np.nan_to_num(score, nan=0.0) >= recorder.INDUCTION_THRESHOLD)
    if not len(crossed):
        return None
    end = int(crossed[0])
    below = np.flatnonzero(np.nan_to_num(score[:end], nan=0.0) < 0.2)
    start = int(below[-1]) if len(below) else 0
    rise = np.diff(np.nan_to_num(score[: end + 1], nan=0.0))
    jump = int(np.argmax(rise)) + 1 if len(rise) else end
    lo = max(0, start - max(1, end - start))
    window = np.nan_to_num(loss[lo : end + 1], nan=-np.inf)
    bump = lo + int(np.argmax(window))
    return {"start": steps[start], "end": steps[end], "jump": steps[jump], "bump": steps[bump]}


def _note(result: TrainResult, rec: Record) -> None:
    """Note the first step each head crosses the induction threshold, and when an induction head formed."""
    L = rec.induction.shape[0]
    for layer in range(1 if L > 1 else 0, L):
        for head, score in enumerate(rec.induction[layer]):
            if score >= recorder.INDUCTION_THRESHOLD and (layer, head) not in result.crossings:
                result.crossings[(layer, head)] = rec.step
    if result.formed_step is None and rec.induction_formed:
        result.formed_step, result.formed_seconds = rec.step, rec.seconds
