"""Explore: one head's attention for the current text."""

import streamlit as st

from ui.sidebar import current_encoder, current_output
from ui.state import t
from viz.heatmap import head_heatmap
from viz.overlays import add_mask_overlay


def main() -> None:
    st.title(t("explore.title"))
    out = current_output()
    enc = current_encoder() if out is not None else None
    if out is None or enc is None:
        return

    c = enc.config
    st.caption(t("explore.model_facts", name=enc.name, layers=c.n_layers, heads=c.n_heads, d_model=c.d_model,
                 d_k=c.d_k, tokens=out.seq, device=str(enc.device)))
    st.session_state["layer"] = min(int(st.session_state.get("layer", 0)), c.n_layers - 1)
    st.session_state["head"] = min(int(st.session_state.get("head", 0)), c.n_heads - 1)
    left, right = st.columns(2)
    layer = left.slider(t("common.layer"), 0, c.n_layers - 1, key="layer")
    head = right.slider(t("common.head"), 0, c.n_heads - 1, key="head")
    weights = out.attentions[layer, head].numpy()
    fig = head_heatmap(weights, out.tokens, title=t("explore.head_title", layer=layer, head=head))
    keep = out.keep.numpy()
    if not keep.all():
        add_mask_overlay(fig, keep, weights)
    st.plotly_chart(fig, width="stretch", key="head_heatmap")


main()
