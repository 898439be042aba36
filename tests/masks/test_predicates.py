"""Masks as predicates (b, h, q_idx, kv_idx) → bool: the vocabulary, composition, users' mask functions, the one
function that makes tensors of them, and the long loop that makes them one block of rows at a time."""

from __future__ import annotations

import pytest
import torch

from models.errors import MaskError
from models.masks import predicates as P

# Hand-written (6 × 6) keeps, rows = queries: what each predicate must say.
CAUSAL = [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0], [1] * 6]
SLIDING_2 = [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 0]]
SLIDING_2 += [[0, 0, 0, 0, 1, 1]]
CHUNK_3 = [[1, 1, 1, 0, 0, 0]] * 3 + [[0, 0, 0, 1, 1, 1]] * 3
DOCS_24 = [[1, 1, 0, 0, 0, 0]] * 2 + [[0, 0, 1, 1, 1, 1]] * 4
PREFIX_2 = [[1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0], [1] * 6]
BAND_1 = [[1 if abs(i - j) <= 1 else 0 for j in range(6)] for i in range(6)]
SINKS_1_OR_WINDOW_2 = [[1 if (j == 0 or (j <= i and i - j < 2)) else 0 for j in range(6)] for i in range(6)]


@pytest.mark.parametrize(
    ("pred", "want"),
    [
        (P.causal(), CAUSAL),
        (P.causal_window(2), SLIDING_2),
        (P.and_masks(P.causal(), P.sliding_window(2)), SLIDING_2),
        (P.chunk(3), CHUNK_3),
        (P.documents([2, 4]), DOCS_24),
        (P.prefix(2), PREFIX_2),
        (P.band(1), BAND_1),
        (P.or_masks(P.sinks(1), P.causal_window(2)), SINKS_1_OR_WINDOW_2),
        (P.not_mask(P.not_mask(P.causal())), CAUSAL),
        (P.causal() & P.sliding_window(2), SLIDING_2),
    ],
    ids=["causal", "window", "and", "chunk", "docs", "prefix", "band", "sinks-or-window", "not-not", "operator"],
)
def test_the_vocabulary_says_what_each_mask_is(pred, want):
    assert P.dense(pred, 6).int().tolist() == want


@pytest.mark.parametrize(
    "pred",
    [
        P.causal(),
        P.causal(diagonal=1),
        P.causal_window(5),
        P.band(3),
        P.prefix(4),
        P.chunk(7),
        P.chunk(4, offset=1),
        P.documents([3, 9, 1, 20]),
        P.or_masks(P.sinks(2), P.causal_window(4)),
        P.and_masks(P.causal(), P.documents([10, 23])),
    ],
    ids=lambda p: p.name,
)
def test_a_predicate_s_key_span_holds_every_key_it_allows(pred):
    """The long loop reads only the keys a block's span names: no allowed key may lie outside it."""
    n = 33
    full = P.dense(pred, n)
    for q0 in range(0, n, 5):
        for q1 in (q0 + 1, q0 + 4, min(n, q0 + 11)):
            k0, k1 = pred.keys(q0, q1, n)
            allowed = full[q0:q1].any(0).nonzero().flatten()
            if allowed.numel():
                assert k0 <= int(allowed[0]) and int(allowed[-1]) < k1, (q0, q1, k0, k1)


def test_materialise_gives_any_window_of_the_square_and_batch_and_head_axes():
    pred = P.causal_window(4)
    whole = P.dense(pred, 40)
    window = P.materialise(pred, (17, 29), (5, 31))
    assert window.shape == (1, 1, 12, 26)
    assert torch.equal(window[0, 0], whole[17:29, 5:31])
    pad = P.padding(torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1]]))
    keep = P.materialise(P.and_masks(P.causal(), pad), 4, batch=2)
    assert keep.shape == (2, 1, 4, 4)
    assert keep[0, 0, 3].tolist() == [True, True, True, False]  # right padding: the [PAD] key hidden
    assert keep[1, 0, 2].tolist() == [False, True, True, False]  # left padding: key 0 hidden, causal after
    per_head = P.materialise(lambda b, h, q, kv: (kv <= q) | (h == 1), 3, heads=2)
    assert per_head.shape == (1, 2, 3, 3) and bool(per_head[0, 1].all()) and not bool(per_head[0, 0].all())


