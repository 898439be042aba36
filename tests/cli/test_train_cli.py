"""`python -m models train`: the per-record log, the summary (text and --json), the checkpoint folder that every
loader opens with the same attentions as transformers' eager model, and bad input as one line with exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from transformers import AutoTokenizer

from models import load_model
from models.analysis.induction import induction_scores
from models.cli import main
from models.encoder import PARITY_TOLERANCE
from models.training.checkpoint import transformers_attentions
from models.training.tasks import make_task

SHORT = ["--steps", "40", "--d-model", "32", "--heads", "2", "--every", "20", "--batch", "8"]


def test_json_summary_and_a_folder_every_loader_opens(tmp_path, capsys):
    out = tmp_path / "trained"
    assert main(["train", "--task", "induction", *SHORT, "--seed", "0", "--json", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["steps"] == 40 and doc["stop"] == "steps" and doc["out"] == str(out)
    assert len(doc["induction"]) == 2 and len(doc["induction"][0]) == 2
    assert set(doc["induction_by_length"]) == {"n=6", "n=10", "n=14"}
    assert doc["verdict"]["state"] in ("no_head", "weak_copy", "formed") and "copy_loss" in doc["verdict"]
    assert "induction_formed_step" in doc and doc["chance_loss"] == pytest.approx(np.log(64))
    assert [ln.split()[1] for ln in captured.err.splitlines() if ln.startswith("step")] == ["1", "20", "40"]

    # The folder: config.json, safetensors, a tokenizer AutoTokenizer loads, training.json.
    for name in ("config.json", "model.safetensors", "tokenizer.json", "training.json"):
        assert (out / name).is_file(), name
    tok = AutoTokenizer.from_pretrained(str(out))
    task = make_task("induction")
    probe = task.probe().ids[0]
    words = task.text_of(probe)
    assert tok(words)["input_ids"] == probe.tolist()

    # Our loader opens it (as every page does) and its attentions equal transformers' eager model's.
    enc = load_model(str(out), device="cpu")
    assert enc.capabilities.causal and enc.capabilities.heads == 2
    ours = enc.encode(words).attentions
    theirs = transformers_attentions(out, probe[None])[0]
    assert ours.shape == theirs.shape
    assert float((ours - theirs).abs().max()) <= PARITY_TOLERANCE
    assert induction_scores(enc).shape == (2, 2)  # the Heads page's own score runs on it


def test_text_task_with_a_file_and_a_plain_summary(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("注意力让每个词都能看到前面的词。" * 60 + "The cat sat on the mat. " * 40, encoding="utf-8")
    out = tmp_path / "chars"
    args = ["train", "--task", "text", "--text-file", str(text), *SHORT, "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "validation loss" in printed and f"wrote {out}" in printed
    enc = load_model(str(out), device="cpu")
    got = enc.encode("注意力让每个词")
    assert got.tokens == list("注意力让每个词")
    ids = got.input_ids[None]
    theirs = transformers_attentions(out, ids)[0]
    assert float((got.attentions - theirs).abs().max()) <= PARITY_TOLERANCE


def test_no_scale_is_reported_as_a_flag(capsys):
    assert main(["train", *SHORT, "--heads", "1", "--no-scale"]) == 0
    printed = capsys.readouterr().out
    assert "flag unscaled" in printed
    # 40 steps end on the plateau: the verdict says so plainly, with the copy's loss and the advice.
    assert "no induction head: it reached its step budget on the plateau, loss on the copy" in printed
    assert "advice: " in printed and "another seed" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--heads", "3"], "not a multiple of heads"),
        (["--layers", "9"], "layers must be"),
        (["--text-file", "x.txt"], "--text-file is for --task text"),
        (["--task", "text", "--text-file", "/nonexistent/t.txt"], "cannot read"),
        (["--task", "text", "--text-file", "SHORT"], "at least"),
        (["--threads", "0"], "--threads"),
        (["--task", "nope"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    short = tmp_path / "short.txt"
    short.write_text("too short", encoding="utf-8")
    args = [str(short) if a == "SHORT" else a for a in args]
    assert main(["train", "--steps", "5", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:") and message in err


def test_the_time_budget_stops_a_run(monkeypatch, capsys):
    monkeypatch.setenv("ATTENTION_LENS_MAX_TRAIN_SECONDS", "1")
    assert main(["train", "--steps", "200000", "--d-model", "32", "--heads", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stop"] == "budget" and doc["steps"] < 200_000
