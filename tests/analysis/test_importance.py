"""Head gates, importance (Michel et al.) and the ported masked-LM head."""

from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest
import torch

from models import Encoder, load_encoder
from models.analysis.importance import (
    Batch,
    ablation_effects,
    gate_gradients,
    head_importance,
    masked_copies,
    normalise,
    raw_importance,
)
from tests.conftest import TOKENIZER_FILES

SENTENCE = "The animal didn't cross the street because it was too tired."


def save_mlm_folder(path, seed=3, cls_name="BertForMaskedLM", **config):
    """Save a random transformers BERT with a masked-LM head, with the bundled vocabulary."""
    import transformers

    from models import bundled_model_dir

    torch.manual_seed(seed)
    cfg = transformers.BertConfig(initializer_range=0.05, **config)
    getattr(transformers, cls_name)(cfg).save_pretrained(path)
    for name in TOKENIZER_FILES:
        if (bundled_model_dir() / name).is_file():
            shutil.copy(bundled_model_dir() / name, path / name)
    return path


TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


@pytest.fixture(scope="module")
def tiny():
    return load_encoder("random:tiny", device="cpu")


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    return load_encoder(str(save_mlm_folder(tmp_path_factory.mktemp("tiny-mlm"), **TINY)), device="cpu")


def float64(enc: Encoder) -> Encoder:
    """The same model in float64, for finite differences that are not lost in rounding."""
    return Encoder(
        copy.deepcopy(enc.model).double(),
        enc.tokenizer,
        enc.device,
        torch.float64,
        enc.name,
        enc.spec,
        mlm_head=None if enc.mlm_head is None else _double_head(enc),
    )


def _double_head(enc: Encoder):
    model = copy.deepcopy(enc.model).double()
    head = copy.deepcopy(enc.mlm_head).double()
    return head.tie(model.embeddings.word_embeddings) if head.decoder is None else head


# ---- gates ------------------------------------------------------------------------------------------


def test_gate_zero_equals_zeroing_the_heads_context(tiny):
    """ξ_h = 0 gives exactly the model whose W_o never sees head h's context (its input columns zeroed)."""
    out = tiny.encode(SENTENCE)
    ids, tt = out.input_ids[None], out.token_type_ids[None]
    layer, head, d_k = 1, 2, tiny.config.d_k
    gates = torch.ones(2, 4)
    gates[layer, head] = 0.0
    with torch.no_grad():
        gated = tiny.model(ids, tt, head_gates=gates).last_hidden
        cut = copy.deepcopy(tiny.model)
        cut.layers[layer].attention.output.dense.weight[:, head * d_k : (head + 1) * d_k] = 0.0
        zeroed = cut(ids, tt).last_hidden
        untouched = tiny.model(ids, tt).last_hidden
    torch.testing.assert_close(gated, zeroed, rtol=0, atol=1e-6)
    assert (gated - untouched).abs().max() > 1e-3  # the head did matter


def test_per_item_gates_equal_separate_runs(tiny):
    out = tiny.encode(SENTENCE)
    ids, tt = out.input_ids[None].repeat(3, 1), out.token_type_ids[None].repeat(3, 1)
    g = torch.ones(3, 2, 4)
    g[1, 0, 1] = 0.0
    g[2, 1, 3] = 0.0
    g[2, 0, 0] = 0.5
    with torch.no_grad():
        together = tiny.model(ids, tt, head_gates=g).last_hidden
        for i in range(3):
            alone = tiny.model(ids[i : i + 1], tt[i : i + 1], head_gates=g[i]).last_hidden
            torch.testing.assert_close(together[i], alone[0], rtol=1e-5, atol=1e-6)


