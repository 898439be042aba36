"""Explore a long text (thousands of tokens) whose maps are made on demand: pooled tiles, exact windows, bands.

A long text's maps are never held whole (models.maps.OnDemandMaps). Here: every head at a glance from max-pooled
tiles (each cell the largest weight of its block of tokens, said on the page), a layer's heads from the same
tiles, one head's map pooled with a window the reader moves and sizes down to single tokens (the window's cells
drawn from the exact map of that window only), the line view for the window, and a sliding-window layer's band.
Streamlit glue only; the maps come from models, the figures from viz.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from models import EncoderOutput
from models.maps import OVERVIEW_CELLS, pool_factor
from viz.heatmap import head_heatmap
from viz.layer import layer_figure
from viz.lines import lines_figure
from viz.overlays import add_mask_overlay
from viz.overview import overview_figure, render_mosaic

from . import debug, results, state
from .state import t

TILE = OVERVIEW_CELLS  # cells per side of an overview tile (and of a layer's maps): max-pooled by the forward
HEAD_CELLS = 256  # cells per side of one head's pooled map
WINDOW = 128  # tokens per side of the exact window a head opens on
LINES_MAX = 80


@debug.counted("long_pooled", results.cached)
def pooled(key: state.Selection, size: int, how: str, _out: EncoderOutput) -> np.ndarray:
    """Return every head's map pooled to ≤ size × size cells, (layers, heads, qb, kb) float32 (cached per text)."""
    maps = _out.attentions
    return np.stack([maps.pooled(layer, None, size, how).numpy() for layer in range(_out.n_layers)])


@debug.counted("long_head", results.cached)
def head_pooled(key: state.Selection, layer: int, head: int, size: int, _out: EncoderOutput) -> np.ndarray:
    """Return one head's map max-pooled to ≤ size × size cells (cached)."""
    return _out.attentions.pooled(layer, head, size, "max").numpy()


def block_labels(tokens: list[str], f: int, n: int) -> tuple[list[str], list[int]]:
    """Return labels and start positions of the pooled cells: "i–j: first token" per block of f tokens."""
    starts = list(range(0, n, f))
    if f == 1:
        return [tokens[i] for i in starts], starts
    return [f"{i}–{min(n, i + f) - 1}: {tokens[i]}" for i in starts], starts


def note(out: EncoderOutput) -> None:
    """Say what a long text's page shows: maps on demand, what they keep against what dense maps would take."""
    maps = out.attentions
    st.info(
        t(
            "long.note",
            tokens=f"{out.seq:,}",
            kept=f"{maps.nbytes / 2**20:,.0f}",
            dense=f"{maps.nbytes_dense / 2**30:,.1f}",
        )
    )


def overview(out: EncoderOutput, layer: int, head: int) -> list:
    """Every head at a glance from max-pooled tiles."""
    caps = out.capabilities
    with st.spinner(t("long.pooling", heads=out.n_layers * out.n_heads)):
        tiles = pooled(state.selection(), TILE, "max", out)
    f = pool_factor(out.seq, out.seq, TILE)
    group = caps.group_size if caps.grouped else 1
    scale = st.session_state.get("overview_scale", "sqrt")
    exclude = bool(st.session_state.setdefault("overview_exclude_first", caps.special_roles == "first_token"))
    mosaic = render_mosaic(tiles, scale=scale if scale in ("sqrt", "map", "log") else "sqrt", exclude_first=exclude,
                           group=group, max_tile=TILE)  # fmt: skip
    fig = overview_figure(
        mosaic,
        selected=(layer, head),
        title=t("explore.overview_title"),
        hover=t("explore.overview_hover_long", layer="%{customdata[0]}", head="%{customdata[1]}") + "<extra></extra>",
        group_prefix=t("explore.kv_prefix"),
    )
    st.plotly_chart(fig, key="overview_chart", width="stretch")
    st.caption(t("long.overview_note", f=f, cells=tiles.shape[-1]))
    left, right = st.columns([3, 2])
    left.radio(
        t("explore.overview_scale"),
        ("sqrt", "map", "log"),
        key="overview_scale",
        horizontal=True,
        format_func=lambda s: t(f"explore.overview_scale_name.{s}"),
    )
    right.toggle(t("explore.exclude_first"), key="overview_exclude_first", help=t("explore.exclude_first_help"))
    return [(t("explore.overview_title"), fig)]


def layer_view(out: EncoderOutput, layer: int) -> list:
    """A layer's heads from the same max-pooled tiles, with the layer's band when it has a sliding window."""
    tiles = pooled(state.selection(), TILE, "max", out)[layer]  # (heads, qb, kb)
    f = pool_factor(out.seq, out.seq, TILE)
    labels, starts = block_labels(list(out.display_tokens or out.tokens), f, out.seq)
    titles = [t("explore.head_short", head=h) for h in range(tiles.shape[0])]
    fig, _ = layer_figure(tiles, titles, q_pos=starts, k_pos=starts)
    fig.update_layout(title=dict(text=t("explore.layer_title", layer=layer), y=0.995, yanchor="top"), margin=dict(t=70))
    st.plotly_chart(fig, key="layer_chart", width="stretch")
    window = out.capabilities.window(layer)
    st.caption(t("long.layer_note", f=f) + (" " + t("long.band", window=window) if window else ""))
    return [(t("explore.layer_title", layer=layer), fig)]


