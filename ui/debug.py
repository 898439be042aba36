"""The request path's debug log: one line per script run and per cached call (hit or miss, with the hit rate).

Off unless ATTENTION_LENS_DEBUG=1 (then to stderr, or to the file named by ATTENTION_LENS_DEBUG_FILE).
bench/serve.py turns it on to count script runs per typed text. The caches themselves are Streamlit's: this only
counts, by a thread-local flag that the cached body sets when it really runs (a miss).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("attention_lens")
ENABLED = os.environ.get("ATTENTION_LENS_DEBUG", "") not in ("", "0")
_lock = threading.Lock()
_stats: dict[str, list[int]] = {}  # name → [calls, misses], over every session of this server
_local = threading.local()

if ENABLED and not log.handlers:
    _file = os.environ.get("ATTENTION_LENS_DEBUG_FILE")
    _handler = logging.FileHandler(_file) if _file else logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.DEBUG)
    log.propagate = False


def script_run(what: str = "") -> None:
    """Log that a script run started (one per rerun of the app)."""
    if ENABLED:
        _local.started = time.thread_time()
        _local.started_process = time.process_time()
        log.debug("script run %s", what)


def script_done() -> None:
    """Log the CPU the script thread spent on this run (the app's code; not OpenMP's helpers, the event loop or
    Streamlit's work after the run). bench/serve.py reads it."""
    started = getattr(_local, "started", None)
    if ENABLED and started is not None:
        log.debug(
            "script done: %.1f ms CPU in the script thread, %.1f ms in the whole process meanwhile",
            1e3 * (time.thread_time() - started),
            1e3 * (time.process_time() - _local.started_process),
        )


def counted(name: str, cache: Callable[[F], F]) -> Callable[[F], F]:
    """Wrap a Streamlit cache decorator so that the debug log counts calls and misses of `name`.

    Usage: `@debug.counted("encode", st.cache_data(max_entries=8))` in place of `@st.cache_data(max_entries=8)`.
    """

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def body(*args: Any, **kwargs: Any) -> Any:
            _local.__dict__[name] = True  # the cache missed: the body runs
            return fn(*args, **kwargs)

        cached = cache(body)  # type: ignore[arg-type]  # wraps keeps the signature Streamlit hashes

        @functools.wraps(fn)
        def front(*args: Any, **kwargs: Any) -> Any:
            if not ENABLED:
                return cached(*args, **kwargs)
            _local.__dict__[name] = False
            result = cached(*args, **kwargs)
            missed = _local.__dict__.pop(name, False)
            with _lock:
                calls_misses = _stats.setdefault(name, [0, 0])
                calls_misses[0] += 1
                calls_misses[1] += int(missed)
                calls, misses = calls_misses
            log.debug(
                "cache %s %s: hit rate %d/%d = %.0f%%",
                name,
                "miss" if missed else "hit",
                calls - misses,
                calls,
                100 * (calls - misses) / calls,
            )
            return result

        front.clear = cached.clear  # type: ignore[attr-defined]
        return front  # type: ignore[return-value]

    return wrap


def stats() -> dict[str, tuple[int, int]]:
    """Return (calls, misses) per cached function counted so far in this process."""
    with _lock:
        return {k: (v[0], v[1]) for k, v in _stats.items()}
