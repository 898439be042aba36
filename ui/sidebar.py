"""The shared sidebar (model, device, text, pair, examples, mask, language) and the current result for pages."""

from __future__ import annotations

import streamlit as st
import torch

from models import AttnVizError, Capabilities, Encoder, EncoderOutput, ModelNotAllowedError, settings
from models.attention_file import AttentionMaps
from models.masks import Expectation, parse_expectation
from models.masks.expressions import is_predicate_expression, predicate_expression

from . import cache, presentation, source, state
from .i18n import LANGUAGES
from .safe import md
from .state import EXAMPLES, t

MODEL_CHOICES = (
    "minilm",
    "smollm2",
    "bert-base-uncased",
    "bert-base-chinese",
    "gpt2",
    "distilgpt2",
    "random:minilm",
    "random:bert-base",
    "random:tiny",
    "random:gpt2",
    "random:gpt2-tiny",
    "random:smollm2",
    "random:llama-tiny",
)
CUSTOM = "custom"
MASK_KINDS = ("bidirectional", "causal", "window", "prefix", "chunk")
CUSTOM_MASK = "composed"
# A causal model's own mask with nothing added: the picker's value where an encoder's is "bidirectional" (the mask
# both stand for). A value of its own, not only a label: the browser redraws a picked option's label only when
# its value changes, so "Bidirectional (BERT)" stayed on screen after switching to a decoder.
BUILT_IN = "built_in"


def _text_from_file() -> None:
    """A .txt upload becomes the text (a long one: up to the model's positions), within the text budget."""
    st.session_state.pop("text_file_error", None)
    upload = st.session_state.get("text_file")
    if upload is None:
        return
    cap = int(settings.limit("max_text_chars"))
    raw = upload.getvalue()[: 4 * cap + 4]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        st.session_state["text_file_error"] = t("sidebar.text_file_not_utf8")
        return
    if len(text) > cap:
        st.session_state["text_file_error"] = t("sidebar.text_file_too_long", n=f"{len(text):,}", cap=f"{cap:,}")
        return
    st.session_state["text"] = text


def _apply_example() -> None:
    key = st.session_state.get("example")
    if key in EXAMPLES:
        st.session_state["text"], st.session_state["text_b"] = EXAMPLES[key]
        if key == "chinese" and st.session_state.get("model") == "minilm":
            st.session_state["example_note"] = True


def shared_server() -> bool:
    """Return whether this server listens beyond this computer (then custom models need the operator's list)."""
    return not settings.is_loopback(st.get_option("server.address"))


def model_options() -> tuple[tuple[str, ...], bool]:
    """Return (the model specs the sidebar offers, whether a custom id or folder may be typed)."""
    allowed = settings.current().models
    if allowed is not None:
        return allowed, False
    return MODEL_CHOICES, not shared_server()


def _model_label(spec: str) -> str:
    if spec in (*MODEL_CHOICES, CUSTOM):
        return t(f"sidebar.model_choice.{spec.replace(':', '_').replace('-', '_')}")
    return spec  # the operator's own spec, from ATTENTION_LENS_MODELS


def _model_picker() -> None:
    current = state.get("model")
    offered, custom_ok = model_options()
    choice_key = "model_choice"
    if choice_key not in st.session_state:
        if current in offered or custom_ok:
            st.session_state[choice_key] = current if current in offered else CUSTOM
        else:  # a link asked for a model this server does not offer: refused, said once, the first one used
            st.session_state["model_refused"] = True
            st.session_state[choice_key] = offered[0]
    options = (*offered, CUSTOM) if custom_ok else offered
    choice = st.selectbox(
        t("sidebar.model"),
        options,
        key=choice_key,
        format_func=_model_label,
        help=t("sidebar.model_help"),
        on_change=lambda: st.session_state.pop("model_refused", None),
        accept_new_options=custom_ok,  # a folder or id typed into the box is taken as it is, no "Other…" first
    )
    if st.session_state.get("model_refused"):
        st.error(_refusal())
    if settings.current().models is None and shared_server():
        st.caption(t("sidebar.custom_off"))
    if custom_ok and choice not in options:  # typed into the box itself
        st.session_state["model"] = str(choice).strip() or "minilm"
    elif choice == CUSTOM:
        if "model_custom" not in st.session_state:
            st.session_state["model_custom"] = "" if current in MODEL_CHOICES else current
        typed = st.text_input(
            t("sidebar.model_custom"), key="model_custom", placeholder="bert-base-uncased  |  /path/to/folder"
        )
        st.session_state["model"] = typed.strip() or "minilm"
    else:
        st.session_state["model"] = choice


