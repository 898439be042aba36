"""`python -m models export`: files that load without pickle and match transformers; exit code 2 on bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from models.cli import main
from tests.core.test_parity import ATTN_TOL, hf_reference

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "The animal didn't cross the street because it was too tired."


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "models", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_export_npz_matches_transformers(tmp_path):
    from models import bundled_model_dir

    out = tmp_path / "a.npz"
    assert main(["export", "--model", "minilm", "--text", SENTENCE, "--out", str(out)]) == 0
    data = np.load(out, allow_pickle=False)
    attn = data["attentions"]
    T = len(data["tokens"])
    assert attn.shape == (6, 12, T, T) and attn.dtype == np.float32
    assert data["hidden_states"].shape == (T, 384) and data["hidden_states"].dtype == np.float32
    assert data["tokens"][0] == "[CLS]"
    theirs, _, _ = hf_reference(bundled_model_dir(), [SENTENCE])
    assert np.abs(attn - theirs[0].numpy()).max() <= ATTN_TOL


def test_export_bert_base_shaped_folder(bert_base_dir, tmp_path):
    out = tmp_path / "b.npz"
    assert main(["export", "--model", str(bert_base_dir), "--text", SENTENCE, "--out", str(out)]) == 0
    data = np.load(out, allow_pickle=False)
    T = len(data["tokens"])
    assert data["attentions"].shape == (12, 12, T, T)
    theirs, _, _ = hf_reference(bert_base_dir, [SENTENCE])
    assert np.abs(data["attentions"] - theirs[0].numpy()).max() <= ATTN_TOL


def test_export_json_pair_and_mask(tmp_path, capsys):
    out = tmp_path / "a.json"
    code = main(
        [
            "export",
            "--model",
            "random:tiny",
            "--text",
            "first part",
            "--text-b",
            "second part",
            "--mask",
            "causal",
            "--json",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    T = len(doc["tokens"])
    assert set(doc["token_type_ids"]) == {0, 1}
    attn = np.array(doc["attentions"])
    assert attn.shape == (2, 4, T, T)
    assert np.array(doc["mask"]).tolist() == np.tril(np.ones((T, T), bool)).tolist()
    assert attn[..., ~np.tril(np.ones((T, T), bool))].max() == 0


def test_export_json_to_stdout(capsys):
    assert main(["export", "--model", "random:tiny", "--text", "hi", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == ["[CLS]", "hi", "[SEP]"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["export", "--text", "", "--out", "x.npz"], "empty"),
        (["export", "--model", "no-such-model-xyz", "--text", "hi", "--out", "x.npz"], "cannot load"),
        (["export", "--model", "/no/such/folder", "--text", "hi", "--out", "x.npz"], "does not exist"),
        (["export", "--text", "hi"], "--out"),
        (["export", "--text", "hi", "--out", "x.npz", "--mask", "sideways"], "unknown mask"),
        (["export", "--text", "hi", "--bogus"], "unrecognized"),
        ([], "choose a command"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_subprocess_exit_code_and_no_traceback():
    """The real entry point: `python -m models` hands main's 2 to the shell, with one line and no traceback."""
    r = run_cli("export", "--model", "not-a-model-abc", "--text", "hi", "--out", "x.npz")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_truncation_warning_on_stderr(tmp_path):
    out = tmp_path / "long.npz"
    assert main(["export", "--model", "random:tiny", "--text", "word " * 600, "--out", str(out)]) == 0
    assert np.load(out, allow_pickle=False)["attentions"].shape[-1] == 512


def test_unwritable_output_is_exit_2(tmp_path, capsys):
    assert (
        main(["export", "--model", "random:tiny", "--text", "hi", "--out", str(tmp_path / "no" / "dir" / "x.npz")]) == 2
    )
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_device_flag(tmp_path):
    assert (
        main(["export", "--model", "random:tiny", "--device", "cuda", "--text", "hi", "--out", str(tmp_path / "g.npz")])
        == 0
    )


def test_hf_id_loads_from_the_local_cache(tiny_dir, tmp_path):
    """An HF id resolves through the Hugging Face cache layout with no network (HF_HUB_OFFLINE=1).

    A subprocess because huggingface_hub reads HF_HUB_CACHE when it is imported."""
    repo = tmp_path / "hub" / "models--local--tiny-bert"
    snapshot = repo / "snapshots" / "0123456789abcdef"
    shutil.copytree(tiny_dir, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123456789abcdef")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"), "PYTHONWARNINGS": "ignore"}
    r = subprocess.run(
        [sys.executable, "-m", "models", "info", "--model", "local/tiny-bert"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert (info["layers"], info["heads"], info["d_model"]) == (2, 4, 64)
    assert info["name"] == "local/tiny-bert"


def test_closed_pipe_is_not_a_traceback():
    """`python -m models export --json | head` must end quietly when head stops reading."""
    cmd = f"{sys.executable} -m models export --model random:tiny --text '{'word ' * 300}' --json | head -c 10"
    r = subprocess.run(
        ["bash", "-c", "set -o pipefail; " + cmd],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"},
    )
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.returncode == 0
