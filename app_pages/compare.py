"""Compare: run A (the sidebar's model, text and mask) against run B (another model, text, mask or checkpoint).

Streamlit only: numbers from models.analysis.compare (cached per pair of selections), figures from viz.compare.
When the two runs' positions line up: heads ranked by Jensen–Shannon distance, the Δ of every head, one head's
A | B | Δ with one hover; otherwise statistics and labels side by side. The link reopens the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from models import AttnVizError, EncoderOutput, settings
from models.analysis.compare import Comparison, compare, delta_maps
from models.masks import parse_expectation
from ui import cache, controls, debug, lenses, results, state
from ui.heads_view import label_names
from ui.safe import md
from ui.sidebar import MODEL_CHOICES, model_capabilities, model_options, output_for, shared_server
from ui.state import Selection, t
from viz.compare import delta_mosaic, distance_grid, paired_heatmaps
from viz.heads import label_grid
from viz.overview import overview_figure

MINIMAL_PAIR = ("The keys to the cabinet are", "The keys to the cabinet is")
TOP = 12  # heads in the ranked table
PRESETS = ("untrained", "minimal_pair", "mask")


@dataclass
class Compared:
    """One comparison and what its views draw (numpy: cached, shared, never mutated)."""

    cmp: Comparison
    delta: np.ndarray | None  # (layers, heads, q_pos, k_pos) B − A, "maps" only
    keep: np.ndarray | None  # (q_pos, k_pos): a cell is grey only when both runs hide it
    maps_a: np.ndarray | None  # (layers, heads, q_pos, k_pos) of each run, as compared (raw or value-weighted)
    maps_b: np.ndarray | None


@debug.counted("comparison", results.cached)
def comparison(sel_a: Selection, sel_b: Selection, weighted: bool) -> Compared:
    """Return run A against run B (cached per pair of selections and lens)."""
    a, b = cache.encode(sel_a, weighted), cache.encode(sel_b, weighted)
    maps_a = lenses.weighted(sel_a).shares if weighted else None
    maps_b = lenses.weighted(sel_b).shares if weighted else None
    cmp = compare(a, b, maps_a, maps_b)
    if cmp.mode != "maps":
        return Compared(cmp, None, None, None, None)
    src_a = maps_a if maps_a is not None else a.attentions
    src_b = maps_b if maps_b is not None else b.attentions
    delta = delta_maps(src_a, src_b)
    L = a.n_layers
    return Compared(
        cmp,
        delta,
        (a.keep | b.keep).numpy(),
        np.stack([np.asarray(src_a[la]) for la in range(L)]),
        np.stack([np.asarray(src_b[la]) for la in range(L)]),
    )


@debug.counted("delta_mosaic", results.cached)
def _mosaic(sel_a: Selection, sel_b: Selection, weighted: bool, _delta: np.ndarray, _keep: np.ndarray) -> tuple:
    return delta_mosaic(_delta, None if _keep.all() else _keep)


# ---- run B ---------------------------------------------------------------------------------------------------


def _apply_preset() -> None:
    """on_change of the presets: set run B (and for the minimal pair run A's text) before the widgets are drawn."""
    preset = st.session_state.get("compare_preset")
    a_model = state.get("model")
    if preset == "untrained":
        st.session_state["against_model"] = _untrained_of(a_model) or ""
        st.session_state["against_text"] = st.session_state["against_mask"] = ""
    elif preset == "minimal_pair":
        st.session_state["text"], st.session_state["against_text"] = MINIMAL_PAIR
        st.session_state["against_model"] = st.session_state["against_mask"] = ""
    elif preset == "mask":
        caps = cache.capabilities(a_model) if a_model in MODEL_CHOICES else None
        st.session_state["against_mask"] = "window:3" if caps is not None and caps.causal else "causal"
        st.session_state["against_model"] = st.session_state["against_text"] = ""
    st.session_state["compare_preset"] = None


def _untrained_of(spec: str) -> str | None:
    """Return the untrained twin of a model this server offers (`random:` + its name), if it offers that too."""
    offered, _ = model_options()
    twin = spec if spec.startswith("random:") else f"random:{spec}"
    return twin if twin in offered and twin != spec else None


def _mask_name(a: Selection) -> str:
    """Return run A's mask as its run names it: a causal model's built-in mask is causal, never "bidirectional"."""
    if a.mask == "bidirectional" and model_capabilities(a.model).causal:
        return "causal"
    return a.mask


def _run_b(a: Selection) -> Selection | None:
    """Draw run B's pickers; return its selection (None after saying why it cannot run)."""
    offered, custom_ok = model_options()
    st.selectbox(
        t("compare.presets"),
        PRESETS,
        index=None,
        key="compare_preset",
        placeholder=t("compare.presets_placeholder"),
        format_func=lambda p: t(f"compare.preset.{p}"),
        on_change=_apply_preset,
    )
    left, mid, right = st.columns([2, 3, 2])
    current = state.get("against_model") or ""
    options = ["", *offered]
    if current and current not in options:
        try:
            settings.check_model(current, presets=MODEL_CHOICES, shared=shared_server())
            options.append(current)  # a spec from a link that this server allows
        except AttnVizError:
            st.error(t("compare.model_refused", model=md(current)))
            st.session_state["against_model"] = ""
    model = left.selectbox(
        t("compare.against_model"),
        options,
        key="against_model",
        format_func=lambda s: t("compare.same_model", model=a.model) if not s else s,
        help=t("compare.against_model_help_custom" if custom_ok else "compare.against_model_help"),
    )
    text = mid.text_area(
        t("compare.against_text"),
        key="against_text",
        height=80,
        placeholder=t("compare.same_text"),
        help=t("compare.against_text_help"),
    )
    mask = right.text_input(
        t("compare.against_mask"),
        key="against_mask",
        placeholder=t("compare.same_mask", mask=_mask_name(a)),
        help=t("compare.against_mask_help"),
    )
    right.toggle(t("compare.weighted"), key="compare_weighted", help=t("compare.weighted_help"))
    mask_b = a.mask
    if (mask or "").strip():
        try:
            mask_b = parse_expectation(mask.strip()).name
        except AttnVizError as err:
            st.error(t("compare.mask_bad", reason=md(err)))
            return None
    return a._replace(model=model or a.model, text=(text or "").strip() or a.text, mask=mask_b)


# ---- views -----------------------------------------------------------------------------------------------------


def _clicked(chart_key: str) -> None:
    """Selection callback: a clicked tile or cell (customdata [layer, head, …]) selects that head."""
    event = st.session_state.get(chart_key) or {}
    for p in (event.get("selection") or {}).get("points") or []:
        data = p.get("customdata")
        if isinstance(data, list | tuple) and len(data) >= 2:
            st.session_state["layer"], st.session_state["head"] = int(data[0]), int(data[1])
            return


def _facts(cmp: Comparison, a: EncoderOutput, b: EncoderOutput) -> None:
    st.caption(t("compare.run_a", model=md(a.model), mask=md(a.mask), n=len(cmp.tokens_a)))
    st.caption(t("compare.run_b", model=md(b.model), mask=md(b.mask), n=len(cmp.tokens_b)))
    if cmp.mode == "maps":
        if cmp.differs:
            changed = ", ".join(f"{i}: {md(cmp.tokens_a[i])} → {md(cmp.tokens_b[i])}" for i in cmp.differs)
            st.info(t("compare.mode_maps_pair", changed=changed))
        else:
            st.info(t("compare.mode_maps"))
    elif cmp.mode == "statistics":
        st.info(t("compare.mode_statistics", a=len(cmp.tokens_a), b=len(cmp.tokens_b)))
    else:
        st.warning(t("compare.mode_separate"))


def _head_hover(cmp: Comparison) -> np.ndarray:
    names = label_names()
    out = np.empty((cmp.n_layers, cmp.n_heads), dtype=object)
    for la in range(cmp.n_layers):
        for h in range(cmp.n_heads):
            out[la, h] = t(
                "compare.hover_head",
                layer=la,
                head=h,
                distance=f"{cmp.distance[la, h]:.3f}" if cmp.distance is not None else "–",
                a=names.get(str(cmp.labels_a[la, h]), str(cmp.labels_a[la, h])),
                b=names.get(str(cmp.labels_b[la, h]), str(cmp.labels_b[la, h])),
            )
    return out


def _shown(statistic: str, value: float) -> str:
    """Return a statistic as the Heads table shows it: shares in %, the normalised entropy as a number."""
    return f"{float(value):.2f}" if statistic == "entropy_norm" else f"{100 * float(value):.1f} %"


def _ranking(cmp: Comparison, layer: int, head: int) -> None:
    st.subheader(t("compare.ranking_title"))
    unit = t("compare.distance_unit") if cmp.mode == "maps" else t("compare.change_unit")
    left, right = st.columns([2, 3], gap="medium")
    with left:
        fig = distance_grid(
            cmp.distance if cmp.distance is not None else np.zeros((cmp.n_layers, cmp.n_heads)),
            t("compare.grid_title"),
            unit,
            t("heads.axis.layer"),
            t("heads.axis.head"),
            hover=_head_hover(cmp),
            selected=(layer, head),
        )
        st.plotly_chart(
            fig,
            key="compare_grid",
            width="stretch",
            on_select=lambda: _clicked("compare_grid"),
            selection_mode="points",
        )
    with right:
        names = label_names()
        rows = []
        for la, h in cmp.ranked[:TOP]:
            row = {t("compare.col.head"): f"L{la}H{h}", unit: float(cmp.distance[la, h])}  # type: ignore[index]
            if cmp.mode == "maps":
                assert cmp.max_delta is not None
                row[t("compare.col.max_delta")] = float(cmp.max_delta[la, h])
            k = str(cmp.moved[la, h]) if cmp.moved is not None else cmp.columns[0]
            row[t("compare.col.moved")] = t(f"heads.col.{k}")
            row["A"], row["B"] = _shown(k, cmp.stats_a[k][la, h]), _shown(k, cmp.stats_b[k][la, h])
            row[t("compare.col.labels")] = f"{names[str(cmp.labels_a[la, h])]} → {names[str(cmp.labels_b[la, h])]}"
            rows.append(row)
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="compare_table")
        st.caption(t("compare.ranking_caption_maps" if cmp.mode == "maps" else "compare.ranking_caption_statistics"))


