"""Generation with our KV cache: rows equal the full forward's, greedy equals recomputing, budgets hold."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import load_model
from models.errors import BudgetError, InputError
from models.lecture.generate import ROW_TOL, check_rows, generate


def test_cached_rows_equal_the_full_forward(gpt2_tiny):
    g = generate(gpt2_tiny, "The cat sat on the mat.", 12)
    assert len(g.generated_ids) == len(g.steps) == 12
    assert g.stop == "budget" and not g.notes
    assert g.max_row_error is not None and g.max_row_error <= ROW_TOL
    P = len(g.prompt_ids)
    for s, step in enumerate(g.steps):
        assert step.position == (P - 1 if s == 0 else P + s - 1)
        assert step.rows.shape == (2, 4, step.position + 1)
        assert np.allclose(step.rows.sum(-1), 1, atol=1e-5)
        assert step.cache_shape == (1, 4, step.position + 1, 16)  # (batch, heads, seq, d_k)
        assert step.cache_bytes == step.formula_bytes == 2 * 2 * 1 * 4 * (step.position + 1) * 16 * 4


def test_the_check_catches_a_wrong_row(gpt2_tiny):
    g = generate(gpt2_tiny, "One two three.", 4)
    g.steps[2].rows = np.roll(g.steps[2].rows, 1, axis=-1)  # off by one key
    assert check_rows(gpt2_tiny, g) > 100 * ROW_TOL


def test_greedy_equals_recomputing_without_a_cache(gpt2_tiny):
    g = generate(gpt2_tiny, "The cat sat", 6)
    ids = list(g.prompt_ids)
    with torch.inference_mode():
        for _ in range(6):
            hidden = gpt2_tiny.model(torch.tensor([ids])).last_hidden[0, -1]
            ids.append(int(torch.argmax(gpt2_tiny.model.logits(hidden))))
    assert ids[len(g.prompt_ids) :] == g.generated_ids


def test_top_k_is_reproducible_and_stays_in_the_top_k(gpt2_tiny):
    a = generate(gpt2_tiny, "The cat sat", 8, top_k=3, seed=7)
    b = generate(gpt2_tiny, "The cat sat", 8, top_k=3, seed=7)
    assert a.generated_ids == b.generated_ids
    for step in a.steps:
        assert step.chosen in [i for i, _ in step.top[:3]]


def test_rows_array_is_zero_padded(gpt2_tiny):
    g = generate(gpt2_tiny, "Hello there", 5)
    rows, lengths = g.rows_array()
    assert rows.shape == (5, 2, 4, int(lengths.max())) and rows.dtype == np.float32
    assert lengths.tolist() == [s.position + 1 for s in g.steps]
    assert (rows[0, :, :, lengths[0] :] == 0).all()


def test_stops_at_the_models_positions(gpt2_tiny, monkeypatch):
    monkeypatch.setattr(type(gpt2_tiny.config), "max_positions", property(lambda self: 8), raising=False)
    g = generate(gpt2_tiny, "The cat sat", 50, check=False)
    assert len(g.prompt_ids) + len(g.generated_ids) == 8
    assert g.notes and "positions" in g.notes[0]
    assert g.stop == "positions"


def test_stops_where_the_model_chooses_its_end_of_text_token(gpt2_tiny_dir):
    """A GPT-2 folder whose tied LM head is edited so that greedy step K (and no step before it) chooses eos."""
    dec = load_model(str(gpt2_tiny_dir), device="cpu")  # a fresh copy: its weights are edited below
    eos, K = dec.tokenizer.eos_token_id, 3
    plain = generate(dec, "The cat sat", 8, check=False)
    assert eos not in plain.generated_ids and plain.stop == "budget"
    # The newest position's hidden state at steps 0…K (the logits are wte · h): make eos's row orthogonal to
    # h_0…h_{K−1} and along h_K. Steps before K keep their choice (eos scores 0 there); step K picks eos. Only
    # the LM head's eos row changes: eos is never fed before step K, so nothing else moves.
    P = len(plain.prompt_ids)
    with torch.inference_mode():
        seq = torch.tensor([[*plain.prompt_ids, *plain.generated_ids[:K]]])
        h = dec.model(seq).last_hidden[0, P - 1 : P + K]  # (K + 1, d_model)
        q, _ = torch.linalg.qr(h[:K].T)  # orthonormal basis of h_0…h_{K−1}
        v = h[K] - q @ (q.T @ h[K])
        dec.model.wte.weight[eos] = 1e3 * v / v.norm()

    g = generate(dec, "The cat sat", 8)
    assert g.generated_ids == [*plain.generated_ids[:K], eos]
    assert len(g.steps) == K + 1 and g.steps[-1].chosen == eos
    assert g.stop == "end_of_text"
    assert g.notes == [f"stopped after {K + 1} of 8 tokens: the model chose its end-of-text token '<|endoftext|>'"]
    assert g.tokens[-1] == "<|endoftext|>" and g.text == dec.tokenizer.decode(plain.generated_ids[:K])
    assert g.max_row_error is not None and g.max_row_error <= ROW_TOL  # the cache check covers every step run
    # Sampling stops there too: with k = 1, top-k is greedy.
    assert generate(dec, "The cat sat", 8, top_k=1, check=False).stop == "end_of_text"


def test_budget_and_bad_input(gpt2_tiny, minilm, monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_MAX_GENERATE", "4")
    with pytest.raises(BudgetError, match="ATTENTION_LENS_MAX_GENERATE"):
        generate(gpt2_tiny, "Hi", 5)
    with pytest.raises(InputError, match="decoder"):
        generate(minilm, "Hi", 2)
    with pytest.raises(InputError, match="prompt"):
        generate(gpt2_tiny, "   ", 2)
    with pytest.raises(InputError):
        generate(gpt2_tiny, "Hi", 0)
