"""Needle in a haystack and retrieval heads (models.analysis.needle), checked against transformers' eager attention.

The retrieval score is recomputed here from transformers' own maps (output_attentions) over the prompt and the
answer in one pass, by Wu et al.'s definition, independently of our cache and our bookkeeping.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models.analysis.needle import NEEDLE, SECRET, build_prompt, needle_grid
from models.cli import main
from models.errors import BudgetError, InputError


@pytest.fixture(scope="module")
def tiny():
    from models import load_model

    return load_model("random:llama-tiny", device="cpu")


def their_copies(model, ids: list[int], answer: list[int], span: tuple[int, int]) -> tuple[np.ndarray, int]:
    """Wu et al.'s copy counts from transformers' eager maps: (layers, heads) copies and the counted steps."""
    seq = torch.tensor([ids + answer[:-1]])
    with torch.no_grad():
        attn = torch.stack(model(input_ids=seq, output_attentions=True).attentions)[:, 0]  # (L, H, q, k)
    n0, n1 = span
    needle = ids[n0:n1]
    copies = np.zeros(attn.shape[:2], np.int64)
    counted = 0
    for g, w in enumerate(answer):
        if w not in needle:
            continue
        counted += 1
        q = len(ids) - 1 + g  # the position whose output is answer token g
        for layer in range(attn.shape[0]):
            for head in range(attn.shape[1]):
                j = int(attn[layer, head, q, : q + 1].argmax())
                copies[layer, head] += int(n0 <= j < n1 and seq[0, j] == w)
    return copies, counted


def test_the_prompt_holds_the_needle_where_asked(tiny):
    for depth in (0.0, 0.5, 1.0):
        prompt, (n0, n1), ids = build_prompt(tiny, 120, depth)
        assert NEEDLE in prompt and len(ids) <= 120
        assert tiny.tokenizer.decode(ids[n0:n1]).strip() == NEEDLE
        frac = n0 / len(ids)
        assert abs(frac - depth * (len(ids) - (n1 - n0) - 20) / len(ids)) < 0.2


@pytest.mark.long
def test_retrieval_scores_equal_an_independent_count_from_transformers(smollm2):
    from tests.core.test_llama import _smollm2_reference

    g = needle_grid(smollm2, [160], [0.5])
    (case,) = g.cases
    assert case.found and SECRET in case.answer  # SmolLM2 finds a needle in 160 tokens
    _, span, ids = build_prompt(smollm2, 160, 0.5)
    copies, counted = their_copies(_smollm2_reference(), ids, case.answer_ids, span)
    assert counted == case.counted >= 1
    assert np.array_equal(copies, case.copies)
    scores = g.scores()
    assert np.allclose(scores, copies / counted)
    heads = g.heads()
    assert [h["retrieval_score"] for h in heads] == sorted((h["retrieval_score"] for h in heads), reverse=True)
    assert heads[0]["retrieval_score"] > 0.2  # a trained model has heads that copy the needle


def test_grid_on_a_random_model_and_its_checks(tiny, monkeypatch):
    g = needle_grid(tiny, [64, 96], [0.0, 1.0], answer_tokens=3)
    assert [(c.context, c.depth) for c in g.cases] == [(64, 0.0), (64, 1.0), (96, 0.0), (96, 1.0)]
    assert g.found_grid([64, 96], [0.0, 1.0]).shape == (2, 2)
    assert len(g.heads()) == tiny.config.n_layers * tiny.config.n_heads
    c = g.cases[0]
    assert c.answer_rows.shape == (tiny.config.n_layers, tiny.config.n_heads, c.window[1] - c.window[0])
    with pytest.raises(InputError, match="depth"):
        needle_grid(tiny, [64], [1.5])
    with pytest.raises(InputError, match="context"):
        needle_grid(tiny, [10], [0.5])
    monkeypatch.setenv("ATTENTION_LENS_NEEDLE_CASES", "3")
    with pytest.raises(BudgetError, match="ATTENTION_LENS_NEEDLE_CASES"):
        needle_grid(tiny, [64, 96], [0.0, 1.0])


def test_needle_command(capsys):
    args = ["needle", "--model", "random:llama-tiny", "--context", "64,80", "--depths", "0,0.5", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["cases"]) == 4 and set(doc["cases"][0]) >= {
        "context",
        "depth",
        "prompt",
        "needle",
        "answer",
        "found",
    }
    scores = [h["retrieval_score"] for h in doc["heads"]]
    assert scores == sorted(scores, reverse=True) and set(doc["heads"][0]) == {"layer", "head", "retrieval_score"}
    assert main(["needle", "--model", "random:llama-tiny", "--context", "64", "--depths", "x"]) == 2
    assert "depth" in capsys.readouterr().err
    assert main(["needle", "--model", "minilm", "--context", "64", "--depths", "0.5"]) == 2
    assert "decoder" in capsys.readouterr().err


def test_retrieval_bookkeeping_equals_transformers_on_a_forced_answer(tiny, monkeypatch):
    """A cheap twin of the SmolLM2 check on random:llama-tiny (grouped, rotary), made to answer with the needle's own
    tokens (its next-token logits replaced, nothing else) so that every step counts: the steps counted and each
    head's copies equal Wu et al.'s count from transformers' eager maps, and the first answer step's attention row,
    read through our KV cache, equals transformers'. (A random model's heads copy nothing, so the copies are zeros
    here; the SmolLM2 test above compares real ones.)"""
    from tests.analysis.test_cache import tiny_reference

    _, span, ids = build_prompt(tiny, 96, 0.5)
    answer = ids[span[0] : span[1]][:6]
    steps = iter(answer)
    real = tiny.model.logits

    def forced(hidden):
        out = torch.zeros_like(real(hidden))
        out[..., next(steps)] = 1.0
        return out

    monkeypatch.setattr(tiny.model, "logits", forced)
    g = needle_grid(tiny, [96], [0.5], answer_tokens=len(answer))
    (case,) = g.cases
    assert case.answer_ids == answer and case.counted == len(answer)
    reference = tiny_reference()
    copies, counted = their_copies(reference, ids, answer, span)
    assert counted == case.counted
    assert np.array_equal(copies, case.copies), (copies, case.copies)
    with torch.no_grad():
        attn = torch.stack(reference(input_ids=torch.tensor([ids]), output_attentions=True).attentions)[:, 0]
    lo, hi = case.window
    np.testing.assert_allclose(case.answer_rows, attn[:, :, len(ids) - 1, lo:hi].numpy(), atol=1e-5)
