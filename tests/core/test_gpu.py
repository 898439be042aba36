"""Parity on CUDA. Skips without a GPU; run on one with `pytest -m gpu`."""

from __future__ import annotations

import pytest
import torch

from models import bundled_model_dir, load_encoder
from tests.core.test_parity import ATTN_TOL, HIDDEN_TOL, hf_reference

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU"),
]


@pytest.fixture(autouse=True)
def _true_fp32():
    """TF32 would change matmul precision on Ampere+; parity is promised in true fp32. Restored afterwards, so no
    other test inherits a global flag it did not set."""
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


TEXTS = ["The animal didn't cross the street because it was too tired.", "Short.", " ".join(["token"] * 600)]


def test_cuda_parity_fp32():
    enc = load_encoder("minilm", device="cuda")
    assert enc.device.type == "cuda"
    out = enc.encode_batch(TEXTS)
    attn, hidden, _ = hf_reference(bundled_model_dir(), TEXTS)  # transformers on the CPU
    assert out.attentions.device.type == "cpu" and out.attentions.dtype == torch.float32
    assert (out.attentions - attn).abs().max() <= ATTN_TOL
    assert (out.hidden_states - hidden).abs().max() <= HIDDEN_TOL


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_half_precision_returns_float32_attention(dtype):
    enc = load_encoder("minilm", device="cuda", dtype=dtype)
    out = enc.encode(TEXTS[0])
    ref = load_encoder("minilm", device="cpu").encode(TEXTS[0])
    assert out.attentions.dtype == torch.float32
    assert torch.allclose(out.attentions.sum(-1), torch.ones(()), atol=1e-4)
    assert (out.attentions - ref.attentions).abs().max() < 5e-2


def test_cuda_decoder_parity_fp32(gpt2_dir):
    from tests.core.test_decoder import TEXTS
    from tests.core.test_decoder import hf_reference as gpt2_reference

    dec = load_encoder(str(gpt2_dir), device="cuda")
    for text in TEXTS.values():
        out = dec.encode(text)
        attn, hidden, _ = gpt2_reference(gpt2_dir, text)  # transformers on the CPU
        assert (out.attentions - attn).abs().max() <= ATTN_TOL
        assert (out.hidden_states - hidden).abs().max() <= HIDDEN_TOL


def test_cuda_llama_family_parity_fp32(smollm2):
    """SmolLM2 on the GPU against the same model on the CPU (which the CPU tests hold to transformers)."""
    gpu = load_encoder("smollm2", device="cuda")
    text = TEXTS[0]
    out, ref = gpu.encode(text), smollm2.encode(text)
    assert (out.attentions - ref.attentions).abs().max() <= ATTN_TOL
    assert (out.hidden_states - ref.hidden_states).abs().max() <= HIDDEN_TOL
