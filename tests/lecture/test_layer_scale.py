"""The lecture reads the layer's own scale: on a GPT-2 saved with scale_attn_weights=False (the Train page's "break
it" checkpoint) the self-check of "Inside a head" holds to 1e-5, and the troubleshooting demonstration's "as
trained" row is the model's own."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models import load_model
from models.lecture import troubleshoot
from models.lecture.steps import head_steps, layer_scale
from tests.conftest import save_gpt2_folder

TEXT = "The cat sat on the mat because it was tired of the dog."


@pytest.fixture(scope="module")
def unscaled(tmp_path_factory):
    path = save_gpt2_folder(
        tmp_path_factory.mktemp("gpt2-unscaled"), n_embd=64, n_layer=2, n_head=4, scale_attn_weights=False
    )
    enc = load_model(str(path), device="cpu")
    return enc, enc.encode(TEXT, internals=True)


def test_the_self_check_holds_on_a_checkpoint_without_the_scale(unscaled):
    enc, out = unscaled
    assert layer_scale(enc, 1) == 1.0  # the module's own constant, not 1/√d_k
    for layer, head, query in ((0, 1, out.seq - 1), (1, 3, 5)):
        s = head_steps(enc, out, layer, head, query)
        assert s.errors["formula"] <= 1e-5, s.errors
        assert s.errors["attention"] <= 1e-6
        # The row shown as "scaled" is the model's; without a scale the two rows are the same.
        assert np.allclose(s.probs_unscaled, s.probs, atol=1e-6)


def test_the_scaling_demonstration_shows_the_layer_s_own_scores(unscaled):
    enc, out = unscaled
    d = troubleshoot.scaling_effect(out, layer=1, head=2, query=6)
    assert d.scale == pytest.approx(1.0, rel=1e-4)
    assert np.allclose(d.row_scaled, out.attentions[1, 2, 6].numpy(), atol=1e-6)
    assert np.allclose(d.row_scaled, d.row_unscaled, atol=1e-6)


def test_a_scaled_checkpoint_still_reads_one_over_root_d_k(gpt2_tiny):
    out = gpt2_tiny.encode(TEXT, internals=True)
    assert layer_scale(gpt2_tiny, 0) == pytest.approx(1 / math.sqrt(gpt2_tiny.config.d_k))
    d = troubleshoot.scaling_effect(out, layer=0, head=0, query=4)
    assert d.scale == pytest.approx(1 / math.sqrt(gpt2_tiny.config.d_k), rel=1e-4)
    s = head_steps(gpt2_tiny, out, 0, 0, 4)
    assert s.errors["formula"] <= 1e-5
    assert not torch.allclose(torch.from_numpy(s.probs_unscaled), torch.from_numpy(s.probs))
