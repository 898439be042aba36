"""Training jobs of the Train page: each runs on a worker thread, off the script thread, holding one of the
server's heavy slots (ui.slots) while it trains; the page's fragment reads its records once a second.

A job is one run, or a comparison (h = 1, 2, 4, 8; or the "break it" variants) trained one after the other in
the same slot. Jobs live in one registry for the process, keyed by an id the session keeps; at most MAX_JOBS are
kept (the oldest finished ones go first, with their checkpoint folders). Nothing here draws: the page does.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from models import AttnVizError
from models.training import Record, TrainConfig, TrainResult, make_task, save_checkpoint, train

from . import slots

MAX_JOBS = 16
CHECKPOINT_PREFIX = "attention-lens-trained-"


@dataclass
class Job:
    """One training job: its configs, their records as they come, and how it ended."""

    id: str
    kind: str  # "single", "heads" (h = 1, 2, 4, 8) or "bugs" (correct, no √d_k, no causal mask)
    configs: list[TrainConfig]
    labels: list[str]  # one per config, for legends
    stop: threading.Event = field(default_factory=threading.Event)
    state: str = "waiting"  # waiting (for a slot) | running | done | stopped | failed
    records: list[list[Record]] = field(default_factory=list)  # per config, appended by the worker
    results: list[TrainResult] = field(default_factory=list)  # per finished config
    current: int = 0  # the config being trained
    step: int = 0  # the step the current run has reached (every step, not only records)
    seconds: float = 0.0  # seconds into the current run
    error: str = ""
    note: str = ""  # why a finished run was not saved, when it was not
    probe_tokens: list[str] = field(default_factory=list)  # the fixed probe's tokens (the maps' axes)
    chance: float = float("nan")  # ln V of the task's fresh draws (nan for text: no target is drawn afresh)
    folder: str = ""  # the checkpoint of a single run, once saved
    created: float = field(default_factory=time.monotonic)
    started: float | None = None
    finished: float | None = None
    thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.state in ("waiting", "running")

    def latest(self) -> Record | None:
        """Return the newest record of the run in progress (or of the last run)."""
        for recs in reversed(self.records):
            if recs:
                return recs[-1]
        return None


_lock = threading.Lock()
_jobs: OrderedDict[str, Job] = OrderedDict()


def get(job_id: str | None) -> Job | None:
    with _lock:
        return _jobs.get(job_id) if job_id else None


def running() -> int:
    """Return how many jobs are waiting or training now (all sessions)."""
    with _lock:
        return sum(1 for j in _jobs.values() if j.active)


def start(kind: str, configs: list[TrainConfig], labels: list[str], save: bool = True) -> Job:
    """Check every config, register a job and start its worker thread; return the job at once."""
    for c in configs:
        c.check()
    task = make_task(configs[0].task, **configs[0].task_options())  # a bad text says so here, not in the thread
    job = Job(id=uuid.uuid4().hex, kind=kind, configs=configs, labels=labels)
    job.probe_tokens = task.tokens(task.probe().ids[0])
    job.chance = task.chance_loss if task.name != "text" else float("nan")
    job.records = [[] for _ in configs]
    with _lock:
        _jobs[job.id] = job
        _evict()
    job.thread = threading.Thread(target=_work, args=(job, save), name=f"train-{job.id[:8]}", daemon=True)
    job.thread.start()
    return job


def stop(job_id: str | None) -> None:
    job = get(job_id)
    if job is not None:
        job.stop.set()


def stop_all(timeout: float = 30.0) -> None:
    """Stop every job and wait for their threads (tests; a server shutting down)."""
    with _lock:
        jobs = list(_jobs.values())
    for job in jobs:
        job.stop.set()
    for job in jobs:
        if job.thread is not None:
            job.thread.join(timeout)


def _work(job: Job, save: bool) -> None:
    try:
        with slots.held_by_worker(job.stop) as got:
            if not got:
                job.state = "stopped"
                return
            job.state = "running"
            job.started = time.monotonic()
            for i, config in enumerate(job.configs):
                if job.stop.is_set():
                    break
                job.current, job.step, job.seconds = i, 0, 0.0
                result = train(
                    config, on_record=job.records[i].append, stop=job.stop, on_step=lambda s, sec: _at(job, s, sec)
                )
                job.results.append(result)
            if save and job.kind == "single" and job.results:
                folder = tempfile.mkdtemp(prefix=CHECKPOINT_PREFIX)
                try:
                    job.folder = str(save_checkpoint(job.results[0], folder))
                except AttnVizError as err:  # e.g. a Llama trained without √d_k: transformers cannot say so
                    shutil.rmtree(folder, ignore_errors=True)
                    job.note = str(err)
            job.state = "stopped" if job.stop.is_set() else "done"
    except AttnVizError as err:
        job.error, job.state = str(err), "failed"
    except Exception as err:  # noqa: BLE001 - a worker thread has no page: the page shows this message instead
        job.error, job.state = f"{type(err).__name__}: {err}", "failed"
    finally:
        job.finished = time.monotonic()


def _at(job: Job, step: int, seconds: float) -> None:
    job.step, job.seconds = step, seconds


def _evict() -> None:
    """Drop the oldest finished jobs beyond MAX_JOBS (and their checkpoint folders); call with _lock held."""
    done = [j for j in _jobs.values() if not j.active]
    while len(_jobs) > MAX_JOBS and done:
        old = done.pop(0)
        _jobs.pop(old.id, None)
        if old.folder and Path(old.folder).name.startswith(CHECKPOINT_PREFIX):
            shutil.rmtree(old.folder, ignore_errors=True)
