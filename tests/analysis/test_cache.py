"""The bounded KV cache (models.analysis.cache) against transformers' eager Llama on the same weights.

`full` gives transformers' own loss token by token; a bounded cache (window:W, sink:S+window:W) gives what
transformers gives under the same 4-D float mask; chunk sizes do not change a loss; a bounded cache's bytes do not
grow with the text; and a cache that keeps one key too many fails (the held positions and the token-by-token loss).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from models import families, load_model
from models.analysis import cache as cache_mod
from models.analysis.cache import BoundedCache, parse_cache, perplexity, text_ids
from models.errors import BudgetError, InputError
from models.loading import random_state, shipped_tokenizer
from models.masks.conventions import causal_keep, sink_window_keep

REL = 1e-4  # the issue's bar: per-token loss relative to transformers'
TEXT = (
    "The lighthouse keeper climbed the stairs every evening to light the lamp. Ships passed the rocks in the dark, "
    "and the keeper wrote their names in a book. One winter night a storm broke the window of the lamp room, and "
    "the keeper held a lantern in the gap until morning. The ships passed safely, and the book kept their names. "
)


@pytest.fixture(scope="module")
def tiny():
    return load_model("random:llama-tiny", device="cpu")


@functools.cache
def tiny_reference():
    """transformers' LlamaForCausalLM built and seeded as random:llama-tiny is, eager attention."""
    import transformers

    fam, fields = families.random_family("llama-tiny")
    tok = shipped_tokenizer()
    fields = dict(fields, vocab_size=len(tok), bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    state, cfg = random_state(fam, fields)
    hf_cfg = transformers.LlamaConfig.from_dict(cfg)
    hf_cfg._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(hf_cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    model.tie_weights()
    return model.eval()


def their_nll(model, ids: list[int], keep: torch.Tensor | None = None) -> tuple[np.ndarray, float]:
    """Return transformers' per-token loss (from its logits) and its own mean loss (labels=ids, no mask only)."""
    x = torch.tensor([ids])
    mask = None
    if keep is not None:  # the 4-D float mask (batch, heads, q, k): 0 where a key is seen, finfo.min where not
        mask = torch.zeros(1, 1, len(ids), len(ids)).masked_fill(~keep, torch.finfo(torch.float32).min)
    with torch.no_grad():
        out = model(input_ids=x, attention_mask=mask, labels=x)
    per = F.cross_entropy(out.logits[0, :-1].float(), x[0, 1:], reduction="none").double().numpy()
    return per, float(out.loss)


def _close(ours: np.ndarray, theirs: np.ndarray) -> float:
    return float(np.max(np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-6)))


def test_the_sink_window_mask_is_the_sliding_window_without_sinks():
    for w in (1, 3, 8):
        assert torch.equal(sink_window_keep(12, None, w), causal_keep(12, window=w))
    assert torch.equal(sink_window_keep(12, None, None), causal_keep(12))
    k = sink_window_keep(10, None, 3, sink=2)
    assert k[9].nonzero().flatten().tolist() == [0, 1, 7, 8, 9]  # the 2 sinks and the 3 most recent
    assert k[2].nonzero().flatten().tolist() == [0, 1, 2]


def test_parse_cache():
    assert parse_cache("full").window is None and parse_cache(None).name == "full"
    assert parse_cache("window:64").name == "window:64"
    s = parse_cache(" sink:4 + window:256 ")
    assert (s.sink, s.window, s.name) == (4, 256, "sink:4+window:256")
    for bad in ("window:0", "window", "sink:4", "window:-1", "sink:4+window:", "window:1e3", "all"):
        with pytest.raises(InputError):
            parse_cache(bad)


def test_full_equals_transformers_loss_on_llama_tiny(tiny):
    ids = text_ids(tiny, TEXT)
    theirs, mean = their_nll(tiny_reference(), ids)
    p = perplexity(tiny, ids, "full", chunk=16)
    assert p.tokens == len(ids) and p.nll.shape == (len(ids) - 1,)
    assert _close(p.nll, theirs) <= REL
    assert abs(p.mean_nll - mean) <= REL * mean
    assert p.perplexity == pytest.approx(np.exp(mean), rel=REL)


@pytest.mark.parametrize("spec", ["window:8", "sink:2+window:8", "sink:1+window:1"])
def test_a_bounded_cache_equals_transformers_with_the_same_4d_mask(tiny, spec):
    ids = text_ids(tiny, TEXT)
    s = parse_cache(spec)
    theirs, _ = their_nll(tiny_reference(), ids, s.keep(len(ids)))
    full, _ = their_nll(tiny_reference(), ids)
    for chunk in (1, 5, 64):
        p = perplexity(tiny, ids, spec, chunk=chunk)
        assert _close(p.nll, theirs) <= REL, (spec, chunk)
    assert np.abs(theirs - full).max() > 1e-2  # the mask matters: evicting keys changes the loss


def test_chunked_equals_one_pass(tiny):
    ids = text_ids(tiny, TEXT)[:60]
    for spec in ("full", "window:6", "sink:3+window:6"):
        ref = cache_mod.one_pass_nll(tiny, ids, spec)
        for chunk in (1, 7, 10_000):
            assert np.abs(perplexity(tiny, ids, spec, chunk=chunk).nll - ref).max() <= 1e-5, (spec, chunk)


def test_bounded_cache_bytes_do_not_grow_with_the_text(tiny):
    ids = text_ids(tiny, TEXT * 3)
    c = tiny.config
    per_token = 2 * c.n_layers * c.kv_heads * c.head_dim * 4  # K and V, every layer, fp32
    short, long = ids[:60], ids
    for spec, held in (("window:8", 7), ("sink:4+window:8", 11)):
        a, b = perplexity(tiny, short, spec, chunk=4), perplexity(tiny, long, spec, chunk=4)
        assert a.cache_bytes_max == b.cache_bytes_max == (held + 4) * per_token  # held between passes + a pass
        assert set(b.cache_bytes[2:]) == {held * per_token}
    fa, fb = perplexity(tiny, short, "full", chunk=4), perplexity(tiny, long, "full", chunk=4)
    assert fa.cache_bytes_max == len(short) * per_token and fb.cache_bytes_max == len(long) * per_token


def test_the_cache_holds_exactly_the_sinks_and_the_window(tiny):
    ids = text_ids(tiny, TEXT)[:40]
    cache = BoundedCache(window=5, sink=2)
    for t, tok in enumerate(ids):
        tiny.model(torch.tensor([[tok]]), cache=cache)
        cache.evict()
        want = [p for p in range(t + 1) if p < 2 or p > t + 1 - 5]  # what the query at t + 1 may see
        assert cache.positions.tolist() == want
        assert cache.seq == len(want) and cache.position == t + 1


def _one_too_many(self):
    """evict() that keeps the key just outside the window: the planted bug."""
    if not self.keys:
        return
    kept = (self.positions < self.sink) | (self.positions >= self.seen - self.window)
    idx = kept.nonzero().flatten()
    self.positions = self.positions[idx]
    self.keys = [k.index_select(2, idx) for k in self.keys]
    self.values = [v.index_select(2, idx) for v in self.values]


def test_a_cache_that_keeps_one_key_too_many_fails(tiny, monkeypatch):
    ids = text_ids(tiny, TEXT)[:50]
    spec = "sink:2+window:6"
    ref = cache_mod.one_pass_nll(tiny, ids, spec)
    ok = perplexity(tiny, ids, spec, chunk=1)
    assert np.abs(ok.nll - ref).max() <= 1e-5
    monkeypatch.setattr(BoundedCache, "evict", _one_too_many)
    bad = perplexity(tiny, ids, spec, chunk=1)  # one token at a time: it sees exactly what the cache holds
    assert np.abs(bad.nll - ref).max() > 1e-3
    assert bad.cache_bytes_max > ok.cache_bytes_max


def test_refusals(tiny, minilm, monkeypatch):
    with pytest.raises(InputError, match="at least 2 tokens"):
        perplexity(tiny, [5], "full")
    with pytest.raises(InputError, match="next token"):
        perplexity(minilm, "The cat sat on the mat.", "full")
    with pytest.raises(InputError, match="positions"):
        perplexity(tiny, [5] * (tiny.config.max_positions + 1), "window:4")
    monkeypatch.setenv("ATTENTION_LENS_MAX_TOKEN_HEADS", "100")
    with pytest.raises(BudgetError, match="ATTENTION_LENS_MAX_TOKEN_HEADS"):
        perplexity(tiny, TEXT, "full")


@pytest.mark.long
def test_smollm2_full_and_bounded_equal_transformers(smollm2):
    from tests.core.test_llama import _smollm2_reference

    ids = text_ids(smollm2, TEXT)
    assert 60 <= len(ids) <= 200
    ref = _smollm2_reference()
    theirs, mean = their_nll(ref, ids)
    p = perplexity(smollm2, ids, "full", chunk=50)
    assert _close(p.nll, theirs) <= REL
    assert abs(p.mean_nll - mean) <= REL * mean
    spec = parse_cache("sink:4+window:16")
    bounded, _ = their_nll(ref, ids, spec.keep(len(ids)))
    assert _close(perplexity(smollm2, ids, spec, chunk=32).nll, bounded) <= REL


def test_perplexity_command(tmp_path, capsys):
    import json

    from models.cli import main

    f = tmp_path / "t.txt"
    f.write_text(TEXT, encoding="utf-8")
    args = ["perplexity", "--model", "random:llama-tiny", "--text-file", str(f), "--json"]
    assert main([*args, "--cache", "sink:2+window:8", "--chunk", "16"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"tokens", "nll", "perplexity", "cache_bytes_max"}
    assert len(doc["nll"]) == doc["tokens"] - 1 and doc["perplexity"] == pytest.approx(np.exp(np.mean(doc["nll"])))
    assert main([*args, "--cache", "window:0"]) == 2
    assert "window" in capsys.readouterr().err
    assert main(["perplexity", "--model", "minilm", "--text", "The cat sat.", "--json"]) == 2
    assert "next token" in capsys.readouterr().err


def test_generation_through_a_bounded_cache(tiny, capsys):
    import json

    from models.cli import main
    from models.lecture.generate import generate

    g = generate(tiny, TEXT[:120], 12, check=True, cache_spec="sink:2+window:6")
    assert g.cache == "sink:2+window:6"
    assert g.max_row_error is not None and g.max_row_error <= 1e-5  # each row equals one pass under the mask
    assert len({s.cache_bytes for s in g.steps[1:]}) == 1  # flat: sinks + window, step after step
    last = g.steps[-1]
    assert last.rows.shape[-1] == last.position + 1 and last.cache_shape[2] == 2 + 6
    assert np.count_nonzero(last.rows[0, 0]) <= 8 and last.rows[0, 0, 2 : last.position - 5].max() == 0
    full = generate(tiny, TEXT[:120], 12, check=False)
    assert full.steps[-1].cache_bytes > last.cache_bytes
    args = ["generate", "--model", "random:llama-tiny", "--prompt", "The cat", "--tokens", "5", "--json"]
    assert main([*args, "--cache", "window:3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cache"] == "window:3" and len(set(doc["cache_bytes"][1:])) == 1
    assert main([*args, "--cache", "sink:2"]) == 2
