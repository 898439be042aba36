"""Attention files from elsewhere: every accepted layout round-trips to the same maps; every bad file gets its message."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save as st_save
from safetensors.torch import save as st_save_torch

from models.attention_file import (
    AttentionFileError,
    AttentionMaps,
    maps_from,
    normalise_attentions,
    read,
)
from models.cli import main as cli_main
from models.errors import InputError

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]


def softmax_maps(*shape: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32) * 3
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


REF = softmax_maps(2, 3, 5, 5)  # (layers, heads, q_pos, k_pos)


def npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def torch_bytes(obj, legacy: bool = False) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


def check_ref(m: AttentionMaps, tokens=TOKENS) -> None:
    assert m.attentions.dtype == np.float32 and m.attentions.shape == REF.shape
    np.testing.assert_array_equal(m.attentions, REF)
    assert m.tokens == list(tokens) and m.k_tokens == list(tokens)
    assert not m.cross and not m.causal and m.kind == "encoder"


# ---- accepted layouts ------------------------------------------------------------------------------


def test_npz_stacked():
    check_ref(read(npz(attentions=REF, tokens=np.array(TOKENS)), "a.npz"))


def test_npz_batched_picks_item_and_says_so():
    batched = np.stack([softmax_maps(2, 3, 5, 5, seed=9), REF], axis=1)  # (layers, batch, heads, q, k)
    m = read(npz(attentions=batched, tokens=np.array(TOKENS)), "b.npz", item=1)
    check_ref(m)
    assert any("batch of 2; showing item 1" in str(n) for n in m.notes)
    with pytest.raises(AttentionFileError, match=r"item 2 .* batch holds 2"):
        read(npz(attentions=batched), "b.npz", item=2)


def test_npz_per_layer():
    m = read(npz(**{"attentions.0": REF[0], "attentions.1": REF[1]}, tokens=np.array(TOKENS)), "p.npz")
    check_ref(m)


def test_npy_without_tokens_names_positions():
    buf = io.BytesIO()
    np.save(buf, REF)
    m = read(buf.getvalue(), "a.npy")
    np.testing.assert_array_equal(m.attentions, REF)
    assert m.tokens == ["0", "1", "2", "3", "4"] and not m.named
    assert any("positions are named 0…4" in str(n) for n in m.notes)


@pytest.mark.parametrize("per_layer", [False, True])
def test_safetensors_with_tokens_in_metadata(per_layer):
    tensors = {f"attentions.{i}": REF[i] for i in range(2)} if per_layer else {"attentions": REF}
    data = st_save(tensors, metadata={"tokens": json.dumps(TOKENS)})
    check_ref(read(data, "a.safetensors"))


def test_safetensors_half_and_bfloat16():
    half = read(
        st_save({"attentions": REF.astype(np.float16)}, metadata={"tokens": json.dumps(TOKENS)}), "h.safetensors"
    )
    np.testing.assert_allclose(half.attentions, REF, atol=1e-3)
    bf = torch.from_numpy(REF).bfloat16()
    m = read(st_save_torch({"attentions": bf}, metadata={"tokens": json.dumps(TOKENS)}), "b.safetensors")
    np.testing.assert_array_equal(m.attentions, bf.float().numpy())


def test_torch_tuple_like_transformers_output():
    per_layer = tuple(torch.from_numpy(REF[i])[None] for i in range(2))  # each (batch 1, heads, q, k)
    m = read(torch_bytes(per_layer), "out.pt")
    np.testing.assert_array_equal(m.attentions, REF)
    assert any("positions are named" in str(n) for n in m.notes)


def test_torch_dict_with_tokens_and_legacy_format():
    obj = {"attentions": torch.from_numpy(REF), "tokens": TOKENS}
    check_ref(read(torch_bytes(obj), "d.pt"))
    check_ref(read(torch_bytes(obj, legacy=True), "legacy.pt"))


def test_json_nested_lists(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"attentions": REF.tolist(), "tokens": TOKENS}))
    check_ref(read(path))


def test_cross_attention_q7_k11():
    cross = softmax_maps(2, 4, 7, 11)
    q = [f"q{i}" for i in range(7)]
    k = [f"k{j}" for j in range(11)]
    m = read(npz(attentions=cross, q_tokens=np.array(q), k_tokens=np.array(k)), "x.npz")
    assert m.cross and not m.causal and m.q_tokens == q and m.k_tokens == k
    assert (m.n_q, m.n_k) == (7, 11)
    data = st_save({"attentions": cross}, metadata={"q_tokens": json.dumps(q), "k_tokens": json.dumps(k)})
    assert read(data, "x.safetensors").k_tokens == k


def test_causal_detected_from_a_real_decoder(tmp_path):
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=50, attn_implementation="eager")).eval()
    with torch.no_grad():
        out = model(torch.tensor([[1, 5, 7, 9, 3, 2]]), output_attentions=True)
    path = tmp_path / "gpt2.pt"
    torch.save(out.attentions, path)
    m = read(path)
    assert m.causal and m.kind == "decoder" and m.mask == "causal (detected)"
    np.testing.assert_array_equal(m.attentions, torch.stack(out.attentions)[:, 0].numpy())
    # The normaliser takes the output object itself, as the notebook's show does.
    np.testing.assert_array_equal(normalise_attentions(out), m.attentions)


def test_our_export_npz_and_json_round_trip(tmp_path, minilm, capsys):
    text = "The cat sat."
    ref = minilm.encode(text)
    assert cli_main(["export", "--model", "minilm", "--text", text, "--out", str(tmp_path / "e.npz")]) == 0
    assert cli_main(["export", "--model", "minilm", "--text", text, "--json", "--out", str(tmp_path / "e.json")]) == 0
    for name in ("e.npz", "e.json"):
        m = read(tmp_path / name)
        assert m.tokens == ref.tokens and m.keep is not None and m.keep.all()
        np.testing.assert_allclose(m.attentions, ref.attentions.numpy(), atol=1e-6)
        assert not m.causal and not m.notes


def test_export_of_a_causal_run_is_detected_and_keeps_its_mask(tmp_path, minilm, capsys):
    assert cli_main(["export", "--text", "One two three.", "--mask", "causal", "--out", str(tmp_path / "c.npz")]) == 0
    m = read(tmp_path / "c.npz")
    assert m.causal and m.kind == "decoder"
    assert m.keep is not None and not m.keep[0, 1] and m.keep[1, 0]


# ---- bad files -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"attentions": REF, "tokens": np.array(TOKENS[:4])}, r"5 query positions, while the tokens number 4"),
        (
            {
                "attentions": softmax_maps(1, 1, 7, 11),
                "q_tokens": np.array(list("abcdefg")),
                "k_tokens": np.array(list("abc")),
            },
            r"11 key positions, while k_tokens number 3",
        ),
        ({"attentions": np.where(REF > 0.5, np.nan, REF)}, r"NaN or infinite value\(s\), the first at layer 0"),
        ({"attentions": np.where(REF > 0.5, np.inf, REF)}, r"NaN or infinite"),
        ({"attentions": REF - 0.1}, r"negative value\(s\).*scores or logits"),
        ({"attentions": np.ones(5, dtype=np.float32)}, r"attention of shape \(5,\): expected \(layers, heads"),
        ({"attentions": np.zeros((2, 0, 5, 5), dtype=np.float32)}, r"empty"),
        ({"weights": REF}, r"no attention maps: expected 'attentions'.*found weights"),
        ({"attentions.0": REF[0], "attentions.2": REF[1]}, r"attentions\.1 is missing"),
        (
            {"attentions.0": REF[0], "attentions.1": REF[1, :, :4, :4]},
            r"layer 1 has shape \(3, 4, 4\), layer 0 has \(3, 5, 5\)",
        ),
        ({"attentions": REF, "mask": np.ones((4, 4), bool)}, r"mask has shape \(4, 4\), the maps are .* \(5, 5\)"),
    ],
)
def test_bad_npz_gets_its_message(arrays, message):
    with pytest.raises(AttentionFileError, match=message):
        read(npz(**arrays), "bad.npz")


def test_rows_not_summing_to_one_is_a_warning_saying_how_far():
    m = read(npz(attentions=REF * 0.8, tokens=np.array(TOKENS)), "scaled.npz")
    np.testing.assert_array_equal(m.attentions, REF * 0.8)
    (note,) = m.notes
    assert note.code == "rows" and note.values["n"] == 30
    assert "30 of 30 rows do not sum to 1 (off by up to 0.2" in str(note)


def test_pickled_object_arrays_are_refused():
    data = npz(attentions=REF, tokens=np.array(TOKENS, dtype=object))
    with pytest.raises(AttentionFileError, match="Python objects, which need pickle"):
        read(data, "obj.npz")


def test_unknown_and_damaged_files():
    with pytest.raises(AttentionFileError, match="not an attention file"):
        read(b"hello there", "a.txt")
    with pytest.raises(AttentionFileError, match="is empty"):
        read(b"", "e.npz")
    with pytest.raises(AttentionFileError, match="not valid JSON"):
        read(b'{"attentions": [', "a.json")
    with pytest.raises(AttentionFileError, match="ragged"):
        read(b'{"attentions": [[[[1.0, 0.0], [1.0]]]]}', "r.json")
    good = st_save({"attentions": REF})
    with pytest.raises(AttentionFileError, match="cut.safetensors is not a readable safetensors file: incomplete"):
        read(good[:-8], "cut.safetensors")  # the safetensors library's own check of the header's offsets
    with pytest.raises(AttentionFileError, match="tokens.*JSON list"):
        read(st_save({"attentions": REF}, metadata={"tokens": "[the cat"}), "m.safetensors")
    with pytest.raises(InputError, match=r"cannot read attention file .*missing\.npz"):
        read(Path("/nonexistent/missing.npz"))
    with pytest.raises(InputError, match="it is a folder"):
        read(Path(__file__).parent)


def test_size_cap_is_checked_from_headers_before_inflating(monkeypatch):
    zeros = np.zeros((4, 12, 128, 128), dtype=np.float32)  # 3 MB inflated, a few kB compressed
    data = npz(attentions=zeros)
    assert len(data) < 100_000

    def never(*args, **kwargs):
        raise AssertionError("an array was inflated before its size was checked")

    monkeypatch.setattr(np.lib.format, "read_array", never)
    declared = r"\(attentions, \(4, 12, 128, 128\) float32\) is 3 MB, over this server's limit of 1 MB"
    with pytest.raises(AttentionFileError, match=declared):
        read(data, "bomb.npz", max_bytes=2**20)
    with pytest.raises(AttentionFileError, match="over this server's limit"):
        read(st_save({"attentions": zeros}), "big.safetensors", max_bytes=2**20)
    with pytest.raises(AttentionFileError, match="over this server's limit"):
        read(torch_bytes(torch.from_numpy(zeros)), "big.pt", max_bytes=2**20)
    with pytest.raises(AttentionFileError, match="over this server's limit"):
        normalise_attentions(torch.zeros(4, 12, 128, 128), max_bytes=2**20)


def test_npz_with_a_lying_header_is_refused_before_allocating():
    """A .npy header may declare any shape: a 10⁸-float declaration is refused from the header alone."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": "<f4", "fortran_order": False, "shape": (10, 10, 1000, 1000)}
        )
        z.writestr("attentions.npy", header.getvalue() + b"\0" * 64)
    with pytest.raises(AttentionFileError, match="381 MB, over this server's limit of 256 MB"):
        read(buf.getvalue(), "liar.npz")


