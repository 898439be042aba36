"""Long texts: maps on demand equal the dense maps and transformers', statistics stream exactly, memory stays
bounded (no heads · seq² for all layers at once), and the CLI exports chosen layers and heads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from models import BudgetError, load_model
from models.analysis.heads import analyse
from models.maps import OnDemandMaps
from tests.conftest import LLAMA_CLASSES, save_llama_folder

ROOT = Path(__file__).resolve().parents[2]
TEXT = "The cat sat on the mat, and the dog slept by the door; the bird sang. " * 32


def _folder(path: Path, model_type: str = "qwen2", positions: int = 8192, **config) -> Path:
    save_llama_folder(path, model_type, max_position_embeddings=positions, **config)
    tok_config = path / "tokenizer_config.json"
    doc = json.loads(tok_config.read_text())
    doc["model_max_length"] = positions
    tok_config.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    """A Qwen2-shaped model with a sliding window on its later layers, long positions."""
    path = _folder(
        tmp_path_factory.mktemp("long-qwen2"), use_sliding_window=True, sliding_window=64, max_window_layers=1
    )
    return str(path)


def test_on_demand_maps_equal_dense_and_transformers(windowed, monkeypatch):
    import transformers

    enc = load_model(windowed, device="cpu")
    dense = enc.encode(TEXT, hidden=False)
    assert not dense.on_demand and dense.seq > 900
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    lazy = enc.encode(TEXT, hidden=False)
    assert lazy.on_demand and isinstance(lazy.attentions, OnDemandMaps)
    assert lazy.attentions.nbytes < lazy.attentions.nbytes_dense / 20
    theirs = getattr(transformers, LLAMA_CLASSES["qwen2"][1]).from_pretrained(windowed, attn_implementation="eager")
    with torch.no_grad():
        ref = theirs(input_ids=lazy.input_ids[None].clone(), output_attentions=True).attentions
    for layer in range(enc.config.n_layers):
        for head in range(enc.config.n_heads):
            ours = lazy.attentions[layer, head]
            assert (ours - dense.attentions[layer, head]).abs().max() <= 1e-6
            assert (ours - ref[layer][0, head]).abs().max() <= 1e-5
    # The windowed layers' maps are exact zeros outside their band; rows and windows read the same numbers.
    far = torch.ones(lazy.seq, lazy.seq, dtype=torch.bool).tril(-64)
    assert lazy.attentions[2, 1][far].abs().max() == 0
    window = lazy.attentions[1, 3, 500:600, 450:620]
    assert torch.equal(window, lazy.attentions.head(1, 3, rows=slice(500, 600), cols=slice(450, 620)))
    assert (window - dense.attentions[1, 3, 500:600, 450:620]).abs().max() <= 1e-6


def test_pooled_tiles_are_the_max_and_the_mass_of_exact_blocks(windowed, monkeypatch):
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    out = load_model(windowed, device="cpu").encode(TEXT, hidden=False)
    exact = out.attentions[0, 2].numpy()
    T = exact.shape[0]
    f = -(-T // 128)
    pad = np.zeros((-(-T // f) * f, -(-T // f) * f), np.float32)
    pad[:T, :T] = exact
    blocks = pad.reshape(pad.shape[0] // f, f, pad.shape[1] // f, f)
    np.testing.assert_allclose(out.attentions.pooled(0, 2, 128, "max").numpy(), blocks.max(axis=(1, 3)), atol=1e-6)
    mean = out.attentions.pooled(0, 2, 128, "mean").numpy()
    np.testing.assert_allclose(mean.sum(-1), 1.0, atol=1e-5)  # pooled rows are still distributions


def test_streamed_statistics_equal_the_dense_ones_at_1024_tokens(windowed, monkeypatch):
    enc = load_model(windowed, device="cpu")
    text = enc.tokenizer.decode(enc.tokenizer(TEXT * 2)["input_ids"][:1024])
    dense = analyse(enc.encode(text, hidden=False))
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    out = enc.encode(text, hidden=False)
    assert out.on_demand and out.seq == 1024
    streamed = analyse(out)
    for name, values in dense.stats.items():
        if np.isnan(values).all():
            assert np.isnan(streamed.stats[name]).all()
            continue
        np.testing.assert_allclose(streamed.stats[name], values, rtol=1e-5, atol=1e-6, err_msg=name)
    assert (streamed.labels == dense.labels).all()
    assert streamed.pooled > 1 and np.isnan(streamed.cka).all()  # redundancy from pooled maps, said so


def test_a_long_text_is_refused_before_the_forward_when_over_budget(windowed, monkeypatch):
    enc = load_model(windowed, device="cpu")
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    monkeypatch.setenv("ATTENTION_LENS_MAX_TOKEN_HEADS", "1000")
    with pytest.raises(BudgetError, match="ATTENTION_LENS_MAX_TOKEN_HEADS"):
        enc.encode(TEXT)
    monkeypatch.delenv("ATTENTION_LENS_MAX_TOKEN_HEADS")
    with pytest.raises(BudgetError, match="internals"):  # the lecture's internals keep every map: not on demand
        enc.encode(TEXT, internals=True)


MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    import torch
    from models import load_model
    from models.analysis.heads import analyse
    enc = load_model(sys.argv[1], device="cpu")
    text = enc.tokenizer.decode(enc.tokenizer("The cat sat on the mat, and the dog slept. " * 700)["input_ids"][:4096])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = enc.encode(text, hidden=False)
    report = analyse(out)
    one = out.attentions[3, 7]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seq": out.seq, "on_demand": out.on_demand, "dense": out.attentions.nbytes_dense,
                      "grew": (peak - base) * 1024, "labels": len(report.labels.ravel())}))
    """
)


