"""Masks: named masks, conventions converted at the edge, shapes placed on (batch, heads, q_pos, k_pos), files
loaded without pickle, and the expression evaluator that refuses everything off its whitelist."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from models import masks
from models.errors import MaskError
from models.masks.expressions import evaluate

T = 6
TRIL = torch.tril(torch.ones(T, T, dtype=torch.bool))


# ---- named masks ------------------------------------------------------------------------------------


def test_named_masks_are_consistent():
    assert torch.equal(masks.named_keep("causal", T), TRIL)
    assert masks.named_keep("bidirectional", T) is None
    w = masks.named_keep("window:1", T)
    assert w.diagonal().all() and w.diagonal(1).all() and w.diagonal(-1).all() and not w.diagonal(2).any()
    assert torch.equal(masks.named_keep("window:0", T), torch.eye(T, dtype=torch.bool))
    p = masks.named_keep("prefix:3", T)
    assert p[:3, :3].all() and not p[:3, 3:].any()  # the prefix sees itself, not the future
    assert torch.equal(p[3:], (TRIL | (torch.arange(T) < 3))[3:])  # causal after it, prefix visible to all
    assert torch.equal(masks.named_keep("prefix:0", T), TRIL)
    assert torch.equal(masks.named_keep("prefix:99", T), torch.ones(T, T, dtype=torch.bool))
    for spec in ("causal", "window:2", "prefix:3"):  # every query sees itself: no empty rows, ever
        assert masks.named_keep(spec, T).diagonal().all()


def test_padding_hides_keys_not_queries():
    am = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    keep = masks.padding_keep(am)
    assert keep.shape == (2, 1, 1, 4)
    full = keep.expand(2, 1, 4, 4)[1, 0]
    assert full[:, 2:].sum() == 0 and full[2:, :2].all()  # padded rows still see the real keys


# ---- conventions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mask, convention",
    [
        (TRIL, "keep"),
        (TRIL.int(), "keep"),
        (TRIL.float(), "keep"),
        (~TRIL, "drop"),
        (torch.triu(torch.ones(T, T), 1).long(), "drop"),
        (torch.zeros(T, T).masked_fill(~TRIL, float("-inf")), "additive"),
        (torch.zeros(T, T).masked_fill(~TRIL, torch.finfo(torch.float32).min), "additive"),
        (torch.zeros(T, T, dtype=torch.float16).masked_fill(~TRIL, torch.finfo(torch.float16).min), "additive"),
        ((1.0 - TRIL.float()) * -10000.0, "additive"),  # the original BERT code's extended mask
    ],
)
def test_every_correct_form_converts_to_the_same_keep(mask, convention):
    assert torch.equal(masks.to_keep(mask, convention), TRIL)
    assert torch.equal(masks.read_as(mask, convention), TRIL)


@pytest.mark.parametrize(
    "mask, convention, message",
    [
        (TRIL.float() * 0.5, "keep", "0/1"),
        (~TRIL.long(), "drop", "0/1"),  # ~ on an int mask gives -1/-2
        (TRIL.float(), "additive", "soft biases"),
        (TRIL, "additive", "additive mask holds floats"),
        (torch.full((T, T), float("nan")), "keep", "0/1"),
        (torch.zeros(T, T).masked_fill(~TRIL, float("-inf")), "keep", "looks additive"),
    ],
)
def test_to_keep_refuses_values_the_convention_cannot_hold(mask, convention, message):
    with pytest.raises(MaskError, match=message):
        masks.to_keep(mask, convention)


def test_lenient_reading_mirrors_the_usual_code():
    additive = torch.zeros(T, T).masked_fill(~TRIL, float("-inf"))
    # masked_fill(mask == 0, -inf) on an additive mask: -inf is nonzero, so the triangle flips.
    assert torch.equal(masks.read_as(additive, "keep"), ~TRIL)
    # scores + a 0/1 mask hides nothing.
    assert masks.read_as(TRIL.float(), "additive").all()
    assert masks.read_as(TRIL, "additive").all()


def test_unknown_convention():
    with pytest.raises(MaskError, match="keep, drop or additive"):
        masks.to_keep(TRIL, "inverted")


def test_values_are_described_for_people():
    additive = (1 - TRIL.float()) * torch.finfo(torch.float32).min
    assert masks.describe_values(additive) == f"0 ×{int(TRIL.sum())}, finfo(float32).min ×{int((~TRIL).sum())}"
    assert masks.describe_values(torch.tensor([float("nan"), float("nan"), 0.0])) == "nan ×2, 0 ×1"


# ---- shapes -----------------------------------------------------------------------------------------


def test_right_aligned_placement():
    p = masks.place((T, T), batch=2, heads=12, seq=T)
    assert p.view == (1, 1, T, T) and p.lands_on == ("q_pos", "k_pos") and not p.key_padding
    p = masks.place((2, 1, T, 1), batch=2, heads=12, seq=T)
    assert p.lands_on == ("batch", "heads", "q_pos", "k_pos")
    p = masks.place((12, T, T), batch=1, heads=12, seq=T)
    assert p.view == (1, 12, T, T)


def test_batch_seq_mask_is_key_padding():
    p = masks.place((3, T), batch=3, heads=12, seq=T)
    assert p.key_padding and p.view == (3, 1, 1, T) and p.lands_on == ("batch", "k_pos")
    # batch == seq is ambiguous: PyTorch's own rule (q_pos, k_pos) wins, and the placement says so.
    p = masks.place((T, T), batch=T, heads=12, seq=T)
    assert not p.key_padding and p.lands_on == ("q_pos", "k_pos")


@pytest.mark.parametrize(
    "shape, message",
    [
        ((5, 5), r"mask of shape \(5, 5\).*\(1, 12, 6, 6\)"),
        ((3, 1, T, T), "lands on batch, which has size 1"),
        ((2, 1, T), "lands on heads"),  # a (batch, seq) mask unsqueezed once: batch lands on heads
        ((1, 1, 1, 1, T), "at most 4 axes"),
        ((), "at least one axis"),
    ],
)
def test_shapes_that_do_not_fit_name_both_shapes(shape, message):
    with pytest.raises(MaskError, match=message):
        masks.place(shape, batch=1, heads=12, seq=T)


def test_encoder_takes_converted_user_masks(minilm):
    """The encoder applies any bool keep that fits; other conventions go through to_keep first."""
    text = "one two three four"
    seq = minilm.encode(text).seq
    mha_style = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)  # True = masked
    out = minilm.encode(text, mask=masks.to_keep(mha_style, "drop"))
    assert out.mask == "custom" and torch.equal(out.keep, torch.tril(torch.ones(seq, seq, dtype=torch.bool)))
    assert out.attentions[..., mha_style].abs().max() == 0
    with pytest.raises(MaskError, match="to_keep"):
        minilm.encode(text, mask=mha_style.float())
    with pytest.raises(MaskError, match="lands on batch"):
        minilm.encode(text, mask=torch.ones(3, 1, seq, seq, dtype=torch.bool))
    per_head = torch.ones(minilm.config.n_heads, seq, seq, dtype=torch.bool)
    per_head[3] = torch.tril(per_head[3])
    out = minilm.encode(text, mask=per_head)
    assert out.attentions[:, 3][..., mha_style].abs().max() == 0 and out.attentions[:, 2][..., mha_style].sum() > 0


# ---- files ------------------------------------------------------------------------------------------


def test_files_load_without_pickle(tmp_path):
    np.save(tmp_path / "m.npy", TRIL.numpy())
    torch.save(TRIL, tmp_path / "m.pt")
    torch.save({"mask": TRIL.int()}, tmp_path / "d.pt")
    np.savez(tmp_path / "m.npz", mask=TRIL.numpy(), other=np.zeros(3))
    for name in ("m.npy", "m.pt", "d.pt", "m.npz"):
        assert torch.equal(masks.load_mask_file(tmp_path / name).bool(), TRIL), name


def test_pickles_are_refused(tmp_path):
    class Boom:
        def __reduce__(self):
            return (print, ("unpickled!",))

    with open(tmp_path / "evil.pt", "wb") as f:
        pickle.dump({"mask": Boom()}, f)
    torch.save([TRIL, TRIL], tmp_path / "list.pt")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(MaskError, match="never unpickled"):
        masks.load_mask_file(tmp_path / "evil.pt")
    with pytest.raises(MaskError, match="never unpickled"):
        masks.load_mask_file(tmp_path / "obj.npy")
    with pytest.raises(MaskError, match="holds a list, not a tensor"):
        masks.load_mask_file(tmp_path / "list.pt")


def test_bad_files(tmp_path):
    (tmp_path / "junk.npy").write_bytes(b"not numpy at all")
    (tmp_path / "junk.pt").write_bytes(b"\x00\x01garbage")
    np.savez(tmp_path / "two.npz", a=np.ones(2), b=np.ones(2))
    for name, message in [
        ("junk.npy", "no NumPy header"),
        ("junk.pt", "not written by torch.save"),
        ("two.npz", "name the mask"),
        ("missing.npy", "does not exist"),
    ]:
        with pytest.raises(MaskError, match=message):
            masks.load_mask_file(tmp_path / name)
    with pytest.raises(MaskError, match=".npy, .npz or .pt"):
        masks.load_mask_bytes(b"", "mask.csv")
    np.save(tmp_path / "c.npy", np.ones(3, dtype=np.complex64))
    with pytest.raises(MaskError, match="bool, int or float"):
        masks.load_mask_file(tmp_path / "c.npy")


def test_resolve_dispatches_and_names_unknown_words():
    assert masks.resolve("causal", seq=T)[1] == "named"
    assert torch.equal(masks.resolve("causal", seq=T)[0], TRIL)
    assert masks.resolve("bidirectional", seq=T)[0].all()
    t, kind = masks.resolve("torch.tril(torch.ones(seq, seq))", seq=T)
    assert kind == "expression" and torch.equal(t.bool(), TRIL)
    with pytest.raises(MaskError, match="unknown mask 'sideways'"):
        masks.resolve("sideways", seq=T)
    with pytest.raises(MaskError, match="does not exist"):
        masks.resolve("nothere.npy", seq=T)


# ---- expressions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("torch.tril(torch.ones(seq, seq))", TRIL.float()),
        ("torch.tril(torch.ones(seq, seq, dtype=torch.bool))", TRIL),
        ("np.tril(np.ones((seq, seq), dtype=bool))", TRIL),
        ("torch.ones(seq, seq).tril().bool()", TRIL),
        ("~torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)", TRIL),
        ("torch.triu(torch.ones(seq, seq, dtype=torch.bool)).T", TRIL),
        ("torch.arange(seq)[:, None] >= torch.arange(seq)[None, :]", TRIL),
        ("torch.triu(torch.full((seq, seq), float('-inf')), diagonal=1) == 0", TRIL),
        ("torch.zeros(seq, seq).masked_fill(~torch.tril(torch.ones(seq, seq, dtype=torch.bool)), -inf) == 0", TRIL),
        ("torch.triu(torch.full((seq, seq), torch.finfo(torch.float32).min), 1) > -1", TRIL),
        ("np.tril(np.ones((seq, seq)), k=-1) + np.eye(seq)", TRIL.float()),
        ("torch.tril(torch.ones(seq, seq))[None, None].expand(batch, heads, seq, seq)[0, 0].bool()", TRIL),
    ],
)
def test_expressions(expr, expected):
    got = evaluate(expr, seq=T, batch=2, heads=3)
    assert got.dtype == expected.dtype and torch.equal(got, expected)


def test_expression_sees_the_attention_mask():
    am = torch.tensor([[1, 1, 1], [1, 1, 0]])
    got = evaluate("attention_mask[:, None, None, :].bool()", seq=3, batch=2, attention_mask=am)
    assert got.shape == (2, 1, 1, 3) and got[1, 0, 0].tolist() == [True, True, False]
    additive = evaluate(
        "(1 - attention_mask[:, None, None, :]) * torch.finfo(torch.float32).min", seq=3, batch=2, attention_mask=am
    )
    assert torch.equal(masks.to_keep(additive, "additive"), got)


@pytest.mark.parametrize(
    "expr, message",
    [
        ("__import__('os').system('echo pwned')", "the name '__import__'"),
        ("torch.ones(1).__class__.__bases__", "the attribute '__"),
        ("torch.tril.__globals__", "'__globals__'"),
        ("(lambda: 0)()", "lambda"),
        ("[i for i in range(3)]", "comprehensions"),
        ("open('/etc/passwd').read()", "the name 'open'"),
        ("eval('1')", "the name 'eval'"),
        ("getattr(torch, 'load')", "the name 'getattr'"),
        ("torch.load('x.pt')", "torch.load"),
        ("torch.nn.functional.softmax", "torch.nn"),
        ("torch.ones(2).numpy()", ".numpy"),
        ("np.lib.format", "np.lib"),
        ("import os", "not a Python expression"),
        ("x = 1", "not a Python expression"),
        ("(x := torch.ones(2))", "':='"),
        ("f'{seq}'", "f-strings"),
        ("torch.ones(seq) if seq else 0", "'if … else'"),
        ("torch.ones(seq).bool() and torch.ones(seq).bool()", "'and' / 'or'"),
        ("seq ** 99", "'\\*\\*'"),
        ("float('1e308')", "float\\('1e308'\\)"),
        ("torch.ones(2)[torch.ones(2).bool()]", "indexing with Tensor"),
        ("1 < seq < 5", "chained comparisons"),
        ("{'a': 1}", "dicts"),
        ("seq", "not a mask tensor"),
    ],
)
def test_malicious_or_unsupported_expressions_are_refused(expr, message):
    with pytest.raises(MaskError, match=message):
        evaluate(expr, seq=T)


@pytest.mark.parametrize(
    "expr",
    [
        "torch.ones(100000, 100000)",
        "torch.ones(4096, 1) & torch.ones(1, 4096 * 4096)",
        "torch.arange(0, 1e12)",
        "torch.ones(2, 2).repeat(5000, 5000)",
        "torch.ones(seq, seq).expand(1000000, seq, seq)",
        "torch.full((99999999, 99999999), 1.0)",
        "np.eye(10000000)",
        "torch.where(torch.ones(65536, 1).bool(), torch.ones(1, 65536), 0)",
    ],
)
def test_sizes_are_capped_before_anything_is_built(expr):
    with pytest.raises(MaskError, match="cells"):
        evaluate(expr, seq=T)


def test_expression_length_and_depth_are_capped():
    with pytest.raises(MaskError, match="at most 1000 characters"):
        evaluate("+".join(["seq"] * 400), seq=T)
    with pytest.raises(MaskError):
        evaluate("(" * 200 + "seq" + ")" * 200, seq=T)
    with pytest.raises(MaskError, match="empty"):
        evaluate("   ", seq=T)
