"""One head step by step: the recomputed tensors are the encoder's own (≤ 1e-6), with the right shapes and code."""

from __future__ import annotations

import linecache
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from models import InputError, load_encoder
from models.lecture import steps as steps_module
from models.lecture.memory import mha_params
from models.lecture.steps import OPTIONAL, STEP_KEYS, head_steps, one_vs_many

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "The animal didn't cross the street because it was too tired."  # 16 tokens with [CLS] and [SEP]
TOL = 1e-6


@pytest.fixture(scope="module")
def bert_base(bert_base_dir):
    return load_encoder(str(bert_base_dir), device="cpu")


def _check_against_encoder(enc, out, cases):
    for layer, head, query in cases:
        s = head_steps(enc, out, layer, head, query)
        # Against the textbook formula, in float64 from the recorded tensors alone (independent of torch's path).
        assert s.errors["formula"] <= TOL and s.errors["weighted_sum"] <= TOL, s.errors
        # Against the model's own result for this text.
        assert s.errors["attention"] <= TOL, (layer, head, s.errors)
        assert s.errors["context"] <= TOL and s.errors["queries"] <= TOL
        assert s.errors["keys"] <= TOL and s.errors["values"] <= TOL
        assert s.errors["next_layer"] <= 1e-5, s.errors  # through residual, LayerNorm and the feed-forward block
        # The numbers shown are the model's attention and context, not only close on average.
        assert np.abs(s.probs - out.attentions[layer, head, query].numpy()).max() <= TOL
        assert np.abs(s.head_map - out.attentions[layer, head].numpy()).max() <= TOL
        assert np.abs(s.context - out.context[layer, head, query].numpy()).max() <= TOL
        assert np.abs(s.weighted.sum(0) - s.context).max() <= 1e-5  # Σ_j p_j v_j
        assert math.isclose(float(s.probs.sum()), 1.0, abs_tol=1e-5)
        np.testing.assert_allclose(s.merged[s.head_slice], s.context, atol=1e-6)  # concat puts the head in place
        np.testing.assert_allclose(s.q, out.queries[layer, head].numpy(), atol=TOL)


def test_bundled_model_reproduces_the_encoder(minilm):
    out = minilm.encode(SENTENCE, internals=True)
    _check_against_encoder(minilm, out, [(0, 0, 0), (3, 5, 4), (5, 11, out.seq - 1)])


def test_long_input_every_head(minilm):
    """~300 tokens, every head of the first and last layer: the whole map within 1e-6.

    d_k = 32, so 1/√d_k is not exact in binary: dividing q·k afterwards instead of scaling q first (as the
    encoder does) would already differ by ~3e-6 here.
    """
    out = minilm.encode("The keys to the cabinet that the old man built are on the table. " * 20, internals=True)
    assert out.seq > 250
    worst = max(
        head_steps(minilm, out, layer, head, 7).errors["attention"]
        for layer in (0, out.n_layers - 1)
        for head in range(out.n_heads)
    )
    assert worst <= TOL


def test_bert_base_shaped_reproduces_the_encoder_with_d_k_64(bert_base):
    out = bert_base.encode(SENTENCE, internals=True)
    assert out.seq == 16
    _check_against_encoder(bert_base, out, [(0, 3, 2), (11, 7, 9)])
    s = head_steps(bert_base, out, 2, 1, 5)
    shapes = {st.key: st.shape for st in s.steps}
    assert shapes["input"] == (1, 16, 768)
    assert shapes["project"] == (1, 16, 768)
    assert shapes["split"] == (1, 16, 12, 64)
    assert shapes["transpose"] == (1, 12, 16, 64)  # the issue's own example
    assert shapes["dot"] == shapes["scale"] == shapes["mask"] == shapes["softmax"] == (1, 12, 16, 16)
    assert shapes["weighted_sum"] == (1, 12, 16, 64)
    assert shapes["concat"] == shapes["w_o"] == (1, 16, 768)
    # BERT rotates nothing and shares no key/value heads: those steps are not there.
    assert [st.key for st in s.steps] == [k for k in STEP_KEYS if k not in OPTIONAL]
    assert all(len(st.axes) == len(st.shape) for st in s.steps)
    assert not s.step("mask").ran  # one sentence, no mask: the line is shown, it did not run


@pytest.mark.parametrize("which", ["minilm", "bert_base"])
def test_causal_mask(which, minilm, bert_base):
    enc = minilm if which == "minilm" else bert_base
    out = enc.encode(SENTENCE, "It was late.", mask="causal", internals=True)
    _check_against_encoder(enc, out, [(1, 2, 6), (enc.config.n_layers - 1, 0, out.seq - 1)])
    i = 6
    s = head_steps(enc, out, 1, 2, i)
    future = np.arange(out.seq) > i
    assert (~s.keep == future).all()
    assert (s.probs[future] == 0).all() and (s.masked[future] == np.finfo(np.float32).min).all()
    assert (s.masked[~future] == s.scores[~future]).all()
    assert np.triu(s.head_map, 1).max() == 0  # no weight on any future position


