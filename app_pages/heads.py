"""Heads: per-head statistics, pattern labels, redundancy between heads and head importance for the current text."""

import streamlit as st

from models.analysis.corpus import is_bert_base
from models.analysis.heads import HeadReport, analyse
from models.analysis.importance import Importance, head_importance, work_estimate
from ui import cache, state
from ui.heads_view import (
    duplicates_section,
    importance_section,
    labels_section,
    pairs_section,
    redundancy_section,
    shares_section,
    table_section,
)
from ui.sidebar import current_encoder, current_output
from ui.state import Selection, t

# Importance runs one pass per head (or 7 masked copies with a backward pass): automatic on a GPU, and on a
# CPU up to this many multiply-adds (a few seconds on 2 cores); behind a button above it. MiniLM: up to
# ~170 tokens; BERT-base: about a sentence with the proxy, the button with its masked-LM head.
AUTO_IMPORTANCE_WORK = 1e11


@st.cache_data(show_spinner=False, max_entries=16)
def head_report(sel: Selection) -> HeadReport:
    """Return statistics, labels and redundancy of the selection's text (numpy only, cached per selection)."""
    return analyse(cache.encode(sel, True), cache.model(sel).device)


@st.cache_data(show_spinner=False, max_entries=16)
def importance(sel: Selection) -> Importance:
    """Return head importance of the selection's text with its removal curve (cached per selection)."""
    return head_importance(cache.model(sel), cache.encode(sel, False))


def main() -> None:
    st.title(t("heads.title"))
    st.caption(t("heads.intro"))
    out = current_output(internals=True)
    enc = current_encoder() if out is not None else None
    if out is None or enc is None:
        return
    sel = state.selection()
    with st.spinner(t("heads.computing")):
        report = head_report(sel)
    c = enc.config
    st.caption(t("heads.facts", model=enc.name, layers=c.n_layers, heads=c.n_heads, tokens=out.seq))

    cheap = enc.device.type == "cuda" or work_estimate(enc, out.seq) <= AUTO_IMPORTANCE_WORK
    wanted = cheap or st.session_state.get("heads_importance_on", False)
    imp = None
    if wanted:
        with st.spinner(t("heads.computing_importance")):
            imp = importance(sel)

    labels_section(report)
    table_section(report, imp)
    redundancy_section(report, "heads")
    attn = out.attentions.numpy()
    duplicates_section(report, "heads")
    pairs_section(report, lambda i: (attn[i // c.n_heads, i % c.n_heads], list(out.tokens)), "heads")

    st.subheader(t("heads.importance.title"))
    if imp is None:
        st.info(t("heads.importance.slow", tokens=out.seq))
        if st.button(
            t("heads.importance.compute"), key="heads_importance_button", help=t("heads.importance.compute_help")
        ):
            st.session_state["heads_importance_on"] = True
            st.rerun()
    else:
        importance_section(report, imp, "heads")
    shares_section(report, is_bert_base(c.n_layers, c.n_heads, c.d_model), "heads")


main()
