"""Why here: one attention score split into exact parts, checked against transformers' own q/k projections and
rotary (the score), against the score itself (every decomposition sums to it) and against planted bugs (a part
dropped from the table, the rotary pairs interleaved)."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
import torch

import models.analysis.explain as explain_mod
from models import load_encoder, load_model
from models.analysis.explain import count_components, explain
from models.cli import main

SCORE_TOL = 1e-4  # ours against transformers' q/k
SUM_TOL = 1e-5  # by dimension and by frequency against the score
TABLE_REL = 1e-4  # the component table against the score, relative
TEXT = "The animal didn't cross the street because it was too tired."


# ---- transformers' side -----------------------------------------------------------------------------------


@functools.cache
def twin(spec: str):
    """Return transformers' eager model holding the same weights as ours (random:… by the same seeded init)."""
    if spec == "smollm2":
        from tests.core.test_llama import _smollm2_reference

        return _smollm2_reference()
    if spec.startswith("/"):  # a Llama-family folder (tests.conftest.save_llama_folder)
        import transformers

        from tests.conftest import LLAMA_CLASSES

        model_type = json.loads(open(f"{spec}/config.json").read())["model_type"]
        cls = getattr(transformers, LLAMA_CLASSES[model_type][1])
        return cls.from_pretrained(spec, attn_implementation="eager").eval()
    if spec == "minilm":
        import transformers

        from models import bundled_model_dir

        return transformers.BertModel.from_pretrained(str(bundled_model_dir()), attn_implementation="eager").eval()
    import transformers

    from models.families import random_family
    from models.loading import EAGER, random_state

    found = random_family(spec.removeprefix("random:"))
    assert found is not None
    fam, fields = found
    fields = dict(fields, vocab_size=ours(spec).config.vocab_size)  # the tokenizer's length, as the loader does
    state, _ = random_state(fam, fields)
    model = getattr(transformers, fam.hf_model)(getattr(transformers, fam.hf_config)(**fields, **EAGER))
    model.load_state_dict(state)
    return model.eval()


def _attention(model, layer: int):
    """Return transformers' attention module of `layer` (the one whose input is what q and k are made from)."""
    body = getattr(model, "model", model)
    if hasattr(body, "layers"):  # Llama family
        return body.layers[layer].self_attn
    if hasattr(body, "h"):  # GPT-2
        return body.h[layer].attn
    return body.encoder.layer[layer].attention.self  # BERT


def their_qk(spec: str, ids: torch.Tensor, layer: int, head: int, kv: int):
    """Return transformers' (q (T, d_k), k (T, d_k), scale, q and k before rotation, inv_freq or None)."""
    model = twin(spec)
    attn = _attention(model, layer)
    seen: dict = {}

    def grab(_m, args, kwargs):
        seen["x"] = args[0] if args else kwargs["hidden_states"]
        seen["rope"] = kwargs.get("position_embeddings")

    handle = attn.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.no_grad():
            model(input_ids=ids)
    finally:
        handle.remove()
    x = seen["x"][0]  # (T, d_model): what the attention reads (after the norm in a pre-norm block)
    with torch.no_grad():
        if hasattr(attn, "q_proj"):
            from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

            d = attn.head_dim
            q, k = attn.q_proj(x).view(len(x), -1, d), attn.k_proj(x).view(len(x), -1, d)  # (T, heads, d)
            if hasattr(attn, "q_norm"):  # Qwen3: each head's q and k normalised before rotation
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = q.transpose(0, 1)[None], k.transpose(0, 1)[None]  # (1, heads, T, d)
            cos, sin = seen["rope"]
            qr, kr = apply_rotary_pos_emb(q, k, cos, sin)
            inv = _attention_inv_freq(model)
            return qr[0, head], kr[0, kv], attn.scaling, q[0, head], k[0, kv], inv
        if hasattr(attn, "c_attn"):
            C = x.shape[-1]
            q, k, _ = attn.c_attn(x).split(C, dim=-1)
            d = C // attn.num_heads
            return q[:, head * d : (head + 1) * d], k[:, kv * d : (kv + 1) * d], 1 / math.sqrt(d), None, None, None
        d = attn.attention_head_size
        q, k = attn.query(x), attn.key(x)
        return q[:, head * d : (head + 1) * d], k[:, kv * d : (kv + 1) * d], 1 / math.sqrt(d), None, None, None