def test_scaling_softmax_side_by_side(minilm):
    """Without /√d_k the logits are √d_k times larger: the softmax is sharper, on every row."""
    out = minilm.encode(SENTENCE, internals=True)
    s = head_steps(minilm, out, 2, 3, 7)
    np.testing.assert_allclose(s.scores, s.dots / math.sqrt(s.d_k), rtol=1e-6, atol=1e-6)
    assert s.probs_unscaled.max() >= s.probs.max()
    # The entropies the page quotes, against numpy written out here.
    assert s.entropy == pytest.approx(-(s.probs[s.probs > 0] * np.log(s.probs[s.probs > 0])).sum(), abs=1e-5)
    p = s.probs_unscaled[s.probs_unscaled > 0]
    assert s.entropy_unscaled == pytest.approx(-(p * np.log(p)).sum(), abs=1e-5)
    assert s.entropy_unscaled <= s.entropy


def test_steps_are_recomputed_from_the_layer_input(minilm):
    """A wrong layer input must show up in the self-check: the steps are computed, not copied from the output."""
    out = minilm.encode(SENTENCE, internals=True)
    bad = replace(out, layer_inputs=out.layer_inputs + 0.5 * torch.randn_like(out.layer_inputs))
    s = head_steps(minilm, bad, 2, 3, 4)
    assert s.errors["attention"] > 1e-3 and s.errors["queries"] > 1e-3


def test_head_share_adds_up_to_the_output(minilm):
    """W_o is linear: the heads' shares plus the bias give the attention block's output."""
    out = minilm.encode(SENTENCE, internals=True)
    shares = sum(head_steps(minilm, out, 1, h, 3).head_share for h in range(minilm.config.n_heads))
    bias = minilm.model.layers[1].attention.output.dense.bias.numpy()
    np.testing.assert_allclose(shares + bias, head_steps(minilm, out, 1, 0, 3).output, atol=1e-5)


def test_each_step_shows_the_line_that_made_its_tensor(minilm, gpt2_tiny):
    """The code shown is read from the running source: the line of models/ that made the tensor."""
    for enc in (minilm, gpt2_tiny):
        out = enc.encode(SENTENCE, internals=True)
        s = head_steps(enc, out, 1, 2, 3)
        for st in s.steps:
            path, _, rest = st.where.partition(":")
            lineno = int(rest.split(",")[0])
            source_line = linecache.getline(str(ROOT / path), lineno)
            assert source_line.strip() and source_line.strip() in st.code, (st.key, st.where, st.code)
            assert source_line.strip() in st.function, st.key
        assert s.step("scale").where.startswith("models/attention.py")  # the core every family calls
        assert "softmax" in s.step("softmax").code and "matmul(q * scale" in s.step("scale").code


def test_the_lines_are_recorded_as_they_run(minilm, monkeypatch):
    """Swap the core's row function for a copy defined here: the page's lines follow, so they are not copied."""
    import models.attention as core

    def attend_rows(q, k, v, keep, scale, opts):  # the same arithmetic, in this file
        hook = opts.hook
        scores = hook("scores", torch.matmul(q * scale, k.transpose(-2, -1)))
        probs = hook("probs", torch.softmax(scores, dim=-1, dtype=torch.float32))
        context = hook("context", torch.matmul(probs, v)) if v is not None else None
        return context, probs

    out = minilm.encode(SENTENCE, internals=True)
    monkeypatch.setattr(core, "attend_rows", attend_rows)
    s = head_steps(minilm, out, 2, 3, 4)
    assert s.step("softmax").where.startswith("test_steps.py:")
    assert s.errors["attention"] <= TOL  # the same numbers


@pytest.mark.parametrize(
    "args",
    [(6, 0, 0), (-1, 0, 0), (0, 12, 0), (0, 0, 99)],
)
def test_bad_indices(minilm, args):
    out = minilm.encode(SENTENCE, internals=True)
    with pytest.raises(InputError):
        head_steps(minilm, out, *args)


def test_needs_internals_and_a_single_text(minilm):
    with pytest.raises(InputError, match="internals"):
        head_steps(minilm, minilm.encode(SENTENCE), 0, 0, 0)
    with pytest.raises(InputError, match="single"):
        head_steps(minilm, minilm.encode_batch([SENTENCE, "Short."], internals=True), 0, 0, 0)


