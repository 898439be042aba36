"""The shared sidebar (model, device, text, pair, examples, mask, language) and the current result for pages."""

from __future__ import annotations

import streamlit as st
import torch

from models import AttnVizError, Encoder, EncoderOutput
from models.attention_file import AttentionMaps
from models.masks import Expectation, parse_expectation

from . import cache, presentation, source, state
from .i18n import LANGUAGES
from .state import EXAMPLES, t

MODEL_CHOICES = ("minilm", "bert-base-uncased", "bert-base-chinese", "random:minilm", "random:bert-base", "random:tiny")
CUSTOM = "custom"
MASK_KINDS = ("bidirectional", "causal", "window", "prefix", "chunk")
CUSTOM_MASK = "composed"


def _apply_example() -> None:
    key = st.session_state.get("example")
    if key in EXAMPLES:
        st.session_state["text"], st.session_state["text_b"] = EXAMPLES[key]
        if key == "chinese" and st.session_state.get("model") == "minilm":
            st.session_state["example_note"] = True


def _model_picker() -> None:
    current = state.get("model")
    choice_key = "model_choice"
    if choice_key not in st.session_state:
        st.session_state[choice_key] = current if current in MODEL_CHOICES else CUSTOM
    options = (*MODEL_CHOICES, CUSTOM)
    choice = st.selectbox(
        t("sidebar.model"),
        options,
        key=choice_key,
        format_func=lambda o: t(f"sidebar.model_choice.{o.replace(':', '_').replace('-', '_')}"),
        help=t("sidebar.model_help"),
    )
    if choice == CUSTOM:
        if "model_custom" not in st.session_state:
            st.session_state["model_custom"] = "" if current in MODEL_CHOICES else current
        typed = st.text_input(
            t("sidebar.model_custom"), key="model_custom", placeholder="bert-base-uncased  |  /path/to/folder"
        )
        st.session_state["model"] = typed.strip() or "minilm"
    else:
        st.session_state["model"] = choice


def _mask_picker() -> None:
    """Pick a mask: a single kind with its number, or any composed expectation typed out (causal+window:3).

    One grammar (models.masks.expectations) for the picker, --mask, --expect and encode(mask=...).
    """
    current = state.get("mask")
    exp = _parsed(current)
    terms = exp.terms if exp is not None else ()
    single = len(terms) <= 1 and all(t.kind in MASK_KINDS for t in terms)
    kind = (terms[0].kind if terms else "bidirectional") if single else CUSTOM_MASK
    if "mask_kind" not in st.session_state:
        st.session_state["mask_kind"] = kind
    kind = st.selectbox(
        t("sidebar.mask"),
        (*MASK_KINDS, CUSTOM_MASK),
        key="mask_kind",
        format_func=lambda k: t(f"sidebar.mask_kind.{k}"),
        help=t("sidebar.mask_help"),
    )
    if kind in ("window", "prefix", "chunk"):
        pkey = f"mask_{kind}"
        if pkey not in st.session_state:
            param = terms[0].value if single and terms and terms[0].kind == kind else None
            st.session_state[pkey] = param if isinstance(param, int) else {"window": 2, "prefix": 4, "chunk": 4}[kind]
        low = 1 if kind == "chunk" else 0
        value = st.number_input(t(f"sidebar.mask_param.{kind}"), min_value=low, max_value=511, step=1, key=pkey)
        st.session_state["mask"] = f"{kind}:{int(value)}"
    elif kind == CUSTOM_MASK:
        if "mask_custom" not in st.session_state:
            st.session_state["mask_custom"] = current if exp is not None and not single else "causal+window:3"
        typed = st.text_input(t("sidebar.mask_custom"), key="mask_custom", help=t("sidebar.mask_custom_help"))
        try:
            st.session_state["mask"] = parse_expectation(typed).name
        except AttnVizError as err:
            st.error(t("sidebar.mask_custom_bad", reason=str(err)))
            st.session_state["mask"] = "bidirectional"
    else:
        st.session_state["mask"] = kind


def _parsed(spec: object) -> Expectation | None:
    try:
        return parse_expectation(spec if isinstance(spec, str) else "", allow_empty=True)
    except AttnVizError:
        return None


def render() -> None:
    """Draw the sidebar; its widgets write the selections into st.session_state and the URL."""
    with st.sidebar:
        st.radio(t("sidebar.language"), list(LANGUAGES), key="lang", format_func=LANGUAGES.get, horizontal=True)
        presentation.sidebar_toggle()
        source.sidebar()
        if source.from_file():  # a file brings its own maps: no model, text or mask to pick
            state.sync_url()
            return
        _model_picker()
        devices = ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        if state.get("device") not in devices:
            st.session_state["device"] = "auto"
        st.selectbox(t("sidebar.device"), devices, key="device", help=t("sidebar.device_help"))
        if torch.cuda.is_available():
            st.selectbox(t("sidebar.dtype"), ["fp32", "bf16", "fp16"], key="dtype", help=t("sidebar.dtype_help"))
        else:
            st.session_state["dtype"] = "fp32"

        st.selectbox(
            t("sidebar.examples"),
            list(EXAMPLES),
            index=None,
            key="example",
            placeholder=t("sidebar.examples_placeholder"),
            format_func=lambda k: t(f"sidebar.example.{k}"),
            on_change=_apply_example,
        )
        st.text_area(t("sidebar.text"), key="text", height=110, help=t("sidebar.text_help"))
        st.text_area(t("sidebar.text_b"), key="text_b", height=70, help=t("sidebar.text_b_help"))
        if st.session_state.pop("example_note", False):
            st.info(t("sidebar.chinese_note"))
        _mask_picker()
    state.sync_url()


def current_encoder() -> Encoder | None:
    """Return the selected model, loading it with a spinner; on failure (or with a file as the source, which has
    no model) show why and return None."""
    if source.from_file():
        source.needs_model()
        return None
    sel = state.selection()
    try:
        with st.spinner(t("status.loading_model", model=sel.model)):
            return cache.model(sel)
    except AttnVizError as err:
        st.error(t("status.model_failed", model=sel.model, reason=str(err)))
        return None


def current_output(internals: bool = False) -> EncoderOutput | None:
    """Return the current text's EncoderOutput (cached), or None after showing a friendly message."""
    if source.from_file():
        source.needs_model()
        return None
    sel = state.selection()
    if not sel.text:
        st.info(t("status.empty_text"))
        return None
    enc = current_encoder()
    if enc is None:
        return None
    try:
        with st.spinner(t("status.encoding")):
            out = cache.encode(sel, internals)
    except AttnVizError as err:
        st.error(t("status.encode_failed", reason=str(err)))
        return None
    if out.truncated:
        st.warning(t("status.truncated", limit=out.seq, cut=out.truncated))
    if out.many_unknown:
        st.warning(t("status.unknown_tokens", n=out.n_unknown, total=out.seq))
    return out


def current_maps(internals: bool = False) -> EncoderOutput | AttentionMaps | None:
    """Return the maps every model-free view needs: the model's output for the text, or the uploaded file's."""
    return source.current_file() if source.from_file() else current_output(internals)
