"""check_attention on planted bugs: correct attention passes, each classic bug fails with its cause.

The targets live in tests/masks/attention_targets.py (bench/masks.py times them too).
"""

from __future__ import annotations

import pytest
import torch

from models import assert_attention, check_attention
from models.errors import InputError, MaskError
from models.masks.harness import TargetError

from .attention_targets import (
    Attention,
    MHACausal,
    SDPACausal,
    Stack,
    band,
    blocks,
    cumulative_mean,
    tril,
)

CORRECT = [
    ("hand-written tril", lambda: Attention(), "causal", {}),
    ("SDPA is_causal", lambda: SDPACausal(), "causal", {}),
    ("nn.MultiheadAttention bool mask", lambda: MHACausal(), "causal", {}),
    ("mask after softmax, renormalised", lambda: Attention(how="after_renorm"), "causal", {}),
    ("2-layer stack", lambda: Stack(), "causal", {}),
    ("2-layer sliding window at depth 2", lambda: Stack(keep=lambda T: band(T, 2)), "causal+window:2", {"depth": 2}),
    ("cumulative mean", lambda: cumulative_mean, "causal", {}),
    ("sliding window", lambda: Attention(keep=lambda T: band(T, 3)), "causal+window:3", {}),
    ("chunked", lambda: Attention(keep=lambda T: blocks(T, 4)), "causal+chunk:4", {}),
    ("right padding", lambda: Attention(), "causal+padding", {"pad": 4}),
    ("left padding", lambda: Attention(), "causal+padding", {"pad": 4, "padding_side": "left"}),
    ("bidirectional", lambda: Attention(keep=None), "bidirectional", {}),
]


@pytest.mark.parametrize("name, make, expect, kw", CORRECT, ids=[c[0] for c in CORRECT])
def test_correct_attention_passes(name, make, expect, kw):
    r = check_attention(make(), expect, **kw)
    assert r.ok, r.text()
    assert r.leaks == r.over_masked == r.padded_reads == r.batch_leaks == [] and r.cause is None


BUGS = [
    # (name, target, expectation, kwargs, words the cause must contain, which lists are non-empty)
    ("transposed", lambda: Attention(keep=lambda T: tril(T).T), "causal", {}, "transposed", {"leaks", "over_masked"}),
    ("next token visible", lambda: Attention(keep=lambda T: tril(T, 1)), "causal", {}, "off by one", {"leaks"}),
    (
        "window one too wide",
        lambda: Attention(keep=lambda T: band(T, 4)),
        "causal+window:3",
        {},
        "causal+window:4",
        {"leaks"},
    ),
    (
        "window one too narrow",
        lambda: Attention(keep=lambda T: band(T, 2)),
        "causal+window:3",
        {},
        "causal+window:2",
        {"over_masked"},
    ),
    (
        "chunk boundary",
        lambda: Attention(keep=lambda T: blocks(T, 4, 1)),
        "causal+chunk:4",
        {},
        "chunk boundary",
        {"leaks", "over_masked"},
    ),
    (
        "mask after softmax",
        lambda: Attention(how="after"),
        "causal",
        {},
        "after softmax without renormalising",
        {"leaks"},
    ),
    ("softmax over queries", lambda: Attention(how="queries"), "causal", {}, "sequence axis", {"leaks"}),
    ("norm over positions", lambda: Attention(seq_norm=True), "causal", {}, "sequence axis", {"leaks"}),
    (
        "padding on queries",
        lambda: Attention(padding="queries"),
        "causal+padding",
        {"pad": 4, "padding_side": "left"},
        "query axis",
        {"padded_reads"},
    ),
    (
        "padding ignored",
        lambda: Attention(keep=None, padding="ignore"),
        "padding",
        {"pad": 4},
        "padding ignored",
        {"padded_reads"},
    ),
    (
        "left padding as right",
        lambda: Attention(padding="lengths"),
        "causal+padding",
        {"pad": 4, "padding_side": "left"},
        "wrong side",
        {"padded_reads", "over_masked"},
    ),
    (
        "batch_first missing",
        lambda: MHACausal(batch_first=False, causal=False),
        "bidirectional",
        {},
        "batch_first",
        {"batch_leaks", "over_masked"},
    ),
    ("-inf on an empty row", lambda: Attention(keep=lambda T: tril(T, -1), how="neg_inf"), "causal", {}, "NaN", set()),
    ("no mask", lambda: Attention(keep=None), "causal", {}, "nothing is masked", {"leaks"}),
    (
        "stack judged at depth 1",
        lambda: Stack(keep=lambda T: band(T, 2)),
        "causal+window:2",
        {},
        "--depth 2",
        {"leaks"},
    ),
    (
        "window not applied",
        lambda: Stack(),
        "causal+window:2",
        {"depth": 2},
        "window:2 term is not applied",
        {"leaks"},
    ),
]


