"""encode(hidden=False): the last layer stops at its attention (what the app's pages ask for), same maps."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from models import bundled_model_dir, load_model
from models.network import ForwardOptions

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


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """Return the [start, end) byte range a tensor's elements span in memory."""
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) if t.numel() else 0
    return t.data_ptr(), t.data_ptr() + span * t.element_size()


class _Reads(TorchDispatchMode):
    """Count, per watched weight, the ops any of whose tensors touch that weight's memory.

    Below every module and functional call (GEMMs on views of a stacked weight included), so a path that skips
    nn.Module hooks cannot hide a read."""

    def __init__(self, watched: dict[str, torch.Tensor]):
        super().__init__()
        self.ranges = {name: _extent(w) for name, w in watched.items()}
        self.reads = dict.fromkeys(watched, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.is_view:  # slicing W_q;W_k out of the stacked weight makes a view; it reads nothing
            return func(*args, **(kwargs or {}))
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.numel():
                a0, a1 = _extent(t)
                for name, (b0, b1) in self.ranges.items():
                    if a0 < b1 and b0 < a1:
                        self.reads[name] += 1
        return func(*args, **(kwargs or {}))


def _tail(enc) -> dict[str, torch.Tensor]:
    """The last layer's weights a maps-only forward must not read: W_v (encoders), W_o and the feed-forward."""
    if not enc.is_decoder:
        last = enc.model.layers[-1]
        return {
            "v": last.attention.self.value.weight,
            "out": last.attention.output.dense.weight,
            "ffn": last.intermediate.dense.weight,
        }
    last = enc.model.h[-1]
    return {"out": last.attn.c_proj.weight, "ffn": last.mlp.c_fc.weight}


def test_the_read_counter_sees_every_weight(case):
    enc, _path = case
    with _Reads(_tail(enc)) as seen:
        enc.encode(SENTENCE)
    assert all(n > 0 for n in seen.reads.values()), seen.reads  # the full forward reads all of them


def test_maps_only_gives_the_same_maps_without_the_last_layers_tail(case):
    enc, _path = case
    full = enc.encode(SENTENCE)
    with _Reads(_tail(enc)) as seen:
        maps = enc.encode(SENTENCE, hidden=False)
    assert maps.hidden_states is None and full.hidden_states is not None
    assert set(seen.reads.values()) == {0}, seen.reads  # the last layer's tail did not run
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
        res = gpt2_tiny.model(ids, cache=KVCache(), options=ForwardOptions(maps_only=True))
    assert res.last_hidden is not None


def test_a_forward_without_the_hidden_state_says_so(minilm):
    ids = minilm.tokenize([SENTENCE]).input_ids
    with torch.inference_mode():
        res = minilm.model(ids, options=ForwardOptions(maps_only=True))
    assert res.last_hidden is None
    with pytest.raises(RuntimeError, match="maps_only"):
        _ = res.hidden