@pytest.mark.long
def test_no_path_holds_every_layers_maps_at_4096_tokens(tmp_path):
    """4 layers × 8 heads at 4,096 tokens: dense maps would be 2 GB; the forward, the statistics and one head's map
    together must grow the process by far less (measured: the kernel's high-water mark of a fresh process)."""
    folder = _folder(tmp_path / "wide", "llama", num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(folder)], capture_output=True, text=True, env=env, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["seq"] == 4096 and doc["on_demand"] and doc["labels"] == 32
    assert doc["dense"] == 4 * 4 * 8 * 4096 * 4096  # 2 GiB
    assert doc["grew"] < doc["dense"] / 3, doc  # one head's map (64 MiB) and row blocks, never all layers at once


def test_cli_exports_chosen_layers_and_heads_of_a_long_text(windowed, tmp_path, monkeypatch):
    from models.cli import main

    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    text = tmp_path / "long.txt"
    text.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "two.npz"
    argv = ["export", "--model", windowed, "--text-file", str(text), "--layers", "0,2", "--heads", "3", "--out"]
    assert main([*argv, str(out)]) == 0
    d = np.load(out)
    T = len(d["tokens"])
    assert d["attentions"].shape == (2, 1, T, T) and d["layer_ids"].tolist() == [0, 2] and d["head_ids"].tolist() == [3]
    assert d["hidden_states"].shape == (T, 64)
    np.testing.assert_allclose(d["attentions"].sum(-1), 1.0, atol=1e-5)
    assert main(["export", "--model", windowed, "--text-file", str(text), "--layers", "9", "--out", str(out)]) == 2
    assert (
        main(["stats", "--model", windowed, "--text-file", str(text), "--json", "--out", str(tmp_path / "s.json")]) == 0
    )
    doc = json.loads((tmp_path / "s.json").read_text())
    assert len(doc["heads"]) == 12 and doc["kind"] == "decoder"


