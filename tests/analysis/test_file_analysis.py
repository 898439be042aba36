"""Head statistics of maps that came without a model (attention files): the same numbers as for a model's
output on self-attention; the key-side statistics on cross-attention."""

from __future__ import annotations

import math

import numpy as np

from models.analysis.heads import analyse, analyse_maps


def test_square_maps_give_the_models_own_report(minilm):
    out = minilm.encode("The cat sat on the mat.", "It was warm.", internals=True)
    ref = analyse(out)
    rep = analyse_maps(out.attentions.numpy(), out.tokens, token_type_ids=out.token_type_ids.numpy(), model="f")
    for k in ref.stats:
        np.testing.assert_allclose(rep.stats[k], ref.stats[k], atol=1e-6, equal_nan=True)
    np.testing.assert_array_equal(rep.labels, ref.labels)
    np.testing.assert_allclose(rep.js, ref.js, atol=1e-6)
    np.testing.assert_allclose(rep.cosine, ref.cosine, atol=1e-6)
    assert rep.pairs and np.isnan(rep.cka).all()  # CKA needs the heads' outputs


def test_cross_attention_statistics_read_the_keys():
    Q, K = 7, 11
    attn = np.zeros((1, 3, Q, K), dtype=np.float32)
    attn[0, 0] = 1.0 / K  # uniform over the keys
    attn[0, 1, :, 0] = 1.0  # everything on the first key
    attn[0, 2, :, 0] = 1.0  # the same as head 1
    keys = ["<s>", "a", ",", "b", "c", "d", "e", "f", "g", "h", "[SEP]"]
    rep = analyse_maps(attn, [f"q{i}" for i in range(Q)], keys)
    assert math.isclose(rep.stats["entropy"][0, 0], math.log(K), rel_tol=1e-5)
    assert math.isclose(rep.stats["entropy_norm"][0, 0], 1.0, rel_tol=1e-5)
    assert math.isclose(rep.stats["sep"][0, 0], 1 / K, rel_tol=1e-5)
    assert math.isclose(rep.stats["punct"][0, 0], 1 / K, rel_tol=1e-5)
    assert rep.stats["cls"][0, 1] == 1.0 and rep.stats["confidence"][0, 1] == 1.0
    assert np.isnan(rep.stats["prev"]).all() and np.isnan(rep.stats["distance"]).all()
    assert list(rep.labels[0]) == ["broad", "cls", "cls"]
    assert rep.js[1, 2] < 1e-5 < rep.js[0, 1]
    assert rep.cosine[1, 2] > 0.999
    # JS by hand (Clark et al.: smoothed with n = the key count, summed over query rows).
    P = 0.999 * attn[0].astype(np.float64) + 0.001 / K
    M = (P[0] + P[1]) / 2
    by_hand = (0.5 * (P[0] * np.log(P[0] / M)).sum(-1) + 0.5 * (P[1] * np.log(P[1] / M)).sum(-1)).sum()
    assert math.isclose(rep.js[0, 1], by_hand, rel_tol=1e-4)
