"""Dynamic batching: sessions asking the same model at once are served together, each with exactly its own rows.

A class pasting texts in the same minute used to cost one forward per session, each on its own thread, all of them
fighting for the same two cores (and OpenMP's threads spinning while they waited). Now one worker thread per loaded
model (spec, device, dtype) takes what sessions ask of it: the first request wakes it, it waits `WINDOW_S` for more
to arrive (or until `MAX_BATCH` have), then runs them as padded batches through `models.batched.encode_many` (padding hides
the shorter texts' padded keys; batches are sized to fit ATTENTION_LENS_DENSE_MAPS_MB; a text too long to gain from
padding runs alone, in turn) and hands each session its
own result: its own rows, trimmed to its tokens, equal to the text run alone up to float rounding
(tests/app/test_batching.py). Triton's and Ray Serve's dynamic batching work the same way.

What is batched: the maps-only encode every page asks for first (`ui.cache.encode` without internals), for a text
whose maps fit the dense budget, under the model's own mask (bidirectional, causal). The rest — internals, long
texts with their progress bar, user masks — runs in the session's thread as before.

Bounds: a worker runs one batch at a time, so a loaded model has at most one batch in flight (its maps within the
dense budget); it does not take one of the server's heavy slots (ui.slots): a session's thread holding a slot may
be waiting on a result the worker is computing, and a worker waiting for that slot would never get it. A thread
that already holds a heavy slot (an analysis encoding its text) encodes inline, never through the worker.
If a batch fails (one bad text), each of its requests is run alone, so each session gets its own error.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from models import Encoder, EncoderOutput
from models.batched import encode_many

from . import debug

ENABLED = os.environ.get("ATTENTION_LENS_BATCHING", "1") != "0"  # 0: every session encodes alone (the bench's peer)
WINDOW_S = 0.005  # how long the worker waits for more requests after the first arrives
MAX_BATCH = 32  # requests taken into one gathering at most (encode_many splits them by the maps' budget)
MASKS = ("", "bidirectional", "causal")  # masks batched: the model's own (a position-only mask: rows slice alike)


@dataclass
class _Request:
    enc: Encoder
    text: str
    text_b: str | None
    mask: str | None
    done: threading.Event = field(default_factory=threading.Event)
    result: EncoderOutput | None = None
    error: BaseException | None = None


class Batcher:
    """One model's worker: gathers concurrent requests into padded batches (see the module's docstring)."""

    def __init__(self, name: str = ""):
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._thread: threading.Thread | None = None
        self._name = name
        self.batches: deque[int] = deque(maxlen=1000)  # requests per recent gathering, for the tests

    def encode(self, enc: Encoder, text: str, text_b: str | None = None, mask: str | None = None) -> EncoderOutput:
        """Return `enc.encode(text, text_b, mask=mask, hidden=False)`, run with whatever else arrives meanwhile."""
        req = _Request(enc, text, text_b or None, mask or None)
        with self._cond:
            self._queue.append(req)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=f"batcher {self._name}", daemon=True)
                self._thread.start()
            self._cond.notify()
        req.done.wait()
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def _take(self) -> list[_Request]:
        with self._cond:
            while not self._queue:
                self._cond.wait()
            first = time.perf_counter()
            while len(self._queue) < MAX_BATCH:
                left = WINDOW_S - (time.perf_counter() - first)
                if left <= 0:
                    break
                self._cond.wait(left)
            taken, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            return taken

    def _loop(self) -> None:
        while True:
            taken = self._take()
            self.batches.append(len(taken))
            groups: dict[Hashable, list[_Request]] = {}
            for r in taken:  # a batch shares one mask and is all pairs or all single texts
                groups.setdefault((id(r.enc), r.mask, r.text_b is not None), []).append(r)
            for reqs in groups.values():
                self._serve(reqs)
            del taken, groups, reqs, r  # an evicted model and the served results are not kept alive here

    def _serve(self, reqs: list[_Request]) -> None:
        t0 = time.perf_counter()
        forwards: list[int] = []  # texts per forward run (encode_many: short texts together, long ones alone)
        try:
            enc = reqs[0].enc
            pairs = reqs[0].text_b is not None
            seconds = [r.text_b for r in reqs] if pairs else None
            outs = encode_many(enc, [r.text for r in reqs], seconds, reqs[0].mask, forwards=forwards)
            for r, o in zip(reqs, outs, strict=True):
                r.result = o
        except Exception:  # noqa: BLE001 - one bad text must not fail the others: each runs alone, gets its own
            for r in reqs:
                try:
                    r.result = r.enc.encode(r.text, r.text_b, mask=r.mask, hidden=False)
                except Exception as err:  # noqa: BLE001 - handed to the session that asked
                    r.error = err
        finally:
            if debug.ENABLED:
                debug.log.debug(
                    "batch of %d served in %.0f ms, texts per forward %s",
                    len(reqs),
                    1e3 * (time.perf_counter() - t0),
                    forwards,
                )
            for r in reqs:
                if r.result is None and r.error is None:
                    r.error = RuntimeError("the batch was not served")
                r.done.set()


_lock = threading.Lock()
_batchers: dict[Hashable, Batcher] = {}


def batcher(key: Hashable) -> Batcher:
    """Return the worker for a loaded model (key: spec, device, dtype), made on first use."""
    with _lock:
        if key not in _batchers:
            _batchers[key] = Batcher(name=str(key[0]) if isinstance(key, tuple) else str(key))
        return _batchers[key]
