"""Per-head statistics, labels and redundancy against known answers (docs/METRICS.md), and on the real model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.analysis.heads import (
    LABELS,
    THRESHOLDS,
    Accumulator,
    CkaAccumulator,
    Roles,
    analyse,
    cka_matrix,
    closest_pairs,
    cluster_order,
    cosine_matrix,
    is_punct,
    js_matrix,
    label_heads,
    mds,
    near_duplicates_per_layer,
    nearest,
    sentence_stats,
)

TOKENS = ["[CLS]", "the", "cat", "sat", ",", "then", "slept", ".", "[SEP]"]
N = len(TOKENS)


def roles(tokens=TOKENS, segment=None, real=None):
    T = len(tokens)
    real = torch.ones(1, T, dtype=torch.bool) if real is None else real
    seg = torch.zeros(1, T, dtype=torch.long) if segment is None else torch.tensor([segment])
    return Roles.of([tokens], real, seg)


def stats_of(A: np.ndarray, r: Roles | None = None) -> dict[str, float]:
    """Statistics of one head's (n, n) map, as floats."""
    attn = torch.tensor(A, dtype=torch.float32)[None, None, None]  # (1, 1, 1, n, n)
    out = sentence_stats(attn, r or roles())
    return {k: float(v[0, 0, 0]) for k, v in out.items()}


def label_of(A: np.ndarray, r: Roles | None = None, pairs: bool = False) -> str:
    s = stats_of(A, r)
    return str(label_heads({k: np.array([[v]]) for k, v in s.items()}, pairs)[0, 0])


def one_hot(cols: list[int], n: int = N) -> np.ndarray:
    A = np.zeros((n, n))
    A[np.arange(n), cols] = 1.0
    return A


# ---- statistics with known answers ----------------------------------------------------------------


def test_previous_token_map():
    A = one_hot([0] + list(range(N - 1)))  # row 0 has no left neighbour: it attends to itself
    s = stats_of(A)
    assert s["prev"] == pytest.approx(1.0)
    assert s["next"] == pytest.approx(0.0)
    assert s["entropy"] == pytest.approx(0.0, abs=1e-6)  # 0·ln 0 = 0: one-hot rows have no entropy
    assert s["confidence"] == pytest.approx(1.0)
    assert s["distance"] == pytest.approx((N - 1) / N)  # every row but the first looks one step away
    assert label_of(A) == "prev"


def test_next_token_map():
    A = one_hot(list(range(1, N)) + [N - 1])
    s = stats_of(A)
    assert s["next"] == pytest.approx(1.0) and s["prev"] == pytest.approx(0.0)
    assert label_of(A) == "next"


def test_uniform_map_has_entropy_ln_n():
    A = np.full((N, N), 1.0 / N)
    s = stats_of(A)
    assert s["entropy"] == pytest.approx(math.log(N), rel=1e-6)
    assert s["entropy_norm"] == pytest.approx(1.0, rel=1e-6)
    assert s["confidence"] == pytest.approx(1.0 / N)
    assert s["cls"] == pytest.approx(1.0 / N)
    assert s["sep"] == pytest.approx(1.0 / N)
    assert s["punct"] == pytest.approx(2.0 / N)  # "," and "."
    assert s["self"] == pytest.approx(1.0 / N)
    i, j = np.indices((N, N))
    assert s["distance"] == pytest.approx(np.abs(i - j).mean(), rel=1e-6)
    assert label_of(A) == "broad"


def test_vertical_heads():
    assert label_of(one_hot([0] * N)) == "cls"
    assert stats_of(one_hot([0] * N))["cls"] == pytest.approx(1.0)
    assert label_of(one_hot([N - 1] * N)) == "sep"
    assert stats_of(one_hot([N - 1] * N))["sep"] == pytest.approx(1.0)
    punct = one_hot([4] * N)  # the comma
    assert stats_of(punct)["punct"] == pytest.approx(1.0)
    assert label_of(punct) == "punct"


def test_sep_share_counts_every_sep_together():
    tokens = ["[CLS]", "a", "b", "[SEP]", "c", "d", "[SEP]"]
    n = len(tokens)
    A = np.zeros((n, n))
    A[:, 3] = 0.5
    A[:, 6] = 0.5
    r = roles(tokens, segment=[0, 0, 0, 0, 1, 1, 1])
    assert stats_of(A, r)["sep"] == pytest.approx(1.0)