def _attention_inv_freq(model) -> torch.Tensor:
    return model.model.rotary_emb.inv_freq.double()


# ---- ours --------------------------------------------------------------------------------------------------


@functools.cache
def ours(spec: str):
    return load_encoder(spec, device="cpu") if spec == "minilm" else load_model(spec, device="cpu")


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory) -> str:
    """A random Qwen3 folder: per-head q/k RMSNorm before rotation, an explicit head_dim, one key/value head."""
    from tests.conftest import save_llama_folder

    path = tmp_path_factory.mktemp("qwen3") / "qwen3"
    return str(save_llama_folder(path, "qwen3", head_dim=32, num_key_value_heads=1))


def check_sums(e) -> None:
    """Every decomposition of e sums to its score."""
    assert abs(e.by_dimension.sum() - e.score) <= SUM_TOL
    if e.by_frequency is not None:
        assert abs(e.by_frequency.sum() - e.score) <= SUM_TOL
    assert e.table is not None
    assert abs(e.table.sum() - e.score) <= TABLE_REL * max(abs(e.score), 1e-3), (e.table.sum(), e.score)


# (spec, layer, head, query, key): a layer with earlier layers to decompose, a query that sees its key.
CASES = [
    ("random:llama-tiny", 1, 3, -1, 2),
    ("random:gpt2-tiny", 1, 2, -1, 1),
    ("minilm", 4, 7, 5, 9),
    pytest.param("smollm2", 6, 4, -1, 3, marks=pytest.mark.long),
]


