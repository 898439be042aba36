"""What the server process costs besides the work asked of it: OpenMP threads spinning, full garbage collections.

**Spinning.** torch's CPU kernels run on OpenMP threads, and libgomp, by default, keeps a waiting thread spinning
for ~300,000 iterations (~10 ms of a core on the 2-core machine) after a parallel region or at a barrier, in case
the next region comes at once. In an encode it does; in a script run the regions are separated by Python work
(figures, PNG, widgets), and whenever the browser or another session holds a core, a thread waiting at a barrier
spins instead of yielding it. With two torch threads the server spent 360 ms of CPU per typed text (bundled model,
128 tokens, `bench/serve.py`); capped at 10,000 iterations ~185 ms, at 1,000 iterations ~150 ms, while an encode
alone on an idle machine takes about as long at either cap (30 ms; uncapped 29 ms; no spinning at all, 37 ms).
`before_torch()` sets the cap at 1,000. It must run before torch is first imported (libgomp reads its settings
once, when it loads): `ui/__init__.py` calls it. A value set in the environment (`GOMP_SPINCOUNT`, or
`OMP_WAIT_POLICY`) is left as it is.

**Garbage collection.** Streamlit runs a full garbage collection, `gc.collect(2)`, after every script run (its `runner.postScriptGC`
option), so that what a run leaves in reference cycles goes at once. A full collection walks every object the
process tracks, and with torch, transformers, plotly and Streamlit imported and a model loaded that is ~430,000
objects: 210 ms of CPU after every run on the 2-core machine — four times the encode of a 128-token text on the
bundled model, and half of everything the server spent on a typed text (py-spy on the running server,
`bench/serve.py`). Nearly all of those objects live as long as the process: modules, classes, functions, the
loaded models' modules and parameters.

`settle()` collects once and then freezes what is left (`gc.freeze()`): those objects move to a permanent
generation that collections skip, so the collection after a run walks only what was made since (well under 1 ms
instead of 210). What a run makes is still collected after the run, as before.

What freezing costs: an object frozen here that later becomes unreachable *inside a reference cycle* is never
freed by the cycle collector. Objects freed by reference counting — a model or an encoder result evicted from a
cache: no cycles, `tests/app/test_runtime.py` checks it — are freed as always. So `settle()` runs only when the
process has just made long-lived things: once after the app's imports, and after each model load.
"""

from __future__ import annotations

import gc
import threading
import time

from models.openmp import SPIN_COUNT, cap_spinning  # noqa: F401  # SPIN_COUNT: the cap, read by tests

from . import debug

_lock = threading.Lock()
_settled = False


def before_torch() -> None:
    """Cap OpenMP's spin-waiting (see the module's docstring); call before torch is imported."""
    cap_spinning()


def settle(why: str) -> None:
    """Collect, then freeze every object the process has now (see the module's docstring)."""
    with _lock:
        t0 = time.perf_counter()
        gc.collect()  # garbage first: anything frozen in a cycle would stay for good
        gc.freeze()
        if debug.ENABLED:
            debug.log.debug(
                "gc settled after %s: %d objects frozen in %.0f ms",
                why,
                gc.get_freeze_count(),
                1e3 * (time.perf_counter() - t0),
            )


def settle_once(why: str) -> None:
    """Settle the first time a process calls this (the app's imports done); do nothing afterwards."""
    global _settled
    with _lock:
        if _settled:
            return
        _settled = True
    settle(why)
