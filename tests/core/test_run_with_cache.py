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


def test_run_with_cache_keeps_rows_watched_modules_of_its_own_thread_and_stops_at_a_layer(gpt2_tiny):
    """What explain asks of the one mechanism: two token rows of every sequence axis, a module's input and output
    (from the recorder's own thread only), and a forward that stops at a layer's probs."""
    import threading

    from models.attention import Recorder

    net = gpt2_tiny.model
    ids = gpt2_tiny.tokenize(["The cat sat on the mat because it was tired."]).input_ids
    mlp, norm = net.block_parts(0).mlp, net.block_parts(1).attn_norm
    watch = {"mlp0": (mlp, "output"), "norm1": (norm, "input")}
    names = ("queries", "keys", "scores", "merged")
    rows = [5, 2]
    with torch.inference_mode():
        plain = net(ids)
        _, whole = net.run_with_cache(ids, names=names, watch=watch)
        res, rec = net.run_with_cache(ids, names=names, rows=rows, watch=watch, options=ForwardOptions(stop_at_layer=1))
    r = torch.tensor(rows)
    assert torch.equal(rec["queries", 0], whole["queries", 0][:, :, r])
    assert torch.equal(rec["keys", 0], whole["keys", 0][:, :, r])
    assert torch.equal(rec["scores", 0], whole["scores", 0][:, :, r][..., r])
    assert torch.equal(rec["merged", 0], whole["merged", 0][:, r])
    assert len(rec.hidden_states) == 2  # the layers' inputs up to the last one run, not its output
    assert all(torch.equal(a, b[:, r]) for a, b in zip(rec.hidden_states, whole.hidden_states, strict=False))
    assert torch.equal(rec.modules["mlp0"], whole.modules["mlp0"][:, r])
    assert torch.equal(whole.modules["norm1"], whole.hidden_states[1])  # layer 1's norm reads layer 1's input
    assert torch.equal(rec.modules["norm1"], whole.modules["norm1"][:, r])
    # Layer 1 stopped at its probs: no context, no merged heads, no hidden state.
    assert "merged" not in rec.tensors[1] and res.last_hidden is None
    assert torch.equal(res.attentions, plain.attentions[:, 1])
    assert not mlp._forward_hooks and not norm._forward_pre_hooks  # closed
    # A watched module keeps only its recorder's thread's forwards (the app shares one model between sessions).
    mine = Recorder(names=())
    mine.watch(mlp, "mlp0", "output")
    try:
        other = threading.Thread(target=lambda: net(ids))
        other.start()
        other.join()
        assert mine.modules == {}
        with torch.inference_mode():
            net(ids)
        assert torch.equal(mine.modules["mlp0"], whole.modules["mlp0"])
    finally:
        mine.close()
