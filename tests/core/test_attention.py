"""The attention module itself: against torch.nn.MultiheadAttention, masks, gates and recorded internals."""

from __future__ import annotations

import math

import torch
from torch import nn

from models.attention import Options
from models.bert import SelfAttention, SelfOutput
from models.config import BertConfig

CFG = BertConfig(vocab_size=100, d_model=64, n_layers=1, n_heads=4, d_ff=128, max_positions=32)


def _pair(seed=0):
    """Our attention (+ W_o) and an nn.MultiheadAttention holding the same weights."""
    torch.manual_seed(seed)
    ours, wo = SelfAttention(CFG).eval(), SelfOutput(CFG).eval()
    for m in (ours.query, ours.key, ours.value, wo.dense):
        nn.init.normal_(m.weight, std=0.3)
        nn.init.normal_(m.bias, std=0.1)
    mha = nn.MultiheadAttention(CFG.d_model, CFG.n_heads, batch_first=True, bias=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([ours.query.weight, ours.key.weight, ours.value.weight]))
        mha.in_proj_bias.copy_(torch.cat([ours.query.bias, ours.key.bias, ours.value.bias]))
        mha.out_proj.weight.copy_(wo.dense.weight)
        mha.out_proj.bias.copy_(wo.dense.bias)
    return ours, wo, mha


def test_matches_nn_multihead_attention():
    ours, wo, mha = _pair()
    x = torch.randn(2, 9, CFG.d_model)
    with torch.no_grad():
        ctx, probs = ours(x, None, Options())
        theirs_out, theirs_w = mha(x, x, x, need_weights=True, average_attn_weights=False)
    assert probs.shape == (2, CFG.n_heads, 9, 9)
    assert torch.allclose(probs, theirs_w, atol=1e-6)
    assert torch.allclose(wo.dense(ctx), theirs_out, atol=1e-5)


def test_matches_mha_with_its_inverted_mask_conventions():
    """nn.MultiheadAttention: True = masked (key_padding_mask and bool attn_mask); ours: True = may attend."""
    ours, wo, mha = _pair(1)
    B, T = 2, 7
    x = torch.randn(B, T, CFG.d_model)
    key_padding = torch.zeros(B, T, dtype=torch.bool)
    key_padding[1, 5:] = True  # sentence 2 has two padded keys
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = masked, MHA's causal form
    keep = ~future[None, None] & ~key_padding[:, None, None, :]
    with torch.no_grad():
        ctx, probs = ours(x, keep, Options())
        out, w = mha(
            x, x, x, key_padding_mask=key_padding, attn_mask=future, need_weights=True, average_attn_weights=False
        )
    assert torch.allclose(probs, w, atol=1e-6)
    assert torch.allclose(wo.dense(ctx), out, atol=1e-5)
    assert probs.masked_select(~keep.expand_as(probs)).abs().max() == 0


def test_fully_masked_row_is_not_nan():
    ours, _, _ = _pair()
    x = torch.randn(1, 4, CFG.d_model)
    keep = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    keep[..., 2, :] = False  # query 2 may attend to nothing
    with torch.no_grad():
        _, probs = ours(x, keep, Options())
    assert torch.isfinite(probs).all()
    assert torch.allclose(probs[0, :, 2], torch.full((CFG.n_heads, 4), 0.25))


def test_fill_minus_inf_is_the_tutorials_nan_and_changes_nothing_else():
    """fill=-inf (the mask checker's demonstration) turns only the empty row into NaN; other rows are unchanged."""
    ours, _, _ = _pair()
    x = torch.randn(1, 4, CFG.d_model)
    keep = torch.tril(torch.ones(4, 4, dtype=torch.bool))[None, None].clone()
    keep[..., 2, :] = False
    with torch.no_grad():
        _, ours_probs = ours(x, keep, Options())
        _, inf_probs = ours(x, keep, Options(fill=float("-inf")))
    assert torch.isnan(inf_probs[0, :, 2]).all()
    rest = [0, 1, 3]
    assert not torch.isnan(inf_probs[0, :, rest]).any()
    torch.testing.assert_close(inf_probs[0, :, rest], ours_probs[0, :, rest], rtol=0, atol=1e-7)


def test_head_gates_remove_exactly_one_head():
    ours, _, _ = _pair()
    x = torch.randn(1, 5, CFG.d_model)
    gates = torch.ones(CFG.n_heads)
    gates[2] = 0.0
    with torch.no_grad():
        full, p_full = ours(x, None, Options())
        gated, p_gated = ours(x, None, Options(head_gates=gates))
    d_k = CFG.d_k
    assert torch.equal(p_full, p_gated)  # gates act on the output, not on the pattern
    assert gated[..., 2 * d_k : 3 * d_k].abs().max() == 0
    keep_cols = torch.ones(CFG.d_model, dtype=torch.bool)
    keep_cols[2 * d_k : 3 * d_k] = False
    assert torch.allclose(full[..., keep_cols], gated[..., keep_cols])


def test_internals_reproduce_the_attention(minilm):
    out = minilm.encode("Attention is all you need.", internals=True)
    L, H, T, d_k = out.queries.shape
    assert (L, H, d_k) == (minilm.config.n_layers, minilm.config.n_heads, minilm.config.d_k)
    scores = out.queries @ out.keys.transpose(-2, -1) / math.sqrt(d_k)
    assert torch.allclose(scores, out.scores, atol=1e-5)
    assert torch.allclose(torch.softmax(out.scores, -1), out.attentions, atol=1e-6)
    assert torch.allclose(out.attentions @ out.values, out.context, atol=1e-5)
    assert out.layer_inputs.shape == (L + 1, T, minilm.config.d_model)
    assert torch.allclose(out.layer_inputs[-1], out.hidden_states)
