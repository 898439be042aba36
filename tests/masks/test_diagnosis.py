"""One diagnoser for both sides (models/masks/diagnosis.py): the same wrong mask gets the same classic bug from
check-mask (the mask's cells) and from check-attention (a module that applies it), word for word; a bug planted
in a shared candidate (the transposed one built untransposed, a neighbour off) fails here on both sides."""

from __future__ import annotations

import pytest
import torch

from models import check_attention
from models.analysis.mask_checker import check_mask
from models.masks import diagnosis
from models.masks.expectations import parse

from .attention_targets import Attention, band, blocks, tril

SENTENCE = "The animal didn't cross the street because it was too tired."  # 16 tokens on minilm
BATCH = [SENTENCE, "Too tired."]


def _both_ways(T: int) -> torch.Tensor:
    i = torch.arange(T)
    return (i[:, None] - i[None, :]).abs() <= 3


SAME_BUG = [
    # (name, the mask as keep (T) → (T, T) bool, expectation, the bug's code)
    ("next token visible", lambda T: tril(T, 1), "causal", "diag.next_visible"),
    ("transposed", lambda T: tril(T).T, "causal", "diag.transposed"),
    ("diagonal masked", lambda T: tril(T, -1), "causal", "diag.diagonal_masked"),
    ("window one too wide", lambda T: band(T, 4), "causal+window:3", "diag.off_by_one"),
    ("chunks counted from 1", lambda T: blocks(T, 4, 1), "causal+chunk:4", "diag.chunk_shifted"),
    ("causality missing", _both_ways, "causal+window:3", "diag.causal_missing"),
    ("another named mask", lambda T: band(T, 2), "causal", "diag.is_named"),
]


@pytest.mark.parametrize("name, keep, expect, code", SAME_BUG, ids=[b[0] for b in SAME_BUG])
def test_checker_and_harness_name_the_same_bug(minilm, name, keep, expect, code):
    T = minilm.encode(SENTENCE).seq
    mask = check_mask(minilm, [SENTENCE], keep(T), "keep", expect)
    module = check_attention(Attention(keep=keep), expect, seq=T)
    assert not mask.ok and not module.ok
    assert [d.code for d in mask.diagnosis] == [code], mask.text()
    assert module.diagnosis is not None and module.diagnosis.code == code, module.text()
    assert mask.diagnosis[0] == module.diagnosis  # the same phrase: code and values
    assert module.cause == mask.diagnosis[0].english()


def test_padding_on_the_wrong_side_is_one_bug_on_both_sides(minilm):
    """A padding mask built from lengths, as if the padding were on the other side: the tokenizer pads the
    checker's batch on the right, check-attention's item 0 on the left; each names the side it saw."""
    mask = check_mask(minilm, BATCH, "attention_mask.flip(-1)", "keep", "padding")
    module = check_attention(Attention(keep=None, padding="lengths"), "padding", pad=4, padding_side="left")
    assert [d.code for d in mask.diagnosis] == ["diag.padding_wrong_side"], mask.text()
    assert module.diagnosis is not None and module.diagnosis.code == "diag.padding_wrong_side", module.text()
    assert "hides the left end of the sequence (right padding treated as left)" in mask.diagnosis[0].english()
    assert "hides the right end of the sequence (left padding treated as right)" in (module.cause or "")


def test_one_meaning_of_transposed():
    """The transposed candidate is the position pattern's transpose with padding kept on the key axis."""
    real = torch.tensor([[True] * 5 + [False] * 3, [True] * 8])
    found = {c.code: c for c in diagnosis.candidates(parse("causal+padding"), real)}
    pos = torch.tril(torch.ones(8, 8, dtype=torch.bool))
    assert torch.equal(found["transposed"].keep, pos.T[None] & real[:, None, :])
    assert not bool(found["transposed"].keep[0, :, 5:].any())  # padded keys stay hidden, on every query row
    assert torch.equal(found["next_visible"].keep, torch.tril(torch.ones(8, 8, dtype=torch.bool), 1) & real[:, None, :])
    assert torch.equal(found["padding_on_queries"].keep, pos[None] & real[:, :, None])


def test_dependence_of_a_row_with_no_key_is_every_key():
    """What check-attention sees of a mask: a row with no visible key reads every key (softmax over finfo.min)."""
    keep = torch.tril(torch.ones(4, 4, dtype=torch.bool), -1)
    dep = diagnosis.dependence(keep)
    assert dep[0].all() and torch.equal(dep[1:], torch.tril(torch.ones(4, 4, dtype=torch.bool))[1:])
    assert torch.equal(diagnosis.dependence(band(6, 1), 2), band(6, 2))  # a window widens by W per layer
