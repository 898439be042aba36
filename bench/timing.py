"""The timing loop the model benches share: every side once per round, the order rotating, medians at the end.

Alternating in one process means drift in the machine's speed (another process, the CPU's clock) hits every side
alike; rotating who goes first shares out whatever one run leaves behind for the next (allocator, caches).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously); nothing to wait for on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def alternate(
    sides: Sequence[Callable[[], object]],
    warmup: int,
    repeats: int,
    device: torch.device,
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """Run each side warmup + repeats times, interleaved, and return each side's median in milliseconds."""
    times: list[list[float]] = [[] for _ in sides]
    order = list(range(len(sides)))
    for i in range(warmup + repeats):
        k = i % len(order)
        for j in order[k:] + order[:k]:
            sync(device)
            t0 = clock()
            sides[j]()
            sync(device)
            if i >= warmup:
                times[j].append(clock() - t0)
    return [statistics.median(t) * 1e3 for t in times]
