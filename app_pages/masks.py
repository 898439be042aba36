"""Masks: check an attention mask (an example, an expression or an uploaded file) and see it over the attention."""

from __future__ import annotations

import numpy as np
import streamlit as st

from models import AttnVizError
from models.analysis.mask_checker import EXAMPLES, MaskReport, example_expect
from models.masks import CONVENTIONS
from ui import controls, state
from ui.figures import HALF_PX, heatmap_words
from ui.mask_report import checked, show_report
from ui.safe import md
from ui.sidebar import current_encoder, current_output
from ui.state import t
from viz.heatmap import head_heatmap
from viz.overlays import AGREEMENT, add_mask_overlay, mask_agreement

SOURCES = ("example", "expression", "file")
EXPECT_KINDS = ("causal", "bidirectional", "padding", "window", "prefix", "causal+padding", "composed")
DEFAULT_BATCH = "Too tired."
# Page widgets whose values should survive a visit to another page (the file uploader cannot be restored).
KEPT = (
    "mc_source",
    "mc_example",
    "mc_expr",
    "mc_convention",
    "mc_expect_kind",
    "mc_param",
    "mc_expect_text",
    "mc_batch",
    "mc_item",
)


def _apply_example(key: str, seq: int) -> None:
    """Put an example's expression, convention and expectation into the widgets (before they are drawn)."""
    expr, convention, _, _ = EXAMPLES[key]
    expect = example_expect(key, seq)
    kind, _, param = expect.partition(":")
    st.session_state["mc_expr"] = expr
    st.session_state["mc_convention"] = convention
    if expect in EXPECT_KINDS or (kind in ("window", "prefix") and param.isdigit()):
        st.session_state["mc_expect_kind"] = kind
        if param:
            st.session_state["mc_param"] = int(param)
    else:
        st.session_state["mc_expect_kind"] = "composed"
        st.session_state["mc_expect_text"] = expect


def _mask_inputs(seq: int) -> tuple[str | bytes | None, str, str, str]:
    """Draw the mask pickers; return (mask: expression or file bytes, file name, convention, expectation)."""
    for key in KEPT:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    if st.session_state.get("mc_example") not in EXAMPLES:
        st.session_state["mc_example"] = "ok_tril"
    if "mc_expr" not in st.session_state:
        _apply_example(st.session_state["mc_example"], seq)
    source = st.radio(
        t("masks.source"), SOURCES, key="mc_source", horizontal=True, format_func=lambda s: t(f"masks.source_kind.{s}")
    )
    mask: str | bytes | None = None
    name = ""
    if source == "example":
        key = st.selectbox(
            t("masks.example_label"),
            list(EXAMPLES),
            key="mc_example",
            format_func=lambda k: ("✓ " if EXAMPLES[k][3] else "✗ ") + t(f"masks.example.{k}"),
        )
        _apply_example(key, seq)  # the example fixes convention and expectation (shown, not editable)
        st.caption(t(f"masks.lesson.{key}"))
        mask = EXAMPLES[key][0]
        st.code(mask, language="python")
    elif source == "expression":
        mask = st.text_input(t("masks.expression"), key="mc_expr", help=t("masks.expression_help")).strip() or None
    else:
        up = st.file_uploader(
            t("masks.upload"), type=["npy", "npz", "pt", "pth"], key="mc_file", help=t("masks.upload_help")
        )
        if up is not None:
            mask, name = up.getvalue(), up.name
    fixed = source == "example"
    left, mid, right = st.columns(3)
    st.session_state.setdefault("mc_convention", "keep")
    st.session_state.setdefault("mc_expect_kind", "causal")
    convention = left.selectbox(
        t("masks.convention"),
        CONVENTIONS,
        key="mc_convention",
        disabled=fixed,
        format_func=lambda c: t(f"masks.convention_kind.{c}"),
        help=t("masks.convention_help"),
    )
    kind = mid.selectbox(
        t("masks.expect"),
        EXPECT_KINDS,
        key="mc_expect_kind",
        disabled=fixed,
        format_func=lambda k: t(f"masks.expect_kind.{k.replace('+', '_')}"),
        help=t("masks.expect_help"),
    )
    expect = kind
    if kind in ("window", "prefix"):
        st.session_state.setdefault("mc_param", 2)
        value = right.number_input(
            t(f"masks.param.{kind}"), min_value=0, max_value=511, step=1, key="mc_param", disabled=fixed
        )
        expect = f"{kind}:{int(value)}"
    elif kind == "composed":
        st.session_state.setdefault("mc_expect_text", "causal+window:3")
        expect = right.text_input(
            t("masks.expect_text"), key="mc_expect_text", disabled=fixed, help=t("masks.expect_text_help")
        ).strip()
    return mask, name, convention, expect