def _refusal() -> str:
    """Return the one refusal message: it never depends on whether the asked-for file or folder exists."""
    allowed = settings.current().models
    if allowed is not None:
        return t("status.model_refused", choices=md(", ".join(allowed)))
    return t("status.custom_refused")


MASK_PARAM_MAX = 511  # positions of a 512-token model, counted from 0


def _capabilities(spec: str) -> Capabilities:
    """Return what the spec's model can do, from its config; a spec this server refuses is not looked at."""
    try:
        settings.check_model(spec, presets=MODEL_CHOICES, shared=shared_server())
    except AttnVizError:
        return Capabilities()
    return cache.capabilities(spec)


model_capabilities = _capabilities  # for pages that name a model's own mask (Compare's run B)


def _mask_picker(decoder: bool = False) -> None:
    """Pick a mask: a single kind with its number, or any composed expectation typed out (causal+window:3).

    One grammar (models.masks.expectations) for the picker, --mask, --expect and encode(mask=...).
    """
    current = state.get("mask")
    typed_predicate = _predicate(current)  # a predicate expression over q_idx, kv_idx, b, h: a custom mask
    exp = None if typed_predicate else _parsed(current)
    terms = exp.terms if exp is not None else ()
    single = not typed_predicate and len(terms) <= 1 and all(t.kind in MASK_KINDS for t in terms)
    kind = (terms[0].kind if terms else "bidirectional") if single else CUSTOM_MASK
    param = terms[0].value if single and terms and isinstance(terms[0].value, int) else None
    if "mask_kind" not in st.session_state:  # first run: the mask came from a link or the default
        if exp is None and not typed_predicate:
            st.warning(t("sidebar.mask_unknown", given=md(str(current))[:200]))
            kind = "bidirectional"
        elif param is not None and param > MASK_PARAM_MAX:
            used = f"{kind}:{MASK_PARAM_MAX}"
            st.warning(t("sidebar.mask_clamped", given=md(current), kind=kind, high=MASK_PARAM_MAX, used=used))
            param = MASK_PARAM_MAX
        st.session_state["mask_kind"] = kind
    swap = {"bidirectional": BUILT_IN} if decoder else {BUILT_IN: "bidirectional"}
    st.session_state["mask_kind"] = swap.get(st.session_state["mask_kind"], st.session_state["mask_kind"])
    kind = st.selectbox(
        t("sidebar.mask"),
        (BUILT_IN if decoder else "bidirectional", *MASK_KINDS[1:], CUSTOM_MASK),
        key="mask_kind",
        format_func=lambda k: t(
            "sidebar.mask_kind.bidirectional_decoder" if k == BUILT_IN else f"sidebar.mask_kind.{k}"
        ),
        help=t("sidebar.mask_help_decoder" if decoder else "sidebar.mask_help"),
    )
    if kind in ("window", "prefix", "chunk"):
        pkey = f"mask_{kind}"
        if pkey not in st.session_state:
            own = param if single and terms and terms[0].kind == kind else None
            st.session_state[pkey] = own if own is not None else {"window": 2, "prefix": 4, "chunk": 4}[kind]
        low = 1 if kind == "chunk" else 0
        value = st.number_input(
            t(f"sidebar.mask_param.{kind}"), min_value=low, max_value=MASK_PARAM_MAX, step=1, key=pkey
        )
        st.session_state["mask"] = f"{kind}:{int(value)}"
    elif kind == CUSTOM_MASK:
        if "mask_custom" not in st.session_state:
            given = typed_predicate or (exp is not None and not single)
            st.session_state["mask_custom"] = current if given else "causal+window:3"
        typed = st.text_input(t("sidebar.mask_custom"), key="mask_custom", help=t("sidebar.mask_custom_help"))
        try:
            if is_predicate_expression(typed):  # checked by the restricted expression language, never eval'd
                predicate_expression(typed)
                st.session_state["mask"] = " ".join(typed.split())
            else:
                st.session_state["mask"] = parse_expectation(typed).name
        except AttnVizError as err:
            st.error(t("sidebar.mask_custom_bad", reason=str(err)))
            st.session_state["mask"] = "bidirectional"
    else:
        st.session_state["mask"] = "bidirectional" if kind == BUILT_IN else kind


