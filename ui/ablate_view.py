"""Heads page: what removing each head (and each key/value group of a grouped-query model) does to the next-token
prediction — models.analysis.ablate.sweep, the measure of `python -m models ablate`, behind a button (one forward
per few heads), cached per selection in ui.results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from models import AttnVizError, Encoder
from models.analysis.ablate import Sweep, sweep

from . import cache, debug, results
from .safe import md
from .state import Selection, t


@debug.counted("ablate", results.cached)
def ablations(sel: Selection) -> Sweep:
    """Return every head's (and key/value group's) ablation on the selection's text."""
    return sweep(cache.model(sel), sel.text)


def table(s: Sweep) -> pd.DataFrame:
    """Return one row per unit, the largest mean ΔKL first."""
    order = np.argsort(-s.mean_kl, kind="stable")
    return pd.DataFrame(
        {
            t("ablate.col.unit"): [s.names[i] for i in order],
            t("ablate.col.mean"): s.mean_kl[order],
            t("ablate.col.low"): s.ci95[order, 0],
            t("ablate.col.high"): s.ci95[order, 1],
            t("ablate.col.last"): s.last_kl[order],
            t("ablate.col.logit"): s.logit_diff[order],
        }
    )


def heads_only(s: Sweep, n_heads: int) -> Sweep:
    """Return the sweep's single-head units (layer-major, as the Heads table's rows), without key/value groups."""
    n = sum(1 for name in s.names if not name.startswith("KV "))  # sweep_units: every head first, then the groups
    assert n % n_heads == 0, (n, n_heads)
    return Sweep(s.names[:n], s.units[:n], s.mean_kl[:n], s.ci95[:n], s.last_kl[:n], s.logit_diff[:n])


def for_table(sel: Selection, enc: Encoder) -> Sweep | None:
    """The Heads table's "ablate" columns: measured once asked (here or in the Importance tab), else a button.

    An encoder has no next-token prediction to measure: its removal measure is the Importance column.
    """
    if enc.capabilities.lm_head != "next_token":
        st.caption(t("ablate.column_encoder"))
        return None
    if not st.session_state.get("heads_ablate_on", False):
        if st.button(t("ablate.column_compute"), key="heads_ablate_column_button", help=t("ablate.column_help")):
            st.session_state["heads_ablate_on"] = True
            st.rerun()
        return None
    try:
        with st.spinner(t("ablate.computing")):
            return heads_only(ablations(sel), enc.config.n_heads)
    except AttnVizError as err:
        st.error(t("ablate.failed", reason=md(err)))
        return None


def section(sel: Selection, enc: Encoder) -> None:
    """Draw the ablation section (decoders only: the measure is the next-token distribution)."""
    st.subheader(t("ablate.title"))
    if enc.capabilities.lm_head != "next_token":
        st.caption(t("ablate.needs_decoder"))
        return
    st.caption(t("ablate.intro"))
    if not st.session_state.get("heads_ablate_on", False):
        if st.button(t("ablate.compute"), key="heads_ablate_button"):
            st.session_state["heads_ablate_on"] = True
            st.rerun()
        return
    try:
        with st.spinner(t("ablate.computing")):
            s = ablations(sel)
    except AttnVizError as err:
        st.error(t("ablate.failed", reason=md(err)))
        return
    st.dataframe(table(s), hide_index=True, width="stretch", key="heads_ablate_table")
    if enc.capabilities.grouped:
        st.caption(t("ablate.grouped_note", group=enc.capabilities.group_size))