def _figures(report: MaskReport) -> None:
    B = report.keep.shape[0]
    item = 0
    if B > 1:
        padded = [int((~report.real[b]).sum()) for b in range(B)]
        if st.session_state.get("mc_item") not in range(B):
            st.session_state["mc_item"] = int(np.argmax(padded))  # the most padded sentence shows padding best
        item = st.selectbox(
            t("masks.item"),
            list(range(B)),
            key="mc_item",
            format_func=lambda b: t("masks.item_label", n=b + 1, pads=padded[b]),
        )
    L, H = report.attentions.shape[1], report.attentions.shape[2]
    layer, head = controls.layer_head(*st.columns(2), L, H)

    tokens = report.tokens[item]
    weights = report.attentions[item, layer, head]
    expected, judged = report.expected[item], report.judged[item]
    keep = report.keep[item, head if report.keep.shape[1] > 1 else 0]
    left, right = st.columns(2)
    with left:
        fig = head_heatmap(
            weights,
            tokens,
            title=t("masks.attention_title", layer=layer, head=head),
            words=heatmap_words(),
            width_hint=HALF_PX,
        )
        add_mask_overlay(fig, expected | ~judged, weights)
        st.plotly_chart(fig, width="stretch", key="mc_attention")
        st.caption(t("masks.attention_caption", expect=report.expect))
    with right:
        labels = {k: t(f"masks.agree.{k}") for k in AGREEMENT}
        fig = mask_agreement(
            keep,
            expected,
            tokens,
            judged,
            labels,
            title=t("masks.grid_title", convention=report.declared, expect=report.expect),
        )
        st.plotly_chart(fig, width="stretch", key="mc_grid")
        st.caption(t("masks.grid_caption"))


def main() -> None:
    st.title(t("masks.title"))
    st.caption(t("masks.intro"))
    out = current_output()
    enc = current_encoder() if out is not None else None
    if out is None or enc is None:
        return

    mask, file_name, convention, expect = _mask_inputs(out.seq)
    sel = state.selection()
    text, text_b = sel.text, sel.text_b
    texts, texts_b = [text], ([text_b] if text_b else None)
    if "padding" in expect:
        st.session_state.setdefault("mc_batch", DEFAULT_BATCH)
        extra = st.text_area(t("masks.batch"), key="mc_batch", height=80, help=t("masks.batch_help"))
        texts += [line.strip() for line in extra.splitlines() if line.strip()]
        if text_b:
            st.info(t("masks.pair_ignored"))
        texts_b = None
    if mask is None:
        st.info(t("masks.need_mask"))
        return

    try:
        with st.spinner(t("masks.checking")):
            report = checked(
                sel.model_only(),
                tuple(texts),
                tuple(texts_b) if texts_b else None,
                mask,
                file_name,
                convention,
                expect,
            )
    except AttnVizError as err:
        st.error(t("masks.bad_mask", reason=md(err)))
        return

    show_report(report)
    _figures(report)
    with st.expander(t("masks.conventions_title")):
        st.markdown(t("masks.conventions_body"))


main()
