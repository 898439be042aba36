"""Heads: per-head statistics, pattern labels, redundancy between heads and head importance for the current text."""

import streamlit as st

from models import AttnVizError
from models.analysis.corpus import is_bert_base
from models.analysis.heads import HeadReport, analyse, analyse_maps
from models.analysis.importance import Importance, head_importance, work_estimate
from models.analysis.induction import induction_scores
from models.attention_file import AttentionMaps
from models.maps import pool_factor
from ui import ablate_view, cache, debug, lenses, long_text, results, source, state
from ui.heads_view import (
    duplicates_section,
    importance_section,
    labels_section,
    pairs_section,
    redundancy_section,
    section_tabs,
    shares_section,
    table_section,
)
from ui.sidebar import current_encoder, current_maps
from ui.state import Selection, t

# Importance runs one pass per head (or 7 masked copies with a backward pass): automatic on a GPU, and on a
# CPU up to this many multiply-adds (a few seconds on 2 cores); behind a button above it. MiniLM: up to
# ~170 tokens; BERT-base: about a sentence with the proxy, the button with its masked-LM head.
AUTO_IMPORTANCE_WORK = 1e11


@debug.counted("head_report", results.cached)
def head_report(sel: Selection) -> HeadReport:
    """Return statistics, labels and redundancy of the selection's text (numpy only, cached per selection).

    A decoder's report also carries its induction scores (one pass on a repeated random sequence) and labels.
    """
    enc = cache.model(sel)
    report = analyse(cache.encode(sel, not cache.long_text(sel)), enc.device)  # a long text: no CKA (internals)
    return report.with_induction(induction_scores(enc)) if enc.capabilities.causal else report


@debug.counted("importance", results.cached)
def importance(sel: Selection) -> Importance:
    """Return head importance of the selection's text with its removal curve (cached per selection)."""
    return head_importance(cache.model(sel), cache.encode(sel, False))


@debug.counted("file_report", results.cached)
def file_report(key: Selection, _maps: AttentionMaps) -> HeadReport:
    """Return statistics, labels and redundancy of an attention file's maps (cached per file and item)."""
    return analyse_maps(
        _maps.attentions, _maps.q_tokens, _maps.k_tokens, _maps.token_type_ids, model=_maps.model, causal=_maps.causal
    )


def file_main(maps: AttentionMaps) -> None:
    """Heads for maps from a file: everything but importance and CKA, which need the model itself."""
    with st.spinner(t("heads.computing")):
        report = file_report(source.result_key(maps), maps)
    st.caption(t("heads.facts", model=maps.model, layers=maps.n_layers, heads=maps.n_heads, tokens=maps.n_q))
    if not maps.cross:
        st.caption(t("source.causal") if maps.causal else t("source.not_causal"))
    tab = section_tabs()
    with tab["labels"]:
        labels_section(report, heading=False)
    with tab["table"]:
        table_section(report, None, heading=False)
    with tab["redundancy"]:
        redundancy_section(report, "heads", with_cka=False, heading=False)
        st.caption(t("source.cka_needs_model"))
    attn, H = maps.attentions, maps.n_heads
    with tab["dupes"]:
        duplicates_section(report, "heads", heading=False)
        pairs_section(report, lambda i: (attn[i // H, i % H], list(maps.q_tokens)), "heads", key_tokens=maps.k_tokens)
    with tab["importance"]:
        st.info(t("source.importance_needs_model"))
        st.button(t("source.switch_to_model"), key="heads_switch_to_model", on_click=source.use_model)
    with tab["shares"]:
        shares_section(report, False, "heads", heading=False)


def long_main(out, enc, sel: Selection) -> None:
    """Heads for a long text: exact statistics and labels, redundancy on pooled maps, no importance."""
    with st.spinner(t("heads.computing")):
        report = head_report(sel)
    c = enc.config
    long_text.note(out)
    st.caption(t("heads.facts", model=enc.name, layers=c.n_layers, heads=c.n_heads, tokens=out.seq))
    tab = section_tabs()
    with tab["labels"]:
        labels_section(report, heading=False)
    with tab["table"]:
        table_section(report, None, heading=False)
    with tab["redundancy"]:
        st.caption(t("heads.long_pooled", f=report.pooled))
        redundancy_section(report, "heads", with_cka=False, heading=False)
    tiles = long_text.pooled(sel, long_text.TILE, "max", out)
    f = pool_factor(out.seq, out.seq, long_text.TILE)
    labels, _ = long_text.block_labels(list(out.display_tokens or out.tokens), f, out.seq)
    with tab["dupes"]:
        duplicates_section(report, "heads", heading=False)
        pairs_section(report, lambda i: (tiles[i // c.n_heads, i % c.n_heads], labels[: tiles.shape[-1]]), "heads")
    with tab["importance"]:
        st.info(t("heads.importance.long", tokens=f"{out.seq:,}"))
    with tab["shares"]:
        cls_sep = enc.capabilities.special_roles == "cls_sep"
        shares_section(report, cls_sep and is_bert_base(c.n_layers, c.n_heads, c.d_model), "heads", heading=False)


def main() -> None:
    st.title(t("heads.title"))
    st.caption(t("heads.intro"))
    sel = state.selection()
    try:
        internals = not source.from_file() and bool(sel.text) and not cache.long_text(sel)
    except Exception:  # noqa: BLE001 - a model that does not load says why below, in current_maps
        internals = True
    maps = current_maps(internals=internals)
    if isinstance(maps, AttentionMaps):
        file_main(maps)
        return
    out = maps
    enc = current_encoder() if out is not None else None
    if out is None or enc is None:
        return
    sel = state.selection()
    if out.on_demand:
        return long_main(out, enc, sel)
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

    try:  # what each head passes on (the value-weighted lens; ui/lenses.py), a column to rank heads by
        output_norm = lenses.weighted(sel).output_norm
    except AttnVizError:
        output_norm = None  # over the derived-maps budget: the table goes without it
    tab = section_tabs()
    with tab["labels"]:
        labels_section(report, heading=False)
    with tab["table"]:
        ablation = ablate_view.for_table(sel, enc)  # the "ablate" columns, on demand (a button until asked)
        table_section(report, imp, output_norm, heading=False, ablation=ablation)
    with tab["redundancy"]:
        redundancy_section(report, "heads", heading=False)
    attn = out.attentions.numpy()
    with tab["dupes"]:
        duplicates_section(report, "heads", heading=False)
        pairs_section(report, lambda i: (attn[i // c.n_heads, i % c.n_heads], list(out.display_tokens)), "heads")
    with tab["importance"]:
        if imp is None:
            st.info(t("heads.importance.slow", tokens=out.seq))
            if st.button(
                t("heads.importance.compute"), key="heads_importance_button", help=t("heads.importance.compute_help")
            ):
                st.session_state["heads_importance_on"] = True
                st.rerun()
        else:
            importance_section(report, imp, "heads")
        ablate_view.section(sel, enc)  # each head (and key/value group) removed: ΔKL of the next token
    with tab["shares"]:
        cls_sep = enc.capabilities.special_roles == "cls_sep"
        shares_section(report, cls_sep and is_bert_base(c.n_layers, c.n_heads, c.d_model), "heads", heading=False)


main()