def test_thresholds_are_strict_and_shown():
    assert THRESHOLDS == {
        "prev": 0.5,
        "next": 0.5,
        "cls": 0.6,
        "sep": 0.6,
        "punct": 0.6,
        "block": 0.8,
        "broad": 0.9,
        "sink": 0.6,
        "induction": 0.4,
    }
    # exactly 0.6 on [CLS] is not a [CLS] head (the rule is "> 0.6")
    A = np.full((N, N), 0.4 / (N - 1))
    A[:, 0] = 0.6
    assert stats_of(A)["cls"] == pytest.approx(0.6)
    assert label_of(A) != "cls"
    A[:, 0] = 0.61
    A[:, 1:] = 0.39 / (N - 1)
    assert label_of(A) == "cls"


def test_block_for_sentence_pairs_only():
    tokens = ["[CLS]", "a", "b", "[SEP]", "c", "d", "e", "[SEP]"]
    seg = [0, 0, 0, 0, 1, 1, 1, 1]
    n = len(tokens)
    A = np.zeros((n, n))
    for i in range(n):
        same = [j for j in range(n) if seg[j] == seg[i]]
        A[i, same] = 1.0 / len(same)
    r = roles(tokens, segment=seg)
    s = stats_of(A, r)
    assert s["block"] == pytest.approx(1.0)
    assert label_of(A, r, pairs=True) == "block"
    single = roles(tokens)
    assert math.isnan(stats_of(A, single)["block"])
    assert label_of(A, single, pairs=False) != "block"


def test_heterogeneous_when_no_rule_holds():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(N, N)) * 1.5
    A = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    s = stats_of(A)
    assert max(s["prev"], s["next"]) <= 0.5 and max(s["cls"], s["sep"], s["punct"]) <= 0.6
    assert s["entropy_norm"] <= 0.9
    assert label_of(A) == "heterogeneous"


def test_labels_are_from_the_list():
    assert set(LABELS) == {"prev", "next", "cls", "sep", "punct", "block", "broad", "heterogeneous"}


@pytest.mark.parametrize(
    "token, expected",
    [
        (".", True),
        (",", True),
        ("，", True),
        ("—", True),
        ("...", True),
        ("'", True),
        ("a", False),
        ("3", False),
        ("##s", False),
        ("[SEP]", False),
        ("[CLS]", False),
        ("[UNK]", False),
        ("猫", False),
    ],
)
def test_punctuation(token, expected):
    assert is_punct(token) is expected


# ---- padding ----------------------------------------------------------------------------------------


def test_padded_query_rows_are_excluded():
    """Stats of a padded batch equal those of each sentence alone, whatever the padded rows hold."""
    rng = np.random.default_rng(1)
    lengths = [5, 9]
    T = max(lengths)
    attn = torch.zeros(2, 2, 3, T, T)
    singles = []
    for b, n in enumerate(lengths):
        logits = torch.tensor(rng.normal(size=(2, 3, n, n)) * 2, dtype=torch.float32)
        maps = torch.softmax(logits, -1)
        attn[b, :, :, :n, :n] = maps
        attn[b, :, :, n:, :n] = torch.softmax(torch.randn(2, 3, T - n, n) * 5, -1)  # padded rows: anything
        singles.append((maps, ["[CLS]"] + ["w"] * (n - 2) + ["[SEP]"]))
    tokens = [toks + ["[PAD]"] * (T - len(toks)) for _, toks in singles]
    real = torch.tensor([[i < n for i in range(T)] for n in lengths])
    batch = sentence_stats(attn, Roles.of(tokens, real, torch.zeros(2, T, dtype=torch.long)))
    for b, (maps, toks) in enumerate(singles):
        alone = sentence_stats(
            maps[None],
            Roles.of([toks], torch.ones(1, len(toks), dtype=torch.bool), torch.zeros(1, len(toks), dtype=torch.long)),
        )
        for k, v in alone.items():
            torch.testing.assert_close(batch[k][b], v[0], equal_nan=True, rtol=1e-5, atol=1e-6)
    # JS of the padded batch = sum of each sentence's JS
    js = js_matrix(attn, real)
    parts = sum(js_matrix(maps) for maps, _ in singles)
    torch.testing.assert_close(js, parts, rtol=1e-5, atol=1e-5)


# ---- Jensen–Shannon -----------------------------------------------------------------------------------


