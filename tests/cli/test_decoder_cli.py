"""The CLI with decoders: export/info/stats/check-mask accept GPT-2, and `generate` as issue 10 specifies."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.cli import main
from tests.core.test_decoder import ATTN_TOL
from tests.core.test_decoder import hf_reference as gpt2_reference

TEXT = "The animal didn't cross the street because it was too tired."


def test_export_on_a_gpt2_folder_matches_transformers(gpt2_tiny_dir, tmp_path):
    out = tmp_path / "a.npz"
    assert main(["export", "--model", str(gpt2_tiny_dir), "--text", TEXT, "--out", str(out)]) == 0
    data = np.load(out, allow_pickle=False)
    attn, _, ids = gpt2_reference(gpt2_tiny_dir, TEXT)
    assert data["attentions"].shape == tuple(attn.shape)
    assert np.abs(data["attentions"] - attn.numpy()).max() <= ATTN_TOL
    T = data["attentions"].shape[-1]
    assert (data["attentions"][..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0).all()
    assert data["mask"].tolist() == np.tril(np.ones((T, T), bool)).tolist()


def test_info_stats_check_mask_accept_a_decoder(capsys):
    assert main(["info", "--model", "random:gpt2-tiny"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "decoder"
    assert main(["stats", "--model", "random:gpt2-tiny", "--text", TEXT, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "decoder" and "induction" in doc["heads"][0] and "cls" not in doc["heads"][0]
    assert doc["heads"][0]["label"] in ("induction", "prev", "sink", "punct", "broad", "heterogeneous")
    assert "next-token" in doc["importance_measure"]
    code = main(
        [
            "check-mask",
            "--model",
            "random:gpt2-tiny",
            "--text",
            TEXT,
            "--mask",
            "causal",
            "--convention",
            "keep",
            "--expect",
            "causal",
        ]
    )
    assert code == 0
    assert "decoder" in capsys.readouterr().out


def test_generate_text_json_and_npz(tmp_path, capsys):
    assert main(["generate", "--model", "random:gpt2-tiny", "--prompt", "The cat", "--tokens", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "The cat"
    args = ["generate", "--model", "random:gpt2-tiny", "--prompt", "The cat", "--tokens", "4", "--top-k", "3"]
    assert main([*args, "--seed", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"prompt_tokens", "generated_tokens", "text", "stop"} and doc["stop"] == "budget"
    assert len(doc["generated_tokens"]) == 4 and doc["prompt_tokens"][0] == "The"
    out = tmp_path / "g.npz"
    assert main([*args, "--seed", "1", "--out", str(out)]) == 0
    data = np.load(out, allow_pickle=False)
    n_prompt = len(doc["prompt_tokens"])
    assert data["tokens"].tolist() == doc["prompt_tokens"] + doc["generated_tokens"]  # same seed, same tokens
    assert data["rows"].shape == (4, 2, 4, n_prompt + 3) and data["rows"].dtype == np.float32
    assert data["lengths"].tolist() == [n_prompt, n_prompt + 1, n_prompt + 2, n_prompt + 3]
    for s, n in enumerate(data["lengths"]):
        assert np.allclose(data["rows"][s, :, :, :n].sum(-1), 1, atol=1e-5)
        assert (data["rows"][s, :, :, n:] == 0).all()


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "minilm", "--prompt", "x", "--tokens", "2"],  # an encoder
        ["--model", "random:gpt2-tiny", "--prompt", "x", "--tokens", "0"],
        ["--model", "random:gpt2-tiny", "--prompt", "x", "--tokens", "100000"],  # over the budget
        ["--model", "random:gpt2-tiny", "--prompt", "  ", "--tokens", "2"],
        ["--model", "random:gpt2-tiny", "--prompt", "x", "--tokens", "2", "--top-k", "0"],
        ["--prompt", "x", "--tokens", "2"],  # no model
    ],
)
def test_generate_bad_input_is_one_line_and_exit_2(args, capsys):
    assert main(["generate", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
