"""`python -m models stats --attentions FILE`: the same JSON as for the model that made the maps, with the
fields that need a model null, and the encoder/decoder kind following the detected causality."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models.cli import main
from tests.core.test_attention_file import softmax_maps

TEXT = "The keys to the cabinet are on the table."


def run_json(capsys, *args) -> dict:
    assert main(["stats", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("model", ["minilm", "random:gpt2-tiny"])
def test_a_file_gives_the_models_own_statistics(tmp_path, capsys, model):
    ref = run_json(capsys, "--model", model, "--text", TEXT, "--no-importance")
    assert main(["export", "--model", model, "--text", TEXT, "--out", str(tmp_path / "a.npz")]) == 0
    capsys.readouterr()
    doc = run_json(capsys, "--attentions", str(tmp_path / "a.npz"))
    assert doc["kind"] == ref["kind"] == ("decoder" if "gpt2" in model else "encoder")
    assert doc["causal"] is (model != "minilm")
    assert doc["tokens"] == ref["tokens"] and doc["rows"] == ref["rows"]
    assert [(h["layer"], h["head"], h["label"]) for h in doc["heads"]] == [
        (h["layer"], h["head"], h["label"]) for h in ref["heads"]
    ]
    for mine, theirs in zip(doc["heads"], ref["heads"], strict=True):
        for k, v in theirs.items():
            if k == "induction":  # a decoder's induction score runs the model on its own input: none from a file
                assert k not in mine
                continue
            assert mine[k] == pytest.approx(v, abs=1e-5), k
    for name in ("js", "js_per_row", "cosine"):
        np.testing.assert_allclose(doc["redundancy"][name], ref["redundancy"][name], atol=1e-5)
    assert doc["redundancy"]["cka"] is None
    assert doc["importance"] is None and doc["importance_measure"] is None and doc["removal"] is None
    assert set(ref) <= set(doc)


def test_causal_detection_labels_an_encoder_run_under_a_causal_mask_decoder(tmp_path, capsys):
    assert main(["export", "--text", TEXT, "--mask", "causal", "--out", str(tmp_path / "c.npz")]) == 0
    capsys.readouterr()
    assert run_json(capsys, "--attentions", str(tmp_path / "c.npz"))["kind"] == "decoder"


def test_cross_attention_and_a_batched_torch_file(tmp_path, capsys):
    path = tmp_path / "x.pt"
    per_layer = tuple(
        torch.from_numpy(softmax_maps(2, 3, 7, 11, seed=i)) for i in range(2)
    )  # (batch 2, heads 3, 7, 11)
    torch.save(
        {"attentions": per_layer, "q_tokens": [f"q{i}" for i in range(7)], "k_tokens": list("abcdefghijk")}, path
    )
    assert main(["stats", "--attentions", str(path), "--item", "1", "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert "batch of 2; showing item 1" in captured.err
    assert doc["k_tokens"] == list("abcdefghijk") and len(doc["tokens"]) == 7
    assert len(doc["heads"]) == 6 and doc["heads"][0]["prev"] is None  # no neighbours across two sequences
    assert np.array(doc["redundancy"]["js"]).shape == (6, 6)
    assert main(["stats", "--attentions", str(path)]) == 0  # the table for people
    assert "2 layers × 3 heads" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mask", "causal"], "need a model; not with --attentions"),
        (["--item", "-1"], "--item must be 0 or more"),
        (["--item", "5"], "item 5 was asked for, but the batch holds 1"),
    ],
)
def test_bad_arguments_and_files_exit_2_with_one_line(tmp_path, capsys, extra, message):
    np.savez(tmp_path / "a.npz", attentions=softmax_maps(1, 2, 4, 4)[:, None])
    assert main(["stats", "--attentions", str(tmp_path / "a.npz"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_pickled_payload_exits_2_and_never_runs(tmp_path, capsys):
    from tests.core.test_attention_file import _Payload

    marker = tmp_path / "pwned"
    torch.save({"attentions": torch.zeros(1, 1, 2, 2), "tokens": _Payload(str(marker))}, tmp_path / "evil.pt")
    assert main(["stats", "--attentions", str(tmp_path / "evil.pt"), "--json"]) == 2
    assert "pickled objects are never run" in capsys.readouterr().err
    assert not marker.exists()


# ---- `stats --file` at any scale (issue 36): formats, bad rows, engines --------------------------------------


def test_a_folder_of_jsonl_and_parquet_gives_the_document_of_the_same_txt(tmp_path, capsys):
    """The document keeps its fields and adds "input", "tokens_sample" and "engine"; bad rows are counted."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [("The cat sat on the mat.", None), ("A first half.", "A second half."), ("Dogs bark.", None)]
    (tmp_path / "one.txt").write_text("".join(f"{a}\t{b}\n" if b else f"{a}\n" for a, b in rows))
    folder = tmp_path / "many"
    folder.mkdir()
    (folder / "a.jsonl").write_text(
        json.dumps({"text": rows[0][0]}) + "\n" + json.dumps({"text": rows[1][0], "text_b": rows[1][1]}) + "\n{oops\n"
    )
    pq.write_table(pa.table({"text": [rows[2][0], None]}), folder / "b.parquet")
    one = run_json(capsys, "--file", str(tmp_path / "one.txt"), "--no-importance")
    many = run_json(capsys, "--file", str(folder), "--no-importance", "--batch-size", "2")
    assert one["input"] == {
        "rows": 3,
        "sentences": 3,
        "skipped": {"empty": 0, "undecodable": 0, "malformed": 0, "too_long": 0},
        "truncated": 0,
    }
    assert many["input"]["rows"] == 5 and many["input"]["skipped"] == {
        "empty": 1,
        "undecodable": 0,
        "malformed": 1,
        "too_long": 0,
    }
    assert one["engine"] == {"name": "local", "workers": 1, "batches": 1}
    assert many["engine"] == {"name": "local", "workers": 1, "batches": 3}
    assert many["tokens_sample"]["lines"] == 3 and many["tokens_sample"]["of"] == 3
    assert many["tokens"] == one["tokens"] and many["sentences"] == 3 and many["rows"] == one["rows"]
    for a, b in zip(one["heads"], many["heads"], strict=True):
        assert a["label"] == b["label"]
        for k, v in a.items():
            if isinstance(v, float):
                assert b[k] == pytest.approx(v, abs=2e-6), k  # 1e-6, and the document's rounding to 6 decimals
    np.testing.assert_allclose(many["redundancy"]["js_per_row"], one["redundancy"]["js_per_row"], atol=2e-6)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--engine", "ray", "--text", "hi"], "go with --file"),
        (["--workers", "2"], "go with --engine ray"),
        (["--batch-size", "0"], "--batch-size must be between 1 and 1,000,000"),
        (["--engine", "ray", "--workers", "0"], "--workers must be between 1 and 1,000,000"),
        (["--redundancy-lines", "5"], "--redundancy-lines must be 0 (every line) or from 64"),
        (["--redundancy-lines", "100", "--text", "hi"], "--redundancy-lines go with --file"),
    ],
)
def test_engine_options_are_checked_in_one_line(tmp_path, capsys, extra, message):
    (tmp_path / "c.txt").write_text("One.\nTwo.\n")
    args = ["stats", "--no-importance", *extra]
    if "--text" not in extra:
        args += ["--file", str(tmp_path / "c.txt")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_without_ray_the_engine_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    (tmp_path / "c.txt").write_text("One.\n")
    assert main(["stats", "--file", str(tmp_path / "c.txt"), "--engine", "ray", "--no-importance"]) == 2
    err = capsys.readouterr().err
    assert 'pip install -e ".[scale]"' in err and err.count("\n") == 1


def test_a_folder_without_a_corpus_file_is_refused(tmp_path, capsys):
    (tmp_path / "notes.md").write_text("# not a corpus")
    assert main(["stats", "--file", str(tmp_path), "--no-importance"]) == 2
    assert "holds no .txt, .jsonl or .parquet file" in capsys.readouterr().err


def test_a_written_document_opens_again_as_the_same_report(tmp_path, minilm):
    """`stats --out` then report_from_document: the statistics, labels and redundancy of analysing it here."""
    from models.analysis.corpus import analyse_corpus, read_corpus, report_from_document
    from models.analysis.heads import STATS

    text = "The cat sat on the mat.\nA first half.\tA second half.\nDogs bark at night.\n"
    (tmp_path / "c.txt").write_text(text)
    out = tmp_path / "s.json"
    assert main(["stats", "--file", str(tmp_path / "c.txt"), "--no-importance", "--out", str(out)]) == 0
    opened = report_from_document(out.read_bytes())
    here, _ = analyse_corpus(minilm, read_corpus(text))
    assert (opened.sentences, opened.rows, opened.pairs) == (here.sentences, here.rows, here.pairs)
    for k in ("entropy", "entropy_norm", "cls", "sep", "punct", "self", "prev", "next", "confidence", "distance"):
        assert k in STATS
        np.testing.assert_allclose(opened.stats[k], here.stats[k], atol=2e-6, err_msg=k)  # 6 decimals in the file
    np.testing.assert_allclose(opened.cls_entropy, here.cls_entropy, atol=2e-6)
    assert (opened.labels == here.labels).all()
    for name in ("js", "cosine", "cka"):
        np.testing.assert_allclose(getattr(opened, name), getattr(here, name), atol=2e-6, err_msg=name)
    assert opened.order == here.order


def test_a_large_file_says_its_redundancy_is_over_a_sample(tmp_path, capsys):
    """Past --redundancy-lines lines, JS, cosine and CKA are summed over a hash-picked sample, and the document and
    the table say so; --redundancy-lines 0 sums them over every line (statistics the same either way)."""
    (tmp_path / "c.txt").write_text("".join(f"Sentence number {i} is here.\n" for i in range(200)))
    base = ["--file", str(tmp_path / "c.txt"), "--no-importance"]
    sampled = run_json(capsys, *base, "--redundancy-lines", "64")
    every = run_json(capsys, *base, "--redundancy-lines", "0")
    sample = sampled["redundancy_sample"]
    assert 20 < sample["lines"] < 120 and sample["of"] == 200 and "BLAKE2b-64" in sample["rule"]
    assert sampled["redundancy"]["rows"] == sample["rows"] < sampled["rows"]
    assert every["redundancy_sample"] == {"lines": 200, "of": 200, "rows": every["rows"], "rule": "every line"}
    assert [h["entropy"] for h in sampled["heads"]] == [h["entropy"] for h in every["heads"]]
    assert main(["stats", *base, "--redundancy-lines", "64"]) == 0  # the table for people says it too
    assert f"nats, over a sample of {sample['lines']:,} of the 200 sentences" in capsys.readouterr().out
