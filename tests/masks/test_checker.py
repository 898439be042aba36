"""The mask checker on the real bundled model: every classic bug planted and caught, every correct form passes.

Also the two properties the checker's behavioural test rests on: a causal export has exactly zero attention above
the diagonal in every layer and head, and outputs at a prefix do not move when later tokens change.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models import masks
from models.analysis.mask_checker import check_mask, parse_expect
from models.cli import main
from models.errors import InputError, MaskError

SENTENCE = "The animal didn't cross the street because it was too tired."
BATCH = [SENTENCE, "Too tired."]  # the second one is padded to the first one's length

TRIL_BOOL = "torch.tril(torch.ones(seq, seq, dtype=torch.bool))"
TRIU1_BOOL = "torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)"  # nn.MultiheadAttention's causal mask

CORRECT = [
    # (mask, convention, expect)
    (TRIL_BOOL, "keep", "causal"),
    ("torch.tril(torch.ones(seq, seq))", "keep", "causal"),  # float 0/1, as the example
    ("torch.tril(torch.ones(seq, seq, dtype=torch.int64))", "keep", "causal"),
    ("torch.triu(torch.full((seq, seq), float('-inf')), diagonal=1)", "additive", "causal"),
    ("torch.triu(torch.full((seq, seq), torch.finfo(torch.float32).min), diagonal=1)", "additive", "causal"),
    ("(1 - torch.tril(torch.ones(seq, seq))) * -10000.0", "additive", "causal"),
    (TRIU1_BOOL, "drop", "causal"),
    ("causal", "keep", "causal"),
    (f"{TRIL_BOOL}[None, None].expand(1, heads, seq, seq)", "keep", "causal"),
    ("window:2", "keep", "window:2"),
    ("(torch.arange(seq)[:, None] - torch.arange(seq)[None, :]).abs() > 2", "drop", "window:2"),
    ("prefix:4", "keep", "prefix:4"),
    ("torch.ones(seq, seq, dtype=torch.bool)", "keep", "bidirectional"),
    ("torch.zeros(seq, seq)", "additive", "bidirectional"),
]
CORRECT_PADDING = [
    ("attention_mask", "keep"),  # (batch, seq), as the tokenizer gives it
    ("attention_mask[:, None, None, :].bool()", "keep"),
    ("attention_mask == 0", "drop"),  # nn.MultiheadAttention's key_padding_mask
    ("(1 - attention_mask[:, None, None, :]) * torch.finfo(torch.float32).min", "additive"),
]


@pytest.fixture(scope="module")
def check(minilm):
    def run(mask, convention, expect, texts=SENTENCE):
        report = check_mask(minilm, texts, mask, convention, expect)
        json.dumps(report.to_dict(), allow_nan=False)  # the CLI's --json must always serialise
        for f in report.findings:
            assert f.english() and "{" not in f.english(), f.code
        return report

    return run


@pytest.mark.parametrize("mask, convention, expect", CORRECT)
def test_correct_forms_pass(check, mask, convention, expect):
    r = check(mask, convention, expect)
    assert r.ok, r.text()
    assert r.failed() == [] and r.diagnosis == []
    assert r.finding("mass").data["max_mass"] == 0.0
    behaviour = r.finding("behaviour")
    if expect == "bidirectional":
        assert behaviour.status == "skip"
    else:
        assert behaviour.status == "pass" and behaviour.data["max_change"] == 0.0  # exactly, on the CPU


@pytest.mark.parametrize("mask, convention", CORRECT_PADDING)
def test_correct_padding_masks_pass(check, mask, convention):
    r = check(mask, convention, "padding", texts=BATCH)
    assert r.ok, r.text()
    assert r.finding("behaviour").status == "pass" and r.finding("behaviour").data["max_change"] == 0.0
    assert r.finding("mass").data["max_mass"] == 0.0
    if mask == "attention_mask":
        assert r.placement.key_padding and r.placement.lands_on == ("batch", "k_pos")


def _codes(r):
    return [d.code for d in r.diagnosis]


def test_inverted_mha_mask_passed_as_keep(check):
    """nn.MultiheadAttention's True-means-masked causal mask handed to SDPA-style code (True = attend)."""
    r = check(TRIU1_BOOL, "keep", "causal")
    assert not r.ok
    conv = r.finding("convention")
    assert conv.status == "fail" and r.apparent == "drop" and "nn.MultiheadAttention" in conv.english()
    assert _codes(r) == ["diag.inverted"]
    assert {"leaks", "over", "behaviour", "mass"} <= set(r.failed())