def test_gradient_matches_finite_differences(tiny):
    """|∂L/∂ξ| from autograd against central differences, on random:tiny (in float64)."""
    enc = float64(tiny)
    batch = Batch.from_output(tiny.encode(SENTENCE), "cpu")
    target = torch.randn(
        batch.input_ids.shape[1], tiny.config.d_model, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )

    def loss_fn(hidden, part):
        return ((hidden - target) ** 2).sum()

    grad = gate_gradients(enc, batch, loss_fn)[0].double()  # (layers, heads)
    eps = 1e-2  # softmax runs in float32 even in a float64 model: smaller steps would measure its rounding
    for layer, head in [(0, 0), (0, 3), (1, 1), (1, 2)]:
        vals = []
        for sign in (1, -1):
            g = torch.ones(2, 4, dtype=torch.float64)
            g[layer, head] += sign * eps
            with torch.no_grad():
                vals.append(loss_fn(enc.model(batch.input_ids, batch.token_type_ids, head_gates=g).last_hidden, None))
        fd = (vals[0] - vals[1]) / (2 * eps)
        assert grad[layer, head].item() == pytest.approx(fd.item(), rel=1e-4, abs=1e-6)


def test_mlm_importance_matches_finite_differences(tiny_mlm):
    """I_h = Σ_copies |∂L_c/∂ξ_h| with L_c the masked-LM loss of copy c: against central differences."""
    enc = float64(tiny_mlm)
    batch = Batch.from_output(tiny_mlm.encode("The cat sat on the mat."), "cpu")
    raw = raw_importance(enc, batch).double()
    copies, targets, _ = masked_copies(enc, batch)
    assert len(copies) == 7  # seven maskable tokens (the full stop too): one copy each
    eps = 1e-2  # softmax runs in float32 even in a float64 model: smaller steps would measure its rounding
    for layer, head in [(0, 1), (1, 3)]:
        total = 0.0
        for c in range(len(copies)):
            one = copies.take(torch.tensor([c]))
            vals = []
            for sign in (1, -1):
                g = torch.ones(2, 4, dtype=torch.float64)
                g[layer, head] += sign * eps
                with torch.no_grad():
                    h = enc.model(one.input_ids, one.token_type_ids, head_gates=g).last_hidden
                    at = targets[c : c + 1] != -100
                    logits = enc.mlm_head(h[at])
                    vals.append(torch.nn.functional.cross_entropy(logits, targets[c : c + 1][at], reduction="sum"))
            total += abs(((vals[0] - vals[1]) / (2 * eps)).item())
        assert raw[layer, head].item() == pytest.approx(total, rel=1e-4)


def test_masked_copies_mask_every_token_once_and_never_specials(minilm):
    out = minilm.encode(SENTENCE)
    tok = minilm.tokenizer
    batch = Batch.from_output(out, "cpu")
    copies, targets, source = masked_copies(minilm, batch)
    assert len(copies) == 7 and source.tolist() == [0] * 7
    masked = targets != -100
    assert masked.sum(0).tolist() == [0] + [1] * (out.seq - 2) + [0]  # [CLS] and [SEP] never, the rest once
    assert torch.equal(copies.input_ids[masked], torch.full((out.seq - 2,), tok.mask_token_id))
    assert torch.equal(targets[masked].sort().values, out.input_ids[1:-1].sort().values)


# ---- importance -------------------------------------------------------------------------------------


def test_normalise_per_layer_l2_then_min_max():
    raw = np.array([[3.0, 4.0], [1.0, 0.0]])
    # layer norms 5 and 1 → [[0.6, 0.8], [1, 0]] → min–max over all heads
    np.testing.assert_allclose(normalise(raw), [[0.6, 0.8], [1.0, 0.0]])
    assert normalise(np.zeros((2, 3))).tolist() == [[0.0] * 3] * 2


def test_proxy_importance_on_the_bundled_model(minilm):
    assert minilm.mlm_head is None  # a sentence encoder: no masked-LM head, so the proxy
    out = minilm.encode(SENTENCE)
    imp = head_importance(minilm, out)
    assert imp.measure == "proxy" and "proxy" in imp.description
    s = imp.scores
    assert s.shape == (6, 12) and s.min() == 0.0 and s.max() == 1.0
    # the ablation effect of one head, by hand
    batch = Batch.from_output(out, "cpu")
    g = torch.ones(6, 12)
    g[2, 5] = 0.0
    with torch.no_grad():
        base = minilm.model(batch.input_ids, batch.token_type_ids).last_hidden
        cut = minilm.model(batch.input_ids, batch.token_type_ids, head_gates=g).last_hidden
    assert imp.raw[2, 5] == pytest.approx((cut - base).norm(dim=-1).sum().item(), rel=1e-4)
    c = imp.curve
    assert c.ks[0] == 0 and c.ks[-1] == 72
    assert c.least_first[0] == pytest.approx(0.0, abs=1e-4)  # nothing removed, nothing changed
    assert c.least_first[-1] == pytest.approx(c.most_first[-1])  # everything removed either way
    assert c.least_first[1] < c.most_first[1]  # the least important heads matter least


