"""At most ATTENTION_LENS_HEAVY_SLOTS heavy computations at once per server; the others wait, and say so.

A class pasting at once then queues instead of swapping. A thread that already holds a slot (a cached analysis that
encodes its text first) does not take a second one, so nested heavy work cannot deadlock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import streamlit as st

from models import settings

from .state import t

_lock = threading.Lock()
_semaphore: threading.BoundedSemaphore | None = None
_size = 0
_held = threading.local()
waiting = 0  # sessions waiting right now (for the message and the load test)


def _slots() -> threading.BoundedSemaphore:
    global _semaphore, _size
    with _lock:
        n = int(settings.limit("heavy_slots"))
        if _semaphore is None or n != _size:
            _semaphore, _size = threading.BoundedSemaphore(n), n
        return _semaphore


@contextlib.contextmanager
def held_by_worker(cancel: threading.Event) -> Iterator[bool]:
    """Hold one heavy slot from a worker thread (it has no page to draw on): wait until one frees or `cancel` is
    set; yield whether the slot was taken (False: cancelled while waiting, nothing held)."""
    global waiting
    sem = _slots()
    got = sem.acquire(blocking=False)
    if not got:
        with _lock:
            waiting += 1
        try:
            while not got and not cancel.is_set():
                got = sem.acquire(timeout=0.25)
        finally:
            with _lock:
                waiting -= 1
    try:
        yield got
    finally:
        if got:
            sem.release()


def holding() -> bool:
    """Return whether this thread holds a heavy slot now (inside `heavy()`)."""
    return bool(getattr(_held, "depth", 0))


@contextlib.contextmanager
def heavy() -> Iterator[None]:
    """Hold one of the server's heavy slots while the block runs; show "waiting for a free slot" until one frees."""
    depth = getattr(_held, "depth", 0)
    if depth:
        _held.depth = depth + 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    sem = _slots()
    if not sem.acquire(blocking=False):
        global waiting
        note = st.empty()
        note.info(t("status.waiting_slot", slots=_size), icon=":material/hourglass_top:")
        with _lock:
            waiting += 1
        try:
            sem.acquire()
        finally:
            with _lock:
                waiting -= 1
            note.empty()
    _held.depth = 1
    try:
        yield
    finally:
        _held.depth = 0
        sem.release()