def test_inverted_keep_mask_passed_as_drop(check):
    r = check(TRIL_BOOL, "drop", "causal")
    assert not r.ok and r.apparent == "keep" and _codes(r) == ["diag.inverted"]


def test_additive_mask_in_tutorial_code(check):
    """`masked_fill(mask == 0, -inf)` on an additive 0/-inf mask: -inf is nonzero, the triangle flips."""
    r = check("torch.triu(torch.full((seq, seq), float('-inf')), diagonal=1)", "keep", "causal")
    assert not r.ok and r.apparent == "additive" and _codes(r) == ["diag.inverted"]
    assert "declare additive" in r.finding("convention").english()


def test_01_mask_declared_additive_hides_nothing(check):
    r = check("torch.tril(torch.ones(seq, seq))", "additive", "causal")
    assert not r.ok and r.apparent == "keep" and _codes(r) == ["diag.no_mask"]
    assert "leaks" in r.failed() and r.finding("leaks").data["count"] == r.real.sum() * (r.real.sum() - 1) // 2


def test_int_mask_inverted_with_tilde(check):
    """~ on a 0/1 int mask gives -1/-2, not 1/0."""
    r = check("~torch.tril(torch.ones(seq, seq, dtype=torch.int64))", "drop", "causal")
    assert not r.ok and r.finding("convention").code == "convention.invalid"


def test_off_by_one_diagonal_masked(check):
    r = check("torch.tril(torch.ones(seq, seq, dtype=torch.bool), diagonal=-1)", "keep", "causal")
    assert not r.ok and _codes(r) == ["diag.diagonal_masked"]
    assert r.finding("convention").status == "pass"  # the convention is right; the mask is off by one
    assert r.finding("leaks").status == "pass"
    over = r.finding("over")
    assert over.data["count"] == r.tokens[0].__len__()  # exactly the diagonal
    rows = r.finding("rows")
    assert rows.status == "fail" and rows.data["empty_real_rows"] == 1  # [CLS] sees nothing
    assert rows.data["nan_rows_neg_inf"] > 0 and rows.data["nan_outputs_neg_inf"] > 0 and rows.data["finite_ours"]
    # And the empty row is why its information "leaks": finfo.min makes [CLS] attend uniformly to the future.
    assert r.finding("behaviour").status == "fail"


def test_off_by_one_next_token_visible(check):
    r = check("torch.tril(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)", "keep", "causal")
    assert not r.ok and _codes(r) == ["diag.next_visible"]
    n = len(r.tokens[0])
    assert r.finding("leaks").data["count"] == n - 1 and r.finding("over").status == "pass"
    assert r.finding("behaviour").status == "fail" and r.finding("mass").status == "fail"


def test_transposed(check):
    r = check("torch.triu(torch.ones(seq, seq, dtype=torch.bool))", "keep", "causal")
    assert not r.ok and _codes(r) == ["diag.transposed"]
    assert r.finding("leaks").data["first"][0] == [0, 0, 1]  # [CLS] sees the next token


def test_window_off_by_one(check):
    r = check("window:3", "keep", "window:2")
    assert not r.ok and _codes(r) == ["diag.off_by_one"] and "window:3" in r.diagnosis[0].english()
    assert r.finding("behaviour").status == "fail"  # a window leaks within one layer: tested on layer 0's output


def test_causal_claimed_bidirectional(check):
    r = check("causal", "keep", "bidirectional")
    assert not r.ok and r.failed() == ["over"] and _codes(r) == ["diag.is_named"]


def test_padding_on_the_query_axis(check):
    """A (batch, seq) padding mask broadcast as [:, None, :, None]: it hides [PAD] rows, not [PAD] keys."""
    r = check("attention_mask[:, None, :, None].bool()", "keep", "padding", texts=BATCH)
    assert not r.ok
    assert r.finding("shape").status == "warn" and r.placement.lands_on[2] == "q_pos"
    assert _codes(r) == ["diag.padding_on_queries"]
    assert {"leaks", "behaviour", "mass"} <= set(r.failed())
    assert r.finding("rows").status == "warn"  # padded query rows are empty: NaN with -inf
    assert r.finding("rows").data["nan_outputs_neg_inf"] > 0


def test_padding_keys_left_visible(check):
    r = check("torch.ones(seq, seq, dtype=torch.bool)", "keep", "padding", texts=BATCH)
    assert not r.ok and _codes(r) == ["diag.padding_keys_visible"]
    n_real = int(r.real[1].sum())
    n_pad = len(r.tokens[1]) - n_real
    assert r.finding("leaks").data["count"] == n_real * n_pad  # every real query of the short text sees every [PAD]
    assert r.finding("behaviour").status == "fail" and r.finding("mass").status == "fail"