def _overview(done: Compared, sel_a: Selection, sel_b: Selection, weighted: bool, layer: int, head: int) -> None:
    assert done.delta is not None and done.keep is not None
    st.subheader(t("compare.overview_title"))
    with st.spinner(t("compare.drawing")):
        mosaic, top = _mosaic(sel_a, sel_b, weighted, done.delta, done.keep)
    hover = t("compare.overview_hover", text="%{customdata[2]}")
    extra = [[str(x)] for x in _head_hover(done.cmp).ravel()]
    fig = overview_figure(mosaic, selected=(layer, head), title="", hover=hover + "<extra></extra>", extra=extra)
    st.plotly_chart(
        fig,
        key="compare_overview",
        width="stretch",
        on_select=lambda: _clicked("compare_overview"),
        selection_mode="points",
    )
    note = t("compare.overview_note", top=f"{top:.3f}")
    if mosaic.factor > 1:
        note += " " + t("explore.overview_pooled", f=mosaic.factor)
    st.caption(note)


def _head(done: Compared, layer: int, head: int, weighted: bool) -> None:
    assert done.maps_a is not None and done.maps_b is not None and done.delta is not None
    cmp = done.cmp
    st.subheader(t("compare.head_title", layer=layer, head=head))
    a, b, d = done.maps_a[layer, head], done.maps_b[layer, head], done.delta[layer, head]
    fig = paired_heatmaps(
        [a, b, d],
        [t("compare.map_a"), t("compare.map_b"), t("compare.map_delta")],
        ["A", "B", "Δ"],
        cmp.tokens_a,
        other_tokens=cmp.tokens_b,
        delta=2,
        words={"query": t("explore.query"), "key": t("explore.key")},
    )
    st.plotly_chart(fig, key="compare_head", width="stretch")
    caption = t(
        "compare.head_note",
        distance=f"{cmp.distance[layer, head]:.4f}" if cmp.distance is not None else "–",
        js=f"{cmp.js[layer, head] / max(cmp.rows, 1):.3g}" if cmp.js is not None else "–",
        delta=f"{float(np.abs(d).max()):.3f}",
    )
    if weighted:
        caption += " " + t("compare.weighted_note")
    st.caption(caption)