def test_ablation_ignores_padding(minilm):
    a = minilm.encode("Short one.")
    both = minilm.encode_batch(["Short one.", "A much longer second sentence than the first."])
    alone = ablation_effects(minilm, Batch.from_output(a, "cpu"))[0]
    padded = ablation_effects(minilm, Batch.from_output(both, "cpu"))[0]
    torch.testing.assert_close(alone, padded, rtol=1e-4, atol=1e-4)


# ---- the masked-LM head -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert_base_mlm_dir(tmp_path_factory):
    """BERT-base shaped, with pooler, NSP head and MLM head, as bert-base-uncased's checkpoint has."""
    return save_mlm_folder(tmp_path_factory.mktemp("bert-base-pretraining"), seed=5, cls_name="BertForPreTraining")


def test_mlm_head_matches_transformers(bert_base_mlm_dir):
    from transformers import BertForMaskedLM

    enc = load_encoder(str(bert_base_mlm_dir), device="cpu")
    assert enc.mlm_head is not None and enc.describe()["mlm_head"] is True
    assert enc.mlm_head.decoder is None  # tied: the word-embedding matrix is shared, not copied
    assert enc.mlm_head._tied_to[0].weight is enc.model.embeddings.word_embeddings.weight
    out = enc.encode("The capital of France is [MASK].", "It is a large city.")
    theirs = BertForMaskedLM.from_pretrained(str(bert_base_mlm_dir), attn_implementation="eager").eval()
    with torch.no_grad():
        ours = enc.mlm_head(out.hidden_states)
        ref = theirs(out.input_ids[None], token_type_ids=out.token_type_ids[None]).logits[0]
    assert torch.allclose(ours, ref, atol=1e-4), (ours - ref).abs().max()
    imp = head_importance(enc, enc.encode("The cat sat on the mat."), curve=False)
    assert imp.measure == "mlm" and imp.raw.shape == (12, 12) and np.all(imp.raw > 0)


def test_checkpoint_without_head_has_none(tiny_dir):
    assert load_encoder(str(tiny_dir), device="cpu").mlm_head is None


def test_a_broken_head_is_dropped_not_randomised(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = save_mlm_folder(tmp_path / "broken", **TINY)
    state = load_file(folder / "model.safetensors")
    state["cls.predictions.transform.dense.weight"] = torch.zeros(64, 32)  # wrong shape
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    enc = load_encoder(str(folder), device="cpu")
    assert enc.mlm_head is None
    assert enc.encode("still works").attentions.shape[:2] == (2, 4)


def test_encoder_keys_are_still_checked_strictly(tmp_path):
    """An MLM checkpoint that lacks an encoder weight is refused, as before."""
    from safetensors.torch import load_file, save_file

    folder = save_mlm_folder(tmp_path / "partial", **TINY)
    state = load_file(folder / "model.safetensors")
    state = {k: v for k, v in state.items() if "layer.1.attention.self.query" not in k}
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    from models import ModelLoadError

    with pytest.raises(ModelLoadError, match="lacks"):
        load_encoder(str(folder), device="cpu")
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]


def test_work_estimate_counts_the_passes(minilm, tiny_mlm):
    from models.analysis.importance import removal_ks, work_estimate

    assert work_estimate(minilm, 256) == pytest.approx(2 * work_estimate(minilm, 128))
    c = minilm.config
    per_pass = c.n_layers * 100 * 12 * c.d_model**2
    assert work_estimate(minilm, 100, curve=False) == pytest.approx(72 / 2 * per_pass)  # proxy: half a pass per head
    t = tiny_mlm.config
    curve_sets = 2 * len(removal_ks(t.n_layers * t.n_heads))  # least- and most-important-first
    expected = (3 * 7 + curve_sets * 7) * t.n_layers * 100 * 12 * t.d_model**2  # 7 masked copies, fwd + bwd
    assert work_estimate(tiny_mlm, 100) == pytest.approx(expected)
