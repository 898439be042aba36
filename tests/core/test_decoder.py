"""Our GPT-2 against transformers' eager GPT2Model / GPT2LMHeadModel on the same weights and the same tokens."""

from __future__ import annotations

import functools

import pytest
import torch

from models import KVCache, load_model
from models.errors import InputError, UnsupportedArchitectureError
from models.masks.conventions import causal_keep

ATTN_TOL = 1e-5
HIDDEN_TOL = 1e-4
LOGIT_TOL = 1e-4

TEXTS = {
    "english": "The animal didn't cross the street because it was too tired.",
    "cjk": "注意力机制让每个词都能看到前面的词。解码器一次生成一个词元。",
    "emoji": "Emoji become bytes too: 🙂 🚀 ✓ — and 🙃!",
}
LONG = " ".join(["The cat sat on the mat."] * 200)  # well over 512 tokens: cut to 512 below


@functools.lru_cache(maxsize=2)
def _hf(path: str, lm: bool = False):
    from transformers import AutoTokenizer, GPT2LMHeadModel, GPT2Model

    cls = GPT2LMHeadModel if lm else GPT2Model
    return cls.from_pretrained(path, attn_implementation="eager").eval(), AutoTokenizer.from_pretrained(path)


def hf_reference(path, text: str, max_length: int | None = None):
    """Return transformers' (attentions (layers, heads, q, k), last hidden (seq, d_model), input ids)."""
    model, tok = _hf(str(path))
    ids = tok(text, return_tensors="pt")["input_ids"]
    if max_length is not None:
        ids = ids[:, :max_length]
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    return torch.stack(out.attentions, dim=1)[0], out.last_hidden_state[0], ids[0]


@pytest.fixture(scope="module")
def gpt2(gpt2_dir):
    return load_model(str(gpt2_dir), device="cpu")


def test_loads_as_a_decoder_of_the_checkpoints_shape(gpt2):
    c = gpt2.config
    assert gpt2.kind == "decoder"
    assert (c.n_layers, c.n_heads, c.d_model, c.d_k, c.max_positions) == (12, 12, 768, 64, 1024)
    # Module names are the checkpoint's keys.
    assert "h.0.attn.c_attn.weight" in gpt2.model.state_dict() and "ln_f.weight" in gpt2.model.state_dict()


@pytest.mark.parametrize("name", list(TEXTS))
def test_parity(gpt2, gpt2_dir, name):
    out = gpt2.encode(TEXTS[name])
    attn, hidden, ids = hf_reference(gpt2_dir, TEXTS[name])
    assert out.input_ids.tolist() == ids.tolist()
    assert out.kind == "decoder" and out.attentions.dtype == torch.float32
    assert out.attentions.shape == attn.shape
    assert (out.attentions - attn).abs().max() <= ATTN_TOL
    assert (out.hidden_states - hidden).abs().max() <= HIDDEN_TOL


def test_parity_512_tokens(gpt2, gpt2_dir):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(gpt2), "max_tokens", property(lambda self: 512))
        with pytest.warns(UserWarning, match="token"):
            out = gpt2.encode(LONG)
    assert out.seq == 512
    attn, hidden, ids = hf_reference(gpt2_dir, LONG, max_length=512)
    assert out.input_ids.tolist() == ids.tolist()
    assert (out.attentions - attn).abs().max() <= ATTN_TOL
    assert (out.hidden_states - hidden).abs().max() <= HIDDEN_TOL


def test_above_the_diagonal_is_exactly_zero(gpt2):
    out = gpt2.encode(TEXTS["english"])
    above = torch.triu(torch.ones(out.seq, out.seq, dtype=torch.bool), diagonal=1)
    assert out.attentions[..., above].abs().max().item() == 0.0
    assert out.keep.equal(~above)  # the applied mask the pages overlay is the causal one
    assert out.mask == "causal"
    sums = out.attentions.sum(-1)
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)


@pytest.mark.parametrize("window", [None, 1, 5])
def test_causal_mask_equals_transformers_masking_utils(window):
    """The mask our models make once per forward is the one transformers builds with causal_mask_function (and,
    for a sliding window, sliding_window_causal_mask_function), new positions after a cache included."""
    from transformers.masking_utils import (
        and_masks,
        causal_mask_function,
        sdpa_mask,
        sliding_window_overlay,
    )

    from models.network import causal_keeps

    T, start = 37, 11
    fn = causal_mask_function if window is None else and_masks(causal_mask_function, sliding_window_overlay(window))
    theirs = sdpa_mask(
        batch_size=1,
        q_length=T - start,
        kv_length=T,
        q_offset=start,
        mask_function=fn,
        allow_is_causal_skip=False,
    )
    ours = causal_keeps(2, T - start, T, start, (None, window), None, torch.device("cpu"))
    assert theirs is not None and ours[1].equal(theirs[0, 0])
    assert ours[0].equal(causal_keep(T)[start:])


