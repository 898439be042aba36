"""Lenses on the maps: raw attention, value-weighted attention and words, applied before a page's views draw.

`apply(out)` draws two switches (their keys "weighted" and "words" are shareable URL keys of the page) and returns
maps with the same names as the model's output (an EncoderOutput, or a file's AttentionMaps), so every view —
overview, layer, head, line view — draws them unchanged:

- value-weighted: each row's shares of ‖α_ij · W_O^h v_j‖ (models.analysis.norms; rows sum to 1 like the raw
  maps); needs the model (not an attention file);
- words: sub-tokens merged (models.analysis.words): keys of a word summed, its queries averaged, special tokens
  apart; the tokens a word merges show on hover (as the "raw" token).

Results are cached per selection in ui.results (a heavy slot for each miss); budgets are checked before anything
is allocated (models.settings max_derived_values).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import streamlit as st
import torch

from models import AttnVizError, EncoderOutput
from models.analysis.norms import first_token_share, value_weighted
from models.analysis.words import Words, word_groups
from models.attention_file import AttentionMaps
from viz.compare import paired_heatmaps

from . import cache, debug, results, source, state
from .safe import md
from .sidebar import current_output
from .state import Selection, t

Maps = EncoderOutput | AttentionMaps


@dataclasses.dataclass
class Weighted:
    """What the value-weighted lens keeps of one run (numpy: cached, shared, never mutated)."""

    shares: np.ndarray  # (layers, heads, q_pos, k_pos) float32: each row's shares of α_ij·‖W_O^h v_j‖
    output_norm: np.ndarray  # (layers, heads): mean ‖output‖ of each head over query rows
    first_raw: np.ndarray  # (layers, heads): share on the first token, raw attention (rows i ≥ 1)
    first_weighted: np.ndarray  # (layers, heads): the same, value-weighted


@debug.counted("weighted", results.cached)
def weighted(sel: Selection) -> Weighted:
    """Return the value-weighted maps of the selection's text (the model's values: encode with internals)."""
    enc = cache.model(sel)
    out = cache.encode(sel, True)
    vw = value_weighted(enc, out)
    shares = vw.shares()
    raw = np.stack([out.attentions[layer].numpy() for layer in range(out.n_layers)])
    return Weighted(
        shares=shares,
        output_norm=vw.output_norm,
        first_raw=first_token_share(raw),
        first_weighted=first_token_share(shares),
    )


def words_of(out: Maps) -> Words:
    """Return the words of a run's (or a file's) tokens; the tokenizer's own special tokens when there is a model."""
    specials = None
    if not source.is_file(out):
        try:
            specials = cache.model(state.selection()).tokenizer.all_special_tokens
        except (AttnVizError, AttributeError):
            specials = None
    return word_groups(list(out.tokens), out.capabilities.token_display, specials)


@debug.counted("words_maps", results.cached)
def _merged(key: Selection, lens: str, _attn: Any, _words: Words) -> np.ndarray:
    """Return every layer's maps merged to words, (layers, heads, words, words) (cached per selection and lens)."""
    return np.stack([_words.merge(np.asarray(_attn[layer])) for layer in range(len(_attn))])


def lens_name(weighted_on: bool, words_on: bool) -> str:
    return "+".join(n for n, on in (("weighted", weighted_on), ("words", words_on)) if on) or "raw"


def result_key(out: Maps) -> Selection:
    """Return the cache key of the maps a lens made: the source's key with the lens in it (mosaics, rollout)."""
    key = source.result_key(out)
    lens = lens_name(bool(st.session_state.get("weighted")), bool(st.session_state.get("words")))
    return key if lens == "raw" else key._replace(mask=f"{key.mask}⟨{lens}⟩")


def _switches(out: Maps) -> tuple[bool, bool]:
    """Draw the two lens switches; return (value-weighted, words). Unavailable lenses are off and say why."""
    file = source.is_file(out)
    cross = source.is_cross(out)
    long = bool(getattr(out, "on_demand", False))  # a long text's maps are made on demand, never kept whole
    if file or long:
        st.session_state["weighted"] = False
    if cross or long:
        st.session_state["words"] = False
    a, b = st.columns(2)
    w = a.toggle(
        t("lens.weighted"),
        key="weighted",
        disabled=file or long,
        help=t("lens.long") if long else t("lens.weighted_needs_model") if file else t("lens.weighted_help"),
    )
    words = b.toggle(
        t("lens.words"),
        key="words",
        disabled=cross or long,
        help=t("lens.long") if long else t("lens.words_cross") if cross else t("lens.words_help"),
    )
    return bool(w) and not (file or long), bool(words) and not (cross or long)


