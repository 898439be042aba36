"""The troubleshooting page's live demonstrations, on real tensors: each shows what the tutorial's table says."""

from __future__ import annotations

import numpy as np
import pytest

from models import InputError, load_encoder
from models.lecture import troubleshoot
from viz.overlays import leaks

SENTENCE = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def out(minilm):
    return minilm.encode(SENTENCE, internals=True)


def test_no_scaling_saturates_softmax(out):
    d = troubleshoot.scaling_effect(out, layer=3, head=5, query=4)
    # Larger logits (× √d_k) can only sharpen a softmax: on every head, max weight up, entropy down.
    assert (d.max_weight[1] >= d.max_weight[0]).all() and (d.entropy[1] <= d.entropy[0]).all()
    np.testing.assert_allclose(d.logit_std[1], d.logit_std[0] * np.sqrt(d.d_k), rtol=1e-4)
    assert d.max_weight[1].mean() > 0.8  # saturated on this real model (measured 0.94 at layer 3)
    np.testing.assert_allclose(d.row_scaled, out.attentions[3, 5, 4].numpy(), atol=1e-6)


def test_view_after_transpose_raises_the_real_error(out):
    d = troubleshoot.contiguous_error(out, layer=1)
    T = out.seq
    assert d.context_shape == (1, out.n_heads, T, 32) and d.transposed_shape == (1, T, out.n_heads, 32)
    assert "view size is not compatible with input tensor's size and stride" in d.error  # PyTorch's own words
    assert d.fixed_shape == (1, T, 384)


def test_fully_masked_row_inf_gives_nan_finfo_min_gives_uniform(out):
    d = troubleshoot.masked_row_nan(out, layer=0, head=0, query=2)
    assert np.isnan(d.with_inf).all()
    np.testing.assert_allclose(d.with_min, 1.0 / out.seq, atol=1e-7)
    np.testing.assert_array_equal(d.scores, out.scores[0, 0, 2].numpy())


def test_planted_transposed_causal_mask_leaks_into_the_future(minilm):
    d = troubleshoot.wrong_mask(minilm, SENTENCE)
    T = d.intended.shape[0]
    assert (d.intended == np.tril(np.ones((T, T), bool))).all() and (d.planted == np.triu(np.ones((T, T), bool))).all()
    assert d.future_mass_right.max() == 0.0  # the right mask: exactly nothing on the future
    assert d.future_mass_wrong.mean() > 0.3
    assert d.leaked_cells == T * (T - 1) // 2  # every future cell gets weight in some head
    # The overlay's leak finder agrees, head by head.
    assert len(leaks(d.intended, d.wrong[0, 0])) > 0 and len(leaks(d.intended, d.right[0, 0])) == 0
    assert d.mask_rows[0].split() == ["1"] * T and d.mask_rows[1].split()[0] == "0"


def test_kv_cache_savings_formula():
    d = troubleshoot.kv_cache_savings(layers=12, heads=12, d_k=64, seq=512, dtype="fp16")
    assert d.recomputed_without == 512 * 513 // 2 and d.computed_with == 512
    assert d.cache_bytes == 2 * 12 * 512 * 12 * 64 * 2


def test_head_spread_and_similarity(out):
    spread = troubleshoot.head_spread(out, 0)
    assert spread.shape == (out.n_heads,) and ((spread >= 0) & (spread <= 1 + 1e-6)).all()
    assert spread.min() < 0.1  # layer 0 of MiniLM has a sharp positional head (normalised entropy ≈ 0)
    sim = troubleshoot.head_similarity(out, 0)
    np.testing.assert_allclose(np.diag(sim), 1.0, atol=1e-5)
    np.testing.assert_allclose(sim, sim.T, atol=1e-6)


def test_untrained_heads_are_nearly_uniform():
    """The tutorial's last row: weights too uniform. Untrained (normal(0, 0.02)) heads spread evenly."""
    enc = load_encoder("random:tiny", device="cpu")
    out = enc.encode(SENTENCE)
    assert troubleshoot.head_spread(out, 0).min() > 0.9


def test_demonstrations_need_internals(minilm):
    plain = minilm.encode(SENTENCE)
    with pytest.raises(InputError):
        troubleshoot.scaling_effect(plain, 0)
    with pytest.raises(InputError):
        troubleshoot.contiguous_error(plain, 0)
