"""Cached loaders. The model and the encoder's results are shared resources, never mutated after they are made.

Every page gets the current EncoderOutput from `encode`, keyed by the sidebar's `Selection` (model, device, dtype,
text, text_b, mask) and internals: switching pages never re-encodes, and a second session with the same text hits
the cache. Keys are short tuples of strings; no array is ever hashed.
"""

from __future__ import annotations

import streamlit as st

from models import Capabilities, Encoder, EncoderOutput, load_encoder, spec_capabilities

from . import debug, results, runtime, slots
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


def model(sel: Selection) -> Encoder:
    """Return the selection's loaded model."""
    return encoder(sel.model, sel.device, sel.dtype)


# Shared, not pickled: cache_data would pickle the result on store and unpickle a private copy on every call —
# ~1 s of every rerun (a slider moved) at 512 tokens on BERT-base. Shared results are never mutated: pages and
# analyses read them (the same contract as the model). ui.results bounds them, with every other result, by bytes.
@debug.counted("encode", results.cached)
def encode(sel: Selection, internals: bool = False) -> EncoderOutput:
    """Return the encoder's output for the selection's text (internals adds Q, K, V, scores and context)."""
    enc = model(sel)
    text_b = sel.text_b or None if enc.capabilities.pairs else None  # one-text models: the sidebar hides text_b
    # hidden=False: no page reads the last hidden state, so the last layer stops at its attention (~10/12 of
    # that layer's matrix work saved: 14 % of the bundled model's, 7 % of BERT-base's), same maps.
    return enc.encode(sel.text, text_b, mask=sel.mask, internals=internals, hidden=False)
