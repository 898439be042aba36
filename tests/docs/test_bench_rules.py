"""The rules a bench figure must pass before the docs show it: a quiet machine, and the code it names.

bench.results refuses to write a result measured at a load average above 1.5 unless --allow-load was given (then
the result says so and the docs mark every figure of it); tools/bench_docs.py does not show a result whose commit
predates the last change to the code it measures.
"""

from __future__ import annotations

import json

import pytest

import bench.results as results
from tools import bench_docs


def _figures() -> dict:
    rec = results.Record("encoder", "a test record")
    rec.headline("encode ÷ transformers", 0.9, target="≤ 1", met=True)
    return rec.figures()


def test_a_busy_machine_writes_no_result(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(results, "LOAD_AT_START", 3.2)
    monkeypatch.setattr(results, "_one_minute_load", lambda: 0.3)  # the machine's real load plays no part
    monkeypatch.setattr(results, "ALLOW_LOAD", False)
    with pytest.raises(results.BusyMachine) as e:
        results.save("encoder", _figures())
    assert e.value.code == 3
    assert not list(tmp_path.iterdir())
    assert "3.20" in capsys.readouterr().err


def test_allow_load_writes_it_marked(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(results, "LOAD_AT_START", 3.2)
    monkeypatch.setattr(results, "_one_minute_load", lambda: 0.3)
    monkeypatch.setattr(results, "ALLOW_LOAD", True)
    doc = json.loads(results.save("encoder", _figures()).read_text())
    assert doc["measured_under_load"] is True and doc["load_at_start"] == 3.2
    assert doc["command"].endswith("--allow-load")
    head = bench_docs._git("rev-parse", "--short", "HEAD").stdout.strip()
    block = bench_docs.render([{**doc, "commit": head}])[2]
    assert "(measured under load)" in block


def test_a_quiet_run_is_written_unmarked(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(results, "LOAD_AT_START", 0.2)
    monkeypatch.setattr(results, "_one_minute_load", lambda: 0.3)
    monkeypatch.setattr(results, "ALLOW_LOAD", False)
    doc = json.loads(results.save("encoder", _figures()).read_text())
    assert "measured_under_load" not in doc
    doc["machine"]["load_average"] = "0.3 0.2 0.1"
    assert not bench_docs.under_load(doc)


def _doc(commit: str) -> dict:
    return {"bench": "encoder", "commit": commit, "command": "python bench/encoder.py", "figures": _figures()}


def test_a_result_older_than_its_code_is_not_shown():
    # The first commit of the repository predates every change to the forward: its figures no longer describe it.
    first = bench_docs._git("rev-list", "--max-parents=0", "HEAD").stdout.split()[-1][:7]
    last = bench_docs._git("log", "-1", "--format=%h", "--", *bench_docs.MEASURES["encoder"]).stdout.strip()
    assert bench_docs.stale(_doc(first)) and last in bench_docs.stale(_doc(first))
    assert bench_docs.stale(_doc(last)) is None  # measured on the code as it is
    block = bench_docs.render([_doc(first)])[2]
    assert "encoder: not shown" in block and "0.9" not in block


def test_a_commit_unknown_to_the_repository_is_not_shown():
    assert "not in this repository" in bench_docs.stale(_doc("0000000"))


def test_a_bench_busy_with_its_own_threads_is_not_other_work(tmp_path, monkeypatch):
    # Two threads on two cores end a long bench near a load of 2: that load is the bench's own, not other work.
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(results, "LOAD_AT_START", 0.4)
    monkeypatch.setattr(results, "_one_minute_load", lambda: 1.9)
    monkeypatch.setattr(results, "ALLOW_LOAD", False)
    monkeypatch.setattr(results, "own_load", lambda: 1.8)
    assert "measured_under_load" not in json.loads(results.save("encoder", _figures()).read_text())
    monkeypatch.setattr(results, "own_load", lambda: 0.1)  # the same load with an idle bench: someone else's work
    with pytest.raises(results.BusyMachine):
        results.save("encoder", _figures())
