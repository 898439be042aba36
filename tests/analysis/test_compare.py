"""Comparing two runs: the distances against scipy's Jensen–Shannon distance, Δ maps, the three modes, budgets."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon

from models import BudgetError, load_model
from models.analysis.compare import compare, delta_maps
from models.analysis.heads import SMOOTH, Roles, analyse, label_heads, paired_js, sentence_stats
from tests.conftest import save_llama_folder

PAIR = ("The keys to the cabinet is", "The keys to the cabinet was")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return load_model(str(save_llama_folder(tmp_path_factory.mktemp("llama"))), device="cpu")


@pytest.fixture(scope="module")
def llama_b(tmp_path_factory):
    """The same shape with other weights: a second checkpoint."""
    return load_model(str(save_llama_folder(tmp_path_factory.mktemp("llama-b"), seed=7)), device="cpu")


def _scipy_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return √(mean over rows of JS) per head from scipy (natural log), on Clark et al.'s smoothed rows."""
    L, H, T, _ = a.shape
    P = a.astype(np.float64) * (1 - SMOOTH) + SMOOTH / T
    Q = b.astype(np.float64) * (1 - SMOOTH) + SMOOTH / T
    out = np.zeros((L, H))
    for la in range(L):
        for h in range(H):
            out[la, h] = np.sqrt(np.mean([jensenshannon(P[la, h, i], Q[la, h, i]) ** 2 for i in range(T)]))
    return out


def test_paired_js_is_scipys_divergence_per_row():
    rng = np.random.default_rng(0)
    a = rng.random((3, 5, 7)) ** 3
    b = rng.random((3, 5, 7)) ** 3
    a /= a.sum(-1, keepdims=True)
    b /= b.sum(-1, keepdims=True)
    ours = paired_js(torch.tensor(a), torch.tensor(b), n=7).numpy()
    P, Q = a * (1 - SMOOTH) + SMOOTH / 7, b * (1 - SMOOTH) + SMOOTH / 7
    ref = np.array([[jensenshannon(P[i, j], Q[i, j]) ** 2 for j in range(5)] for i in range(3)])
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)
    assert (ours <= np.log(2)).all()


def test_two_checkpoints_on_one_text_rank_heads_by_scipys_distance(llama, llama_b):
    a, b = llama.encode(PAIR[0]), llama_b.encode(PAIR[0])
    cmp = compare(a, b)
    assert cmp.mode == "maps" and cmp.differs == [] and cmp.rows == a.seq
    ref = _scipy_distance(a.attentions.numpy(), b.attentions.numpy())
    np.testing.assert_allclose(cmp.distance, ref, rtol=1e-6, atol=1e-9)
    ranked = cmp.ranked
    values = [cmp.distance[la, h] for la, h in ranked]
    assert values == sorted(values, reverse=True) and len(ranked) == a.n_layers * a.n_heads
    delta = delta_maps(a.attentions, b.attentions)
    np.testing.assert_allclose(delta, (b.attentions - a.attentions).numpy(), atol=0)
    np.testing.assert_allclose(cmp.max_delta, np.abs(delta).max(axis=(-2, -1)), rtol=1e-6)
    doc = cmp.to_json()
    first = doc["heads"][0]
    assert (first["layer"], first["head"]) == ranked[0]
    assert first["distance"] == pytest.approx(float(ref.max()), rel=1e-5)
    assert first["js_per_row"] == pytest.approx(first["distance"] ** 2, rel=1e-4)


def test_same_run_twice_is_distance_zero(llama):
    a = llama.encode(PAIR[0])
    cmp = compare(a, llama.encode(PAIR[0]))
    assert cmp.mode == "maps" and np.abs(cmp.distance).max() < 1e-6


def test_minimal_pair_on_a_causal_model_moves_only_the_rows_from_the_change_on(llama):
    a, b = llama.encode(PAIR[0]), llama.encode(PAIR[1])
    assert a.seq == b.seq, (a.tokens, b.tokens)
    cmp = compare(a, b)
    assert cmp.mode == "maps" and cmp.differs == [a.seq - 1]
    assert cmp.row_js is not None
    # Causal: rows before the changed token cannot see it, so they are exactly the same in both runs.
    assert np.abs(cmp.row_js[..., :-1]).max() < 1e-9
    assert (cmp.row_js[..., -1] > 1e-6).all()
    assert cmp.to_json()["differs"] == [{"position": a.seq - 1, "a": a.display_tokens[-1], "b": b.display_tokens[-1]}]


