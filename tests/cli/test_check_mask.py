"""`python -m models check-mask`: exit 0 when the mask is what it claims, 1 when a check fails, 2 on bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models.cli import main

SENTENCE = "The cat sat on the mat."
BASE = ["check-mask", "--model", "minilm", "--text", SENTENCE]


def test_correct_causal_mask_exits_0(capsys):
    code = main([*BASE, "--mask", "torch.tril(torch.ones(seq, seq))", "--convention", "keep", "--expect", "causal"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("PASS") and "behaviour" in out


def test_inverted_mask_exits_1_with_the_diagnosis(capsys):
    code = main(
        [
            *BASE,
            "--mask",
            "torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)",
            "--convention",
            "keep",
            "--expect",
            "causal",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("FAIL") and "inverted" in out and "nn.MultiheadAttention" in out


def test_json_report(capsys):
    code = main(
        [
            *BASE,
            "--mask",
            "torch.tril(torch.ones(seq, seq), diagonal=1)",
            "--convention",
            "keep",
            "--expect",
            "causal",
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["verdict"] == "fail"
    assert {"leaks", "behaviour", "mass"} <= set(doc["failed"])
    assert [d["code"] for d in doc["diagnosis"]] == ["diag.next_visible"]
    leaks = next(f for f in doc["findings"] if f["check"] == "leaks")
    assert leaks["data"]["count"] == len(doc["tokens"][0]) - 1 and leaks["message"]
    assert doc["placement"]["lands_on"] == ["q_pos", "k_pos"]


def test_padding_batch_from_repeated_text(capsys):
    args = ["check-mask", "--model", "minilm", "--text", SENTENCE, "--text", "Hi.", "--expect", "padding"]
    assert main([*args, "--mask", "attention_mask", "--convention", "keep"]) == 0
    assert main([*args, "--mask", "attention_mask[:, None, :, None]", "--convention", "keep"]) == 1
    assert "wrong axis" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["npy", "pt", "npz"])
def test_mask_files(tmp_path, fmt, capsys):
    T = 9  # [CLS] the cat sat on the mat . [SEP]
    mha = np.triu(np.ones((T, T), bool), 1)
    path = tmp_path / f"m.{fmt}"
    if fmt == "npy":
        np.save(path, mha)
    elif fmt == "pt":
        torch.save(torch.from_numpy(mha), path)
    else:
        np.savez(path, mask=mha)
    assert main([*BASE, "--mask", str(path), "--convention", "drop", "--expect", "causal"]) == 0
    assert main([*BASE, "--mask", str(path), "--convention", "keep", "--expect", "causal"]) == 1


def test_export_then_check(tmp_path, capsys):
    """An export's npz carries its mask (True = may attend): check-mask reads it back as a keep mask."""
    out = tmp_path / "w.npz"
    assert main(["export", "--model", "minilm", "--text", SENTENCE, "--mask", "window:1", "--out", str(out)]) == 0
    assert main([*BASE, "--mask", str(out), "--convention", "keep", "--expect", "window:1"]) == 0
    assert main([*BASE, "--mask", str(out), "--convention", "keep", "--expect", "causal"]) == 1


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--mask", "torch.ones(4, 4)", "--convention", "keep", "--expect", "causal"], "does not fit"),
        (["--mask", "__import__('os').system('id')", "--convention", "keep", "--expect", "causal"], "not allowed"),
        (["--mask", "causal", "--convention", "keep", "--expect", "sideways"], "unknown expectation"),
        (["--mask", "causal", "--convention", "inverted", "--expect", "causal"], "invalid choice"),
        (["--mask", "torch.tril(torch.ones(seq, seq))", "--expect", "causal"], "--convention is needed"),
        (["--mask", "attention_mask", "--convention", "keep", "--expect", "padding"], "padded batch"),
        (["--mask", "nothere.npy", "--convention", "keep", "--expect", "causal"], "does not exist"),
        (["--mask", "torch.ones(100000, 100000)", "--convention", "keep", "--expect", "causal"], "cells"),
    ],
)
def test_bad_input_exits_2_with_one_line(extra, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_padding_files_exit_codes(tmp_path, capsys):
    # [CLS] the cat sat on the mat . [SEP] (9 tokens) and [CLS] hi there . [SEP] + 4 × [PAD]
    np.save(tmp_path / "pad.npy", np.array([[1] * 9, [1] * 5 + [0] * 4]))
    np.save(tmp_path / "short.npy", np.array([[1] * 9, [1] * 4 + [0] * 5]))  # hides the short text's [SEP]
    common = ["check-mask", "--model", "minilm", "--text", SENTENCE, "--text", "Hi there."]
    assert main([*common, "--mask", str(tmp_path / "pad.npy"), "--convention", "keep", "--expect", "padding"]) == 0
    capsys.readouterr()
    assert main([*common, "--mask", str(tmp_path / "short.npy"), "--convention", "keep", "--expect", "padding"]) == 1
    assert "#2 0→4 ([CLS]→[SEP])" in capsys.readouterr().out
    assert main([*common, "--mask", "lambda: 0", "--convention", "keep", "--expect", "padding"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "lambda" in err
