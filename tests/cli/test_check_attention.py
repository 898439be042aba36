"""`python -m models check-attention`: file targets and transformers folders, exit codes 0 / 1 / 2, --json.

transformers models are built offline (random weights, save_pretrained): GPT-2-shaped is causal, BERT-shaped is
not, a Mistral-shaped model with sliding_window=4 is causal+window:3 per layer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from models.cli import main

TARGETS = Path(__file__).resolve().parents[1] / "masks" / "attention_targets.py"


def _run(capsys, *args):
    code = main(["check-attention", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_file_targets_exit_0_and_1(capsys):
    code, out, _ = _run(capsys, "--target", f"{TARGETS}:causal_attention", "--expect", "causal")
    assert code == 0 and out.startswith("PASS")
    code, out, _ = _run(capsys, "--target", f"{TARGETS}:transposed_attention", "--expect", "causal", "--json")
    d = json.loads(out)
    assert code == 1 and d["verdict"] == "fail" and "transposed" in d["cause"]
    assert set(d) == {"verdict", "expect", "leaks", "over_masked", "padded_reads", "batch_leaks", "cause"}
    code, out, _ = _run(capsys, "--target", f"{TARGETS}:make_stack()", "--expect", "causal", "--seq", "8")
    assert code == 0, out
    code, out, _ = _run(capsys, "--target", f"{TARGETS}:cumulative_mean", "--expect", "causal", "--d-model", "8")
    assert code == 0, out


def test_padding_on_the_query_axis_fails_by_default(capsys):
    """The new user's case: attention_mask.bool()[:, None, :, None] passed right padding alone (no real token sees
    a pad under causality); the default checks left padding too, and names the bug."""
    target = f"{TARGETS}:query_padding_attention"
    code, out, _ = _run(capsys, "--target", target, "--expect", "causal+padding", "--padding-side", "right")
    assert code == 0, out  # why one side is not enough
    code, out, _ = _run(capsys, "--target", target, "--expect", "causal+padding")
    assert code == 1 and "likely cause: wrong axis: the padding mask lands on the query axis" in out, out
    assert "fails with left padding" in out


@pytest.mark.parametrize(
    "target, expect, extra, message",
    [
        ("nothere.py:x", "causal", [], "does not exist"),
        ("{T}:nope", "causal", [], "has no 'nope'"),
        ("{T}:wrong_shape", "causal", [], "returned shape"),
        ("{T}:raises", "causal", [], "raised ValueError: planted failure"),
        ("{T}:Attention", "causal", [], "is a class"),
        ("{T}", "causal", [], "FILE.py:NAME"),
        ("{T}:causal_attention", "sideways", [], "unknown expectation"),
        ("{T}:causal_attention", "causal+docs:3,4", [], "sum to 7"),
        ("{T}:cumulative_mean", "causal+padding", [], "attention_mask"),
        ("{T}:causal_attention", "causal", ["--seq", "0"], "seq 0"),
        ("{T}:causal_attention", "causal", ["--padding-side", "up"], "invalid choice"),
        ("hf:/nonexistent/folder", "causal", [], "cannot load"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, target, expect, extra, message):
    code, out, err = _run(capsys, "--target", target.format(T=TARGETS), "--expect", expect, *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err


# ---- transformers folders --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    from transformers import (
        BertConfig,
        BertModel,
        GPT2Config,
        GPT2Model,
        MistralConfig,
        MistralModel,
        T5Config,
        T5Model,
    )

    root = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    small = dict(vocab_size=100)
    GPT2Model(
        GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0, **small)
    ).save_pretrained(root / "gpt2")
    BertModel(
        BertConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=64,
            **small,
        )
    ).save_pretrained(root / "bert")
    MistralModel(
        MistralConfig(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            sliding_window=4,
            max_position_embeddings=64,
            **small,
        )
    ).save_pretrained(root / "mistral")
    T5Model(T5Config(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, **small)).save_pretrained(root / "t5")
    return root


def test_gpt2_folder_is_causal(capsys, hf_dirs):
    code, out, _ = _run(capsys, "--target", f"hf:{hf_dirs / 'gpt2'}", "--expect", "causal")
    assert code == 0, out
    code, out, _ = _run(
        capsys,
        "--target",
        f"hf:{hf_dirs / 'gpt2'}",
        "--expect",
        "causal+padding",
        "--pad",
        "4",
        "--padding-side",
        "left",
    )
    assert code == 0, out
    code, out, _ = _run(capsys, "--target", f"hf:{hf_dirs / 'gpt2'}", "--expect", "bidirectional", "--json")
    assert code == 1 and json.loads(out)["over_masked"]


def test_bert_folder_is_not_causal(capsys, hf_dirs):
    code, out, _ = _run(capsys, "--target", f"hf:{hf_dirs / 'bert'}", "--expect", "causal", "--json")
    d = json.loads(out)
    assert code == 1 and d["leaks"] and "nothing is masked" in d["cause"]
    code, out, _ = _run(capsys, "--target", f"hf:{hf_dirs / 'bert'}", "--expect", "bidirectional+padding", "--pad", "3")
    assert code == 0, out


def test_mistral_sliding_window_is_causal_window(capsys, hf_dirs):
    """sliding_window=4 keeps i − j ≤ 3 per layer: causal+window:3, closed over its 2 layers to window:6."""
    ref = f"hf:{hf_dirs / 'mistral'}"
    code, out, _ = _run(capsys, "--target", ref, "--expect", "causal+window:3")
    assert code == 0 and "causal+window:6" in out, out
    code, out, _ = _run(capsys, "--target", ref, "--expect", "causal+window:4", "--json")
    assert code == 1 and json.loads(out)["over_masked"]
    code, out, _ = _run(capsys, "--target", ref, "--expect", "causal+window:3", "--depth", "1")
    assert code == 1 and "--depth 2" in out, out


def test_encoder_decoder_is_unsupported(capsys, hf_dirs):
    code, out, err = _run(capsys, "--target", f"hf:{hf_dirs / 't5'}", "--expect", "causal")
    assert code == 2 and "unsupported" in err