@pytest.mark.parametrize("name, make, expect, kw, words, lists", BUGS, ids=[b[0] for b in BUGS])
def test_planted_bug_fails_with_its_cause(name, make, expect, kw, words, lists):
    r = check_attention(make(), expect, **kw)
    assert not r.ok
    assert r.cause and words in r.cause, r.text()
    for key in ("leaks", "over_masked", "padded_reads", "batch_leaks"):
        assert bool(getattr(r, key)) == (key in lists), (key, r.text())


def test_leaking_pairs_are_exact():
    r = check_attention(Attention(keep=lambda T: tril(T, 1)), "causal", seq=8)
    assert r.leaks == [[i, i + 1] for i in range(7)]
    r = check_attention(Attention(keep=lambda T: band(T, 2)), "causal+window:1", seq=8)
    assert r.leaks == [[i, i - 2] for i in range(2, 8)]


def test_padded_reads_name_the_padded_keys():
    r = check_attention(Attention(keep=None, padding="ignore"), "padding", seq=8, pad=3)
    assert r.padded_reads == [[q, k] for q in range(5) for k in range(5, 8)]
    assert "[pad]" in r.text()


def test_mask_after_softmax_renormalised_is_exact_not_a_leak():
    """Masking after softmax and renormalising is exact in theory; its float residue stays below the noise level."""
    r = check_attention(Attention(how="after_renorm"), "causal", seq=32)
    assert r.ok, r.text()
    forbidden = ~torch.tril(torch.ones(32, 32, dtype=torch.bool))
    assert float(torch.as_tensor(r.dependence[:32, 0])[forbidden].max()) < 1e-6


def test_assert_attention_raises_with_the_report():
    assert_attention(Attention(), "causal")
    with pytest.raises(AssertionError, match="transposed"):
        assert_attention(Attention(keep=lambda T: tril(T).T), "causal")


def test_deterministic_and_in_eval_mode():
    class Dropout(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.drop = Attention(), torch.nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(self.attn(x))

    m = Dropout()
    a, b = check_attention(m, "causal"), check_attention(m, "causal")
    assert a.ok and b.ok and (a.dependence == b.dependence).all()


def test_json_schema_is_exactly_the_documented_keys():
    r = check_attention(Attention(keep=lambda T: tril(T).T), "causal", seq=4)
    d = r.to_dict()
    assert list(d) == ["verdict", "expect", "leaks", "over_masked", "padded_reads", "batch_leaks", "cause"]
    assert d["verdict"] == "fail" and d["expect"] == "causal" and [0, 1] in d["leaks"]


def test_bad_input():
    with pytest.raises(MaskError, match="unknown expectation"):
        check_attention(Attention(), "sideways")
    with pytest.raises(MaskError, match="sum to 7"):
        check_attention(Attention(), "causal+docs:3,4")
    with pytest.raises(TargetError, match="returned shape"):
        check_attention(lambda x: x[0], "causal")
    with pytest.raises(TargetError, match="raised ValueError: boom"):
        check_attention(lambda x: (_ for _ in ()).throw(ValueError("boom")), "causal")
    with pytest.raises(TargetError, match="attention_mask"):
        check_attention(cumulative_mean, "causal+padding")
    with pytest.raises(InputError, match="seq 0"):
        check_attention(Attention(), "causal", seq=0)
    with pytest.raises(InputError, match="Jacobian cells"):
        check_attention(Attention(), "causal", seq=4096, batch=16)
    with pytest.raises(TargetError, match="is a class"):
        check_attention(Attention, "causal")


def test_packed_documents():
    def docs(x):  # causal inside each of two packed documents, written as a cumulative mean per document
        a, b = x[:, :5], x[:, 5:]
        return torch.cat([cumulative_mean(a), cumulative_mean(b)], 1)

    assert check_attention(docs, "causal+docs:5,11").ok
    r = check_attention(docs, "causal+docs:6,10")
    assert not r.ok and "off by one" in r.cause and "causal+docs:5,11" in r.cause


def test_padding_is_checked_on_both_sides_by_default():
    """A module that pads the query axis (attention_mask[:, None, :, None]) passes with right padding alone — under
    causality no real token ever sees a pad — so the default checks left padding too, and catches it."""
    bug = Attention(padding="queries")
    assert check_attention(bug, "causal+padding", padding_side="right").ok  # why one side is not enough
    r = check_attention(bug, "causal+padding")
    assert not r.ok and r.padding_side == "left" and r.padded_reads
    assert "query axis" in (r.cause or ""), r.text()
    assert any("both sides: fails with left" in n for n in r.notes)
    good = check_attention(Attention(), "causal+padding")
    assert good.ok and any("passes with right and with left" in n for n in good.notes), good.text()