def test_different_lengths_rank_heads_by_the_statistic_that_moved(llama):
    a, b = llama.encode(PAIR[0]), llama.encode("The keys to the old wooden cabinet are here")
    cmp = compare(a, b)
    assert cmp.mode == "statistics" and cmp.js is None
    ra, rb = analyse(a), analyse(b)  # the Heads page's statistics of each run
    change = np.stack([np.abs(rb.stats[k] - ra.stats[k]) for k in cmp.columns])
    np.testing.assert_allclose(cmp.distance, change.max(0), rtol=1e-6, atol=1e-9)
    la, h = cmp.ranked[0]
    assert cmp.moved is not None and cmp.moved[la, h] == cmp.columns[int(change[:, la, h].argmax())]
    np.testing.assert_array_equal(cmp.labels_a, ra.labels)


def test_different_models_are_shown_apart(llama, minilm):
    cmp = compare(llama.encode(PAIR[0]), minilm.encode(PAIR[0]))
    assert cmp.mode == "separate" and cmp.ranked == []
    doc = cmp.to_json()
    assert doc["heads"] == [] and len(doc["separate"]["b"]) == minilm.config.n_layers * minilm.config.n_heads


def test_budget_refuses_before_any_delta(llama, monkeypatch):
    a = llama.encode(PAIR[0])
    monkeypatch.setenv("ATTENTION_LENS_MAX_DERIVED_VALUES", "10")
    with pytest.raises(BudgetError, match="ATTENTION_LENS_MAX_DERIVED_VALUES"):
        compare(a, a)
    with pytest.raises(BudgetError):
        delta_maps(a.attentions, a.attentions)


