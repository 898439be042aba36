"""Our encoder against Hugging Face transformers' eager BertModel on the same weights and the same tokens."""

from __future__ import annotations

import functools

import pytest
import torch

from models import bundled_model_dir, load_encoder

ATTN_TOL = 1e-5  # the app's promise: the attention shown is the model's
HIDDEN_TOL = 1e-4

SENTENCE = "The animal didn't cross the street because it was too tired."
PAIR = ("The cat sat on the mat.", "It was warm there, so it fell asleep quickly.")
BATCH = [
    "Short one.",
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "A third sentence, of middling length.",
]
LONG = " ".join(["attention"] * 600)  # well over 512 word pieces


@functools.lru_cache(maxsize=2)
def _hf(path: str):
    from transformers import AutoTokenizer, BertModel

    model = BertModel.from_pretrained(path, attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(path)


def hf_reference(path, texts, texts_b=None, max_length=512):
    """Return transformers' (attentions (batch, layers, heads, q, k), last hidden (batch, seq, d_model))."""
    model, tok = _hf(str(path))
    args = (texts,) if texts_b is None else (texts, texts_b)
    enc = tok(*args, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    return torch.stack(out.attentions, dim=1), out.last_hidden_state, enc


def assert_close(ours_attn, theirs_attn, ours_hidden, theirs_hidden):
    assert ours_attn.shape == theirs_attn.shape
    assert ours_attn.dtype == torch.float32
    attn_err = (ours_attn - theirs_attn).abs().max().item()
    hidden_err = (ours_hidden - theirs_hidden).abs().max().item()
    assert attn_err <= ATTN_TOL, f"attention differs by {attn_err:.2e}"
    assert hidden_err <= HIDDEN_TOL, f"last hidden state differs by {hidden_err:.2e}"


@pytest.fixture(scope="module", params=["minilm", "bert-base-shaped"])
def case(request, minilm, bert_base_dir):
    """(our encoder, the folder transformers loads the same weights from)."""
    if request.param == "minilm":
        return minilm, bundled_model_dir()
    return load_encoder(str(bert_base_dir), device="cpu"), bert_base_dir


def test_shapes_are_the_models(case):
    enc, _ = case
    out = enc.encode(SENTENCE)
    c = enc.config
    assert out.attentions.shape == (c.n_layers, c.n_heads, out.seq, out.seq)
    assert out.hidden_states.shape == (out.seq, c.d_model)
    assert out.tokens[0] == "[CLS]" and out.tokens[-1] == "[SEP]"


def test_bert_base_shape(bert_base_dir):
    c = load_encoder(str(bert_base_dir), device="cpu").config
    assert (c.n_layers, c.n_heads, c.d_model, c.d_k) == (12, 12, 768, 64)


def test_single_sentence(case):
    enc, path = case
    out = enc.encode(SENTENCE)
    attn, hidden, enc_in = hf_reference(path, [SENTENCE])
    assert out.input_ids.tolist() == enc_in["input_ids"][0].tolist()
    assert_close(out.attentions, attn[0], out.hidden_states, hidden[0])


def test_sentence_pair(case):
    enc, path = case
    out = enc.encode(*PAIR)
    attn, hidden, enc_in = hf_reference(path, [PAIR[0]], [PAIR[1]])
    assert out.token_type_ids.tolist() == enc_in["token_type_ids"][0].tolist()
    assert set(out.segments) == {0, 1}
    assert_close(out.attentions, attn[0], out.hidden_states, hidden[0])


def test_padded_batch(case):
    enc, path = case
    out = enc.encode_batch(BATCH)
    attn, hidden, enc_in = hf_reference(path, BATCH)
    assert out.padding.tolist() == enc_in["attention_mask"].bool().tolist()
    assert not out.padding.all(), "the batch must actually be padded"
    # Padded positions included: padding hides keys only, as in transformers.
    assert_close(out.attentions, attn, out.hidden_states, hidden)
    # Padded keys get exactly zero weight.
    pad_keys = ~out.padding[:, None, None, None, :]
    assert out.attentions.masked_select(pad_keys.expand_as(out.attentions)).abs().max() == 0


def test_512_tokens(case):
    enc, path = case
    with pytest.warns(UserWarning, match="token"):
        out = enc.encode(LONG)
    assert out.seq == 512
    assert out.truncated > 0
    attn, hidden, _ = hf_reference(path, [LONG], max_length=512)
    assert_close(out.attentions, attn[0], out.hidden_states, hidden[0])


def test_rows_sum_to_one(case):
    enc, _ = case
    out = enc.encode(*PAIR)
    sums = out.attentions.sum(-1)
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)
    assert (out.attentions >= 0).all()


def test_parity_is_a_real_check(monkeypatch):
    """A planted bug (no 1/√d_k scaling, in the model itself) must break parity, or the tolerance proves nothing."""
    from models.bert import SelfAttention

    enc = load_encoder("minilm", device="cpu")
    attn, hidden, _ = hf_reference(bundled_model_dir(), [SENTENCE])
    good = enc.encode(SENTENCE)
    assert (good.attentions - attn[0]).abs().max() <= ATTN_TOL
    for module in enc.model.modules():
        if isinstance(module, SelfAttention):
            monkeypatch.setattr(module, "scale", 1.0)  # the planted bug: Q·Kᵀ without the division by √d_k
    bad = enc.encode(SENTENCE)
    assert (bad.attentions - attn[0]).abs().max() > 100 * ATTN_TOL
    assert (bad.hidden_states - hidden[0]).abs().max() > 100 * HIDDEN_TOL
