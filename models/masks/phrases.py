"""The one phrase table of the mask checker and the attention harness: every message as a code and its values.

A `Phrase` is a code from `MESSAGES` and the values its template takes; `Phrase.english()` is what the command
line prints, and the app renders the same code in any language (ui.i18n serves `MESSAGES` as `masks.msg.<code>`;
the Chinese, with the same {placeholders}, is in ui/locales/zh/masks.toml, held to it by tests/app/test_masks_page.py).
The classic bugs (`diag.*`) are named here once for both sides: `models.masks.diagnosis` builds their patterns,
the checker (a mask's cells) and the harness (a module's dependency pattern) match them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# English for every message code, the CLI's and the page's (ui.i18n serves these as masks.msg.<code>); the
# Chinese, with the same {placeholders}, is in ui/locales/zh/masks.toml (tests/app/test_masks_page.py).
MESSAGES: dict[str, str] = {
    "verdict.pass": "PASS: this is a correct {expect} mask in the {declared} convention.",
    "verdict.fail": "FAIL: this is not a correct {expect} mask in the {declared} convention: {n_failed} of {n_checks} checks fail.",
    "check.shape": "shape",
    "check.convention": "convention",
    "check.leaks": "leaks",
    "check.over": "over-masked",
    "check.rows": "empty rows",
    "check.behaviour": "behaviour",
    "check.mass": "forbidden mass",
    "shape.ok": "{shape} → {view}, broadcast to (batch, heads, q_pos, k_pos) = {target}; {axes}.",
    "shape.key_padding": "{shape} is read as a (batch, seq) key-padding mask → {view}, broadcast to {target}; {axes}.",
    "shape.queries": "{shape} → {view}: the sequence axis lands on q_pos and k_pos is broadcast, so the mask hides whole query rows instead of keys; {axes}.",
    "convention.match": "values {values}; read as {apparent}, {why}: as declared.",
    "convention.unclear": "values {values}; the values alone cannot tell keep from drop, so the declared {declared} is taken.",
    "convention.mismatch": "declared {declared}, but the values {values} read as {apparent}: {why}. {advice}",
    "convention.same_cells": "declared {declared}; the values {values} look {apparent}, but both readings hide the same cells here.",
    "convention.invalid": "the values {values} are not a valid {declared} mask: {problem}.",
    "convention.no_fix": "declared {declared}; read as {apparent} the values {values} come closer ({why}), but neither reading is {expect}: ~mask would make another wrong mask, so the cells themselves are wrong (see the diagnosis).",
    "why.exact": "it is exactly the expected {expect} mask",
    "why.closer": "{agree}% of the judged cells agree with {expect} (read the other way: {other}%)",
    "why.diagonal": "every token sees itself (the other reading would hide each token from itself)",
    "why.additive": "0 = attend and {fill} = masked, added to the scores",
    "why.additive_none": "all 0, added to the scores: nothing masked",
    "advice.keep_as_drop": "True means masked here, nn.MultiheadAttention's convention: pass ~mask, or declare drop.",
    "advice.drop_as_keep": "True means may attend here, SDPA's and the tutorial's convention: pass ~mask, or declare keep.",
    "advice.bool_as_additive": "Added to the scores, 0 and 1 hide nothing: use (1 - mask) * torch.finfo(dtype).min, or declare {apparent}.",
    "advice.additive_as_bool": "Read as {declared}, -inf is nonzero, so the hidden and visible cells swap: declare additive, or pass mask == 0.",
    "problem.not01": "a keep or drop mask holds True/False or 0/1 (~ on an int mask gives -1 and -2; use a bool mask)",
    "problem.soft": "an additive mask holds 0 and -inf (or ≤ -1e4); other values are soft biases, not a mask",
    "problem.nan": "NaN in a mask turns the scores it touches into NaN",
    "leaks.none": "no cell is visible that {expect} hides ({judged} cells judged).",
    "leaks.found": "cells visible that {expect} hides: {n}, e.g. {examples}.",
    "over.none": "no cell is hidden that {expect} shows.",
    "over.found": "cells hidden that {expect} shows: {n}, e.g. {examples}.",
    "rows.none": "every query row sees at least one key.",
    "rows.found": "query rows with no visible key: {n} ({examples}). With masked_fill(…, -inf) their softmax is NaN ({nan_rows} NaN rows over all layers and heads) and NaN reaches {nan_out} of {n_out} real output positions; with finfo.min, as our encoder does, they spread evenly over masked keys instead.",
    "rows.padded": "padded query rows with no visible key: {n} ({examples}). Harmless with finfo.min (our encoder), but with -inf they are NaN and the NaN reaches {nan_out} of {n_out} real output positions in the following layers.",
    "rows.padded_nan": "padded query rows with no visible key: {n} ({examples}), and this mask's -inf makes them NaN: the NaN reaches {nan_out} of {n_out} real output positions in the following layers. Use finfo.min instead of -inf.",
    "behaviour.pass": "changed the tokens {what} in {n} copies of the input: the outputs that {expect} shields from them moved by at most {change} (0 when the mask holds).",
    "behaviour.fail": "changed the tokens {what}: the output at position {pos} ('{token}') moved by {change} in layer {layer}: information leaks from positions the mask should hide.",
    "behaviour.skip": "under {expect} every output may depend on every token: nothing to hold fixed.",
    "what.after": "after position t",
    "what.padding": "at padded positions",
    "what.both": "after position t and at padded positions",
    "what.after_t": "after position {t}",
    "mass.zero": "attention on forbidden keys after softmax: exactly 0 in every layer and head.",
    "mass.found": "up to {max_mass} of a query's attention lands on keys {expect} forbids (layer {layer}, head {head}, query {q} '{token}'); {mean_mass} per judged row on average.",
    # The classic bugs, shared by the checker and the harness (models.masks.diagnosis builds their patterns).
    "diag.inverted": "inverted: the mask is the complement of {expect} (True/1 means masked here)",
    "diag.transposed": "transposed: query and key axes swapped (the upper triangle instead of the lower)",
    "diag.diagonal_masked": "off by one: the diagonal is masked, so no token sees itself and the first row sees nothing",
    "diag.next_visible": "off by one: every token also sees the next one",
    "diag.no_mask": "nothing is masked: every query sees every key (the mask is not applied, or 0/1 is added to the scores)",
    "diag.everything_masked": "everything is masked",
    "diag.padding_keys_visible": "padding ignored: padded keys stay visible, so real tokens attend to [PAD] (the attention_mask does not reach the scores)",
    "diag.padding_on_queries": "wrong axis: the padding mask lands on the query axis (mask[:, None, :, None]): it hides whole [PAD] rows instead of [PAD] keys (mask[:, None, None, :])",
    "diag.off_by_one": "off by one: this is {name}, not {expect}",
    "diag.chunk_shifted": "chunk boundary: the blocks of {size} start at position {offset}, not 0 (the block index counted from 1, or left padding not subtracted)",
    "diag.padding_wrong_side": "padding on the wrong side: the mask hides the {other} end of the sequence ({side} padding treated as {other})",
    "side.left": "left",
    "side.right": "right",
    "diag.is_named": "this is a {name} mask",
    "diag.causal_missing": "causality missing: this is {name} without causal, so tokens also see the tokens after them",
    "diag.term_missing": "the {term} term is not applied: this is {name}",
    # What only the harness sees: a module's outputs, not a mask's cells.
    "diag.nonfinite": "non-finite outputs: a query row with every key masked by -inf gives NaN after softmax (use torch.finfo(dtype).min, or make sure every row keeps a key)",
    "diag.batch_swapped": "batch items see each other: the batch and sequence axes are swapped (nn.MultiheadAttention without batch_first=True reads (batch, seq, d_model) as (seq, batch, d_model))",
    "diag.too_shallow": "the pattern is {closure}, which is {expect} over {k} layers: a {k}-layer target is judged with --depth {k} (depth={k})",
    "diag.after_softmax": "mask applied after softmax without renormalising: the forbidden keys reach query {q} only through the softmax's denominator (their dependence has rank {rank}, at most one per head, against {allowed_rank} for the allowed keys); renormalise the rows, or mask the scores before softmax",
    "diag.softmax_over_queries": "normalisation over the sequence axis: softmax over queries (dim=-2) instead of keys (dim=-1), so each key's column is normalised over every query, the future included",
    "diag.statistics_over_positions": "normalisation over the sequence axis: every forbidden position reaches the output through per-feature statistics over positions (a mean or norm over dim=1 instead of dim=-1)",
    "diag.unseen_dependence": "a dependence autograd cannot see: detach(), integer ops, or a mask computed from the values",
    "shape.decoder": "this model is a decoder: it always applies its own causal mask (torch.tril) and ANDs yours with "
    "it, so what is judged below is that combination: {hidden} cell(s) your mask leaves open are hidden by the "
    "model's own mask.",
}


@dataclass
class Phrase:
    """A message: a code from MESSAGES and its values (which may be Phrases themselves)."""

    code: str
    values: dict[str, Any] = field(default_factory=dict)

    def render(self, lookup: Any) -> str:
        """Return the message with lookup(code) as its template (nested Phrases rendered the same way)."""
        vals = {k: v.render(lookup) if isinstance(v, Phrase) else v for k, v in self.values.items()}
        return lookup(self.code).format(**vals)

    def english(self) -> str:
        return self.render(MESSAGES.__getitem__)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.english(), "values": _jsonable(self.values)}


def _jsonable(v: Any) -> Any:
    if isinstance(v, Phrase):
        return v.english()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray | torch.Tensor):
        return _jsonable(v.tolist())
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v