def test_lm_logits_match_gpt2_lm_head_model(gpt2, gpt2_dir):
    model, tok = _hf(str(gpt2_dir), lm=True)
    ids = tok(TEXTS["english"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        theirs = model(input_ids=ids).logits[0]
        ours = gpt2.model.logits(gpt2.model(ids).last_hidden)[0]
    assert (ours - theirs).abs().max() <= LOGIT_TOL


def test_padded_batch_matches_one_by_one(gpt2):
    texts = [TEXTS["english"], "Short.", TEXTS["cjk"]]
    batch = gpt2.encode_batch(texts)
    assert not batch.padding.all()
    for i, text in enumerate(texts):
        one = gpt2.encode(text)
        item = batch.item(i)
        assert item.tokens == one.tokens
        assert (item.attentions - one.attentions).abs().max() <= ATTN_TOL


def test_kv_cache_rows_equal_the_full_forward(gpt2):
    """Feeding one token at a time through our KV cache gives each row of the full forward pass."""
    ids = gpt2.encode(TEXTS["english"]).input_ids[None]  # (1, T)
    T = ids.shape[1]
    with torch.inference_mode():
        full = gpt2.model(ids)
        cache = KVCache()
        for t in range(T):
            step = gpt2.model(ids[:, t : t + 1], cache=cache)
            assert cache.shape() == (1, 12, t + 1, 64)
            assert step.attentions.shape == (1, 12, 12, 1, t + 1)
            row = full.attentions[0, :, :, t, : t + 1]
            assert (step.attentions[0, :, :, 0] - row).abs().max() <= ATTN_TOL
            assert (step.last_hidden[0, 0] - full.last_hidden[0, t]).abs().max() <= HIDDEN_TOL
    assert cache.nbytes == 2 * 12 * 1 * 12 * T * 64 * 4


def test_planted_off_by_one_mask_breaks_parity(gpt2_tiny_dir, monkeypatch):
    """With tril(diagonal=1) — each token sees the next one — parity must fail, or the tolerance proves nothing."""
    from models.masks import predicates

    dec = load_model(str(gpt2_tiny_dir), device="cpu")
    text = TEXTS["english"]
    attn, hidden, _ = hf_reference(gpt2_tiny_dir, text)
    good = dec.encode(text)
    assert (good.attentions - attn).abs().max() <= ATTN_TOL
    monkeypatch.setattr(predicates, "causal_window", lambda window=None: predicates.causal(diagonal=1))
    bad = dec.encode(text)
    assert (bad.attentions - attn).abs().max() > 100 * ATTN_TOL
    assert (bad.hidden_states - hidden).abs().max() > 100 * HIDDEN_TOL


def test_user_mask_is_combined_with_the_causal_mask(gpt2_tiny):
    """A bidirectional 'mask' cannot lift the causal one; a window narrows it."""
    text = TEXTS["english"]
    base = gpt2_tiny.encode(text)
    out = gpt2_tiny.encode(text, mask=torch.ones(base.seq, base.seq, dtype=torch.bool))
    assert torch.equal(out.keep, base.keep)
    win = gpt2_tiny.encode(text, mask="window:2")
    T = win.seq
    i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
    assert torch.equal(win.keep, (j <= i) & ((i - j).abs() <= 2))
    assert win.attentions[..., ~win.keep].abs().max() == 0


def test_display_tokens_are_readable(gpt2_tiny):
    out = gpt2_tiny.encode("The cat 注意力 🙂")
    assert len(out.display_tokens) == len(out.tokens) == out.seq
    assert any(t.startswith("Ġ") for t in out.tokens)
    assert not any("Ġ" in t for t in out.display_tokens)
    assert "".join(out.display_tokens).startswith("The cat 注意力")
    assert out.many_unknown is False


def test_random_decoders():
    tiny = load_model("random:gpt2-tiny", device="cpu")
    c = tiny.config
    assert (c.n_layers, c.n_heads, c.d_model) == (2, 4, 64)
    assert tiny.describe()["kind"] == "decoder"
    again = load_model("random:gpt2-tiny", device="cpu")
    assert torch.equal(tiny.model.h[0].attn.c_attn.weight, again.model.h[0].attn.c_attn.weight)


def test_decoder_refuses_sentence_pairs(gpt2_tiny):
    with pytest.raises(InputError, match="pair"):
        gpt2_tiny.encode("One.", text_b="Two.")


def test_bert_outputs_gain_kind_and_display_tokens(minilm):
    out = minilm.encode("The cat sat.")
    assert out.kind == "encoder" and minilm.kind == "encoder"
    assert out.display_tokens == out.tokens


def test_other_architectures_are_refused(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UnsupportedArchitectureError, match="t5"):
        load_model(str(tmp_path), device="cpu")


def test_causal_mask_is_the_tutorials():
    assert causal_keep(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_keep(4, window=2).tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [False, True, True, False],
        [False, False, True, True],
    ]
