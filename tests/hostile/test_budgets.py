"""Analyses whose work grows with heads² or tokens³ ask their budget before they start (issue 26): over it, the
report says which budget and still carries every head's statistics and labels; at it, the work is done."""

from __future__ import annotations

import numpy as np
import pytest

from lens_testing.hostile_corpus import maps
from models import BudgetError
from models.analysis.corpus import analyse_corpus, read_corpus
from models.analysis.heads import analyse, analyse_maps
from models.analysis.rollout import attention_rollout


def test_pair_heads_bounds_files(monkeypatch):
    attn = maps(2, 3, 5, 5)  # 6 heads
    monkeypatch.setenv("ATTENTION_LENS_PAIR_HEADS", "5")
    over = analyse_maps(attn, list("abcde"))
    assert over.pairwise_skipped == (
        "comparing 6 heads pairwise needs 6 heads; the budget ATTENTION_LENS_PAIR_HEADS allows 5 heads"
    )
    assert over.js.shape == over.cosine.shape == over.cka.shape == (0, 0) and over.coords is None
    assert over.order == list(range(6)) and over.labels.shape == (2, 3) and over.stats["entropy"].shape == (2, 3)
    assert over.to_json()["redundancy"] is None and over.to_json()["redundancy_skipped"] == over.pairwise_skipped
    monkeypatch.setenv("ATTENTION_LENS_PAIR_HEADS", "6")
    at = analyse_maps(attn, list("abcde"))
    assert at.pairwise and at.js.shape == (6, 6) and at.coords is not None and sorted(at.order) == list(range(6))


def test_pair_cells_bounds_one_input(monkeypatch):
    attn = maps(1, 100, 20, 20)  # 4,950 pairs × 400 cells = 1.98 million
    monkeypatch.setenv("ATTENTION_LENS_PAIR_CELLS", "1")
    over = analyse_maps(attn, [f"t{i}" for i in range(20)])
    assert "comparing 100 heads pairwise over 400 cells needs 2 million cells" in over.pairwise_skipped
    assert "ATTENTION_LENS_PAIR_CELLS allows 1 million cells" in over.pairwise_skipped
    monkeypatch.setenv("ATTENTION_LENS_PAIR_CELLS", "2")
    assert analyse_maps(attn, [f"t{i}" for i in range(20)]).js.shape == (100, 100)


def test_pair_heads_bounds_a_model_and_a_corpus(minilm, monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_PAIR_HEADS", "71")  # MiniLM: 6 layers × 12 heads = 72
    out = minilm.encode("The cat sat on the mat.", internals=True)
    report = analyse(out)
    assert "72 heads pairwise" in report.pairwise_skipped and report.cka.shape == (0, 0)
    assert np.isfinite(report.stats["entropy"]).all() and report.labels.shape == (6, 12)
    corpus, _ = analyse_corpus(minilm, read_corpus("One line here.\nAnd another one."))
    assert "72 heads pairwise" in corpus.pairwise_skipped and corpus.js.shape == (0, 0)
    monkeypatch.setenv("ATTENTION_LENS_PAIR_HEADS", "72")
    assert analyse(out).js.shape == (72, 72)


def test_rollout_asks_its_budget_first(monkeypatch):
    attn = np.tile(np.eye(1000, dtype=np.float32), (2, 1, 1, 1))  # 2 · 1000³ = 2 billion
    monkeypatch.setenv("ATTENTION_LENS_ROLLOUT_WORK", "1")
    with pytest.raises(BudgetError, match=r"rollout over 2 layers of 1000 positions needs 2 billion multiply-adds; "
                       r"the budget ATTENTION_LENS_ROLLOUT_WORK allows 1"):  # fmt: skip
        attention_rollout(attn)
    monkeypatch.setenv("ATTENTION_LENS_ROLLOUT_WORK", "2")
    assert attention_rollout(attn).shape == (2, 1000, 1000)