def _layer_by_layer(a: torch.Tensor, b: torch.Tensor, real: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The computation compare did before issue 35, kept literally as the reference: a layer at a time, each
    statistic with its own temporaries."""
    L, H, T, _ = a.shape
    n = int(real.sum())
    row_js, max_delta = np.zeros((L, H, T)), np.zeros((L, H), dtype=np.float32)
    for layer in range(L):
        P = a[layer].double() * (1.0 - SMOOTH) + SMOOTH / n
        Q = b[layer].double() * (1.0 - SMOOTH) + SMOOTH / n
        M = 0.5 * (P + Q)
        rows = (0.5 * (torch.special.xlogy(P, P / M) + torch.special.xlogy(Q, Q / M))).sum(-1).clamp_min(0.0)
        rows[:, ~real] = 0.0
        row_js[layer] = rows.numpy()
        max_delta[layer] = (b[layer] - a[layer]).abs().amax(dim=(-2, -1)).numpy()
    return row_js, max_delta


class _ByLayer:
    """Maps read only a layer at a time, as a long text's OnDemandMaps are."""

    def __init__(self, maps: torch.Tensor):
        self.maps, self.shape = maps, maps.shape

    def __getitem__(self, layer: int) -> torch.Tensor:
        return self.maps[layer]


def test_every_heads_distance_in_pieces_equals_the_layer_by_layer_result(llama, llama_b, monkeypatch):
    """Issue 35: row_distances takes both runs' maps in place, every head in one vectorised loop over pieces of
    rows on buffers made once; the numbers are those of the layer-by-layer computation, and exactly those of the
    slices of heads it replaced, for dense and on-demand maps and any piece size."""
    from models.analysis import compare as cmp_mod

    a, b = llama.encode(PAIR[0]).attentions, llama_b.encode(PAIR[0]).attentions
    T = a.shape[-1]
    real = torch.ones(T, dtype=torch.bool)
    real[-1] = False  # a padded row counts 0
    ref_js, ref_delta = _layer_by_layer(a, b, real)
    old_js, old_delta = _slices_of_heads(a, b, real)
    before = a.clone()
    # one piece for everything; 3 heads; 3 rows (pieces that cut heads unevenly); less than a row (one row)
    for piece in (cmp_mod.PIECE_VALUES, 3 * T * T, 3 * T, T - 1):
        monkeypatch.setattr(cmp_mod, "PIECE_VALUES", piece)
        for x, y in ((a, b), (_ByLayer(a), _ByLayer(b))):
            row_js, max_delta = cmp_mod.row_distances(x, y, real)
            np.testing.assert_allclose(row_js, ref_js, rtol=1e-12, atol=1e-15)
            np.testing.assert_array_equal(max_delta, ref_delta)
            np.testing.assert_array_equal(row_js, old_js)  # bit for bit: the document cannot change
            np.testing.assert_array_equal(max_delta, old_delta)
    assert torch.equal(a, before)  # the run's maps are read, never written


# ---- the document before and after the cuts of issue 35 (compare's CPU against export's) ------------------------


def _slices_of_heads(a: torch.Tensor, b: torch.Tensor, real: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """row_distances as it was before its pieces, kept literally: slices of heads, fresh float64 arrays each."""
    L, H, T, _ = a.shape
    n = int(real.sum())
    flat_a, flat_b = torch.as_tensor(a).reshape(L * H, T, T), torch.as_tensor(b).reshape(L * H, T, T)
    row_js = torch.zeros(L * H, T, dtype=torch.float64)
    max_delta = torch.zeros(L * H, dtype=torch.float32)
    step = max(1, (96 << 20) // (4 * 8 * T * T))
    for start in range(0, L * H, step):
        la, lb = flat_a[start : start + step], flat_b[start : start + step]
        row_js[start : start + step] = paired_js(la, lb, n)
        max_delta[start : start + step] = (lb.float() - la.float()).abs().amax(dim=(-2, -1))
    row_js[:, ~real] = 0.0
    return row_js.reshape(L, H, T).numpy(), max_delta.reshape(L, H).numpy()


def _whole_layers(out, maps=None):
    """statistics() as it was: every statistic of a whole layer at a time ('distance' too)."""
    from models.analysis.compare import _shape

    source = out.attentions if maps is None else maps
    roles = Roles.of_output(out)
    per_layer = [
        sentence_stats(torch.as_tensor(np.asarray(source[la]), dtype=torch.float32)[None, None], roles)
        for la in range(_shape(out, maps)[0])
    ]
    stats = {k: torch.cat([p[k][0] for p in per_layer]).double().numpy() for k in per_layer[0]}
    causal = out.capabilities.causal
    if causal:
        stats["entropy_norm"] = stats["entropy_norm_causal"]
    return stats, label_heads(stats, pairs=bool(out.token_type_ids.bool().any()), causal=causal)


@pytest.fixture(scope="module")
def kinds_of_comparison(llama, llama_b, minilm):
    """(run A, run B, maps A, maps B) for each kind of comparison: two checkpoints, a causal minimal pair, a
    bidirectional one (also value-weighted), a mask against a mask, different lengths."""
    from models.analysis.norms import value_weighted

    long_a = "The keys to the old wooden cabinet in the hall are on the table, next to the lamp."
    long_b = "The keys to the old wooden cabinet in the hall is on the table, next to the lamp."
    mini_a, mini_b = minilm.encode(long_a, internals=True), minilm.encode(long_b, internals=True)
    weighted = value_weighted(minilm, mini_a).shares(), value_weighted(minilm, mini_b).shares()
    cat = "The cat sat, then slept."
    return [
        (llama.encode(PAIR[0]), llama_b.encode(PAIR[0]), None, None),
        (llama.encode(PAIR[0]), llama.encode(PAIR[1]), None, None),
        (mini_a, mini_b, None, None),
        (mini_a, mini_b, *weighted),
        (minilm.encode(cat), minilm.encode(cat, mask="causal"), None, None),
        (minilm.encode("A cat."), mini_b, None, None),
        (mini_a, mini_a, None, None),  # the same run twice: every Δ is 0
    ]


@pytest.mark.parametrize("pieces", ["default", "small"])
def test_compares_document_is_byte_for_byte_the_one_before_the_cuts(kinds_of_comparison, monkeypatch, pieces):
    """Issue 35 cut compare's work (the distances in pieces on buffers made once; 'distance', which no document
    shows, left out of the statistics). The JSON `compare` writes is the same bytes as the previous computation's on
    each kind of comparison, and every statistic and row distance is the same bits."""
    from models.analysis import compare as cmp_mod

    if pieces == "small":  # pieces that end inside heads
        T = kinds_of_comparison[2][0].seq
        monkeypatch.setattr(cmp_mod, "PIECE_VALUES", 7 * T)  # 7 rows
    for a, b, maps_a, maps_b in kinds_of_comparison:
        new = cmp_mod.compare(a, b, maps_a, maps_b)
        with monkeypatch.context() as m:
            m.setattr(cmp_mod, "row_distances", _slices_of_heads)
            m.setattr(cmp_mod, "statistics", _whole_layers)
            old = cmp_mod.compare(a, b, maps_a, maps_b)
        assert json.dumps(new.to_json(), allow_nan=False) == json.dumps(old.to_json(), allow_nan=False)
        for k in new.stats_a:  # every statistic kept is the same bits, not just the same 6 decimals
            np.testing.assert_array_equal(new.stats_a[k], old.stats_a[k])
            np.testing.assert_array_equal(new.stats_b[k], old.stats_b[k])
        assert set(old.stats_a) - set(new.stats_a) == {"distance"}
        if new.row_js is not None:
            np.testing.assert_array_equal(new.row_js, old.row_js)