def test_users_mask_functions_are_predicates():
    """A FlexAttention mask_mod, a transformers mask function and a BlockMask say the same as our vocabulary."""

    def sliding_mod(b, h, q_idx, kv_idx):  # FlexAttention's documentation's sliding window
        return (q_idx >= kv_idx) & (q_idx - kv_idx < 4)

    want = P.dense(P.causal_window(4), 20)
    assert torch.equal(P.dense(sliding_mod, 20), want)
    masking_utils = pytest.importorskip("transformers.masking_utils")
    assert torch.equal(P.dense(masking_utils.sliding_window_causal_mask_function(4), 20), want)
    both = masking_utils.and_masks(masking_utils.causal_mask_function, masking_utils.sliding_window_overlay(4))
    assert torch.equal(P.dense(both, 20), want)
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    block = flex.create_block_mask(sliding_mod, None, None, 20, 20, device="cpu")
    assert P.as_predicate(block).name == "sliding_mod"
    assert torch.equal(P.dense(block, 20), want)


def test_a_mask_mod_written_for_scalars_runs_under_vmap_and_bad_ones_are_refused():
    def scalar_only(b, h, q, kv):  # torch.stack needs equal shapes: fine per cell (vmap), not broadcast
        return torch.stack([q, kv]).amax() == q

    assert torch.equal(P.dense(scalar_only, 7), P.dense(P.causal(), 7))
    with pytest.raises(MaskError, match="returned float32"):
        P.dense(lambda b, h, q, kv: (kv <= q).float(), 4)
    with pytest.raises(MaskError, match="raised"):
        P.dense(lambda b, h, q, kv: bool(q > kv), 4)
    with pytest.raises(MaskError, match="a predicate mask is a function"):
        P.as_predicate(torch.ones(3, 3))


def test_every_builder_asks_the_predicates():
    """The named masks, the expectations, the forward's causal keeps and the maps' windows are the predicates'."""
    from models.maps import window_mask
    from models.masks import conventions, parse_expectation
    from models.network import causal_keeps

    assert torch.equal(conventions.causal_keep(9, window=3), P.dense(P.causal_window(3), 9))
    assert torch.equal(conventions.prefix_keep(9, 4), P.dense(P.prefix(4), 9))
    assert torch.equal(conventions.window_keep(9, 2), P.dense(P.band(2), 9))
    exp = parse_expectation("causal+chunk:3+window:4")
    assert torch.equal(exp.position_keep(9), P.dense(P.causal() & P.chunk(3) & P.band(4), 9))
    keeps = causal_keeps(2, 4, 9, 5, (None, 3), None, torch.device("cpu"))
    assert torch.equal(keeps[1], P.materialise(P.causal_window(3), (5, 9), 9)[0, 0])
    assert torch.equal(window_mask(5, 8, 2), P.materialise(P.causal_window(2), 5, 8)[0, 0])


LONG_MASKS = {
    "causal": P.causal(),
    "window": P.causal_window(48),
    "chunk": P.causal() & P.chunk(100),
    "docs": P.causal() & P.documents([130, 127, 256, 300]),
    "user-mask_mod": P.as_predicate(lambda b, h, q, kv: (kv <= q) & ((q - kv < 64) | (kv < 4))),
}


@pytest.mark.parametrize("name", list(LONG_MASKS))
def test_the_long_loop_makes_each_block_s_mask_from_the_predicate(name):
    """attend_in_blocks with the layer's mask as a predicate (made per block of 128 rows, rows at positions
    start…) gives attend_rows under the whole mask made at once: context and log-sum-exps. A predicate made off
    by one at block boundaries (or with the wrong start) fails here."""
    from models.attention import Options, attend_in_blocks, attend_rows, repeat_kv

    pred = LONG_MASKS[name]
    g = torch.Generator().manual_seed(1)
    start, T, nh, n_kv, d = 13, 800, 6, 3, 16  # rows are positions 13 … 812 of 813 keys (a cache's worth first)
    S = start + T
    q = torch.randn(1, nh, T, d, generator=g) * 3
    k = torch.randn(1, n_kv, S, d, generator=g) * 3
    v = torch.randn(1, n_kv, S, d, generator=g)
    lse = torch.empty(1, nh, T)
    ctx, _ = attend_in_blocks(
        q, k, v, None, 0.25, Options(implementation="blocks", rows=128, lse_out=lse, mask=pred, start=start)
    )
    whole = P.materialise(pred, (start, S), S)
    ref_lse = torch.empty(1, nh, T)
    ref, _ = attend_rows(q, repeat_kv(k, 2), repeat_kv(v, 2), whole, 0.25, Options(lse_out=ref_lse))
    assert (ctx - ref).abs().max() <= 1e-5
    assert (lse - ref_lse).abs().max() <= 1e-4
