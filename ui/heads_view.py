"""Sections the Heads and Corpus pages share: labels, the statistics table, redundancy, near-duplicates,
importance and per-layer shares. Streamlit only: numbers come from models.analysis.heads / models.analysis.importance, figures
from viz.heads / viz.redundancy, words from ui/locales/*/heads.toml.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from models.analysis.ablate import Sweep
from models.analysis.corpus import PUBLISHED, our_published_figures
from models.analysis.heads import (
    DECODER_LABELS,
    LABELS,
    THRESHOLDS,
    HeadReport,
    closest_pairs,
    near_duplicates_per_layer,
    nearest,
)
from models.analysis.importance import Importance
from viz.heads import importance_bars, importance_vs_redundancy, label_grid, removal_curve, shares_by_layer
from viz.redundancy import head_map, near_duplicate_bars, pair_maps, redundancy_heatmap

from .figures import FULL_PX, heatmap_words
from .safe import md
from .state import t

# The Heads page's sections, in order: one tab each (a projector shows one at a time, not a 7,000-pixel scroll).
SECTIONS = ("labels", "table", "redundancy", "dupes", "importance", "shares")


def section_tabs() -> dict[str, Any]:
    """Draw one tab per section, with short names that all fit in one row at 1280 px; return the tabs by section."""
    return dict(zip(SECTIONS, st.tabs([t(f"heads.tab.{k}") for k in SECTIONS]), strict=True))


DUPLICATE_THRESHOLD = 0.05  # nats per query row: below this two heads' maps are near-duplicates
MAX_PAIRS = 3

# (map (q_pos, k_pos), tokens) of one head, by layer-major index: for the pairs shown side by side.
MapsFn = Callable[[int], tuple[np.ndarray, list[str]]]


def label_names(labels: tuple[str, ...] = LABELS + DECODER_LABELS) -> dict[str, str]:
    return {k: t(f"heads.label.{k}") for k in labels}


def labels_section(report: HeadReport, heading: bool = True) -> None:
    if heading:  # heading=False: the section sits in a tab that names it
        st.subheader(t("heads.labels.title"))
    decoder = report.causal
    if decoder:
        st.caption(t("heads.labels.decoder_note"))
    hover = _hover(report)
    labels = report.label_set
    short = {k: t(f"heads.label_short.{k}") for k in labels}
    fig = label_grid(report.labels, label_names(labels), short, hover, "", t("heads.axis.layer"), t("heads.axis.head"))
    st.plotly_chart(fig, width="stretch", key="heads_label_grid")
    st.caption(t("heads.labels.grid_title"))
    counts = {k: int((report.labels == k).sum()) for k in labels}
    st.markdown(
        t(
            "heads.labels.rules_decoder" if decoder else "heads.labels.rules",
            **{k: f"{v:g}" for k, v in THRESHOLDS.items()},
            pct_prev=f"{100 * THRESHOLDS['prev']:.0f}",
            pct_cls=f"{100 * THRESHOLDS['cls']:.0f}",
            pct_block=f"{100 * THRESHOLDS['block']:.0f}",
            pct_first=f"{100 * THRESHOLDS['sink']:.0f}",
        )
    )
    words = label_names()
    st.caption(" · ".join(f"{words[k]}: {v}" for k, v in counts.items() if v))


def _hover(report: HeadReport) -> np.ndarray:
    s = report.stats
    names = label_names()
    # The template is looked up once (t reads the session's language) and filled per head: 4,096 heads are 4,096
    # formats, not 4,096 session-state reads.
    template = t("heads.labels.hover_decoder" if report.causal else "heads.labels.hover")
    ind = report.induction
    out = np.empty(report.labels.shape, dtype=object)
    for layer in range(report.n_layers):
        for head in range(report.n_heads):
            common = {
                "name": f"L{layer}H{head}",
                "label": names[str(report.labels[layer, head])],
                "entropy": f"{s['entropy'][layer, head]:.2f}",
                "norm": f"{s['entropy_norm'][layer, head]:.2f}",
                "punct": f"{100 * s['punct'][layer, head]:.0f}",
                "prev": f"{100 * s['prev'][layer, head]:.0f}",
            }
            if report.causal:
                out[layer, head] = template.format(
                    **common,
                    first=f"{100 * s['first'][layer, head]:.0f}",
                    induction="–" if ind is None else f"{ind[layer, head]:.2f}",
                )
            else:
                out[layer, head] = template.format(
                    **common,
                    cls=f"{100 * s['cls'][layer, head]:.0f}",
                    sep=f"{100 * s['sep'][layer, head]:.0f}",
                    next=f"{100 * s['next'][layer, head]:.0f}",
                )
    return out


def table_section(
    report: HeadReport,
    importance: Importance | None,
    output_norm: np.ndarray | None = None,
    heading: bool = True,
    ablation: Sweep | None = None,
) -> None:
    """The statistics table; output_norm (layers, heads): each head's mean output norm (value-weighted lens);
    ablation: each head removed alone (models.analysis.ablate.sweep, heads only, layer-major as the rows)."""
    if heading:
        st.subheader(t("heads.table.title"))
    s = report.stats
    names = report.names
    words = label_names()  # once: 4,096 heads would otherwise look up every label's words 4,096 times
    data: dict[str, object] = {
        t("heads.col.head_name"): names,
        t("heads.col.label"): [words[str(x)] for x in report.labels.ravel()],
        t("heads.col.entropy"): s["entropy"].ravel(),
        t("heads.col.entropy_norm"): s["entropy_norm"].ravel(),
    }
    for k in report.columns:
        data[t(f"heads.col.{k}")] = 100 * s[k].ravel()
    data[t("heads.col.distance")] = s["distance"].ravel()
    if report.induction is not None:
        data[t("heads.col.induction")] = np.asarray(report.induction).ravel()
    if report.pairs:
        data[t("heads.col.block")] = 100 * s["block"].ravel()
    if report.pairwise:
        close, idx = nearest(report.js_per_row)
        data[t("heads.col.nearest")] = [names[i] for i in idx]
        data[t("heads.col.nearest_js")] = close
    if importance is not None:
        data[t("heads.col.importance")] = importance.scores.ravel()
    if output_norm is not None:
        data[t("heads.col.output_norm")] = np.asarray(output_norm).ravel()
    if ablation is not None:  # the numbers `python -m models ablate --heads L.H` gives for each head
        data[t("heads.col.ablate_kl")] = ablation.mean_kl
        data[t("heads.col.ablate_low")] = ablation.ci95[:, 0]  # its 95 % interval over the text's positions
        data[t("heads.col.ablate_high")] = ablation.ci95[:, 1]
        data[t("heads.col.ablate_last")] = ablation.last_kl
        data[t("heads.col.ablate_logit")] = ablation.logit_diff
    df = pd.DataFrame(data)
    pct = st.column_config.NumberColumn(format="%.1f %%")
    config = {t(f"heads.col.{k}"): pct for k in (*report.columns, "block")}
    config[t("heads.col.induction")] = st.column_config.NumberColumn(format="%.2f")
    config[t("heads.col.entropy")] = st.column_config.NumberColumn(format="%.2f")
    config[t("heads.col.entropy_norm")] = st.column_config.NumberColumn(format="%.2f")
    config[t("heads.col.distance")] = st.column_config.NumberColumn(format="%.1f")
    config[t("heads.col.nearest_js")] = st.column_config.NumberColumn(format="%.3f")
    config[t("heads.col.importance")] = st.column_config.NumberColumn(format="%.2f")
    config[t("heads.col.output_norm")] = st.column_config.NumberColumn(format="%.3f")
    for k in ("ablate_kl", "ablate_low", "ablate_high", "ablate_last", "ablate_logit"):
        config[t(f"heads.col.{k}")] = st.column_config.NumberColumn(format="%.4g")
    st.dataframe(df, column_config=config, hide_index=True, width="stretch", height=420, key="heads_table")
    st.caption(t("heads.table.caption", rows=report.rows, sentences=report.sentences))
    if output_norm is not None:
        st.caption(t("heads.table.output_norm_caption"))
    if ablation is not None:
        st.caption(t("heads.table.ablate_caption"))


def redundancy_section(report: HeadReport, key: str, with_cka: bool = True, heading: bool = True) -> None:
    """The redundancy heatmap (JS, cosine, and CKA where the heads' outputs are known) and the map of heads."""
    if heading:
        st.subheader(t("heads.redundancy.title"))
    if not report.pairwise:  # over a budget: asked before any pairwise work (models.analysis.heads)
        st.info(t("heads.redundancy.skipped", reason=md(report.pairwise_skipped)))
        return
    metric = st.radio(
        t("heads.redundancy.metric"),
        ["js", "cosine", "cka"] if with_cka else ["js", "cosine"],
        horizontal=True,
        key=f"{key}_metric",
        format_func=lambda m: t(f"heads.redundancy.{m}"),
    )
    matrix = {"js": report.js_per_row, "cosine": report.cosine, "cka": report.cka}[metric]
    fig = redundancy_heatmap(
        matrix,
        report.order,
        report.names,
        report.n_heads,
        t("heads.redundancy.heatmap_title", metric=t(f"heads.redundancy.{metric}"), n=len(report.names)),
        t(f"heads.redundancy.{metric}_value"),
        similarity=metric != "js",
    )
    st.plotly_chart(fig, width="stretch", key=f"{key}_heatmap")
    st.caption(t("heads.redundancy.caption", rows=report.redundancy_rows))
    if report.redundancy_sentences < report.sentences:  # a large corpus: over a sample of its lines
        st.caption(
            t(
                "heads.redundancy.sample",
                lines=report.redundancy_sentences,
                of=report.sentences,
                rows=report.redundancy_rows,
            )
        )
    groups = report.kv_groups()
    if groups is not None:
        within, across = groups
        st.info(
            t(
                "heads.redundancy.kv_groups",
                group=report.group,
                within=f"{within:.3f}",
                across=f"{across:.3f}",
                ratio=f"{across / within:.1f}" if within > 0 else "∞",
            )
        )
    if metric == "cka":
        st.caption(t("heads.redundancy.cka_note"))
    fig = head_map(
        report.coords,
        report.names,
        report.n_heads,
        list(report.labels.ravel()),
        label_names(),
        t("heads.redundancy.map_title"),
        t("heads.axis.layer"),
    )
    st.plotly_chart(fig, width="stretch", key=f"{key}_map")
    st.caption(t("heads.redundancy.map_caption", stress=f"{report.stress:.2f}"))


def duplicates_section(report: HeadReport, key: str, heading: bool = True) -> None:
    """Near-duplicates per layer under an adjustable threshold; ends with the heading of `pairs_section`."""
    if heading:
        st.subheader(t("heads.dupes.title"))
    if not report.pairwise:  # over a budget: its own tab says why, as the redundancy tab does
        st.info(t("heads.redundancy.skipped", reason=md(report.pairwise_skipped)))
        return
    threshold = st.slider(
        t("heads.dupes.threshold"),
        0.0,
        0.3,
        DUPLICATE_THRESHOLD,
        0.005,
        format="%.3f",
        key=f"{key}_threshold",
        help=t("heads.dupes.threshold_help"),
    )
    counts = near_duplicates_per_layer(report.js_per_row, report.n_layers, threshold)
    left, right = st.columns(2)
    with left:
        st.markdown(
            "\n".join(
                "- " + t("heads.dupes.line", k=int(c), n=report.n_heads, layer=layer, t=f"{threshold:.3f}")
                for layer, c in enumerate(counts)
            )
        )
        st.caption(t("heads.dupes.anywhere"))
    with right:
        st.plotly_chart(
            near_duplicate_bars(
                counts,
                report.n_heads,
                t("heads.dupes.bars_title", t=f"{threshold:.3f}"),
                t("heads.axis.layer"),
                t("heads.dupes.count"),
            ),
            width="stretch",
            key=f"{key}_dupe_bars",
        )
    st.markdown("**" + t("heads.dupes.pairs_title") + "**")


def pairs_section(
    report: HeadReport, maps: MapsFn, key: str, maps_note: str = "", key_tokens: list[str] | None = None
) -> None:
    """The most redundant pairs of heads (smallest JS), their maps side by side (key_tokens: cross-attention)."""
    if not report.pairwise:
        return
    if maps_note:
        st.caption(maps_note)
    pairs = []
    tokens: list[str] = []
    names = report.names
    for a, b, js in closest_pairs(report.js_per_row, MAX_PAIRS):
        (ma, tokens), (mb, _) = maps(a), maps(b)
        cka = report.cka[a, b]
        caption = t(
            "heads.dupes.pair_caption",
            js=f"{js:.3f}",
            cos=f"{report.cosine[a, b]:.2f}",
            cka="–" if math.isnan(cka) else f"{cka:.2f}",
        )
        if report.same_kv_head(a, b):
            caption += " · " + t("heads.dupes.same_kv", kv=(a % report.n_heads) // report.group)
        pairs.append((ma, mb, names[a], names[b], caption))
    if pairs:
        bar = heatmap_words()["colorbar"]
        st.plotly_chart(pair_maps(pairs, tokens, key_tokens, bar, FULL_PX), width="stretch", key=f"{key}_pairs")


def importance_section(report: HeadReport, importance: Importance, key: str) -> None:
    st.markdown(t(f"heads.importance.measure_{importance.measure}"))
    st.caption(t("heads.importance.scaling"))
    if importance.sentences < report.sentences:
        st.caption(t("corpus.importance_note", n=importance.sentences))
    scores = importance.scores
    st.plotly_chart(
        importance_bars(scores, t("heads.importance.bars_title"), t("heads.axis.layer"), t("heads.importance.value")),
        width="stretch",
        key=f"{key}_imp_bars",
    )
    left, right = st.columns(2)
    curve = importance.curve
    if curve is not None:
        with left:
            fig = removal_curve(
                curve.ks,
                curve.least_first,
                curve.most_first,
                report.n_layers * report.n_heads,
                t("heads.importance.removal_title"),
                t("heads.importance.removed"),
                t(f"heads.importance.unit_{curve.measure}"),
                t("heads.importance.least"),
                t("heads.importance.most"),
            )
            st.plotly_chart(fig, width="stretch", key=f"{key}_removal")
            st.caption(t(f"heads.importance.removal_caption_{curve.measure}"))
    if not report.pairwise:
        return
    with right:
        close, _ = nearest(report.js_per_row)
        fig = importance_vs_redundancy(
            scores,
            close,
            report.names,
            report.n_heads,
            t("heads.importance.scatter_title"),
            t("heads.importance.scatter_x"),
            t("heads.importance.value"),
            t("heads.axis.layer"),
        )
        st.plotly_chart(fig, width="stretch", key=f"{key}_imp_scatter")
        st.caption(t("heads.importance.scatter_caption"))


def shares_section(report: HeadReport, bert_base: bool, key: str, heading: bool = True) -> None:
    if heading:
        st.subheader(t("heads.shares.title"))
    bands = lines = None
    if bert_base:
        lo, hi = PUBLISHED["sep_layers"]  # type: ignore[misc]
        early = PUBLISHED["cls_early_layers"]
        bands = {"sep": (lo, hi, t("corpus.band_sep")), "cls": (min(early), max(early), t("corpus.band_cls"))}  # type: ignore[call-overload, type-var]
        lines = {"sep": float(PUBLISHED["sep_share"])}  # type: ignore[arg-type]
    kinds = ("first", "prev", "punct") if report.causal else ("cls", "sep", "punct")
    fig = shares_by_layer(
        {k: report.stats[k] for k in kinds},
        {k: t(f"heads.shares.{k}") for k in kinds},
        t("heads.axis.layer"),
        t("heads.shares.share"),
        t("heads.shares.mean"),
        t("heads.shares.head"),
        bands=bands,
        lines=lines,
    )
    st.plotly_chart(fig, width="stretch", key=f"{key}_shares")
    st.caption(t("heads.shares.caption"))


def published_section(report: HeadReport, model: str) -> None:
    """The published BERT-base findings beside ours (call only for a BERT-base-shaped model)."""
    st.markdown("**" + t("corpus.published_title") + "**")
    ours = our_published_figures(report)

    def layers(xs: list[int]) -> str:
        return t("corpus.layers_list", layers=", ".join(map(str, xs))) if xs else t("corpus.none")

    rows = [
        (t("corpus.fact_sep"), t("corpus.pub_sep"), f"{100 * ours['sep_share']:.1f} %"),  # type: ignore[operator]
        (
            t("corpus.fact_cls"),
            t("corpus.pub_cls"),
            t("corpus.ours_cls", early=f"{100 * ours['cls_early']:.1f}", rest=f"{100 * ours['cls_rest']:.1f}"),
        ),  # type: ignore[operator]
        (t("corpus.fact_prev"), t("corpus.pub_prev"), layers(ours["prev_layers"])),  # type: ignore[arg-type]
        (t("corpus.fact_next"), t("corpus.pub_next"), layers(ours["next_layers"])),  # type: ignore[arg-type]
        (
            t("corpus.fact_entropy"),
            t("corpus.pub_entropy"),
            t(
                "corpus.ours_entropy",
                value=f"{ours['last_cls_entropy']:.2f}",
                tokens=f"{ours['tokens_per_sentence']:.0f}",
            ),
        ),
    ]
    df = pd.DataFrame(rows, columns=[t("corpus.fact"), t("corpus.published"), t("corpus.ours", model=model)])
    st.table(df.set_index(t("corpus.fact")))
    st.caption(t("corpus.published_caption", model=model))
