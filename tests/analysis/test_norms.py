"""Value-weighted attention ‖α_ij · W_O^h v_j‖ against the same quantity built from transformers' eager model.

The reference never factors the norm: it takes transformers' own attention weights, the value vectors its v
projection made (a forward hook, bias included) and its output projection's weights, forms every vector
α_ij · W_O^h v_j and takes its norm. Under grouped-query attention query head h reads value head h // (H / kv).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import BudgetError, load_model
from models.analysis.norms import first_token_share, value_weighted
from tests.conftest import save_bert_folder, save_gpt2_folder, save_llama_folder

TEXT = "The keys to the cabinet are on the table, said the old man."


def _reference(attn: torch.Tensor, v: torch.Tensor, w_o: torch.Tensor, kv_of: list[int]) -> tuple:
    """Return (N (heads, q, k), output norm per head) from attn (heads, q, k), v (k, kv_heads, d_k) and W_O as
    (d_model, heads·d_k) columns (h·d_k … belong to head h), one vector per (i, j)."""
    attn, v, w_o = attn.detach(), v.detach(), w_o.detach()
    H, Q, K = attn.shape
    d_k = v.shape[-1]
    N = torch.empty(H, Q, K, dtype=torch.float64)
    out = torch.empty(H, dtype=torch.float64)
    for h in range(H):
        cols = w_o[:, h * d_k : (h + 1) * d_k].double()  # (d_model, d_k)
        f = v[:, kv_of[h]].double() @ cols.T  # (k, d_model): W_O^h v_j for every key j
        vectors = attn[h].double()[:, :, None] * f[None, :, :]  # (q, k, d_model): α_ij · W_O^h v_j
        N[h] = torch.linalg.vector_norm(vectors, dim=-1)
        out[h] = torch.linalg.vector_norm(vectors.sum(1), dim=-1).mean()  # ‖Σ_j α_ij W_O^h v_j‖, mean over i
    return N, out


def _check(ours, attn_layers, v_layers, w_o_layers, kv_of) -> None:
    for layer, (attn, v, w_o) in enumerate(zip(attn_layers, v_layers, w_o_layers, strict=True)):
        N, out = _reference(attn, v, w_o, kv_of)
        scale = float(N.abs().max())
        np.testing.assert_allclose(ours.norms[layer], N.numpy(), atol=1e-5 * max(scale, 1.0), rtol=1e-4)
        np.testing.assert_allclose(ours.output_norm[layer], out.numpy(), rtol=1e-4)


def _capture(modules) -> list:
    """Register a forward hook on each module that keeps its output; return the list it fills."""
    kept: list = []
    for m in modules:
        m.register_forward_hook(lambda mod, inp, out: kept.append(out.detach()))
    return kept


def test_llama_gqa_matches_transformers_weights(tmp_path):
    from transformers import LlamaForCausalLM

    path = save_llama_folder(tmp_path / "llama", num_attention_heads=6, num_key_value_heads=2, hidden_size=96)
    enc = load_model(str(path), device="cpu")
    out = enc.encode(TEXT, internals=True)
    ours = value_weighted(enc, out)

    hf = LlamaForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    layers = hf.model.layers
    vs = _capture(layer.self_attn.v_proj for layer in layers)
    with torch.no_grad():
        res = hf(out.input_ids[None], output_attentions=True)
    H, kv = 6, 2
    d_k = 96 // H
    T = out.seq
    kv_of = [h // (H // kv) for h in range(H)]
    _check(
        ours,
        [a[0] for a in res.attentions],
        [v[0].view(T, kv, d_k) for v in vs],
        [layer.self_attn.o_proj.weight for layer in layers],
        kv_of,
    )
    assert ours.norms.shape == tuple(out.attentions.shape)


def test_gpt2_value_bias_and_conv1d_output(tmp_path):
    from transformers import GPT2Model

    path = save_gpt2_folder(tmp_path / "gpt2", n_embd=64, n_layer=2, n_head=4)
    hf = GPT2Model.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():  # a value bias far from zero: a norm that forgets it is caught
        for block in hf.h:
            block.attn.c_attn.bias[128:] = torch.randn(64)
    hf.save_pretrained(path)
    enc = load_model(str(path), device="cpu")
    out = enc.encode(TEXT, internals=True)
    ours = value_weighted(enc, out)

    qkv = _capture(block.attn.c_attn for block in hf.h)
    with torch.no_grad():
        res = hf(out.input_ids[None], output_attentions=True)
    T, d = out.seq, 64
    # Conv1D stores (in, out): y = x @ W + b, so W_O^h is rows h·d_k … of c_proj.weight; as columns of Wᵀ.
    _check(
        ours,
        [a[0] for a in res.attentions],
        [x[0, :, 2 * d :].reshape(T, 4, d // 4) for x in qkv],
        [block.attn.c_proj.weight.T for block in hf.h],
        list(range(4)),
    )


def test_bert_matches_transformers_weights(tmp_path):
    from transformers import BertModel

    path = save_bert_folder(
        tmp_path / "bert", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128
    )
    enc = load_model(str(path), device="cpu")
    out = enc.encode(TEXT, internals=True)
    ours = value_weighted(enc, out)
    hf = BertModel.from_pretrained(path, attn_implementation="eager").eval()
    layers = hf.encoder.layer
    vs = _capture(layer.attention.self.value for layer in layers)
    with torch.no_grad():
        res = hf(out.input_ids[None], token_type_ids=out.token_type_ids[None], output_attentions=True)
    T = out.seq
    _check(
        ours,
        [a[0] for a in res.attentions],
        [v[0].view(T, 4, 16) for v in vs],
        [layer.attention.output.dense.weight for layer in layers],
        list(range(4)),
    )


def test_shares_sum_to_one_and_the_sink_is_read_per_row(tmp_path):
    path = save_llama_folder(tmp_path / "llama")
    enc = load_model(str(path), device="cpu")
    out = enc.encode(TEXT, internals=True)
    vw = value_weighted(enc, out)
    shares = vw.shares()
    np.testing.assert_allclose(shares.sum(-1), 1.0, atol=1e-5)
    # A share is α_ij·f_j / Σ_k α_ik·f_k, from the value norms of the keys.
    raw = out.attentions.numpy()
    expected = raw * vw.value_norms[:, :, None, :]
    np.testing.assert_allclose(shares, expected / expected.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(first_token_share(raw), raw[:, :, 1:, 0].mean(-1))
    assert first_token_share(shares).shape == (out.n_layers, out.n_heads)


def test_budget_refuses_before_allocating(tmp_path, monkeypatch):
    path = save_llama_folder(tmp_path / "llama")
    enc = load_model(str(path), device="cpu")
    out = enc.encode(TEXT, internals=True)
    monkeypatch.setenv("ATTENTION_LENS_MAX_DERIVED_VALUES", "100")
    with pytest.raises(BudgetError, match="ATTENTION_LENS_MAX_DERIVED_VALUES"):
        value_weighted(enc, out)


def test_needs_the_values():
    from models.errors import InputError

    class Bare:
        is_batch = False
        values = None
        context = None

    with pytest.raises(InputError, match="internals"):
        value_weighted(None, Bare())  # type: ignore[arg-type]
