"""Explore: every head at a glance, one layer, one head (heatmap and lines), mean and rollout, exports and links.

Streamlit only: numbers come from ui.sidebar.current_output (cached) and models.analysis.rollout; figures from viz.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from models import EncoderOutput
from models.analysis.rollout import attention_rollout, rollout_refusal
from models.attention_file import AttentionMaps
from ui import controls, debug, lenses, long_text, results, source, state, why
from ui.figures import FULL_PX, HALF_PX, HEAD_PX, heatmap_words
from ui.safe import md
from ui.sidebar import current_encoder, current_maps
from ui.state import t
from viz.aggregate import token_bars
from viz.export import IMAGE_FORMATS, figure_config, json_text, npz_bytes, standalone_html
from viz.heatmap import add_segment_lines, cell_of, head_heatmap
from viz.layer import layer_figure
from viz.lines import lines_figure
from viz.overlays import add_mask_overlay
from viz.overview import Mosaic, overview_figure, render_mosaic
from viz.select import PARTS, SPECIALS, Part, narrow, part_of, renormalise

Maps = EncoderOutput | AttentionMaps  # a model's output or an attention file's maps: the same names

VIEWS: tuple[str, ...] = (
    state.URL["view"].allowed or ()
)  # this page's own shareable selections ("view", "part") live in ui.state.URL
WINDOW = 64  # head view: longer inputs open on a window of this many tokens
LINES_MAX = 80  # the line view draws at most this many tokens per side
LAYER_HEADS = 64  # the layer view draws at most this many heads at once (plotly builds 64 subplots in ~2 s)
JSON_MAX_VALUES = 4_000_000  # above this, the JSON download holds the selected layer only (NPZ always has all)


# ---- URL -------------------------------------------------------------------------------------------


def _share_url() -> str:
    """Return the link that reopens this view: the app's address with the current query parameters."""
    params = {k: st.query_params.get(k) for k in st.query_params}
    base = ""
    try:
        base = st.context.url or ""
    except Exception:  # noqa: BLE001 - no browser context (AppTest, bare mode)
        base = ""
    parts = urlsplit(base) if base else None
    query = urlencode(params)
    if parts is None:
        return f"?{query}" if query else "?"
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, ""))


# ---- cached computations (keyed by the sidebar's selections; the output itself is not hashed) --------


@debug.counted("mosaic", results.cached)
def _mosaic(
    _attn: np.ndarray,
    _keep: np.ndarray,
    _part: Part,
    key: state.Selection,
    part: str,
    scale: str,
    exclude_first: bool = False,
    group: int = 1,
) -> Mosaic:
    # The cut happens inside: on a cache hit no (layers, heads, seq, seq) copy is made.
    cut = _part.cut(_attn)
    return render_mosaic(
        cut, None if _keep.all() else _part.cut(_keep), scale=scale, exclude_first=exclude_first, group=group
    )


@debug.counted("overview_figure", results.cached)
def _overview_figure(
    _mosaic: Mosaic,
    _attn: np.ndarray,
    _caps: Any,
    key: state.Selection,
    part: str,
    scale: str,
    exclude_first: bool,
    group: int,
    selected: tuple[int, int],
    title: str,
    hover: str,
    group_prefix: str,
) -> tuple[go.Figure, float]:
    """Return the overview figure and the mean share of the first token, built once per (model, text, mask, lens,
    part, scale, selection, language): a rerun that changes none of them (a widget elsewhere moved, the page
    redrawn) reuses it. Shared, never mutated (st.plotly_chart serialises a validated copy)."""
    attn = _attn
    first = attn[:, :, 1:, 0].mean(axis=-1) if attn.shape[-1] > 1 else np.zeros(attn.shape[:2])  # (L, H) sink share
    extra = [
        [_caps.kv_head(h) if group > 1 else h, f"{100 * first[la, h]:.0f}"]
        for la in range(attn.shape[0])
        for h in range(attn.shape[1])
    ]
    fig = overview_figure(_mosaic, selected=selected, title=title, hover=hover, group_prefix=group_prefix, extra=extra)
    return fig, float(first.mean())


