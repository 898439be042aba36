"""Attention Lens in a notebook: `show(attentions, tokens)` draws attention from any model as a plotly figure.

Sits above `viz` and `models` as the app's pages do, and never imports streamlit or torch itself: tensors are
read through `.detach().cpu().numpy()`. Layouts are brought to (layers, heads, q_pos, k_pos) by the same
normaliser the file reader uses (`models.attention_file.normalise_attentions`).

    from lens import init_notebook, show
    init_notebook()                                         # first cell: plotly.js once for the whole notebook
    out = model(**inputs, output_attentions=True)           # any transformers model (attn_implementation="eager")
    show(out.attentions, tokenizer.convert_ids_to_tokens(inputs["input_ids"][0]))
    show(out.attentions, tokens, view="head", layer=2, head=3)
    show(cross, q_tokens, view="head", k_tokens=source_tokens)   # cross-attention: queries on rows, keys on columns

The figure renders offline in Jupyter, JupyterLab, VS Code and Colab (viz.notebook.NotebookFigure); plotly.js
travels once per notebook (`init_notebook()`, else with the first figure), not once per figure.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from models.attention_file import AttentionMaps, maps_from
from viz.heatmap import head_heatmap
from viz.layer import layer_figure
from viz.lines import lines_figure
from viz.notebook import NotebookFigure, PlotlyLoader
from viz.overlays import add_mask_overlay
from viz.overview import overview_figure, render_mosaic

VIEWS = ("overview", "layer", "head", "lines")

__all__ = ["VIEWS", "AttentionNote", "figure", "init_notebook", "maps", "show"]


class AttentionNote(UserWarning):
    """Something to know about the maps shown: a batch item picked, positions named 0…n−1, rows not summing to 1."""


def init_notebook(full: bool = False) -> None:
    """Show plotly.js once, as this cell's output, for every figure below it (offline; call it in the first cell).

    The vendored cartesian bundle (1.5 MB) draws every view of `show`; full=True puts the whole plotly.js (4.8 MB)
    there for figures of other kinds. A saved notebook keeps this one copy; each figure after it holds only its
    own data, and draws again when the notebook is reopened and trusted.
    """
    from IPython.display import display  # a notebook's kernel always has IPython; lens itself does not need it

    display(PlotlyLoader(full))


def maps(
    attentions: Any,
    tokens: Sequence[str] | None = None,
    k_tokens: Sequence[str] | None = None,
    *,
    item: int = 0,
    mask: Any = None,
) -> AttentionMaps:
    """Return the checked AttentionMaps of attention in any accepted layout (see models.attention_file)."""
    return maps_from(attentions, tokens, k_tokens, keep=mask, item=item, name="notebook")


def figure(
    m: AttentionMaps, view: str = "overview", layer: int = 0, head: int = 0, focus: int | None = None
) -> NotebookFigure:
    """Return the figure of one view of AttentionMaps (see `show`)."""
    if view not in VIEWS:
        raise ValueError(f"view {view!r}: use one of {', '.join(VIEWS)}")
    if not 0 <= layer < m.n_layers:
        raise ValueError(f"layer {layer}: the attention has layers 0…{m.n_layers - 1}")
    if not 0 <= head < m.n_heads:
        raise ValueError(f"head {head}: the attention has heads 0…{m.n_heads - 1}")
    attn = m.attentions
    keep = m.keep if m.keep is not None and not m.keep.all() else None
    what = "cross-attention" if m.cross else ("causal" if m.causal else "attention")
    size = f"{m.n_q} × {m.n_k} tokens" if m.cross else f"{m.n_q} tokens"
    if view == "overview":
        mosaic = render_mosaic(attn, keep, small=True)  # the notebook keeps it: compressed hard
        fig = overview_figure(
            mosaic, selected=(layer, head), title=f"All heads: {m.n_layers} layers × {m.n_heads} heads, {what}, {size}"
        )
    elif view == "layer":
        stacked = np.concatenate([attn[layer], attn[layer].mean(axis=0, keepdims=True)])
        titles = [f"H{h}" for h in range(m.n_heads)] + ["mean"]
        fig, _ = layer_figure(stacked, titles, keep=keep, tokens=m.q_tokens, key_tokens=m.k_tokens, width_hint=900)
        fig.update_layout(title=dict(text=f"Layer {layer}: every head and their mean ({what})", y=0.995))
    elif view == "head":
        weights = attn[layer, head]
        fig = head_heatmap(
            weights, m.q_tokens, title=f"Layer {layer}, head {head} ({what})", key_tokens=m.k_tokens, width_hint=900
        )
        if keep is not None:
            add_mask_overlay(fig, keep, weights)
    else:
        fig = lines_figure(
            attn[layer, head], m.q_tokens, m.k_tokens, focus=focus, title=f"Layer {layer}, head {head}: lines"
        )
    return NotebookFigure(fig)


def show(
    attentions: Any,
    tokens: Sequence[str] | None = None,
    view: str = "overview",
    layer: int = 0,
    head: int = 0,
    k_tokens: Sequence[str] | None = None,
    *,
    item: int = 0,
    mask: Any = None,
    focus: int | None = None,
) -> NotebookFigure:
    """Return a plotly figure of attention from any model, ready to display in a notebook (offline).

    attentions: numpy or torch, (layers, heads, q_pos, k_pos), (layers, batch, heads, q_pos, k_pos),
        (heads, q_pos, k_pos) or (q_pos, k_pos); transformers' `output.attentions` tuple of (batch, heads,
        q_pos, k_pos) per layer; or the transformers output itself.
    tokens: one per query row (positions 0…n−1 when omitted). k_tokens: one per key column, for
        cross-attention (queries and keys from different sequences); rows are queries, columns keys.
    view: "overview" (every layer × head), "layer" (its heads and their mean), "head" (one heatmap with
        hover) or "lines" (token-to-token lines; focus = a query row keeps only its lines).
    item: which batch element to draw. mask: optional (q_pos, k_pos) bool, True = may attend, drawn over
        the maps. Notes (item picked, positions named, rows not summing to 1) come as AttentionNote warnings.
    """
    m = maps(attentions, tokens, k_tokens, item=item, mask=mask)
    for note in m.notes:
        warnings.warn(str(note), AttentionNote, stacklevel=2)
    return figure(m, view, layer, head, focus)
