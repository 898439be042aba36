"""Induction scores (Olsson et al. 2022) and the decoder's labels: planted heads must be found, others not."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from models.analysis.heads import analyse, label_heads
from models.analysis.induction import induction_scores, repeated_random_tokens
from models.errors import InputError


class _Planted:
    """Stands in for a decoder whose layer 1 head 2 is a perfect induction head; every other head is uniform."""

    def __init__(self, real):
        self.real = real

    def __call__(self, ids):
        B, T = ids.shape
        uniform = torch.tril(torch.ones(T, T))
        uniform = uniform / uniform.sum(-1, keepdim=True)
        attn = uniform.expand(B, 2, 4, T, T).clone()
        n = (T - 1) // 2
        ind = torch.zeros(T, T)
        ind[:, 0] = 1.0  # rows without an earlier copy rest on the first token
        for k in range(n):
            ind[n + 1 + k] = 0
            ind[n + 1 + k, k + 2] = 1.0
        attn[:, 1, 2] = ind
        return SimpleNamespace(attentions=attn)


def test_a_planted_induction_head_scores_one(gpt2_tiny):
    fake = SimpleNamespace(
        is_decoder=True,
        model=_Planted(gpt2_tiny.model),
        tokenizer=gpt2_tiny.tokenizer,
        config=gpt2_tiny.config,
        device=torch.device("cpu"),
        max_tokens=gpt2_tiny.max_tokens,
    )
    scores = induction_scores(fake)  # type: ignore[arg-type]
    assert scores.shape == (2, 4)
    assert scores[1, 2] == pytest.approx(1.0)
    others = np.delete(scores.ravel(), 1 * 4 + 2)
    assert others.max() < 0.1  # a uniform head: about 1 / (n + k)


def test_sequence_is_bos_then_a_copy_twice(gpt2_tiny):
    ids = repeated_random_tokens(gpt2_tiny, n=10, batch=2)
    assert ids.shape == (2, 21)
    assert torch.equal(ids[:, 1:11], ids[:, 11:])
    specials = set(gpt2_tiny.tokenizer.all_special_ids)
    assert not set(ids[:, 1:].flatten().tolist()) & specials


def test_untrained_decoder_has_no_induction_heads(gpt2_tiny):
    scores = induction_scores(gpt2_tiny)
    assert scores.shape == (2, 4) and (scores < 0.1).all()


def test_encoders_are_refused(minilm):
    with pytest.raises(InputError, match="decoder"):
        induction_scores(minilm)


def test_decoder_labels():
    L, H = 1, 5
    z = np.zeros((L, H))
    stats = {"entropy": z, "entropy_norm": z + 0.5, "prev": z.copy(), "first": z.copy(), "punct": z.copy()}
    stats["prev"][0, 1] = 0.7
    stats["first"][0, 2] = 0.8
    stats["punct"][0, 3] = 0.7
    stats["entropy_norm"][0, 4] = 0.95
    ind = z.copy()
    ind[0, 0] = 0.5
    ind[0, 1] = 0.5  # induction wins over previous-token: the more specific pattern
    labels = label_heads(stats, pairs=False, causal=True, induction=ind)
    assert labels.tolist() == [["induction", "induction", "sink", "punct", "broad"]]
    assert label_heads(stats, pairs=False, causal=True)[0, 1] == "prev"  # without induction scores


def test_decoder_report_drops_bert_columns(gpt2_tiny):
    out = gpt2_tiny.encode("The cat sat on the mat.", internals=True)
    report = analyse(out).with_induction(induction_scores(gpt2_tiny))
    doc = report.to_json()
    assert doc["kind"] == "decoder"
    row = doc["heads"][0]
    assert {"first", "prev", "induction"} <= set(row) and not {"cls", "sep", "next"} & set(row)
    assert set(report.labels.ravel()) <= set(report.label_set)
    # The first-token share leaves out row 0, which can only see itself.
    attn = out.attentions.numpy()
    assert report.stats["first"][0, 0] == pytest.approx(attn[0, 0, 1:, 0].mean(), abs=1e-6)