def test_key_padding_mask_passed_as_keep(check):
    r = check("attention_mask == 0", "keep", "padding", texts=BATCH)
    assert not r.ok and r.apparent == "drop" and _codes(r) == ["diag.inverted"]


def test_fully_masked_rows_with_neg_inf_are_nan(check):
    """Padding on both axes, with -inf: [PAD] rows are empty, NaN, and the NaN spreads to real tokens."""
    both = "(attention_mask[:, None, :, None] * attention_mask[:, None, None, :]).bool()"
    r = check(f"torch.zeros(batch, 1, seq, seq).masked_fill(~{both}, -inf)", "additive", "padding", texts=BATCH)
    assert not r.ok and r.failed() == ["rows"] and r.finding("rows").code == "rows.padded_nan"
    assert r.finding("rows").data["nan_outputs_neg_inf"] > 0
    # The same mask with finfo.min is correct: empty [PAD] rows become uniform, not NaN (a warning only).
    r = check(
        f"torch.zeros(batch, 1, seq, seq).masked_fill(~{both}, torch.finfo(torch.float32).min)",
        "additive",
        "padding",
        texts=BATCH,
    )
    assert r.ok and r.finding("rows").status == "warn"
    r = check(both, "keep", "padding", texts=BATCH)
    assert r.ok and r.finding("rows").status == "warn"


def test_a_single_leaking_cell_is_caught(check, minilm):
    seq = minilm.encode(SENTENCE).seq
    keep = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
    keep[3, 9] = True
    r = check(keep, "keep", "causal")
    assert not r.ok and r.finding("leaks").data["count"] == 1 and r.finding("leaks").data["first"] == [[0, 3, 9]]
    assert r.finding("behaviour").status == "fail" and r.finding("behaviour").data["position"] == 3
    assert r.finding("mass").status == "fail" and r.diagnosis == []


def test_one_head_leaking(check, minilm):
    seq = minilm.encode(SENTENCE).seq
    keep = torch.tril(torch.ones(minilm.config.n_heads, seq, seq, dtype=torch.bool))
    keep[5] = True
    r = check(keep.numpy(), "keep", "causal")
    assert not r.ok and r.keep.shape[1] == minilm.config.n_heads
    assert r.finding("leaks").data["first"][0][1] == 5 and r.finding("mass").data["head"] == 5


def test_wrong_shape_names_both_shapes(minilm):
    with pytest.raises(MaskError, match=r"\(5, 5\).*\(1, 12, 16, 16\)"):
        check_mask(minilm, SENTENCE, "torch.ones(5, 5)", "keep", "causal")


def test_bad_input(minilm):
    with pytest.raises(MaskError, match="padded batch"):
        check_mask(minilm, SENTENCE, "attention_mask", "keep", "padding")
    with pytest.raises(MaskError, match="keep, drop or additive"):
        check_mask(minilm, SENTENCE, "causal", "upside-down", "causal")
    with pytest.raises(InputError, match="empty"):
        check_mask(minilm, "  ", "causal", "keep", "causal")
    with pytest.raises(MaskError, match="not allowed"):
        check_mask(minilm, SENTENCE, "__import__('os')", "keep", "causal")


@pytest.mark.parametrize(
    "spec", ["sideways", "window", "causal+bidirectional", "padding+padding", "", "chunk:0", "docs:3,0", "causal+"]
)
def test_bad_expectations(spec):
    with pytest.raises(MaskError):
        parse_expect(spec)


def test_expectations_combine():
    e = parse_expect("Causal + padding")
    assert e.parts == ("causal", "padding") and e.padding
    real = torch.tensor([[True, True, True], [True, True, False]])
    keep = e.keep(3, real)
    assert keep[1].tolist() == [[True, False, False], [True, True, False], [True, True, False]]


def test_causal_plus_padding(check):
    both = "torch.tril(torch.ones(seq, seq, dtype=torch.bool)) & attention_mask[:, None, None, :].bool()"
    assert check(both, "keep", "causal+padding", texts=BATCH).ok
    r = check(TRIL_BOOL, "keep", "causal+padding", texts=BATCH)
    # Right padding sits after every real token, so causal already hides it from real queries: nothing leaks.
    assert r.ok, r.text()


# ---- the properties the behavioural test rests on ---------------------------------------------------