@pytest.mark.parametrize(
    ("n_kv", "span", "user"),
    [(3, (0, None), False), (1, (0, 48), False), (9, None, True), (3, (0, None), True)],
    ids=["gqa-causal", "mqa-window", "mha-user-mask", "gqa-causal-user-mask"],
)
def test_blocked_attention_is_the_plain_blocked_attention(n_kv, span, user):
    """The long forward's arranged block loop (one buffer, softmax in place, grouped heads, mask only where it
    hides) gives attend_rows' numbers block by block: context, log-sum-exps and pooled tiles."""
    from models.attention import Options, attend_in_blocks
    from models.maps import Pooled, pool_block
    from models.masks import predicates
    from models.masks.conventions import causal_keep
    from tests.core.reference import attend_in_blocks_plain

    g = torch.Generator().manual_seed(0)
    T, nh, d = 700, 9, 16
    q = torch.randn(1, nh, T, d, generator=g) * 3
    k = torch.randn(1, n_kv, T, d, generator=g) * 3
    v = torch.randn(1, n_kv, T, d, generator=g)
    keep = None
    if span is not None:
        keep = causal_keep(T, window=span[1])[None, None]
    if user:
        pad = torch.ones(T, T, dtype=torch.bool)
        pad[:, 5:40] = False  # a user's mask hiding some keys from every row
        keep = pad[None, None] if keep is None else keep & pad
    runs = {}
    for fn in (attend_in_blocks, attend_in_blocks_plain):
        lse = torch.empty(1, nh, T)
        pool = Pooled(nh, T, T, size=64) if fn is attend_in_blocks else None
        mask = None if span is None else predicates.causal_window(span[1])  # the layer's own mask, per block
        opts = Options(implementation="blocks", rows=128, lse_out=lse, mask=mask, pool=pool)
        ctx, probs = fn(q, k, v, keep, 0.25, opts)
        assert probs is None
        runs[fn.__name__] = (ctx, lse, pool)
    (ctx, lse, pool), (ref_ctx, ref_lse, _) = runs["attend_in_blocks"], runs["attend_in_blocks_plain"]
    assert (ctx - ref_ctx).abs().max() <= 1e-5
    assert (lse - ref_lse).abs().max() <= 1e-5
    # The tiles pooled as the blocks went by are those of the whole softmax.
    scores = (q * 0.25) @ k.repeat_interleave(nh // n_kv, dim=1).transpose(-1, -2)
    if keep is not None:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    dense = torch.softmax(scores, -1)[0]
    assert (pool.out - pool_block(dense, pool.f, "max")).abs().max() <= 1e-6


def test_the_long_forward_makes_the_overview_tiles_on_the_way(windowed, monkeypatch):
    """The overview's tiles come from the forward itself (no second pass over every map), equal to the ones
    recomputed from the kept queries and keys."""
    from models.maps import OVERVIEW_CELLS

    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    out = load_model(windowed, device="cpu").encode(TEXT, hidden=False)
    maps = out.attentions
    assert set(maps.tiles) == set(range(out.n_layers))
    for layer in (0, out.n_layers - 1):  # a full causal layer and a sliding-window one
        made = maps.pooled(layer, None, OVERVIEW_CELLS, "max")
        tiles = maps.tiles.pop(layer)
        again = maps.pooled(layer, None, OVERVIEW_CELLS, "max")
        maps.tiles[layer] = tiles
        assert made.shape == again.shape
        assert (made - again).abs().max() <= 1e-6


# A user's per-head predicate (a window of 37 keys, 3 sinks, and head 1 also every fifth key), as an expression.
USER_MASK = "(q_idx - kv_idx < 37) | (kv_idx < 3) | ((h == 1) & (kv_idx % 5 == 0))"
LONG_USER = "the cat sat on the mat and the dog slept by the door " * 40  # 881 tokens on both tiny decoders


def _maps_differ(a, b, n_layers: int, n_heads: int) -> torch.Tensor:
    """Return (q_pos,) the largest difference per query row between two runs' maps, over every layer and head."""
    return torch.stack(
        [(a.attentions[i, h] - b.attentions[i, h]).abs().amax(-1) for i in range(n_layers) for h in range(n_heads)]
    ).amax(0)


@pytest.mark.parametrize("spec", ["random:llama-tiny", "random:gpt2-tiny"])
def test_a_predicate_mask_on_a_long_text_is_made_a_block_at_a_time(spec, monkeypatch):
    """A user's predicate on a long text (the block loop, maps on demand) gives the maps of the same mask given as
    a dense tensor (on demand and dense), and is never made (seq, seq): each call of it covers a block of rows."""
    from models.maps import ROW_BLOCK, KeepOnDemand
    from models.masks import predicates
    from models.masks.expressions import predicate_expression

    enc = load_model(spec, device="cpu")
    L, H = enc.config.n_layers, enc.config.n_heads
    user = predicate_expression(USER_MASK)
    T = int(enc.tokenize([LONG_USER]).input_ids.shape[1])
    keep = predicates.materialise(user, T, heads=H)  # (1, heads, T, T): the same mask as a dense tensor
    assert keep.shape == (1, H, T, T) and T > ROW_BLOCK
    cells: list[int] = []  # query rows × keys of every tensor made from the user's predicate (alone or ANDed)
    materialise = predicates.materialise

    def spy(pred, *args, **kw):
        out = materialise(pred, *args, **kw)
        if "spied" in predicates.as_predicate(pred).name:
            cells.append(out.shape[-2] * out.shape[-1])
        return out

    monkeypatch.setattr(predicates, "materialise", spy)
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    lazy = enc.encode(LONG_USER, mask=predicates.Predicate(user.fn, "spied"), hidden=False)
    assert cells and max(cells) <= ROW_BLOCK * T < T * T  # the forward made it a block of rows at a time
    as_tensor = enc.encode(LONG_USER, mask=keep, hidden=False)
    assert lazy.on_demand and as_tensor.on_demand and isinstance(lazy.keep, KeepOnDemand)
    assert (_maps_differ(lazy, as_tensor, L, H) <= 1e-6).all()  # also reads every map: every window made
    made = lazy.keep[300:420, 250:400]  # the applied mask (head 0, and causal), a window at a time
    assert max(cells) <= ROW_BLOCK * T  # and so did every map and the mask's window read since
    monkeypatch.undo()  # the real materialise, dense maps
    dense = enc.encode(LONG_USER, mask=keep, hidden=False)
    assert not dense.on_demand
    assert (_maps_differ(lazy, dense, L, H) <= 1e-6).all()
    assert torch.equal(made, dense.keep[300:420, 250:400]) and torch.equal(lazy.keep.dense(), dense.keep)
    for h in (0, 1):  # the per-head part reached the maps: head 1 sees every fifth key, head 0 does not
        assert (dense.attentions[1, h, 800, 5:700:5] > 0).all() == (h == 1)


def test_a_predicate_off_by_one_at_the_long_loops_block_boundaries_fails_the_comparison(gpt2_tiny, monkeypatch):
    """The comparison above sees the rows where a block of the long loop starts: a predicate that shows one key
    too many only on those rows (q_idx a multiple of FORWARD_ROWS) gives maps that differ from the right
    predicate's dense maps there, and nowhere else (each block's rows are made at their own positions)."""
    from models.maps import FORWARD_ROWS
    from models.masks import predicates
    from models.masks.expressions import predicate_expression

    enc, L, H = gpt2_tiny, gpt2_tiny.config.n_layers, gpt2_tiny.config.n_heads
    right = predicate_expression("q_idx - kv_idx < 37")
    wrong = predicate_expression(f"(q_idx - kv_idx < 38) & ((q_idx % {FORWARD_ROWS} == 0) | (q_idx - kv_idx < 37))")
    T = int(enc.tokenize([LONG_USER]).input_ids.shape[1])
    dense = enc.encode(LONG_USER, mask=predicates.materialise(right, T), hidden=False)
    monkeypatch.setenv("ATTENTION_LENS_DENSE_MAPS_MB", "1")
    ok = enc.encode(LONG_USER, mask=right, hidden=False)
    bad = enc.encode(LONG_USER, mask=wrong, hidden=False)
    assert ok.on_demand and bad.on_demand
    assert (_maps_differ(ok, dense, L, H) <= 1e-6).all()
    off = _maps_differ(bad, dense, L, H) > 1e-3
    boundaries = torch.arange(T) % FORWARD_ROWS == 0
    boundaries[0] = False  # row 0 has no key 37 positions back
    assert torch.equal(off[boundaries], torch.ones(int(boundaries.sum()), dtype=torch.bool))
    # Later layers mix the wrong rows into the next ones; the first layer's rows differ exactly there.
    first = torch.stack([(bad.attentions[0, h] - dense.attentions[0, h]).abs().amax(-1) for h in range(H)]).amax(0)
    assert torch.equal(first > 1e-3, boundaries)