@debug.counted("rollout", results.cached)
def _rollout(_attn: np.ndarray, key: state.Selection) -> np.ndarray:
    return attention_rollout(_attn).numpy()


def _tokens(out: Maps) -> list[str]:
    """Return the tokens as people read them (byte-level BPE decoded); the raw ones go to hover and exports."""
    return list(out.display_tokens or out.tokens)


def _key_tokens(out: Maps) -> list[str]:
    """Return the key axis's tokens as people read them (a file's own key tokens for cross-attention)."""
    return source.key_tokens(out) if source.is_cross(out) else _tokens(out)


def _chart(fig: go.Figure, key: str, filename: str, **kw) -> object:
    fmt = st.session_state.get("img_format", "png")
    return st.plotly_chart(fig, key=key, width="stretch", config=figure_config(fmt, filename), **kw)


# ---- views -----------------------------------------------------------------------------------------


def _clicked(chart_key: str) -> list[dict]:
    """Return the points selected (clicked) in a plotly chart, from its selection state."""
    event = st.session_state.get(chart_key) or {}
    return list((event.get("selection") or {}).get("points") or [])


def _open_from_overview() -> None:
    """Selection callback of the overview: a clicked tile opens that head (its point carries [layer, head])."""
    for p in _clicked("overview_chart"):
        data = p.get("customdata")
        if isinstance(data, list | tuple) and len(data) >= 2:
            st.session_state["layer"], st.session_state["head"] = int(data[0]), int(data[1])
            st.session_state["view"] = "head"
            return


OVERVIEW_SCALES = ("sqrt", "map", "log")


def _scale_picker(where=st) -> None:
    """Draw the colour-scale choice the overview and One layer share (√weight, each map's maximum, log)."""
    where.radio(
        t("explore.overview_scale"),
        OVERVIEW_SCALES,
        key="overview_scale",
        horizontal=True,
        format_func=lambda s: t(f"explore.overview_scale_name.{s}"),
        help=t("explore.per_map_scale_help"),
    )


def _overview(out: Maps, attn: np.ndarray, keep: np.ndarray, part: Part, layer: int, head: int) -> list:
    caps = out.capabilities
    # The scale widgets sit under the figure; a model that parks attention on its first token (a sink) opens with
    # that token left out of the colour scale, or the sink would wash every other pattern out.
    st.session_state.setdefault("overview_exclude_first", caps.special_roles == "first_token")
    scale = st.session_state.get("overview_scale", "sqrt")
    scale = scale if scale in OVERVIEW_SCALES else "sqrt"
    exclude = bool(st.session_state.get("overview_exclude_first")) and attn.shape[-1] > 1
    group = caps.group_size if caps.grouped and caps.heads == attn.shape[1] else 1
    hover_key = "explore.overview_hover_grouped" if group > 1 else "explore.overview_hover"
    hover = t(
        hover_key, layer="%{customdata[0]}", head="%{customdata[1]}", kv="%{customdata[2]}", first="%{customdata[3]}"
    )
    with st.spinner(t("explore.drawing")):
        started = time.perf_counter()
        key, part_name = lenses.result_key(out), st.session_state.get("part", "all")
        mosaic = _mosaic(attn, keep, part, key, part_name, scale, exclude, group)
        fig, first_mean = _overview_figure(
            mosaic, attn, caps, key, part_name, scale, exclude, group, (layer, head),
            t("explore.overview_title"), hover + "<extra></extra>", t("explore.kv_prefix"),
        )  # fmt: skip
        _chart(fig, "overview_chart", "attention-overview", on_select=_open_from_overview, selection_mode="points")
        ms = (time.perf_counter() - started) * 1000
    note = t("explore.overview_note", kb=mosaic.uri_bytes / 1024, bpv=mosaic.bytes_per_value, ms=ms)
    if mosaic.factor > 1:
        note += " " + t("explore.overview_pooled", f=mosaic.factor)
    note += " " + t(f"explore.overview_scale_{scale}")
    if exclude:
        note += " " + t("explore.overview_first_out", share=f"{100 * first_mean:.0f}")
    if group > 1:
        note += " " + t("explore.overview_groups", group=group, kv_heads=caps.kv_heads)
    st.caption(note)
    left, right = st.columns([3, 2])
    _scale_picker(left)
    right.toggle(t("explore.exclude_first"), key="overview_exclude_first", help=t("explore.exclude_first_help"))
    return [(t("explore.overview_title"), fig)]


