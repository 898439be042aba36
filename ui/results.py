"""One cache for every result the app computes, shared by all sessions and bounded by bytes (ATTENTION_LENS_CACHE_MB).

`@results.cached` replaces `st.cache_data` for results: the key is the function and its arguments (those whose name
starts with `_` are left out, as with st.cache_data; the rest are short hashable tuples such as a Selection), a hit
returns the stored object itself (results are never mutated; no pickled copy per hit), and the least recently used
results go first when all of them together hold more bytes than the budget. A miss computes inside one of the
server's heavy slots (ui.slots), unless the function's guard says otherwise (ui.cache.encode's batched path waits
for its model's worker instead: ui.batching); two sessions asking for the same result at once compute it once.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

import numpy as np
import torch
from plotly.basedatatypes import BaseFigure

from models import settings

from . import slots

T = TypeVar("T")
_SCALARS = frozenset({int, float, bool, complex, type(None)})


def nbytes(obj: Any) -> int:
    """Return the bytes a result holds: tensors' storages (each counted once), arrays, strings, and what contains them."""
    seen: set[int] = set()

    def walk(x: Any, depth: int) -> int:
        if depth > 8 or id(x) in seen:
            return 0
        seen.add(id(x))
        kind = type(x)
        if kind in _SCALARS:  # the commonest leaves first: a figure's lists hold hundreds of numbers
            return 32
        if kind is str or kind is bytes:
            return sys.getsizeof(x)
        if kind is list or kind is tuple:
            return 64 + sum(walk(v, depth + 1) for v in x)
        if kind is dict:
            return sum(walk(k, depth + 1) + walk(v, depth + 1) for k, v in x.items())
        if isinstance(x, torch.Tensor):
            s = x.untyped_storage()
            if s.data_ptr() in seen:
                return 0
            seen.add(s.data_ptr())
            return s.nbytes()
        if isinstance(x, np.ndarray):
            return int(x.nbytes)
        if isinstance(x, str | bytes):
            return sys.getsizeof(x)
        if isinstance(x, BaseFigure):
            # What a figure weighs is its traces' and layout's properties (plain dicts and lists, the overview's
            # data URI among them); its trace and layout objects, validators and callbacks only point into them.
            return 64 + walk(x._data, depth + 1) + walk(x._layout, depth + 1) + walk(x._frame_objs, depth + 1)
        if isinstance(x, dict):
            return sum(walk(k, depth + 1) + walk(v, depth + 1) for k, v in x.items())
        if isinstance(x, list | tuple | set | frozenset):
            return 64 + sum(walk(v, depth + 1) for v in x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return 64 + sum(walk(getattr(x, f.name, None), depth + 1) for f in dataclasses.fields(x))
        if hasattr(x, "__dict__") and not isinstance(x, type | torch.nn.Module):
            return 64 + sum(walk(v, depth + 1) for v in vars(x).values())
        return 32

    return walk(obj, 0)


class ByteCache:
    """Least-recently-used results, evicted by bytes; thread-safe; one computation per key at a time."""

    def __init__(self, cap_bytes: Callable[[], int]):
        self._cap = cap_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._pending: dict[Hashable, threading.Lock] = {}
        self.total = 0  # bytes held now
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._items)

    def _lookup(self, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return True, self._items[key][0]
            return False, None

    def get(
        self, key: Hashable, compute: Callable[[], T], guard: Callable[[], AbstractContextManager[Any]] = nullcontext
    ) -> T:
        """Return the cached result for key, computing (and storing) it on a miss. Errors are not cached.

        guard: entered around a miss (the server's heavy slot) *before* the key's gate, so that a thread waiting on a
        gate never holds what the computing thread needs.
        """
        found, value = self._lookup(key)
        if found:
            return value
        with guard():
            return self._compute(key, compute)

    def _compute(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            gate = self._pending.setdefault(key, threading.Lock())
        with gate:  # a second session asking for the same key waits for the first, then hits
            found, value = self._lookup(key)
            if found:
                return value
            try:
                value = compute()
            finally:
                with self._lock:
                    self._pending.pop(key, None)
            self.put(key, value)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        size = nbytes(value)
        cap = self._cap()
        with self._lock:
            self.misses += 1
            if key in self._items:
                self.total -= self._items.pop(key)[1]
            if size > cap:
                return  # larger than the whole budget: used once, never kept
            self._items[key] = (value, size)
            self.total += size
            while self.total > cap and self._items:
                _, (_, n) = self._items.popitem(last=False)
                self.total -= n
                self.evictions += 1

    def clear(self, name: str | None = None) -> None:
        """Forget every result, or only those of one cached function (keys starting with its name)."""
        with self._lock:
            for key in [k for k in self._items if name is None or (isinstance(k, tuple) and k[:1] == (name,))]:
                self.total -= self._items.pop(key)[1]


CACHE = ByteCache(lambda: settings.current().cache_bytes)


def _keyable(v: Any) -> Any:
    """Return v, or a digest for long bytes (an uploaded file): the key never keeps the file alive."""
    if isinstance(v, bytes) and len(v) > 1024:
        return ("sha256", hashlib.sha256(v).hexdigest())
    return v


def cached(
    fn: Callable[..., T], guard: Callable[[dict[str, Any]], AbstractContextManager[Any]] | None = None
) -> Callable[..., T]:
    """Cache fn's results in the shared byte-bounded cache (arguments named `_x` are not part of the key).

    guard: given the call's arguments, what to hold around a miss (default: one of the server's heavy slots)."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        key = (name, *((k, _keyable(v)) for k, v in bound.arguments.items() if not k.startswith("_")))
        hold = slots.heavy if guard is None else functools.partial(guard, bound.arguments)
        return CACHE.get(key, lambda: fn(*args, **kwargs), guard=hold)

    wrapper.clear = lambda: CACHE.clear(name)  # type: ignore[attr-defined]  # as st.cache_data's .clear()
    return wrapper
