"""W_q, W_k, W_v run as one GEMM (SelfAttention.fuse_qkv): same numbers, same schema, one copy of the weights."""

from __future__ import annotations

import copy

import torch

from models.bert import SelfAttention

TEXT = "The animal didn't cross the street because it was too tired."


def attention_modules(enc) -> list[SelfAttention]:
    return [m for m in enc.model.modules() if isinstance(m, SelfAttention)]


def unfused(enc):
    """Return a deep copy of the encoder whose attention runs the three projections separately."""
    twin = copy.deepcopy(enc)
    for m in attention_modules(twin):
        m._qkv = None
    return twin


def test_loaded_encoder_runs_the_fused_projection_on_the_checkpoints_own_storage(minilm):
    mods = attention_modules(minilm)
    assert len(mods) == minilm.config.n_layers
    for m in mods:
        weight, bias = m._fused()  # None would mean three GEMMs
        C = m.query.out_features
        assert weight.shape == (3 * C, C) and bias.shape == (3 * C,)
        # W_q, W_k, W_v are rows of the stacked weight, not copies: nothing is held twice.
        assert m.query.weight.data_ptr() == weight.data_ptr()
        assert m.value.bias.data_ptr() == bias[2 * C :].data_ptr()
        assert torch.equal(weight[C : 2 * C], m.key.weight)
    # The checkpoint schema is unchanged: query/key/value keys, nothing added.
    keys = minilm.model.state_dict().keys()
    assert "encoder.layer.0.attention.self.query.weight" in keys
    assert not [k for k in keys if "qkv" in k]


def test_fused_and_separate_projections_agree(minilm):
    ours = minilm.encode(TEXT, internals=True)
    ref = unfused(minilm).encode(TEXT, internals=True)
    assert (ours.attentions - ref.attentions).abs().max() <= 1e-6
    for name in ("queries", "keys", "values", "scores", "context"):
        assert (getattr(ours, name) - getattr(ref, name)).abs().max() <= 1e-5, name


def test_an_in_place_change_to_w_q_reaches_the_forward(minilm):
    enc = copy.deepcopy(minilm)  # deepcopy gives every parameter storage of its own: fuse again
    for m in attention_modules(enc):
        m.fuse_qkv()
    assert attention_modules(enc)[0]._fused() is not None
    before = enc.encode(TEXT).attentions
    with torch.no_grad():
        attention_modules(enc)[0].query.weight.mul_(3.0)  # what a test that sharpens attention does
    after = enc.encode(TEXT).attentions
    assert (after[0] - before[0]).abs().max() > 1e-3  # layer 0 changed
    assert (after - unfused(enc).encode(TEXT).attentions).abs().max() <= 1e-6


def test_parameters_moved_after_fusing_fall_back_to_three_projections(minilm):
    enc = copy.deepcopy(minilm)
    enc.model.to(torch.float64)  # new storage per parameter: the stacked weight is stale
    mods = attention_modules(enc)
    assert all(m._fused() is None for m in mods)
    enc.model.to(torch.float32)
    out = enc.encode(TEXT)
    assert (out.attentions - minilm.encode(TEXT).attentions).abs().max() <= 1e-5
