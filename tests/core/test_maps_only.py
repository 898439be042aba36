"""encode(hidden=False): the last layer stops at its attention (what the app's pages ask for), same maps."""

from __future__ import annotations

import pytest
import torch

from models import bundled_model_dir, load_model

from .test_decoder import TEXTS
from .test_decoder import hf_reference as gpt2_reference
from .test_parity import ATTN_TOL, BATCH, PAIR, SENTENCE, hf_reference


@pytest.fixture(scope="module", params=["minilm", "bert-base-shaped", "gpt2-shaped"])
def case(request, minilm, bert_base_dir, gpt2_dir):
    if request.param == "minilm":
        return minilm, bundled_model_dir()
    if request.param == "bert-base-shaped":
        return load_model(str(bert_base_dir), device="cpu"), bert_base_dir
    return load_model(str(gpt2_dir), device="cpu"), gpt2_dir


def _tail_calls(enc) -> tuple[dict[str, int], list]:
    """Count calls of the last layer's value projection, output projection and feed-forward during a forward."""
    last = enc.model.layers[-1] if hasattr(enc.model, "layers") else enc.model.h[-1]
    modules = (
        {"ffn": last.intermediate.dense, "out": last.attention.output.dense}
        if hasattr(last, "intermediate")
        else {"ffn": last.mlp.c_fc, "out": last.attn.c_proj}
    )
    calls = dict.fromkeys(modules, 0)
    handles = [
        m.register_forward_hook(lambda *_a, name=name: calls.__setitem__(name, calls[name] + 1))
        for name, m in modules.items()
    ]
    return calls, handles


def test_maps_only_gives_the_same_maps_without_the_last_layers_tail(case):
    enc, _path = case
    full = enc.encode(SENTENCE)
    calls, handles = _tail_calls(enc)
    try:
        maps = enc.encode(SENTENCE, hidden=False)
    finally:
        for h in handles:
            h.remove()
    assert maps.hidden_states is None and full.hidden_states is not None
    assert calls == {"ffn": 0, "out": 0}  # the last layer's tail did not run
    assert maps.attentions.shape == full.attentions.shape
    # Layers before the last run the same ops; the last one's Q and K come from a GEMM over 2/3 of the stacked
    # weight, whose summation order may differ in the last bits.
    assert (maps.attentions[:-1] == full.attentions[:-1]).all()
    assert (maps.attentions - full.attentions).abs().max() <= 1e-6


def test_maps_only_matches_transformers(case):
    enc, path = case
    out = enc.encode(SENTENCE, hidden=False)
    if enc.is_decoder:
        attn, _hidden, _ids = gpt2_reference(path, SENTENCE)
        assert (out.attentions - attn).abs().max() <= ATTN_TOL
    else:
        attn, _hidden, _enc = hf_reference(path, [SENTENCE])
        assert (out.attentions - attn[0]).abs().max() <= ATTN_TOL


def test_maps_only_batches_pairs_and_masks(minilm, gpt2_dir):
    for kwargs in ({}, {"mask": "causal"}, {"mask": "window:2"}):
        full = minilm.encode_batch(BATCH, **kwargs)
        maps = minilm.encode_batch(BATCH, hidden=False, **kwargs)
        assert maps.hidden_states is None
        assert (maps.attentions - full.attentions).abs().max() <= 1e-6
        assert maps.item(1).hidden_states is None  # a batch's items carry the None through
    a, b = PAIR
    assert (minilm.encode(a, b, hidden=False).attentions - minilm.encode(a, b).attentions).abs().max() <= 1e-6
    gpt2 = load_model(str(gpt2_dir), device="cpu")
    texts = list(TEXTS.values())[:2]
    full, maps = gpt2.encode_batch(texts), gpt2.encode_batch(texts, hidden=False)
    assert (maps.attentions - full.attentions).abs().max() <= 1e-6


def test_internals_and_caches_keep_the_whole_forward(minilm, gpt2_tiny):
    # Inside a head needs every layer's context: internals=True ignores hidden=False.
    out = minilm.encode(SENTENCE, internals=True, hidden=False)
    assert out.hidden_states is not None and out.context is not None
    # A KV cache needs the last block's values: maps_only is ignored with a cache.
    from models.gpt2 import KVCache

    ids = gpt2_tiny.tokenize([TEXTS[next(iter(TEXTS))]]).input_ids
    with torch.inference_mode():
        res = gpt2_tiny.model(ids, cache=KVCache(), maps_only=True)
    assert res.last_hidden is not None


def test_a_forward_without_the_hidden_state_says_so(minilm):
    ids = minilm.tokenize([SENTENCE]).input_ids
    with torch.inference_mode():
        res = minilm.model(ids, maps_only=True)
    assert res.last_hidden is None
    with pytest.raises(RuntimeError, match="maps_only"):
        _ = res.hidden