def clark_js(maps: np.ndarray) -> np.ndarray:
    """Clark et al.'s head_distances.py, in float64: smoothed, summed over rows, the divergence itself."""
    N_, n, _ = maps.shape
    P = 0.001 / n + maps * 0.999
    out = np.zeros((N_, N_))
    for h in range(N_):
        m = (P[h][None] + P) / 2
        js = -P[h][None] * np.log(m / P[h][None]) - P * np.log(m / P)
        out[h] = (js / 2).sum(-1).sum(-1)
    return out


def random_maps(L=2, H=3, n=7, seed=0, scale=2.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(L, H, n, n, generator=g) * scale, -1)


def test_js_matches_clark_et_al():
    attn = random_maps()
    ours = js_matrix(attn).numpy()
    ref = clark_js(attn.reshape(-1, 7, 7).double().numpy())
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


def test_js_is_symmetric_zero_on_identical_heads_and_bounded():
    attn = random_maps(n=9)
    attn[1, 2] = attn[0, 1]  # two different heads with the same map
    js = js_matrix(attn).numpy()
    np.testing.assert_allclose(js, js.T, atol=1e-9)
    assert np.all(np.diag(js) == 0)
    assert js[1 * 3 + 2, 0 * 3 + 1] == pytest.approx(0.0, abs=1e-5)
    assert np.all(js >= 0)
    assert np.all(js <= 9 * math.log(2) + 1e-6)  # summed over 9 rows, each row's term ≤ ln 2


def test_js_per_row_at_most_ln2_and_near_it_for_disjoint_rows():
    n = 6
    A = torch.zeros(1, 2, 1, n)  # two heads, one query row each (a 1 × n map)
    A[0, 0, 0, 0] = 1.0
    A[0, 1, 0, 3] = 1.0
    attn = A.expand(1, 2, n, n).clone()  # every row the same: per-row JS = total / n
    js = js_matrix(attn).numpy()
    per_row = js[0, 1] / n
    assert per_row <= math.log(2)
    assert per_row > 0.99 * math.log(2)  # smoothing keeps it just below ln 2


# ---- cosine and CKA -----------------------------------------------------------------------------------


def test_cosine():
    attn = random_maps()
    cos = cosine_matrix(attn).numpy()
    flat = attn.reshape(6, -1).double().numpy()
    ref = flat @ flat.T / np.outer(np.linalg.norm(flat, axis=1), np.linalg.norm(flat, axis=1))
    np.testing.assert_allclose(cos, ref, rtol=1e-5)
    np.testing.assert_allclose(np.diag(cos), 1.0, rtol=1e-6)
    disjoint = torch.zeros(1, 2, 4, 4)
    disjoint[0, 0, :, 0] = 1
    disjoint[0, 1, :, 1] = 1
    assert cosine_matrix(disjoint)[0, 1] == pytest.approx(0.0)


def numpy_cka(X: np.ndarray, Y: np.ndarray) -> float:
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    return float(np.linalg.norm(Y.T @ X) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y)))


def test_cka_identical_invariant_and_matches_the_formula():
    g = torch.Generator().manual_seed(0)
    T, D = 11, 8
    X = torch.randn(T, D, generator=g, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=torch.float64))
    ctx = torch.stack([X, X, 3.7 * X @ Q, torch.randn(T, D, generator=g, dtype=torch.float64)])[None]  # (1, 4, T, D)
    cka = cka_matrix(ctx).numpy()
    assert cka[0, 1] == pytest.approx(1.0, abs=1e-6)  # identical outputs
    assert cka[0, 2] == pytest.approx(1.0, abs=1e-5)  # orthogonal transform and isotropic scaling
    assert cka[0, 3] == pytest.approx(numpy_cka(X.numpy(), ctx[0, 3].numpy()), rel=1e-4)
    assert cka[0, 3] < 0.99
    np.testing.assert_allclose(np.diag(cka), 1.0, rtol=1e-6)


def test_cka_of_a_constant_head_is_undefined_not_a_number_made_up():
    ctx = torch.randn(1, 3, 6, 4)
    ctx[0, 1] = 0.5  # the same vector for every token: nothing to correlate
    cka = cka_matrix(ctx).numpy()
    assert np.isnan(cka[1]).all() and np.isnan(cka[:, 1]).all()
    assert cka[0, 2] == pytest.approx(numpy_cka(ctx[0, 0].numpy(), ctx[0, 2].numpy()), rel=1e-4)