def _predicate(spec: object) -> bool:
    """Return whether spec is a valid predicate expression (e.g. `(kv_idx <= q_idx) & (q_idx - kv_idx < 4)`)."""
    if not isinstance(spec, str) or not is_predicate_expression(spec):
        return False
    try:
        predicate_expression(spec)
    except AttnVizError:
        return False
    return True


def _parsed(spec: object) -> Expectation | None:
    try:
        return parse_expectation(spec if isinstance(spec, str) else "", allow_empty=True)
    except AttnVizError:
        return None


OWN_MODEL_PAGES = ("train",)  # pages that build their own model: the sidebar's model, text and mask do not apply


def render(page: str = "") -> None:
    """Draw the sidebar; its widgets write the selections into st.session_state and the URL."""
    with st.sidebar:
        if page in OWN_MODEL_PAGES:
            st.info(t("sidebar.not_here"))
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
        st.file_uploader(
            t("sidebar.text_file"),
            type=["txt"],
            key="text_file",
            on_change=_text_from_file,
            help=t("sidebar.text_file_help"),
        )
        if st.session_state.get("text_file_error"):
            st.error(st.session_state["text_file_error"])
        caps = _capabilities(state.get("model"))
        if caps.pairs:
            st.text_area(t("sidebar.text_b"), key="text_b", height=70, help=t("sidebar.text_b_help"))
        else:  # one text; the second sentence is kept (in the URL too) for when a pair model comes back
            st.caption(t("sidebar.decoder_note"))
        longest = max(len(state.get("text") or ""), len(state.get("text_b") or ""))
        if longest > state.URL_TEXT_CHARS:
            st.caption(t("sidebar.text_url_cut", n=f"{state.URL_TEXT_CHARS:,}", total=f"{longest:,}"))
        if st.session_state.pop("example_note", False):
            st.info(t("sidebar.chinese_note"))
        _mask_picker(caps.causal)
    state.sync_url()


def current_encoder() -> Encoder | None:
    """Return the selected model, loading it with a spinner; on failure (or with a file as the source, which has
    no model) show why and return None."""
    if source.from_file():
        source.needs_model()
        return None
    return encoder_for(state.selection())


def encoder_for(sel: state.Selection) -> Encoder | None:
    """Return a selection's model (the sidebar's, or a page's second run), held to the operator's list first;
    on failure show why and return None."""
    try:
        # The operator's list (or a shared server's presets) before anything is looked up on disk or the hub.
        settings.check_model(sel.model, presets=MODEL_CHOICES, shared=shared_server())
    except ModelNotAllowedError:
        st.error(_refusal())
        return None
    try:
        with st.spinner(t("status.loading_model", model=md(sel.model))):
            return cache.model(sel)
    except AttnVizError as err:
        st.error(t("status.model_failed", model=md(sel.model), reason=md(err)))
        return None


def current_output(internals: bool = False) -> EncoderOutput | None:
    """Return the current text's EncoderOutput (cached), or None after showing a friendly message."""
    if source.from_file():
        source.needs_model()
        return None
    return output_for(state.selection(), internals)


def output_for(sel: state.Selection, internals: bool = False) -> EncoderOutput | None:
    """Return a selection's EncoderOutput (cached: the sidebar's, or a page's second run), or None after showing a
    friendly message."""
    if not sel.text:
        st.info(t("status.empty_text"))
        return None
    enc = encoder_for(sel)
    if enc is None:
        return None
    place = st.empty()  # a long text's forward fills a progress bar here, layer by layer

    def progress(fraction: float) -> None:
        place.progress(min(1.0, fraction), text=t("status.encoding_long", pct=f"{100 * fraction:.0f}"))

    try:
        with st.spinner(t("status.encoding")):
            out = cache.encode(sel, internals, _progress=progress)
        place.empty()
    except AttnVizError as err:
        st.error(t("status.encode_failed", reason=md(err)))
        return None
    if out.truncated:
        st.warning(t("status.truncated", limit=out.seq, cut=out.truncated))
    if out.many_unknown:
        st.warning(t("status.unknown_tokens", n=out.n_unknown, total=out.seq))
    return out


def current_maps(internals: bool = False) -> EncoderOutput | AttentionMaps | None:
    """Return the maps every model-free view needs: the model's output for the text, or the uploaded file's."""
    return source.current_file() if source.from_file() else current_output(internals)
