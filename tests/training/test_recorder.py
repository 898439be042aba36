"""The recorder's numbers against their definitions (docs/METRICS.md, "Training diagnostics"), each computed here
again from the weights with a forward written out by hand; and the bugs §7 names, planted, flagged."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from models.training import TrainConfig, train
from models.training.recorder import grad_norms, measure, target_losses
from models.training.trainer import build

TINY = dict(family="gpt2", d_model=32, heads=2, layers=2, batch=8, every=10)  # by_hand below is GPT-2's forward


def by_hand(model, ids: torch.Tensor, scale: bool = True):
    """Return (maps per layer (B, H, T, T), scores per layer, embeddings, logits): GPT-2 pre-LN attention-only,
    written from the state dict alone (no module of ours is called)."""
    sd = {k: v.detach().float() for k, v in model.state_dict().items()}
    cfg = model.config
    B, T = ids.shape
    H, d = cfg.n_heads, cfg.d_model
    d_k = d // H
    x = sd["wte.weight"][ids] + sd["wpe.weight"][:T]
    emb = x.clone()
    tril = torch.ones(T, T).tril().bool()
    maps, scores_all = [], []
    for i in range(cfg.n_layers):
        p = f"h.{i}."
        h = F.layer_norm(x, (d,), sd[p + "ln_1.weight"], sd[p + "ln_1.bias"], cfg.layer_norm_eps)
        qkv = h @ sd[p + "attn.c_attn.weight"].T + sd[p + "attn.c_attn.bias"]
        q, k, v = (t.reshape(B, T, H, d_k).transpose(1, 2) for t in qkv.split(d, dim=-1))
        scores = q @ k.transpose(-2, -1) / (math.sqrt(d_k) if scale else 1.0)
        scores_all.append(scores)
        a = torch.softmax(scores.masked_fill(~tril, float("-inf")), dim=-1)
        maps.append(a)
        ctx = (a @ v).transpose(1, 2).reshape(B, T, d)
        x = x + ctx @ sd[p + "attn.c_proj.weight"].T + sd[p + "attn.c_proj.bias"]  # the MLP is zero
    h = F.layer_norm(x, (d,), sd["ln_f.weight"], sd["ln_f.bias"], cfg.layer_norm_eps)
    return maps, scores_all, emb, h @ sd["wte.weight"].T


@pytest.fixture(scope="module")
def trained():
    return train(TrainConfig(steps=60, seed=3, **TINY))


def test_statistics_match_their_definitions(trained):
    r = trained
    validation = r.task.validation()
    probe = r.task.probe()
    got = measure(r.arch, r.model, r.task, validation, probe, True, False, r.config.d_model // r.config.heads)
    ids = torch.cat([b.ids for b in validation.values()])
    maps, scores, emb, logits = by_hand(r.model, ids)
    A = torch.stack(maps, dim=1).numpy()  # (B, L, H, T, T)
    B, L, H, T, _ = A.shape

    # Entropy: each row i ≥ 1 divided by ln(i + 1), mean over rows, then over sequences.
    ent = np.zeros((L, H))
    maxw = np.zeros((L, H))
    prev = np.zeros((L, H))
    for b in range(B):
        for i in range(T):
            row = A[b, :, :, i, : i + 1]
            maxw += row.max(-1) / (T * B)
            if i >= 1:
                p = np.clip(row, 1e-30, 1)
                ent += -(row * np.log(p)).sum(-1) / math.log(i + 1) / ((T - 1) * B)
                prev += A[b, :, :, i, i - 1] / ((T - 1) * B)
    np.testing.assert_allclose(got["entropy"], ent, atol=2e-5)
    np.testing.assert_allclose(got["max_weight"], maxw, atol=2e-5)
    np.testing.assert_allclose(got["prev"], prev, atol=2e-5)

    # Induction on each held-out length: A[start + n + k, start + k + 1], k = 0 … n − 1, mean over k and sequences.
    row = 0
    for name, batch in validation.items():
        n = int(batch.length[0])
        want = np.zeros((L, H))
        for b in range(batch.size):
            s = int(batch.start[b])
            for k in range(n):
                want += A[row + b, :, :, s + n + k, s + k + 1] / (n * batch.size)
        np.testing.assert_allclose(got["induction_by"][name], want, atol=2e-5)
        row += batch.size
    np.testing.assert_allclose(got["induction"], np.min(list(got["induction_by"].values()), axis=0))

    # Scores: std and max |·| over the causal cells; the scale equals 1 when divided by √d_k.
    tril = torch.ones(T, T).tril().bool()
    for i, s in enumerate(scores):
        visible = s[..., tril]
        assert got["score_std"][i] == pytest.approx(float(visible.std()), rel=1e-4)
        assert got["score_max"][i] == pytest.approx(float(visible.abs().max()), rel=1e-4)
    np.testing.assert_allclose(got["score_scale"], 1.0, atol=1e-4)

    # LayerNorm of layer 0: its input is the embeddings.
    x = emb
    y = F.layer_norm(x, (x.shape[-1],), r.model.h[0].ln_1.weight.detach(), r.model.h[0].ln_1.bias.detach())
    m_in, s_in, m_out, s_out = got["norms"]["L0.ln_1"]
    assert (m_in, s_in) == pytest.approx((float(x.mean()), float(x.std())), rel=1e-4, abs=1e-7)
    assert (m_out, s_out) == pytest.approx((float(y.mean()), float(y.std())), rel=1e-4, abs=1e-6)

    # Losses: the next-token cross-entropy, all targets / the copy / the fresh draws.
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    det = torch.cat([b.determined for b in validation.values()])
    fresh = torch.cat([b.chance for b in validation.values()])
    assert got["val_loss"] == pytest.approx(float(ce.mean()), rel=1e-5)
    assert got["val_determined"] == pytest.approx(float(ce[det].mean()), rel=1e-5)
    assert got["val_chance"] == pytest.approx(float(ce[fresh].mean()), rel=1e-5)

    # The probe's maps are every head's map on the one probe sequence.
    pmaps, *_ = by_hand(r.model, probe.ids)
    np.testing.assert_allclose(got["maps"].astype(np.float32), torch.stack(pmaps, 1)[0].numpy(), atol=2e-3)


def test_gradient_norms_are_those_of_w_q_and_w_k(trained):
    r = trained
    model = r.model
    batch = r.task.sample(torch.Generator().manual_seed(5), 8)
    model.zero_grad(set_to_none=True)
    ce, _ = target_losses(r.arch, model, batch, True)
    ce.mean().backward()
    gq, gk = grad_norms(r.arch, model)
    d = r.config.d_model
    for i, block in enumerate(model.h):
        w = block.attn.c_attn.weight
        (g,) = torch.autograd.grad(target_losses(r.arch, model, batch, True)[0].mean(), w)
        assert gq[i] == pytest.approx(float(g[:d].norm()), rel=1e-4)
        assert gk[i] == pytest.approx(float(g[d : 2 * d].norm()), rel=1e-4)
    model.zero_grad(set_to_none=True)


def test_records_are_kept_every_n_steps_and_at_the_end(trained):
    steps = [rec.step for rec in trained.records]
    assert steps == [1, 10, 20, 30, 40, 50, 60]
    assert trained.steps_done == 60 and trained.stop_reason == "steps"
    assert all(np.isfinite(rec.train_loss) for rec in trained.records)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_planted_bug_no_scaling_is_flagged(family):
    """§7 row 1: scores not divided by √d_k. At the same seed (the same initial weights) the scores are √d_k times
    larger, the recorder reads the scale off the running code, and the flag names the bug; the correct run has none."""
    config = TrainConfig(family=family, steps=40, seed=1, d_model=64, heads=1, layers=2, batch=8, every=10)  # 8×
    good = train(config)
    bad = train(TrainConfig(**{**config.__dict__, "scale": False}))
    assert not any("unscaled" in rec.flags for rec in good.records)
    assert all("unscaled" in rec.flags for rec in bad.records)
    np.testing.assert_allclose(bad.records[0].score_scale, 8.0, rtol=1e-3)
    ratio = bad.records[0].score_std / good.records[0].score_std
    assert np.all(ratio > 6), ratio  # nearly the same weights after one step: √64 = 8 times the scores
    # Saturation follows: the unscaled heads are sharper from the first record on.
    assert bad.records[0].max_weight.mean() > good.records[0].max_weight.mean()


def test_planted_bug_no_causal_mask_is_a_leak():
    """§7 row 3: without the causal mask the loss on tokens drawn afresh falls below chance — too good to be true."""
    config = TrainConfig(
        task="reverse", steps=200, seed=0, d_model=32, heads=2, layers=1, batch=16, every=50, lr=1e-2, warmup=100
    )
    good = train(config)
    bad = train(TrainConfig(**{**config.__dict__, "causal": False}))
    chance = good.task.chance_loss
    assert good.last.val_chance > chance - 0.3
    assert "leak" not in good.last.flags
    assert bad.last.val_chance < chance - 1.0
    assert "leak" in bad.last.flags


def test_same_seed_same_curve_other_seed_other_curve():
    a = train(TrainConfig(steps=30, seed=7, **TINY))
    b = train(TrainConfig(steps=30, seed=7, **TINY))
    c = train(TrainConfig(steps=30, seed=8, **TINY))
    assert [r.train_loss for r in a.records] == [r.train_loss for r in b.records]
    assert all(np.array_equal(x.maps, y.maps) for x, y in zip(a.records, b.records, strict=True))
    for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True):
        assert torch.equal(x, y)
    assert [r.train_loss for r in a.records] != [r.train_loss for r in c.records]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_build_is_the_standard_architecture_attention_only(family):
    gen = torch.Generator().manual_seed(0)
    _, _, _, model = build(TrainConfig(**{**TINY, "family": family}), gen)
    for block in model.layers:
        for p in block.mlp.parameters():
            assert not p.requires_grad and not p.any()
    assert all(p.requires_grad for n, p in model.named_parameters() if ".mlp." not in n)