def _as_words(out: Maps, attn: np.ndarray, words: Words) -> Maps:
    """Return out with its token axis turned into words (maps, tokens, mask and segments merged)."""
    keep = words.merge_keep(source.keep_of(out))
    shown, merged_tokens = list(words.words), list(words.pieces)
    if isinstance(out, AttentionMaps):
        types = None if out.token_type_ids is None else words.first_of_word(out.token_type_ids)
        return dataclasses.replace(
            out, attentions=attn, q_tokens=merged_tokens, k_tokens=merged_tokens, keep=keep, token_type_ids=types
        )
    n = words.n_words
    return dataclasses.replace(
        out,
        tokens=merged_tokens,
        display_tokens=shown,
        attentions=torch.from_numpy(attn),
        input_ids=out.input_ids[list(words.starts)],
        token_type_ids=torch.from_numpy(words.first_of_word(out.token_type_ids.numpy())),
        keep=torch.from_numpy(keep),
        padding=torch.ones(n, dtype=torch.bool),
        queries=None,
        keys=None,
        values=None,
        scores=None,
        context=None,
        layer_inputs=None,
        hidden_states=None,
    )


def apply(out: Maps) -> Maps:
    """Draw the lens switches and return the maps the views should draw (out itself when both are off)."""
    weighted_on, words_on = _switches(out)
    if not (weighted_on or words_on):
        return out
    shown: Maps = out
    sel = source.result_key(out)
    try:
        if weighted_on:
            full = current_output(internals=True)  # the values: the same text, encoded with internals
            if full is None:
                return out
            with st.spinner(t("lens.computing_weighted")):
                w = weighted(state.selection())
            shown = dataclasses.replace(full, attentions=torch.from_numpy(w.shares))
            first_r, first_w = float(w.first_raw.mean()), float(w.first_weighted.mean())
            note = t("lens.weighted_note", raw=f"{100 * first_r:.0f}", weighted=f"{100 * first_w:.0f}")
            st.caption(note)
        if words_on:
            words = words_of(shown)
            attn = shown.attentions
            if words.merged:
                merged = _merged(sel, lens_name(weighted_on, True), attn, words)
                shown = _as_words(shown, merged, words)
            st.caption(
                t("lens.words_note", tokens=words.n_tokens, words=words.n_words)
                if words.merged
                else t("lens.words_none")
            )
    except AttnVizError as err:
        st.error(t("lens.failed", reason=md(err)))
        return out
    return shown


def side_by_side(out: Maps, layer: int, head: int) -> None:
    """With the value-weighted lens on: the selected head's raw and value-weighted maps side by side, and the
    first token's share in each (the sink that shrinks)."""
    if source.is_file(out) or not st.session_state.get("weighted"):
        return
    full = current_output(internals=True)
    if full is None:
        return
    w = weighted(state.selection())
    raw = full.attentions[layer, head].numpy()
    vw = w.shares[layer, head]
    tokens = list(full.display_tokens or full.tokens)
    words_on = bool(st.session_state.get("words"))
    if words_on:
        words = words_of(full)
        raw, vw, tokens = words.merge(raw), words.merge(vw), list(words.words)
    st.markdown("**" + t("lens.side_title", layer=layer, head=head) + "**")
    fig = paired_heatmaps(
        [raw, vw],
        [t("lens.raw_title"), t("lens.weighted_title")],
        [t("lens.raw_short"), t("lens.weighted_short")],
        tokens,
        words={"query": t("explore.query"), "key": t("explore.key")},
    )
    st.plotly_chart(fig, key="lens_side_by_side", width="stretch")
    st.caption(
        t(
            "lens.side_note",
            raw=f"{100 * float(w.first_raw[layer, head]):.0f}",
            weighted=f"{100 * float(w.first_weighted[layer, head]):.0f}",
            norm=f"{float(w.output_norm[layer, head]):.2f}",
        )
    )
