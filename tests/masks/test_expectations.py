"""One grammar for what a mask should be, and masks that libraries really make checked against it.

transformers' masking_utils (the functions its models build their masks with) and torch's own causal masks pass
check-mask when declared right; the off-by-one variants an engineer writes by mistake fail, with the diagnosis.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import masking_utils as mu

from models import masks
from models.analysis.mask_checker import check_mask
from models.errors import MaskError
from models.masks.expectations import parse

SENTENCE = "The animal didn't cross the street because it was too tired."  # 16 tokens with [CLS] and [SEP]
T = 16


def _grid(seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(seq)
    return i[:, None], i[None, :]


# ---- the grammar ------------------------------------------------------------------------------------


def test_terms_by_hand():
    i, j = _grid(T)
    assert torch.equal(parse("causal").keep(T), j <= i)
    assert torch.equal(parse("window:3").keep(T), (i - j).abs() <= 3)
    assert torch.equal(parse("causal+window:3").keep(T), (j <= i) & (i - j <= 3))
    assert torch.equal(parse("chunk:4").keep(T), i // 4 == j // 4)
    assert torch.equal(parse("causal + CHUNK:4").keep(T), (j <= i) & (i // 4 == j // 4))
    doc = torch.tensor([0] * 5 + [1] * 3 + [2] * 8)
    assert torch.equal(parse("causal+docs:5,3,8").keep(T), (j <= i) & (doc[:, None] == doc[None, :]))
    assert torch.equal(parse("prefix:4").keep(T), (j <= i) | (j < 4))
    assert parse("bidirectional").keep(T).all() and parse("padding").keep(T).all()
    assert parse("causal+window:3").name == "causal+window:3"
    assert parse(" Causal + Docs:5,3,8 ").name == "causal+docs:5,3,8"


def test_padding_hides_keys_left_or_right():
    right = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]).bool()
    left = right.flip(-1)
    for real in (right, left):
        k = parse("causal+padding").keep(4, real)
        assert k.shape == (2, 4, 4)
        assert torch.equal(k[0], torch.tril(torch.ones(4, 4, dtype=torch.bool)) & real[0][None, :])
        assert torch.equal(k[1], torch.tril(torch.ones(4, 4, dtype=torch.bool)))


@pytest.mark.parametrize(
    "spec, message",
    [
        ("sideways", "unknown expectation"),
        ("window", "unknown expectation"),
        ("window:-1", "unknown expectation"),
        ("chunk:0", "C ≥ 1"),
        ("docs:3,0", "at least one"),
        ("causal+causal", "twice"),
        ("window:2+window:3", "twice"),
        ("bidirectional+causal", "combines only with padding"),
        ("", "meant to be"),
        ("causal+", "unknown expectation"),
    ],
)
def test_refused(spec, message):
    with pytest.raises(MaskError, match=message):
        parse(spec)


def test_docs_must_sum_to_seq():
    with pytest.raises(MaskError, match="sum to 8, but the sequence has 16"):
        parse("docs:5,3").keep(16)


def test_closure_over_layers():
    """Causal, chunk, docs and prefix are closed under composition; a window widens by W per layer."""
    for spec in ("causal", "causal+chunk:4", "causal+docs:5,3,8", "prefix:4", "chunk:4"):
        e = parse(spec)
        assert torch.equal(e.reach(T, 3), e.keep(T)), spec
    e = parse("causal+window:2")
    assert torch.equal(e.reach(T, 3), parse("causal+window:6").keep(T))
    assert e.closure_name(3) == "causal+window:6"
    assert torch.equal(parse("window:1").reach(T, 2), parse("window:2").keep(T))


def test_neighbours_are_the_off_by_one_bugs():
    near = parse("causal+window:3").neighbours(T)
    assert [(c, v.get("name")) for c, v, _ in near] == [
        ("next_visible", None),
        ("off_by_one", "causal+window:2"),
        ("off_by_one", "causal+window:4"),
    ]
    i, j = _grid(T)
    assert torch.equal(near[0][2], (j <= i + 1) & ((i - j).abs() <= 3))
    docs = [v["name"] for c, v, _ in parse("causal+docs:5,3,8").neighbours(T) if c == "off_by_one"]
    assert docs == ["causal+docs:4,4,8", "causal+docs:6,2,8", "causal+docs:5,2,9", "causal+docs:5,4,7"]
    shifted = [v for c, v, _ in parse("chunk:4").neighbours(T) if c == "chunk_shifted"]
    assert shifted == [{"size": 4, "offset": 1}, {"size": 4, "offset": 2}, {"size": 4, "offset": 3}]


def test_one_parser_for_mask_and_encoder(minilm):
    """--mask, encode(mask=...) and --expect take the same composed names."""
    keep, kind = masks.resolve("causal+window:3", seq=T)
    assert kind == "named" and torch.equal(keep, parse("causal+window:3").keep(T))
    out = minilm.encode(SENTENCE, mask="causal+window:3")
    assert out.seq == T
    assert bool((out.attentions[:, :, ~parse("causal+window:3").keep(T)] == 0).all())
    with pytest.raises(MaskError, match="sum to 4"):
        minilm.encode(SENTENCE, mask="docs:2,2")
    with pytest.raises(MaskError, match="unknown mask 'causal\\+windw:3'"):
        masks.resolve("causal+windw:3", seq=T)


# ---- masks from transformers and torch --------------------------------------------------------------


def _sdpa(fn, seq: int = T) -> torch.Tensor:
    """transformers' own boolean mask (batch, 1, q, k), True = may attend, as its SDPA path builds it."""
    return mu.sdpa_mask(batch_size=1, q_length=seq, kv_length=seq, mask_function=fn, allow_is_causal_skip=False)


