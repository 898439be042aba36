"""The sidebar's source: a model (text through our code) or an attention file (maps from elsewhere, no model).

A file's maps are models.attention_file.AttentionMaps: the same names as a model's output (tokens, attentions,
kind, segments, n_layers, n_heads), plus q_tokens / k_tokens for cross-attention. The helpers below give pages
what differs between the two (key tokens, the mask, the cache key) so pages do not branch on the type.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st
from streamlit.errors import StreamlitDuplicateElementKey

from models import AttnVizError, settings
from models.attention_file import AttentionMaps, read

from . import results
from .safe import md
from .state import Selection, selection, t

SOURCES = ("model", "file")
FILE_TYPES = ["npz", "npy", "json", "safetensors", "pt", "pth", "bin"]
UPLOAD_KEY = "attn_upload"  # the uploader widget
FILE_KEY = "attn_file"  # {"name", "id", "data"}: the upload's bytes, kept while the user visits other pages
ITEM_KEY = "attn_item"  # which item of a batched file


def from_file() -> bool:
    return st.session_state.get("source", "model") == "file"


def _take_upload() -> None:
    """on_change of the uploader: keep the file's bytes (or forget them when the file is removed)."""
    up = st.session_state.get(UPLOAD_KEY)
    if up is None:
        st.session_state.pop(FILE_KEY, None)
    else:
        st.session_state[FILE_KEY] = {"name": up.name, "id": up.file_id, "data": up.getvalue()}


def use_model() -> None:
    """Switch the sidebar's source back to the model (a button's callback on pages that need one)."""
    st.session_state["source"] = "model"


def sidebar() -> None:
    """Draw the source picker; with a file, the uploader and the batch item (inside st.sidebar)."""
    if st.session_state.get("source") not in SOURCES:
        st.session_state["source"] = "model"
    st.radio(
        t("source.source"),
        SOURCES,
        key="source",
        horizontal=True,
        format_func=lambda s: t(f"source.{s}"),
        help=t("source.source_help"),
    )
    if not from_file():
        return
    mb = settings.current().max_upload_mb
    st.file_uploader(
        t("source.file"),
        type=FILE_TYPES,
        key=UPLOAD_KEY,
        on_change=_take_upload,
        help=t("source.file_help", mb=mb),
    )
    if FILE_KEY in st.session_state:
        st.caption(t("source.loaded", name=md(st.session_state[FILE_KEY]["name"])))
    st.number_input(t("source.item"), min_value=0, max_value=100_000, step=1, key=ITEM_KEY, help=t("source.item_help"))


# Maps are read once per upload and item, shared (read-only) by every page of the session, never pickled or copied
# on a rerun; they count against ATTENTION_LENS_CACHE_MB with every other result.
@results.cached
def _read(file_id: str, name: str, item: int, _data: bytes) -> AttentionMaps:
    return read(_data, name=name, item=item)


def current_file() -> AttentionMaps | None:
    """Return the uploaded file's maps, or None after saying what is missing or wrong (in the page's language)."""
    f = st.session_state.get(FILE_KEY)
    if not f:
        st.info(t("source.no_file", types=", ".join(f".{x}" for x in FILE_TYPES)))
        return None
    item = int(st.session_state.get(ITEM_KEY, 0) or 0)
    try:
        with st.spinner(t("source.reading", name=md(f["name"]))):
            maps = _read(f["id"], f["name"], item, f["data"])
    except AttnVizError as err:
        st.error(t("source.file_failed", name=md(f["name"]), reason=md(err)))
        return None
    for note in maps.notes:
        st.warning(t(f"source.note.{note.code}", **note.values))
    return maps


def needs_model() -> None:
    """Say that this page needs a model, with a button back to the model source: once per page, though several of
    its sections may ask (the Memory page's two model sections each do)."""
    note = st.empty()  # above the button, filled once the button is known to be this run's first
    try:
        st.button(t("source.switch_to_model"), key="switch_to_model", on_click=use_model, type="primary")
    except StreamlitDuplicateElementKey:  # raised before anything is drawn: an earlier section has said it
        return
    note.info(t("source.needs_model"))


# ---- what pages read the same way from a model's output and from a file ------------------------------------


def is_file(out: Any) -> bool:
    return isinstance(out, AttentionMaps)


def key_tokens(out: Any) -> list[str]:
    """Return the tokens of the key axis (columns): k_tokens for cross-attention, else the tokens."""
    return list(getattr(out, "k_tokens", None) or out.tokens)


def is_cross(out: Any) -> bool:
    return bool(getattr(out, "cross", False))


def is_causal(out: Any) -> bool:
    """Return whether query i sees keys 0…i only: the model's capability, or what a file's maps show."""
    caps = getattr(out, "capabilities", None)
    return bool(caps.causal) if caps is not None else bool(getattr(out, "causal", False))


def keep_of(out: Any) -> np.ndarray:
    """Return the (q_pos, k_pos) bool mask the maps came with (all True when a file carries none)."""
    keep = getattr(out, "keep", None)
    if keep is None:
        attn = out.attentions
        return np.ones(tuple(attn.shape[-2:]), dtype=bool)
    return np.asarray(keep, dtype=bool)


def result_key(out: Any) -> Selection:
    """Return the cache key of the current maps: the sidebar's selection, or the uploaded file and item."""
    if is_file(out):
        f = st.session_state.get(FILE_KEY) or {}
        return Selection(
            f"file:{f.get('id', '')}", "", "", f.get("name", ""), str(st.session_state.get(ITEM_KEY, 0)), ""
        )
    return selection()
