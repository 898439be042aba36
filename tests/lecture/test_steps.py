"""One head step by step: the recomputed tensors are the encoder's own (≤ 1e-6), with the right shapes and code."""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from models import InputError, load_encoder
from models import bert as bert_module
from models.lecture import steps as steps_module
from models.lecture.memory import mha_params
from models.lecture.steps import STEP_KEYS, head_steps, one_vs_many

SENTENCE = "The animal didn't cross the street because it was too tired."  # 16 tokens with [CLS] and [SEP]
TOL = 1e-6


@pytest.fixture(scope="module")
def bert_base(bert_base_dir):
    return load_encoder(str(bert_base_dir), device="cpu")


def _check_against_encoder(enc, out, cases):
    for layer, head, query in cases:
        s = head_steps(enc, out, layer, head, query)
        assert s.errors["attention"] <= TOL, (layer, head, s.errors)
        assert s.errors["context"] <= TOL and s.errors["queries"] <= TOL
        assert s.errors["keys"] <= TOL and s.errors["values"] <= TOL
        assert s.errors["next_layer"] <= 1e-5, s.errors  # through residual, LayerNorm and the feed-forward block
        # The numbers shown are the encoder's attention and context, not only close on average.
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
    assert [st.key for st in s.steps] == list(STEP_KEYS)
    assert all(len(st.axes) == len(st.shape) for st in s.steps)


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


def _normalise(code: str) -> str:
    code = re.sub(r"\s+", " ", code)
    return re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", code)).strip()


def test_source_lines_are_the_encoders_own():
    source = _normalise(inspect.getsource(bert_module))
    for key, lines in steps_module.SOURCE.items():
        for line in lines.splitlines():
            assert _normalise(line) in source, (key, line)


def test_code_lines_are_the_ones_executed():
    source = inspect.getsource(steps_module.head_steps)
    for key, line in steps_module.CODE.items():
        assert line in source, (key, line)


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
    np.testing.assert_array_equal(o.maps, out.attentions[1].numpy())
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


def test_decoder_source_lines_are_the_decoders_own():
    from models import gpt2 as gpt2_module

    source = _normalise(inspect.getsource(gpt2_module))
    for key, lines in steps_module.DECODER_SOURCE.items():
        for line in lines.splitlines():
            assert _normalise(line) in source, (key, line)
    body = inspect.getsource(steps_module._decoder_head_steps)
    for key, line in steps_module.DECODER_CODE.items():
        assert line in body, (key, line)


def test_decoder_steps_are_the_models_own_with_its_tril(gpt2_tiny):
    out = gpt2_tiny.encode("The cat sat on the mat.", internals=True)
    s = steps_module.head_steps(gpt2_tiny, out, 1, 2, 3)
    assert s.kind == "decoder"
    assert max(s.errors.values()) < 1e-5, s.errors
    assert s.keep.tolist() == [True] * 4 + [False] * (out.seq - 4)  # query 3 sees keys 0…3: the tril row
    assert (s.probs[4:] == 0).all()
    o = steps_module.one_vs_many(gpt2_tiny, out, 1)
    assert o.params_heads == o.params_single
    assert np.allclose(np.triu(o.single_map, 1), 0)