def _eager(fn, seq: int = T) -> torch.Tensor:
    """transformers' additive float mask (batch, 1, q, k): 0 or finfo.min, as its eager path builds it."""
    return mu.eager_mask(batch_size=1, q_length=seq, kv_length=seq, mask_function=fn)


def _packed(lengths: list[int]) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))[None]


LIBRARY_MASKS = [
    # (name, mask, convention, expectation that is right)
    ("hf causal sdpa", lambda: _sdpa(mu.causal_mask_function), "keep", "causal"),
    ("hf causal eager", lambda: _eager(mu.causal_mask_function), "additive", "causal"),
    ("hf sliding_window=4", lambda: _sdpa(mu.sliding_window_causal_mask_function(4)), "keep", "causal+window:3"),
    (
        "hf sliding_window=4 eager",
        lambda: _eager(mu.sliding_window_causal_mask_function(4)),
        "additive",
        "causal+window:3",
    ),
    (
        "hf chunked 4",
        lambda: _sdpa(mu.chunked_causal_mask_function(4, torch.zeros(1, dtype=torch.long))),
        "keep",
        "causal+chunk:4",
    ),
    (
        "hf packed 5,3,8",
        lambda: _sdpa(mu.and_masks(mu.causal_mask_function, mu.packed_sequence_mask_function(_packed([5, 3, 8])))),
        "keep",
        "causal+docs:5,3,8",
    ),
    (
        "torch generate_square_subsequent_mask",
        lambda: nn.Transformer.generate_square_subsequent_mask(T),
        "additive",
        "causal",
    ),
    ("torch MHA bool", lambda: torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), "drop", "causal"),
]


@pytest.mark.parametrize("name, make, convention, expect", LIBRARY_MASKS, ids=[m[0] for m in LIBRARY_MASKS])
def test_library_masks_pass_when_declared_right(minilm, name, make, convention, expect):
    r = check_mask(minilm, SENTENCE, make(), convention, expect)
    assert r.ok, r.text()


OFF_BY_ONE = [
    # (name, mask, convention, declared expectation, the diagnosis' code, words it must contain)
    # sliding_window=w keeps i − j ≤ w − 1: declaring it window:w is the classic off by one
    (
        "window w declared as W",
        lambda: _sdpa(mu.sliding_window_causal_mask_function(4)),
        "keep",
        "causal+window:4",
        "diag.off_by_one",
        "causal+window:3",
    ),
    (
        "window one too wide",
        lambda: _sdpa(mu.sliding_window_causal_mask_function(5)),
        "keep",
        "causal+window:3",
        "diag.off_by_one",
        "causal+window:4",
    ),
    (
        "chunk boundary",
        lambda: _sdpa(mu.chunked_causal_mask_function(5, torch.zeros(1, dtype=torch.long))),
        "keep",
        "causal+chunk:4",
        "diag.off_by_one",
        "causal+chunk:5",
    ),
    (
        "document sees its neighbour",
        lambda: _sdpa(mu.and_masks(mu.causal_mask_function, mu.packed_sequence_mask_function(_packed([6, 2, 8])))),
        "keep",
        "causal+docs:5,3,8",
        "diag.off_by_one",
        "causal+docs:6,2,8",
    ),
    (
        "square subsequent read as keep",
        lambda: nn.Transformer.generate_square_subsequent_mask(T),
        "keep",
        "causal",
        "diag.inverted",
        "inverted",
    ),
    (
        "MHA bool with diagonal 0",
        lambda: torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0),
        "drop",
        "causal",
        "diag.diagonal_masked",
        "diagonal",
    ),
    (
        "MHA bool with diagonal 2",
        lambda: torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=2),
        "drop",
        "causal",
        "diag.next_visible",
        "next",
    ),
]


@pytest.mark.parametrize("name, make, convention, expect, code, words", OFF_BY_ONE, ids=[m[0] for m in OFF_BY_ONE])
def test_library_masks_off_by_one_fail(minilm, name, make, convention, expect, code, words):
    r = check_mask(minilm, SENTENCE, make(), convention, expect)
    assert not r.ok
    assert [d.code for d in r.diagnosis] == [code], r.text()
    assert words in r.diagnosis[0].english()


def test_left_padding_chunked_mask_from_transformers():
    """chunked_causal_mask_function counts blocks from the first real token: with left padding it is still
    causal+chunk:C over the real positions, which is what the grammar means (our BERT pads right, so this checks
    the grammar against transformers' own mask directly)."""
    real = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1, 1]]).bool()
    left = torch.tensor([2])
    hf = mu.sdpa_mask(
        batch_size=1,
        q_length=10,
        kv_length=10,
        mask_function=mu.chunked_causal_mask_function(3, left),
        attention_mask=real.long(),
        allow_is_causal_skip=False,
    )[0, 0]
    ours = parse("causal+chunk:3+padding").keep(8, real[:, 2:])[0]
    assert torch.equal(hf[2:, 2:], ours)


def test_check_mask_cli_takes_composed_expectations(capsys):
    from models.cli import main

    assert (
        main(
            [
                "check-mask",
                "--text",
                SENTENCE,
                "--mask",
                "causal+window:3",
                "--convention",
                "keep",
                "--expect",
                "causal+window:3",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "check-mask",
                "--text",
                SENTENCE,
                "--mask",
                "causal+window:2",
                "--convention",
                "keep",
                "--expect",
                "causal+window:3",
            ]
        )
        == 1
    )
    assert "off by one" in capsys.readouterr().out
    assert (
        main(["check-mask", "--text", SENTENCE, "--mask", "causal", "--convention", "keep", "--expect", "docs:3,4"])
        == 2
    )
    assert "sum to 7" in capsys.readouterr().err