def _labels_side_by_side(cmp: Comparison) -> None:
    st.subheader(t("compare.labels_title"))
    names = label_names()
    short = {k: t(f"heads.label_short.{k}") for k in names}
    columns = st.columns(2)
    for where, labels, name in ((columns[0], cmp.labels_a, "A"), (columns[1], cmp.labels_b, "B")):
        hover = np.array([[names.get(str(x), str(x)) for x in row] for row in labels], dtype=object)
        fig = label_grid(labels, names, short, hover, name, t("heads.axis.layer"), t("heads.axis.head"))
        with where:
            st.plotly_chart(fig, key=f"compare_labels_{name}", width="stretch")
            counts = {k: int((labels == k).sum()) for k in sorted(set(labels.ravel()))}
            st.caption(" · ".join(f"{names.get(k, k)}: {v}" for k, v in counts.items()))


def main() -> None:
    st.title(t("compare.title"))
    st.caption(t("compare.intro"))
    state.init("compare")
    sel_a = state.selection()
    sel_b = _run_b(sel_a)
    state.sync_url("compare")
    if sel_b is None:
        return
    weighted = bool(st.session_state.get("compare_weighted"))
    a = output_for(sel_a, weighted)
    b = output_for(sel_b, weighted) if a is not None else None
    if a is None or b is None:
        return
    if sel_a == sel_b:
        st.info(t("compare.same_run"))
    try:
        with st.spinner(t("compare.computing")):
            done = comparison(sel_a, sel_b, weighted)
    except AttnVizError as err:
        st.error(t("compare.failed", reason=md(err)))
        return
    cmp = done.cmp
    _facts(cmp, a, b)
    if cmp.mode == "separate":
        _labels_side_by_side(cmp)
    else:
        c1, c2 = st.columns(2)
        layer, head = controls.layer_head(c1, c2, cmp.n_layers, cmp.n_heads)
        _ranking(cmp, layer, head)
        if cmp.mode == "maps":
            _overview(done, sel_a, sel_b, weighted, layer, head)
            _head(done, layer, head, weighted)
        _labels_side_by_side(cmp)
    with st.expander(t("compare.share_title"), expanded=False):
        st.code(state.share_url(), language=None)
        st.caption(t("compare.share_note"))


main()