def head_view(out: EncoderOutput, layer: int, head: int) -> list:
    """One head: its whole map pooled, a window moved and sized down to single tokens, exact inside."""
    n = out.seq
    tokens = list(out.display_tokens or out.tokens)
    small = head_pooled(state.selection(), layer, head, HEAD_CELLS, out)
    f = pool_factor(n, n, HEAD_CELLS)
    labels, starts = block_labels(tokens, f, n)
    size = int(st.session_state.get("long_size", WINDOW))
    a, b, c = st.columns(3)
    size = a.select_slider(
        t("long.size"), options=[8, 16, 32, 64, 128, 256], value=min(256, max(8, size)), key="long_size"
    )
    default_q = max(0, n - size)  # a causal text's last rows read everything before them
    q0 = b.number_input(
        t("long.q0"), 0, max(0, n - size), min(default_q, max(0, n - size)), step=size // 2 or 1, key="long_q0"
    )
    k0 = c.number_input(
        t("long.k0"), 0, max(0, n - size), min(int(q0), max(0, n - size)), step=size // 2 or 1, key="long_k0"
    )
    q0, k0 = int(q0), int(k0)
    q1, k1 = min(n, q0 + size), min(n, k0 + size)
    full = head_heatmap(
        small, labels, title=t("long.head_pooled", layer=layer, head=head, f=f), q_pos=starts, k_pos=starts
    )
    full.add_shape(  # the window, on the pooled map (cell coordinates)
        type="rect", x0=k0 / f - 0.5, x1=k1 / f - 0.5, y0=q0 / f - 0.5, y1=q1 / f - 0.5,
        line=dict(color="#e4572e", width=2),
    )  # fmt: skip
    weights = out.attentions.head(layer, head, rows=slice(q0, q1), cols=slice(k0, k1)).numpy()
    win = head_heatmap(
        weights,
        tokens[q0:q1],
        title=t("long.head_window", layer=layer, head=head, q0=q0, q1=q1 - 1, k0=k0, k1=k1 - 1),
        key_tokens=tokens[k0:k1],
        q_pos=list(range(q0, q1)),
        k_pos=list(range(k0, k1)),
        raw_tokens=list(out.tokens[q0:q1]),
        raw_key_tokens=list(out.tokens[k0:k1]),
    )
    keep = out.layer_keep(layer)[q0:q1, k0:k1].numpy()
    if not keep.all():
        add_mask_overlay(win, keep, weights)  # hidden cells grey: the causal triangle, a window's band
    left, right = st.columns(2)
    left.plotly_chart(full, key="long_head_pooled", width="stretch")
    right.plotly_chart(win, key="head_heatmap", width="stretch")
    window = out.capabilities.window(layer)
    st.caption(
        t("long.head_note", f=f, rows=q1 - q0, cols=k1 - k0, mass=f"{100 * float(weights.sum(-1).mean()):.0f}")
        + (" " + t("long.band", window=window) if window else "")
    )
    figures = [
        (t("long.head_pooled", layer=layer, head=head, f=f), full),
        (t("explore.head_title", layer=layer, head=head), win),
    ]
    if q1 - q0 <= LINES_MAX and k1 - k0 <= LINES_MAX:
        lines = lines_figure(
            weights, tokens[q0:q1], tokens[k0:k1], q_pos=list(range(q0, q1)), k_pos=list(range(k0, k1)),
            title=t("explore.lines_title"),
        )  # fmt: skip
        st.plotly_chart(lines, key="lines_chart", width="stretch")
        figures.append((t("explore.lines_title"), lines))
    else:
        st.caption(t("long.lines_smaller", n=LINES_MAX))
    return figures


def aggregate_view(out: EncoderOutput, layer: int) -> list:
    """The mean over a layer's heads, from mean-pooled maps (rows still sum to 1), labelled pooled."""
    tiles = pooled(state.selection(), HEAD_CELLS, "mean", out)[layer]  # (heads, qb, kb)
    f = pool_factor(out.seq, out.seq, HEAD_CELLS)
    labels, starts = block_labels(list(out.display_tokens or out.tokens), f, out.seq)
    fig = head_heatmap(
        tiles.mean(axis=0), labels, title=t("long.mean_title", layer=layer, f=f), q_pos=starts, k_pos=starts
    )
    st.plotly_chart(fig, key="mean_chart", width="stretch")
    st.caption(t("long.mean_note", f=f))
    return [(t("long.mean_title", layer=layer, f=f), fig)]


def explore(out: EncoderOutput, view: str, layer: int, head: int) -> list:
    """Draw the Explore page's view for a long text; return its figures."""
    note(out)
    if view == "layer":
        return layer_view(out, layer)
    if view == "head":
        return head_view(out, layer, head)
    if view == "overview" or not view:
        return overview(out, layer, head)
    return aggregate_view(out, layer)