@pytest.mark.parametrize("spec,layer,head,query,key", CASES)
def test_score_equals_transformers_and_every_decomposition_sums_to_it(spec, layer, head, query, key):
    enc = ours(spec)
    e = explain(enc, TEXT, layer, head, query, key)
    ids = enc.tokenize([TEXT]).input_ids
    kv = enc.capabilities.kv_head(head) if enc.capabilities.grouped else head
    q, k, scale, q0, k0, inv = their_qk(spec, ids, layer, head, kv)
    theirs = float((q[e.query].double() * scale) @ k[e.key].double())
    assert abs(e.score - theirs) <= SCORE_TOL, (e.score, theirs)
    assert e.scale == pytest.approx(scale) and e.kv_head == kv
    check_sums(e)
    assert e.stream_error <= 1e-4  # the parts add up to the stream the layer read
    n = count_components(enc, layer)
    assert e.table.shape == (n, n) and len(e.components) == n
    assert e.components[0] == "embed" and e.components[-1] == "bias"
    assert f"L{layer - 1}.mlp" in e.components and f"L0.H{enc.config.n_heads - 1}" in e.components
    assert len(e.top) == 10 and abs(e.top[0][2]) == pytest.approx(np.abs(e.table).max())
    if not enc.capabilities.rotary:
        assert e.by_frequency is None
        return
    # Each rotary pair, from transformers' q and k BEFORE rotation and its frequencies: the pair turns as a plane,
    # so its term is (q_a k_a + q_b k_b) cos Δθ + (q_a k_b − q_b k_a) sin Δθ, Δ = query − key.
    d = q0.shape[-1]
    a, b = torch.arange(d // 2), torch.arange(d // 2) + d // 2
    qa, qb = q0[e.query, a].double(), q0[e.query, b].double()
    ka, kb = k0[e.key, a].double(), k0[e.key, b].double()
    angle = (e.query - e.key) * inv
    pair = scale * ((qa * ka + qb * kb) * angle.cos() + (qa * kb - qb * ka) * angle.sin())
    assert np.abs(e.by_frequency - pair.numpy()).max() <= SUM_TOL
    assert np.allclose(e.frequencies, inv.numpy(), rtol=1e-6)


@pytest.mark.parametrize("spec,layer,head,query,key", CASES)
@pytest.mark.parametrize("dropped", [".mlp", ".H0"])
def test_a_dropped_component_breaks_the_sum(monkeypatch, spec, layer, head, query, key, dropped):
    """The planted bug, on each family: the MLPs (or every layer's head 0) left out of the stream, their names kept —
    the table no longer sums to the score; left out names and all, the table no longer has every component."""
    enc = ours(spec)
    check_sums(explain(enc, TEXT, layer, head, query, key))
    real = explain_mod._stream

    def zeroed(*args, **kwargs):
        stream = real(*args, **kwargs)
        return {n: (v * 0 if n.endswith(dropped) else v) for n, v in stream.items()}

    monkeypatch.setattr(explain_mod, "_stream", zeroed)
    with pytest.raises(AssertionError):
        check_sums(explain(enc, TEXT, layer, head, query, key))

    def removed(*args, **kwargs):
        return {n: v for n, v in real(*args, **kwargs).items() if not n.endswith(dropped)}

    monkeypatch.setattr(explain_mod, "_stream", removed)
    with pytest.raises(AssertionError):  # the names the table must have (count_components) are not all there
        e = explain(enc, TEXT, layer, head, query, key)
        assert e.table is not None and e.table.shape == (count_components(enc, layer),) * 2


def test_interleaved_rotary_pairs_fail_the_frequency_check(monkeypatch):
    """The planted bug: pairs (0, 1), (2, 3), … (GPT-J's layout) instead of rotate_half's (i, i + d/2)."""
    spec = "random:llama-tiny"
    enc = ours(spec)
    monkeypatch.setattr(
        explain_mod, "rotary_pairs", lambda d: torch.arange(d).view(d // 2, 2)
    )  # sums still hold, the pairs are wrong
    e = explain(enc, TEXT, 1, 3, -1, 2)
    check_sums(e)
    ids = enc.tokenize([TEXT]).input_ids
    _, _, scale, q0, k0, inv = their_qk(spec, ids, 1, 3, enc.capabilities.kv_head(3))
    d = q0.shape[-1]
    a, b = torch.arange(d // 2), torch.arange(d // 2) + d // 2
    qa, qb, ka, kb = q0[e.query, a], q0[e.query, b], k0[e.key, a], k0[e.key, b]
    angle = (e.query - e.key) * inv
    pair = scale * ((qa * ka + qb * kb) * angle.cos() + (qa * kb - qb * ka) * angle.sin())
    assert np.abs(e.by_frequency - pair.double().numpy()).max() > 100 * SUM_TOL


def test_table_over_budget_is_refused_politely(monkeypatch):
    enc = ours("random:gpt2-tiny")
    monkeypatch.setenv("ATTENTION_LENS_EXPLAIN_COMPONENTS", "5")
    e = explain(enc, TEXT, 1, 2, -1, 1)
    assert e.table is None and "ATTENTION_LENS_EXPLAIN_COMPONENTS" in e.refused and "8" in e.refused
    check = e.by_dimension.sum()
    assert abs(check - e.score) <= SUM_TOL  # the rest still comes
    assert e.to_json()["by_component"] is None


def test_cli_json(capsys):
    code = main(
        ["explain", "--model", "random:llama-tiny", "--text", TEXT, "--layer", "1", "--head", "3"]
        + ["--query", "-1", "--key", "2", "--json"]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    e = explain(ours("random:llama-tiny"), TEXT, 1, 3, -1, 2)
    assert doc["score"] == pytest.approx(e.score, abs=1e-7)
    assert len(doc["by_frequency"]) == ours("random:llama-tiny").config.d_k // 2
    comp = doc["by_component"]
    assert comp["query_side"] == comp["key_side"] == e.components
    assert sum(map(sum, comp["table"])) == pytest.approx(doc["score"], rel=TABLE_REL)
    assert len(doc["top"]) == 10 and all(len(t) == 3 for t in doc["top"])


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--layer", "9", "--head", "0", "--query", "0", "--key", "0"], "layer 9 is outside 0 … 1"),
        (["--layer", "0", "--head", "0", "--query", "99", "--key", "0"], "query 99 is outside"),
        (["--layer", "0", "--head", "0", "--query", "x", "--key", "0"], "not a whole number"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    code = main(["explain", "--model", "random:gpt2-tiny", "--text", "The cat sat."] + argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_qwen3_qk_norm_is_linearised_too(qwen3_dir):
    """Qwen3 normalises each head's q and k before rotation: frozen per token like the other norms."""
    enc = ours(qwen3_dir)
    e = explain(enc, TEXT, 2, 1, -1, 3)
    check_sums(e)
    ids = enc.tokenize([TEXT]).input_ids
    q, k, scale, *_ = their_qk(qwen3_dir, ids, 2, 1, 0)
    assert abs(e.score - float((q[e.query].double() * scale) @ k[e.key].double())) <= SCORE_TOL
