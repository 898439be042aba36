"""`python -m models stats`: the JSON the issue specifies, and exit code 2 with one line on bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from models.analysis.heads import LABELS
from models.cli import main

HEAD_KEYS = {
    "layer",
    "head",
    "entropy",
    "cls",
    "sep",
    "punct",
    "self",
    "prev",
    "next",
    "confidence",
    "distance",
    "label",
}


def stats_json(capsys, *args) -> dict:
    assert main(["stats", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_text_json_schema(capsys):
    doc = stats_json(capsys, "--model", "minilm", "--text", "The cat sat on the mat, and it purred.")
    assert doc["model"] == "all-MiniLM-L6-v2 (bundled)"
    assert doc["tokens"][0] == "[CLS]" and doc["tokens"][-1] == "[SEP]"
    heads = doc["heads"]
    assert len(heads) == 72
    assert [(h["layer"], h["head"]) for h in heads] == [(layer, head) for layer in range(6) for head in range(12)]
    for h in heads:
        assert HEAD_KEYS <= set(h)
        assert h["label"] in LABELS
        assert 0 <= h["entropy_norm"] <= 1 + 1e-6
        assert h["entropy"] == pytest.approx(h["entropy_norm"] * math.log(len(doc["tokens"])), abs=1e-5)
    for name in ("js", "js_per_row", "cosine", "cka"):
        m = np.array(doc["redundancy"][name], dtype=float)
        assert m.shape == (72, 72), name
        np.testing.assert_allclose(m, m.T, atol=1e-5, err_msg=name)
    assert np.all(np.diag(doc["redundancy"]["js"]) == 0)
    assert np.array(doc["redundancy"]["js_per_row"]).max() <= math.log(2)
    imp = np.array(doc["importance"])
    assert imp.shape == (72,) and imp.min() == 0 and imp.max() == 1
    assert "proxy" in doc["importance_measure"]
    assert doc["thresholds"]["broad"] == 0.9
    assert doc["removal"]["k"][0] == 0 and len(doc["removal"]["least_first"]) == len(doc["removal"]["k"])
    # the matrices are in the heads' order: head 2 of layer 0 (index 2) is the previous-token head
    assert heads[2]["label"] == "prev"


def test_pair_gives_block_share(capsys):
    doc = stats_json(
        capsys, "--model", "random:tiny", "--text", "A question?", "--text-b", "An answer.", "--no-importance"
    )
    assert "block" in doc["heads"][0] and "importance" not in doc
    assert len(doc["redundancy"]["js"]) == 8


def test_file_json(tmp_path, capsys):
    f = tmp_path / "corpus.txt"
    f.write_text("One sentence here.\nAnother, with a comma.\n\nA third one!\n", encoding="utf-8")
    doc = stats_json(capsys, "--model", "random:tiny", "--file", str(f), "--importance-sentences", "2")
    assert doc["sentences"] == 3 and len(doc["tokens"]) == 3 and doc["tokens"][2][-1] == "[SEP]"
    assert doc["importance_sentences"] == 2
    assert len(doc["heads"]) == 8 and len(doc["importance"]) == 8


def test_out_file_and_table(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["stats", "--model", "random:tiny", "--text", "hello world", "--out", str(out), "--no-importance"]) == 0
    assert len(json.loads(out.read_text())["heads"]) == 8
    capsys.readouterr()
    assert main(["stats", "--model", "random:tiny", "--text", "hello world, again"]) == 0
    table = capsys.readouterr().out
    assert "layer head label" in table and "most similar pairs" in table and "importance:" in table


@pytest.mark.parametrize(
    "args, message",
    [
        (["--text", ""], "empty"),
        (["--text", "a", "--file", "x.txt"], "not allowed with"),
        ([], "one of the arguments --text --text-file --file --attentions is required"),
        (["--file", "no-such-file.txt"], "cannot read"),
        (["--file", "empty.txt"], "empty"),
        (["--file", "binary.bin"], "not a text file"),
        (["--file", "empty.txt", "--text-b", "b"], "--text-b goes with --text"),
        (["--model", "no-such-model-xyz", "--text", "hi"], "cannot load"),
        (["--text", "hi", "--mask", "sideways"], "unknown mask"),
        (["--text", "hi", "--importance-sentences", "0"], "at least 1"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "binary.bin").write_bytes(b"\x00\x01\x02binary")
    assert main(["stats", "--model", "random:tiny", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_the_example_corpus_runs_with_the_default_budgets(capsys, monkeypatch):
    """README's `stats --file examples/corpus_en.txt`: 60 lines, more than one forward's ATTENTION_LENS_MAX_BATCH."""
    from pathlib import Path

    monkeypatch.delenv("ATTENTION_LENS_MAX_BATCH", raising=False)
    example = Path(__file__).resolve().parents[2] / "examples" / "corpus_en.txt"
    assert main(["stats", "--file", str(example), "--json", "--no-importance"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sentences"] == 60 and len(doc["tokens"]) == 60


def test_a_decoders_table_prints_its_own_columns(capsys):
    """Issue 40: a causal model's table shows `first` (as the JSON and docs/METRICS.md define it), not [CLS]/[SEP]/next."""
    args = ["stats", "--model", "random:gpt2-tiny", "--text", "The cat sat on the mat. The cat", "--no-importance"]
    doc = stats_json(capsys, *args[1:])
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    heading = lines[1].split()
    assert "first" in heading and "induction" in heading
    assert not {"[CLS]", "[SEP]", "next"} & set(heading)
    col = heading.index("first") - 1  # the heading's "entropy nats (norm)" is two fields per row, not three
    for line, head in zip(lines[2 : 2 + len(doc["heads"])], doc["heads"], strict=True):
        assert float(line.split()[col]) == pytest.approx(100 * head["first"], abs=0.051)
