"""One attention interface: Network.run_with_cache keeps what it is asked for and changes nothing; the forward
takes at most six parameters; every family's attention module has one signature; implementations are named."""

from __future__ import annotations

import inspect

import pytest
import torch

from models.attention import ATTENTION_FUNCTIONS, HOOK_POINTS, Options, attend
from models.network import ForwardOptions


def test_the_forward_takes_at_most_six_parameters(minilm):
    params = [p for p in inspect.signature(type(minilm.model).forward).parameters if p != "self"]
    assert len(params) <= 6, params


def test_every_family_s_attention_module_has_one_signature(minilm, gpt2_tiny, smollm2):
    modules = [minilm.model.layers[0].attention.self, gpt2_tiny.model.layers[0].attn, smollm2.model.layers[0].self_attn]
    signatures = {type(m).__name__: list(inspect.signature(type(m).forward).parameters) for m in modules}
    assert len({tuple(s) for s in signatures.values()}) == 1, signatures
    assert signatures["LlamaAttention"] == ["self", "x", "keep", "opts", "inputs"]


@pytest.mark.parametrize("name", ["minilm", "gpt2_tiny"])
def test_run_with_cache_keeps_the_asked_points_of_the_asked_layers_and_changes_nothing(name, request):
    enc = request.getfixturevalue(name)
    ids = enc.tokenize(["The cat sat on the mat because it was tired."]).input_ids
    with torch.inference_mode():
        plain = enc.model(ids)
        res, rec = enc.model.run_with_cache(ids, names=("queries", "probs"), layers=[1])
    assert torch.equal(plain.attentions, res.attentions)
    assert torch.equal(plain.hidden, res.hidden)
    assert res.record is rec
    assert rec.tensors[0] == {}  # layer 0 was not asked for
    assert set(rec.tensors[1]) == {"queries", "probs"}
    assert torch.equal(rec["probs", 1], res.attentions[:, 1])  # what the hook saw is the map returned
    # Every layer's input is kept: the embeddings, then each layer's output.
    assert len(rec.hidden_states) == enc.config.n_layers + 1
    # names=None keeps every hook point the family makes.
    with torch.inference_mode():
        _, every = enc.model.run_with_cache(ids, names=None, layers=[0])
    assert {"queries", "keys", "values", "scores", "probs", "context", "merged"} <= set(every.tensors[0])
    assert set(every.tensors[0]) <= set(HOOK_POINTS)


def test_a_recorder_with_sites_names_the_line_that_made_each_tensor(minilm):
    from models.attention import Recorder

    ids = minilm.tokenize(["A short text."]).input_ids
    rec = Recorder(names=("scores",), sites=True)
    with torch.inference_mode():
        minilm.model(ids, options=ForwardOptions(record=rec))
    site = rec.where[0]["scores"]
    line = open(site.filename, encoding="utf-8").read().splitlines()[site.lineno - 1]
    assert site.function == "attend_rows" and "matmul" in line


def test_the_implementations_are_named_and_agree():
    """The "eager" and "blocks" implementations share the signature (q, k, v, keep, scale, opts) and give the same context."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 300, 8, generator=g) for _ in range(3))
    k, v = k[:, :2], v[:, :2]  # grouped: 2 key/value heads
    keep = torch.rand(300, 300, generator=g) > 0.3
    keep |= torch.eye(300, dtype=torch.bool)
    assert set(ATTENTION_FUNCTIONS) == {"eager", "blocks"}
    eager, _ = attend(q, k, v, keep, 0.3, Options())
    blocks, probs = attend(q, k, v, keep, 0.3, Options(implementation="blocks", rows=64))
    assert probs is None  # the long loop keeps no map
    assert (eager - blocks).abs().max() <= 1e-5
