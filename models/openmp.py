"""OpenMP's spin-waiting, capped before torch loads: by the server (`ui/runtime.py` has the measurements) and by
every CLI command (`models.cli.main`; compare's CPU was 1.3× export's on an idle machine, 1.6× at a load of 3).

libgomp keeps a waiting thread spinning for ~300,000 iterations (~10 ms of a core here) after a parallel region, in
case the next one comes at once; whenever the other core is busy, a thread waiting at a barrier spins for up to a
scheduler slice instead of yielding it. libgomp reads its settings once, when torch loads it, so the cap must be
set before torch is imported. A setting in the environment (`GOMP_SPINCOUNT`, or `OMP_WAIT_POLICY`) is left alone.
"""

from __future__ import annotations

import os
import sys

SPIN_COUNT = "1000"  # libgomp's spin iterations before a waiting thread sleeps (its default: 300,000)


def cap_spinning() -> None:
    """Set GOMP_SPINCOUNT to SPIN_COUNT unless the environment chose, or torch (and libgomp) already loaded."""
    if "OMP_WAIT_POLICY" not in os.environ and "torch" not in sys.modules:
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)