class _Payload:
    """Unpickling this would create a file: proof of whether pickled code runs."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


@pytest.mark.parametrize("legacy", [False, True])
def test_pickle_payload_in_a_pt_file_never_runs(tmp_path, legacy):
    marker = tmp_path / "pwned"
    data = torch_bytes({"attentions": torch.from_numpy(REF), "tokens": _Payload(str(marker))}, legacy=legacy)
    path = tmp_path / "evil.pt"
    path.write_bytes(data)
    with pytest.raises(AttentionFileError, match="weights_only=True; pickled objects are never run"):
        read(path)
    assert not marker.exists()
    # The payload is real: a plain unpickler (what the reader never uses) does create the file.
    torch.load(path, weights_only=False)
    assert marker.exists()
    os.remove(marker)


# ---- the normaliser in memory ----------------------------------------------------------------------


def test_normaliser_takes_every_layout_to_the_same_maps():
    t = torch.from_numpy(REF)
    layouts = [
        REF,
        t,
        REF[:, None],  # (layers, batch 1, heads, q, k)
        tuple(t[i][None] for i in range(2)),  # transformers' tuple
        [REF[0], REF[1]],  # list of (heads, q, k)
        REF.tolist(),
        t.double(),
        t.requires_grad_(True),
    ]
    for x in layouts:
        np.testing.assert_allclose(normalise_attentions(x), REF, atol=1e-7)
    assert normalise_attentions(REF[0]).shape == (1, 3, 5, 5)  # one layer
    assert normalise_attentions(REF[0, 0]).shape == (1, 1, 5, 5)  # one head


def test_maps_from_keys_without_names_are_positions():
    m = maps_from(softmax_maps(1, 2, 3, 4), ["a", "b", "c"])
    assert m.cross and m.k_tokens == ["0", "1", "2", "3"]
    assert any("no k_tokens were given" in str(n) for n in m.notes)


def test_the_cap_is_the_operators_upload_budget(monkeypatch):
    data = npz(attentions=np.zeros((4, 12, 128, 128), dtype=np.float32))  # 3 MB inflated
    read(data, "ok.npz")
    monkeypatch.setenv("ATTENTION_LENS_MAX_UPLOAD_MB", "1")
    with pytest.raises(AttentionFileError, match="over this server's limit of 1 MB"):
        read(data, "big.npz")
