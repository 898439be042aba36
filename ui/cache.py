"""Cached loaders. The model and the encoder's results are shared resources, never mutated after they are made.

Every page gets the current EncoderOutput from `encode`, keyed by the sidebar's `Selection` (model, device, dtype,
text, text_b, mask) and internals: switching pages never re-encodes, and a second session with the same text hits
the cache. Keys are short tuples of strings; no array is ever hashed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import streamlit as st

from models import Capabilities, Encoder, EncoderOutput, load_encoder, settings, spec_capabilities

from . import batching, debug, results, runtime, slots
from .state import Selection


@debug.counted("encoder", st.cache_resource(show_spinner=False, max_entries=3))
def encoder(spec: str, device: str, dtype: str) -> Encoder:
    """Return the loaded model (errors are not cached: a fixed spec is retried)."""
    with slots.heavy():
        enc = load_encoder(spec, device=device, dtype=dtype)
    runtime.settle("loading a model")  # its modules and parameters live as long as the cache keeps it
    return enc


@st.cache_data(show_spinner=False, max_entries=32, ttl=600)
def capabilities(spec: str) -> Capabilities:
    """Return what a spec's model can do, from its config alone (no weights loaded)."""
    return spec_capabilities(spec)


def long_text(sel: Selection) -> bool:
    """Return whether the selection's text is long enough for maps on demand (no internals, no importance)."""
    return _long_text(sel, settings.limit("dense_maps_mb"))


@functools.lru_cache(maxsize=64)
def _long_text(sel: Selection, dense_maps_mb: float) -> bool:
    # Asked twice for every new text (the encode's guard, then the encode) and by pages: each asking tokenised the
    # text again (0.7 ms for 120 tokens). Keyed by the budget too, so a changed ATTENTION_LENS_DENSE_MAPS_MB counts.
    enc = model(sel)
    return not enc.fits_dense(sel.text, sel.text_b if enc.capabilities.pairs else None)


def model(sel: Selection) -> Encoder:
    """Return the selection's loaded model."""
    return encoder(sel.model, sel.device, sel.dtype)


def batched(sel: Selection, internals: bool = False) -> bool:
    """Return whether this encode goes through the model's batching worker (ui.batching): the maps-only encode of
    a text that fits the dense budget, under the model's own mask, asked by a thread holding no heavy slot."""
    return (
        not internals and batching.ENABLED and sel.mask in batching.MASKS and not slots.holding() and not long_text(sel)
    )


def _guard(args: dict) -> AbstractContextManager:
    """A batched encode waits for its worker without a heavy slot (see ui.batching); the rest holds one."""
    return nullcontext() if batched(args["sel"], args["internals"]) else slots.heavy()


# Shared, not pickled: cache_data would pickle the result on store and unpickle a private copy on every call —
# ~1 s of every rerun (a slider moved) at 512 tokens on BERT-base. Shared results are never mutated: pages and
# analyses read them (the same contract as the model). ui.results bounds them, with every other result, by bytes.
@debug.counted("encode", lambda fn: results.cached(fn, guard=_guard))
def encode(sel: Selection, internals: bool = False, _progress: Callable[[float], None] | None = None) -> EncoderOutput:
    """Return the encoder's output for the selection's text (internals adds Q, K, V, scores and context).

    _progress: told the fraction of layers done while a long text's forward runs (not part of the key)."""
    enc = model(sel)
    text_b = sel.text_b or None if enc.capabilities.pairs else None  # one-text models: the sidebar hides text_b
    # hidden=False: no page reads the last hidden state, so the last layer stops at its attention (~10/12 of
    # that layer's matrix work saved: 14 % of the bundled model's, 7 % of BERT-base's), same maps.
    if batched(sel, internals):  # served with the other sessions asking this model now (ui.batching)
        return batching.batcher((sel.model, sel.device, sel.dtype)).encode(enc, sel.text, text_b, sel.mask)
    return enc.encode(sel.text, text_b, mask=sel.mask, internals=internals, hidden=False, progress=_progress)