def test_pooled_cka_over_sentences_matches_concatenated_tokens():
    g = torch.Generator().manual_seed(2)
    a = torch.randn(1, 2, 2, 5, 4, generator=g) + 10.0  # a large mean: the shift must keep the variance
    b = torch.randn(1, 2, 2, 7, 4, generator=g) + 10.0
    acc = CkaAccumulator()
    acc.add(a, torch.ones(1, 5, dtype=torch.bool))
    acc.add(b, torch.ones(1, 7, dtype=torch.bool))
    pooled = torch.cat([a[0], b[0]], dim=2).reshape(4, 12, 4).numpy()  # (heads, tokens, d_k)
    ref = np.array([[numpy_cka(pooled[i], pooled[j]) for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(acc.matrix().numpy(), ref, rtol=1e-4)
    single = CkaAccumulator()
    single.add(a, torch.ones(1, 5, dtype=torch.bool))
    np.testing.assert_allclose(single.matrix().numpy(), cka_matrix(a[0]).numpy(), rtol=1e-4)


# ---- clustering, map of heads, near-duplicates ----------------------------------------------------------


def test_cluster_order_keeps_clusters_together():
    pts = np.array([0.0, 10.0, 0.1, 10.2, 0.2, 10.1])
    d = np.abs(pts[:, None] - pts[None])
    order = cluster_order(d)
    groups = [int(pts[i] > 5) for i in order]
    assert sorted(order) == list(range(6))
    assert groups in ([0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0])


def test_mds_recovers_planar_distances_up_to_rotation():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    d = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    Y, stress = mds(d)
    dy = np.sqrt(((Y[:, None] - Y[None]) ** 2).sum(-1))
    assert stress < 1e-3
    np.testing.assert_allclose(dy, d, atol=1e-3)
    Y2, _ = mds(d)
    np.testing.assert_array_equal(Y, Y2)  # deterministic


def test_near_duplicates_and_closest_pairs():
    d = np.array([[0, 0.01, 0.5, 0.6], [0.01, 0, 0.4, 0.7], [0.5, 0.4, 0, 0.3], [0.6, 0.7, 0.3, 0]])
    close, idx = nearest(d)
    assert idx.tolist() == [1, 0, 3, 2]
    assert near_duplicates_per_layer(d, n_layers=2, threshold=0.05).tolist() == [2, 0]
    assert near_duplicates_per_layer(d, n_layers=2, threshold=0.35).tolist() == [2, 2]
    assert closest_pairs(d, 2) == [(0, 1, 0.01), (2, 3, 0.3)]


# ---- the real model ---------------------------------------------------------------------------------


def test_report_on_the_bundled_model(minilm):
    out = minilm.encode("The keys to the cabinet that the old man built are on the table.", internals=True)
    rep = analyse(out)
    L, H = 6, 12
    assert rep.labels.shape == (L, H) and set(rep.labels.ravel()) <= set(LABELS)
    assert rep.js.shape == (L * H, L * H) and rep.cka.shape == (L * H, L * H)
    assert rep.rows == out.seq and rep.tokens == out.tokens
    assert np.all(rep.js_per_row <= math.log(2)) and np.all(rep.js >= 0)
    np.testing.assert_allclose(np.diag(rep.cka), 1.0, rtol=1e-5)
    assert sorted(rep.order) == list(range(L * H))
    assert rep.coords.shape == (L * H, 2)
    for k in ("cls", "sep", "punct", "self", "prev", "next", "confidence"):
        assert np.all((rep.stats[k] >= 0) & (rep.stats[k] <= 1 + 1e-6)), k
    # all-MiniLM-L6-v2's layer 0 head 2 is a textbook previous-token head
    assert rep.labels[0, 2] == "prev" and rep.stats["prev"][0, 2] > 0.9


def test_single_input_equals_a_corpus_of_one(minilm):
    out = minilm.encode("A first sentence.", "And its second half, here.", internals=True)
    rep = analyse(out)
    acc = Accumulator(6, 12)
    acc.add(out.attentions[None], Roles.of_output(out), out.context[None])
    other = acc.report(rep.model)
    for k in rep.stats:
        np.testing.assert_allclose(rep.stats[k], other.stats[k], rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(rep.cka, other.cka, rtol=1e-4, atol=1e-5)
    assert rep.pairs and not np.isnan(rep.stats["block"]).any()