def _layer_columns(n_keys: int, group: int) -> int:
    """Return how many maps One layer sets in a row: few enough that every token is labelled at the smallest
    readable font while the text is short (else 3 at least, labels thinned), a whole KV group per row if it fits."""
    label_px = 1.3 * 11 + 0.5  # a label at 11 px (viz.heatmap.TICK_SIZES), keys turned upright
    cols = max(3, min(5, int(0.85 * FULL_PX / (label_px * max(n_keys, 1)))))
    if group > 1:
        cols = group * max(1, cols // group) if group <= 5 else cols
    return cols


def _layer_view(out: Maps, attn: np.ndarray, keep: np.ndarray, part: Part, layer: int, head: int) -> list:
    H = attn.shape[1]  # heads
    first = head // LAYER_HEADS * LAYER_HEADS  # the block of heads that holds the selected one
    last = min(H, first + LAYER_HEADS)
    maps = part.cut(attn[layer, first:last])  # (heads shown, rows, cols)
    mean = part.cut(attn[layer]).mean(axis=0, keepdims=True) if H > LAYER_HEADS else maps.mean(axis=0, keepdims=True)
    stacked = np.concatenate([maps, mean])
    caps = out.capabilities
    group = caps.group_size if caps.grouped and caps.heads == H else 1
    titles = [
        t("explore.head_short", head=h) + (f" · {t('explore.kv_prefix')}{caps.kv_head(h)}" if group > 1 else "")
        for h in range(first, last)
    ] + [t("explore.mean_short")]
    cols = _layer_columns(len(part.cols), group)
    sub_keep = part.cut(keep)
    scale = st.session_state.get("overview_scale", "sqrt")  # one choice for both views, under the figure
    scale = scale if scale in OVERVIEW_SCALES else "sqrt"
    tokens, keys = _tokens(out), _key_tokens(out)
    fig, factor = layer_figure(
        stacked,
        titles,
        q_pos=part.rows,
        k_pos=part.cols,
        keep=None if sub_keep.all() else sub_keep,
        words=heatmap_words(),
        tokens=[tokens[i] for i in part.rows],
        key_tokens=[keys[j] for j in part.cols],
        scale=scale,
        width_hint=FULL_PX,
        cols=cols,
    )
    fig.update_layout(title=dict(text=t("explore.layer_title", layer=layer), y=0.995, yanchor="top"), margin=dict(t=70))
    _chart(fig, "layer_chart", f"attention-layer{layer}")
    note = t(f"explore.overview_scale_{scale}") + " " + t("explore.layer_note")
    if factor > 1:
        note += " " + t("explore.overview_pooled", f=factor)
    if group > 1:
        note += " " + t("explore.layer_groups", group=group, kv_heads=caps.kv_heads)
    if H > LAYER_HEADS:
        note += " " + t("explore.layer_heads_shown", first=first, last=last - 1, n=H, block=LAYER_HEADS)
    st.caption(note)
    _scale_picker()
    return [(t("explore.layer_title", layer=layer), fig)]


def _head_options(out: Maps) -> tuple[bool, bool, bool, tuple[int, int]]:
    n = max(np.shape(out.attentions)[-2:])  # the window runs over positions on both axes
    a, b, c = st.columns(3)
    if SPECIALS.isdisjoint(out.tokens) and SPECIALS.isdisjoint(source.key_tokens(out)):
        hide = renorm = False  # no [CLS]/[SEP] to hide: a decoder (GPT-2), or a file from a model without them
    else:
        hide = a.toggle(t("explore.hide_special"), key="hide_special", help=t("explore.hide_special_help"))
        renorm = b.toggle(
            t("explore.renormalise"), key="renormalise", disabled=not hide, help=t("explore.renormalise_help")
        )
    log = c.toggle(t("explore.log_colour"), key="log_colour", help=t("explore.log_colour_help"))
    if n > WINDOW:
        lo, hi = st.session_state.get("window", (0, WINDOW))
        lo, hi = max(0, min(int(lo), n - 1)), max(1, min(int(hi), n))
        st.session_state["window"] = (lo, hi) if lo < hi else (0, min(WINDOW, n))
        window = st.slider(t("explore.window"), 0, n, key="window", help=t("explore.window_help"))
    else:
        window = (0, n)
    return hide, renorm and hide, log, (int(window[0]), int(window[1]))


def _open_from_lines() -> None:
    """Selection callback of the line view: a clicked query token (x = 0) becomes the focus."""
    for p in _clicked("lines_chart"):
        data = p.get("customdata")
        if p.get("x") == 0 and isinstance(data, list | tuple) and data:
            st.session_state["lines_focus"] = int(data[0])
            return


def _head_view(out: Maps, attn: np.ndarray, keep: np.ndarray, part: Part, layer: int, head: int) -> list:
    hide, renorm, log, (lo, hi) = _head_options(out)
    tokens, keys = _tokens(out), _key_tokens(out)
    shown = narrow(part, out.tokens, hide_special=hide, window=(lo, hi), key_tokens=source.key_tokens(out))
    if shown.empty:
        st.info(t("explore.nothing_in_window"))
        return []
    rows, cols = shown.rows, shown.cols
    weights = shown.cut(attn[layer, head])
    if renorm:
        weights = renormalise(weights)
    q_tok = [tokens[i] for i in rows]
    k_tok = [keys[j] for j in cols]
    title = t("explore.head_title", layer=layer, head=head)
    fig = head_heatmap(
        weights,
        q_tok,
        title=title,
        key_tokens=k_tok,
        q_pos=rows,
        k_pos=cols,
        log=log,
        words=heatmap_words(),
        raw_tokens=[out.tokens[i] for i in rows],
        raw_key_tokens=[source.key_tokens(out)[j] for j in cols],
        width_hint=HEAD_PX,
        pickable=_explains(out),
    )
    sub_keep = shown.cut(keep)
    if not sub_keep.all():
        add_mask_overlay(fig, sub_keep, weights)
    if not source.is_cross(out):
        segments = np.asarray(out.segments)
        add_segment_lines(fig, segments[rows], segments[cols])  # where sentence B starts, on each axis
    focus = st.session_state.get("lines_focus", -1)  # set by the line view below (or its click callback)
    if isinstance(focus, int) and 0 <= focus < len(rows):
        fig.add_shape(
            type="rect",
            x0=-0.5,
            x1=len(cols) - 0.5,
            y0=focus - 0.5,
            y1=focus + 0.5,
            line=dict(color="#e4572e", width=2),
        )
    figures = [(title, fig)]
    clickable = any(tr.name == "cells" for tr in fig.data)  # pickable and small enough: one point per cell

    left, right = st.columns([3, 2], gap="medium")
    below = st.container()  # the "why here" panel, full width under the map and the lines
    with left:
        if clickable:  # a click on a cell opens "why here" for it (ui/why.py)
            _chart(fig, "head_heatmap", f"attention-L{layer}-H{head}", on_select=_why_from_map, selection_mode="points")
        else:
            _chart(fig, "head_heatmap", f"attention-L{layer}-H{head}")
        notes = [t("explore.head_note")]
        if hide:
            notes.append(t("explore.renormalised_note") if renorm else t("explore.not_renormalised_note"))
        n = max(attn.shape[-2:])
        if lo > 0 or hi < n:
            notes.append(t("explore.window_note", lo=lo, hi=hi - 1, n=n))
        st.caption(" ".join(notes))
    with right:
        if len(rows) > LINES_MAX or len(cols) > LINES_MAX:
            st.info(t("explore.lines_too_many", n=LINES_MAX))
            return figures + _why(below, out, attn, layer, head, clickable)
        options = [-1, *range(len(rows))]
        if st.session_state.get("lines_focus", -1) not in options:
            st.session_state["lines_focus"] = -1
        focus = st.selectbox(
            t("explore.lines_focus"),
            options,
            key="lines_focus",
            format_func=lambda i: t("explore.lines_all") if i < 0 else f"{q_tok[i]} · {rows[i]}",
        )
        lines = lines_figure(
            weights,
            q_tok,
            k_tok,
            q_pos=rows,
            k_pos=cols,
            focus=None if focus < 0 else focus,
            title=t("explore.lines_title"),
            words=heatmap_words(),
        )
        _chart(
            lines,
            "lines_chart",
            f"attention-lines-L{layer}-H{head}",
            on_select=_open_from_lines,
            selection_mode="points",
        )
        st.caption(t("explore.lines_note"))
        figures.append((t("explore.lines_title"), lines))
    return figures + _why(below, out, attn, layer, head, clickable)


def _explains(out: Maps) -> bool:
    """Return whether the head view shows the "why here" panel: a model's maps, not a file's or word-merged ones."""
    return isinstance(out, EncoderOutput) and not st.session_state.get("words")


def _why_from_map(chart_key: str = "head_heatmap") -> None:
    """Selection callback of the head's map: a clicked cell becomes the "why here" query and key (ui/why.py)."""
    cell = cell_of(_clicked(chart_key))
    if cell is not None:
        st.session_state[why.QUERY_KEY], st.session_state[why.KEY_KEY] = cell


def _why(where: DeltaGenerator, out: Maps, attn: np.ndarray, layer: int, head: int, clickable: bool = False) -> list:
    """The "why here" panel under a model's head (ui/why.py); not for a file's maps or word-merged positions."""
    if not _explains(out):
        return []
    with where:
        return why.panel(_tokens(out), np.asarray(attn[layer, head]), layer, head, clickable=clickable)


def _set_layer(layer: int) -> None:
    st.session_state["layer"] = layer


def _first_out_top(maps: np.ndarray, cols: np.ndarray, exclude: bool) -> float | None:
    """Return the colour scale's top with the first token's column left out (None: the map's own maximum)."""
    if not exclude or len(cols) < 2 or cols[0] != 0:
        return None
    rest = maps[..., 1:]
    return float(rest.max()) if rest.size and rest.max() > 0 else None


def _aggregate_view(out: Maps, attn: np.ndarray, keep: np.ndarray, part: Part, layer: int) -> list:
    tokens, keys = _tokens(out), _key_tokens(out)
    caps = out.capabilities
    sink = caps.sink and attn.shape[-1] > 1 and not source.is_cross(out)
    if sink:  # the overview's choice, shared: a decoder's first token takes most of every row (the sink)
        st.session_state.setdefault("overview_exclude_first", True)
        st.toggle(t("explore.exclude_first"), key="overview_exclude_first", help=t("explore.exclude_first_help"))
    exclude = sink and bool(st.session_state.get("overview_exclude_first"))
    sub_keep = part.cut(keep)
    hidden = None if sub_keep.all() else sub_keep  # grey means hidden, in this view as in the others
    mean = attn[layer].mean(axis=0)
    q_tok = [tokens[i] for i in part.rows]
    k_tok = [keys[j] for j in part.cols]
    mean_title = t("explore.mean_title", layer=layer)
    square = attn.shape[-1] == attn.shape[-2] and not source.is_cross(out)  # rollout chains square maps
    refusal = rollout_refusal(attn.shape[0], attn.shape[-1]) if square else ""  # asked before any of it runs
    if not square or refusal:
        mean_fig = head_heatmap(
            part.cut(mean),
            q_tok,
            title=mean_title,
            key_tokens=k_tok,
            q_pos=part.rows,
            k_pos=part.cols,
            words=heatmap_words(),
            width_hint=FULL_PX,
            zmax=_first_out_top(part.cut(mean), part.cols, exclude),
        )
        if hidden is not None:
            add_mask_overlay(mean_fig, hidden)
        _chart(mean_fig, "mean_chart", f"attention-mean-L{layer}")
        st.info(t("explore.rollout_skipped", reason=md(refusal)) if refusal else t("source.no_rollout"))
        return [(mean_title, mean_fig)]
    rolled = _rollout(attn, lenses.result_key(out))  # (layers, seq, seq)
    left, right = st.columns(2, gap="medium")
    roll_title = t("explore.rollout_title", layer=layer)
    mean_fig = head_heatmap(
        part.cut(mean),
        q_tok,
        title=mean_title,
        key_tokens=k_tok,
        q_pos=part.rows,
        k_pos=part.cols,
        words=heatmap_words(),
        width_hint=HALF_PX,
        zmax=_first_out_top(part.cut(mean), part.cols, exclude),
    )
    roll_fig = head_heatmap(
        part.cut(rolled[layer]),
        q_tok,
        title=roll_title,
        key_tokens=k_tok,
        q_pos=part.rows,
        k_pos=part.cols,
        words={**heatmap_words(), "colorbar": t("explore.rollout_colorbar")},
        width_hint=HALF_PX,
        zmax=_first_out_top(part.cut(rolled[layer]), part.cols, exclude),
    )
    if hidden is not None:
        add_mask_overlay(mean_fig, hidden)
        add_mask_overlay(roll_fig, hidden)
    with left:
        _chart(mean_fig, "mean_chart", f"attention-mean-L{layer}")
    with right:
        _chart(roll_fig, "rollout_chart", f"attention-rollout-L{layer}")
    notes = [t("explore.rollout_note")]
    if layer < attn.shape[0] - 1:
        notes.append(t("explore.rollout_layer_note", layer=layer, last=attn.shape[0] - 1))
    if sink:
        share = float(rolled[layer][part.rows[-1], 0]) if part.cols[0] == 0 else 0.0
        notes.append(t("explore.rollout_sink_out" if exclude else "explore.rollout_sink", share=f"{100 * share:.0f}"))
    st.caption(" ".join(notes))
    if layer < attn.shape[0] - 1:  # the visitor's choice, one click: the view itself never moves their layer
        st.button(
            t("explore.rollout_to_last", last=attn.shape[0] - 1),
            key="rollout_to_last",
            on_click=_set_layer,
            args=(attn.shape[0] - 1,),
        )
    options = list(range(len(part.rows)))
    # A causal model's last token is the one that has read everything (its first reads only itself: one 100 % bar);
    # an encoder's first token ([CLS]) sums up the input. The default follows the maps shown, kept per kind.
    causal = source.is_causal(out)
    row_key = "rollout_row_causal" if causal else "rollout_row"
    if st.session_state.get(row_key) not in options:
        st.session_state[row_key] = (options[-1] if causal else 0) if options else 0
    row = st.columns([1, 2])[0].selectbox(
        t("explore.rollout_row"), options, key=row_key, format_func=lambda i: f"{q_tok[i]} · {part.rows[i]}"
    )
    bars_title = t("explore.rollout_bars_title", token=q_tok[row], layer=layer)
    bar_values = rolled[layer][part.rows[row], part.cols]
    if exclude and part.cols[0] == 0 and len(part.cols) > 1:  # the sink's bar would dwarf the rest: cut the axis
        bars_title += " " + t("explore.rollout_bars_first", share=f"{100 * float(bar_values[0]):.0f}")
    bars = token_bars(
        bar_values,
        k_tok,
        part.cols,
        title=bars_title,
        value_label=t("explore.share"),
        width_hint=FULL_PX,
    )
    if exclude and part.cols[0] == 0 and len(part.cols) > 1 and bar_values[1:].max() > 0:
        bars.update_yaxes(range=[0, 1.15 * float(bar_values[1:].max())])
    _chart(bars, "rollout_bars", f"attention-rollout-row-L{layer}")
    return [(mean_title, mean_fig), (roll_title, roll_fig), (bars_title, bars)]


# ---- exports ---------------------------------------------------------------------------------------


def _export(out: Maps, attn: np.ndarray, figures: list, layer: int, head: int, view: str) -> None:
    with st.expander(t("explore.export_title"), expanded=False):
        st.markdown(t("explore.share_label"))
        st.code(_share_url(), language=None)
        st.radio(
            t("explore.image_format"),
            IMAGE_FORMATS,
            key="img_format",
            horizontal=True,
            format_func=lambda f: f.upper(),
            help=t("explore.image_format_help"),
        )
        cross = source.is_cross(out)
        no_rollout = bool(rollout_refusal(attn.shape[0], attn.shape[-1]))  # over its budget: the NPZ goes without it
        arrays = {
            "tokens": np.array(out.tokens, dtype=str),
            "display_tokens": np.array(_tokens(out), dtype=str),
            "token_type_ids": np.asarray(out.segments, dtype=np.int64),
            "attentions": attn,
            "mask": source.keep_of(out),
        }
        if cross:  # queries and keys are different sequences: the reader takes them back by these names
            arrays["q_tokens"], arrays["k_tokens"] = arrays.pop("tokens"), np.array(source.key_tokens(out), dtype=str)
        a, b, c = st.columns(3)
        a.download_button(
            t("explore.download_npz", mb=attn.nbytes / 2**20),
            # The rollout is computed when the file is asked for, not on every run of every view.
            data=lambda: npz_bytes(
                arrays if cross or no_rollout else {**arrays, "rollout": attention_rollout(attn).numpy()}
            ),
            file_name="attention.npz",
            mime="application/octet-stream",
            key="dl_npz",
            help=t("explore.download_npz_help"),
            on_click="ignore",
        )
        whole = attn.size <= JSON_MAX_VALUES
        doc: dict = {
            "model": out.model,
            "text": None if source.is_file(out) else state.get("text"),
            "text_b": None if source.is_file(out) else state.get("text_b"),
            "mask": out.mask,
            "tokens": out.tokens,
            "token_type_ids": arrays["token_type_ids"],
            "axes": ["layers", "heads", "q_pos", "k_pos"],
        }
        if cross:
            doc["q_tokens"], doc["k_tokens"] = doc.pop("tokens"), source.key_tokens(out)
        if whole:
            doc["attentions"] = attn
        else:
            doc["layer"] = layer
            doc["attentions"] = attn[layer : layer + 1]
        label = t("explore.download_json") if whole else t("explore.download_json_layer", layer=layer)
        b.download_button(
            label,
            data=lambda: json_text(doc),
            file_name="attention.json",
            mime="application/json",
            key="dl_json",
            help=t("explore.download_json_help"),
            on_click="ignore",
        )
        c.download_button(
            t("explore.download_html"),
            data=_html_maker(out, figures, layer, head, view),
            file_name=f"attention-{view}.html",
            mime="text/html",
            key="dl_html",
            help=t("explore.download_html_help"),
            on_click="ignore",
            disabled=not figures,
        )


def _html_maker(out: Maps, figures: list, layer: int, head: int, view: str) -> Callable[[], str]:
    facts = [(t("explore.fact_model"), out.model)]
    if not source.is_file(out):
        facts.append((t("explore.fact_text"), state.get("text") or ""))
    if state.get("text_b") and not source.is_file(out):
        facts.append((t("explore.fact_text_b"), state.get("text_b")))
    facts += [
        (t("explore.fact_view"), t(f"explore.view_{view}")),
        (t("explore.fact_layer_head"), f"{layer} · {head}"),
        (t("explore.fact_mask"), out.mask),
        (t("explore.fact_tokens"), " × ".join(str(n) for n in dict.fromkeys(np.shape(out.attentions)[-2:]))),
        (t("explore.fact_link"), _share_url()),
    ]
    # Everything read from the session is read now: the download runs the callable later, on another thread.
    title, lang = t("explore.title"), state.get("lang")
    config = figure_config(st.session_state.get("img_format", "png"), f"attention-{view}")
    return lambda: standalone_html(title, figures, facts, lang=lang, config=config)


# ---- page ------------------------------------------------------------------------------------------


def _facts(out: Maps) -> None:
    """Caption what is shown: the model and device, or the file with its shape and detected causality."""
    if isinstance(out, AttentionMaps):
        if out.cross:
            st.caption(
                t("source.facts_cross", name=out.model, layers=out.n_layers, heads=out.n_heads, q=out.n_q, k=out.n_k)
            )
        else:
            st.caption(t("source.facts", name=out.model, layers=out.n_layers, heads=out.n_heads, q=out.n_q))
            st.caption(t("source.causal") if out.causal else t("source.not_causal"))
        return
    enc = current_encoder()
    if enc is None:
        return
    c = enc.config
    st.caption(
        t(
            "explore.model_facts",
            name=enc.name,
            layers=c.n_layers,
            heads=c.n_heads,
            d_model=c.d_model,
            d_k=c.d_k,
            tokens=out.seq,
            device=str(enc.device),
        )
    )


def main() -> None:
    st.title(t("explore.title"))
    out = current_maps()
    if out is None:
        return
    state.init("explore")
    _facts(out)
    raw = out
    out = lenses.apply(out)  # raw, value-weighted or words (ui/lenses.py): the views below draw what comes back
    is_pair = any(out.segments)

    # The view picker gets half the row: its four labels stay whole at 1280 px with the sidebar open.
    cols = st.columns([6, 2, 2, 2] if is_pair else [3, 1, 1], gap="medium")
    view = cols[0].segmented_control(
        t("explore.view"),
        VIEWS,
        key="view",
        required=True,
        format_func=lambda v: t(f"explore.view_{v}"),
    )
    layer, head = controls.layer_head(cols[1], cols[2], out.n_layers, out.n_heads)
    if is_pair:
        cols[3].selectbox(
            t("explore.part"),
            PARTS,
            key="part",
            format_func=lambda p: t(f"explore.part_{p}"),
            help=t("explore.part_help"),
        )
    if out.capabilities.causal and not source.is_file(out):
        st.caption(t("explore.decoder_note"))
    if getattr(out, "on_demand", False):  # a long text: maps on demand, pooled views and exact windows
        long_text.explore(out, view or "overview", layer, head)
        state.sync_url("explore", hidden=("part",))
        return
    attn = np.asarray(out.attentions)  # (layers, heads, q_pos, k_pos) float32, from torch or numpy alike
    if source.is_cross(out):  # rows are the queries' sequence, columns the keys'
        part = Part(np.arange(attn.shape[-2]), np.arange(attn.shape[-1]))
    else:
        part = part_of(out.segments, st.session_state.get("part", "all") if is_pair else "all")
    state.sync_url("explore", hidden=() if is_pair else ("part",))

    keep = source.keep_of(out)
    if view == "overview":
        figures = _overview(out, attn, keep, part, layer, head)
    elif view == "layer":
        figures = _layer_view(out, attn, keep, part, layer, head)
    elif view == "head":
        figures = _head_view(out, attn, keep, part, layer, head)
    else:
        figures = _aggregate_view(out, attn, keep, part, layer)
    lenses.side_by_side(raw, layer, head)
    _export(raw, np.asarray(raw.attentions), figures, layer, head, view or "overview")


main()