def test_causal_export_has_zero_attention_above_the_diagonal(tmp_path, capsys):
    out = tmp_path / "causal.npz"
    assert main(["export", "--model", "minilm", "--text", SENTENCE, "--mask", "causal", "--out", str(out)]) == 0
    data = np.load(out, allow_pickle=False)
    attn, keep = data["attentions"], data["mask"]
    T = attn.shape[-1]
    above = np.triu(np.ones((T, T), bool), 1)
    assert keep.dtype == bool and np.array_equal(keep, ~above)
    for layer in range(attn.shape[0]):
        for head in range(attn.shape[1]):
            assert (attn[layer, head][above] == 0).all(), (layer, head)
    assert np.allclose(attn.sum(-1), 1, atol=1e-5)


@pytest.mark.parametrize("kind", ["npy", "pt", "expression"])
def test_export_with_a_user_mask_in_another_convention(tmp_path, kind, minilm):
    T = minilm.encode(SENTENCE).seq
    mha = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = masked
    if kind == "npy":
        np.save(tmp_path / "m.npy", mha.numpy())
        source = str(tmp_path / "m.npy")
    elif kind == "pt":
        torch.save(mha, tmp_path / "m.pt")
        source = str(tmp_path / "m.pt")
    else:
        source = TRIU1_BOOL
    out = tmp_path / "e.npz"
    args = [
        "export",
        "--model",
        "minilm",
        "--text",
        SENTENCE,
        "--mask",
        source,
        "--convention",
        "drop",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    data = np.load(out, allow_pickle=False)
    assert np.array_equal(data["mask"], ~mha.numpy())
    assert (data["attentions"][..., mha.numpy()] == 0).all()
    causal = np.load(_export_named(tmp_path, "causal"), allow_pickle=False)["attentions"]
    assert np.array_equal(data["attentions"], causal)  # the same computation as the named causal mask


def _export_named(tmp_path, name):
    out = tmp_path / f"{name}.npz"
    assert main(["export", "--model", "minilm", "--text", SENTENCE, "--mask", name, "--out", str(out)]) == 0
    return out


def test_export_refuses_masks_that_cannot_be_converted(tmp_path, capsys):
    np.save(tmp_path / "half.npy", np.full((16, 16), 0.5, np.float32))
    base = ["export", "--model", "minilm", "--text", SENTENCE, "--out", str(tmp_path / "x.npz")]
    for extra, message in [
        (["--mask", str(tmp_path / "half.npy")], "0/1"),
        (["--mask", "torch.ones(3, 3)"], "does not fit"),
        (["--mask", "causal", "--convention", "drop"], "named masks are keep"),
        (["--mask", str(tmp_path / "none.pt")], "does not exist"),
    ]:
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1


def test_prefix_outputs_do_not_move_when_later_tokens_change(minilm):
    """Under a causal mask, outputs at positions ≤ t are bitwise equal whatever comes after t."""
    enc = minilm.tokenizer([SENTENCE], return_tensors="pt")
    ids, types = enc["input_ids"], enc["token_type_ids"]
    T = ids.shape[1]
    keep = masks.causal_keep(T)
    gen = torch.Generator().manual_seed(1)
    for t in (0, 3, T // 2, T - 2):
        changed = ids.clone()
        changed[0, t + 1 :] = torch.randint(1000, minilm.config.vocab_size, (T - t - 1,), generator=gen)
        with torch.inference_mode():
            a, rec_a = minilm.model.run_with_cache(ids, types, keep, names=())
            b, rec_b = minilm.model.run_with_cache(changed, types, keep, names=())
        for layer_a, layer_b in zip(rec_a.hidden_states, rec_b.hidden_states, strict=True):
            assert torch.equal(layer_a[0, : t + 1], layer_b[0, : t + 1]), t
        assert not torch.equal(a.last_hidden[0, t + 1 :], b.last_hidden[0, t + 1 :])
        # Without the mask the prefix does move: the test can fail.
        with torch.inference_mode():
            free_a = minilm.model(ids, types).last_hidden
            free_b = minilm.model(changed, types).last_hidden
        assert (free_a[0, : t + 1] - free_b[0, : t + 1]).abs().max() > 1e-3


def test_decoder_mask_is_judged_with_its_own_tril(gpt2_tiny):
    """A decoder ANDs every mask with its causal one: 'everything visible' is causal in effect, and behaviour says so."""
    from models.analysis.mask_checker import check_mask

    report = check_mask(
        gpt2_tiny, "One two three four five.", "torch.ones(seq, seq, dtype=torch.bool)", "keep", "causal"
    )
    codes = {f.code: f for f in report.findings}
    assert "shape.decoder" in codes and codes["shape.decoder"].values["hidden"] > 0
    assert codes["behaviour.ok"].status == "pass" if "behaviour.ok" in codes else True
    assert report.verdict == "pass"
    window = check_mask(gpt2_tiny, "One two three four five.", "window:1", "keep", "causal")
    assert window.verdict == "fail"  # narrower than causal: over-masked
