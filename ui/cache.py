"""Cached loaders. The model is a shared resource (never mutated after load); results are cached data.

Every page gets the current EncoderOutput from `encode`, keyed by the sidebar's `Selection` (model, device, dtype,
text, text_b, mask) and internals: switching pages never re-encodes, and a second session with the same text hits
the cache. Keys are short tuples of strings; no array is ever hashed.
"""

from __future__ import annotations

import streamlit as st

from models import Encoder, EncoderOutput, load_encoder

from .state import Selection


@st.cache_resource(show_spinner=False, max_entries=3)
def encoder(spec: str, device: str, dtype: str) -> Encoder:
    """Return the loaded model (errors are not cached: a fixed spec is retried)."""
    return load_encoder(spec, device=device, dtype=dtype)


def model(sel: Selection) -> Encoder:
    """Return the selection's loaded model."""
    return encoder(sel.model, sel.device, sel.dtype)


# A 512-token BERT-base result is ~150 MB of attention (~350 MB with internals): keep a handful, not dozens.
@st.cache_data(show_spinner=False, max_entries=8)
def encode(sel: Selection, internals: bool = False) -> EncoderOutput:
    """Return the encoder's output for the selection's text (internals adds Q, K, V, scores and context)."""
    return model(sel).encode(sel.text, sel.text_b or None, mask=sel.mask, internals=internals)