# ---- one head vs many ------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["minilm", "bert_base"])
def test_one_vs_many_parameters_are_equal(which, minilm, bert_base):
    enc = minilm if which == "minilm" else bert_base
    out = enc.encode(SENTENCE, internals=True)
    o = one_vs_many(enc, out, 1)
    d = enc.config.d_model
    assert o.params_heads == o.params_single == 4 * d * d + 4 * d == mha_params(d, enc.config.n_heads)
    assert o.params_per_head == 3 * (d * enc.config.d_k + enc.config.d_k)
    assert o.params_w_o == d * d + d
    # The heads' maps, against softmax(Q_h·K_hᵀ/√d_k) of the recorded queries and keys (not the maps copied).
    q, k = out.queries[1].double(), out.keys[1].double()
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(enc.config.d_k), dim=-1).numpy()
    np.testing.assert_allclose(o.maps, expected, atol=1e-6)
    assert o.single_map.shape == (out.seq, out.seq)
    np.testing.assert_allclose(o.single_map.sum(-1), 1.0, atol=1e-5)


def test_single_head_logits_are_the_sum_of_the_heads_dot_products(minilm):
    """softmax(Q·Kᵀ/√d_model) with the full width: Q·Kᵀ = Σ_h Q_h·K_hᵀ, one softmax instead of h."""
    out = minilm.encode(SENTENCE, internals=True)
    layer = 2
    q, k = out.queries[layer], out.keys[layer]  # (heads, seq, d_k)
    summed = torch.einsum("hid,hjd->ij", q, k) / math.sqrt(minilm.config.d_model)
    expected = torch.softmax(summed, dim=-1).numpy()
    np.testing.assert_allclose(one_vs_many(minilm, out, layer).single_map, expected, atol=1e-5)


def test_one_vs_many_keeps_the_mask(minilm):
    out = minilm.encode(SENTENCE, mask="causal", internals=True)
    o = one_vs_many(minilm, out, 0)
    assert np.triu(o.single_map, 1).max() == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
@pytest.mark.parametrize("dtype,tol", [("fp32", 1e-5), ("bf16", 5e-2)])
def test_steps_of_a_gpu_encoder(dtype, tol):
    """On a GPU the steps are recomputed on the CPU in float32 from a copy of the layer: the page shows the gap."""
    enc = load_encoder("minilm", device="cuda", dtype=dtype)
    out = enc.encode(SENTENCE, internals=True)
    s = head_steps(enc, out, 2, 3, 4)
    assert s.errors["attention"] <= tol, s.errors
    assert next(enc.model.parameters()).device.type == "cuda"  # the shared model was not moved
    o = one_vs_many(enc, out, 2)
    assert o.params_heads == o.params_single == mha_params(enc.config.d_model)


def test_decoder_steps_are_the_models_own_with_its_causal_mask(gpt2_tiny):
    out = gpt2_tiny.encode("The cat sat on the mat.", internals=True)
    s = steps_module.head_steps(gpt2_tiny, out, 1, 2, 3)
    assert max(s.errors.values()) < 1e-5, s.errors
    assert s.keep.tolist() == [True] * 4 + [False] * (out.seq - 4)  # query 3 sees keys 0…3: the causal row
    assert (s.probs[4:] == 0).all() and s.step("mask").ran
    assert s.step("input").where.startswith("models/gpt2.py")
    o = steps_module.one_vs_many(gpt2_tiny, out, 1)
    assert o.params_heads == o.params_single
    assert np.allclose(np.triu(o.single_map, 1), 0)


def test_a_grouped_rotary_model_has_its_own_steps():
    """The Llama family: q and k rotated by position, key/value heads shared — and the steps say so."""
    enc = load_encoder("random:llama-tiny", device="cpu")
    out = enc.encode(SENTENCE, internals=True)
    s = head_steps(enc, out, 1, 3, 5)
    keys = [st.key for st in s.steps]
    assert "rotate" in keys and "repeat_kv" in keys
    assert keys.index("transpose") < keys.index("rotate") < keys.index("repeat_kv") < keys.index("dot")
    assert s.kv_heads == 2 and s.kv_head == 1 and s.group_size == 2  # heads 2, 3 read key/value head 1
    assert max(s.errors.values()) < 1e-5, s.errors
    assert s.step("rotate").where.startswith("models/llama.py")
    # Rotation preserves length; q·k after rotation depends on the distance only.
    np.testing.assert_allclose(np.linalg.norm(s.q_before), np.linalg.norm(s.q[5]), rtol=1e-5)
    assert s.distance_dots is not None and s.distance_dots.shape == (steps_module.DISTANCES,)
    assert s.distance_dots[0] == pytest.approx(float(s.q[5] @ s.k[5]) / math.sqrt(s.d_k), abs=1e-4)
    o = one_vs_many(enc, out, 1)
    assert o.kv_heads == 2 and o.params_heads == o.params_single
