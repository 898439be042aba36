"""The rules a bench figure must pass before the docs show it: a quiet machine, and the code it names.

bench.results refuses to write a result measured at a load average above 1.5 unless --allow-load was given (then
the result says so and the docs mark every figure of it); tools/bench_docs.py does not show a result whose commit
predates the last change to the code it measures.
"""

from __future__ import annotations

import json
import subprocess
import sys

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
    monkeypatch.setattr(results, "other_work", lambda: 0.1)
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
    monkeypatch.setattr(results, "other_work", lambda: 0.1)  # not this machine's: the test suite keeps it busy
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


def test_a_bench_busy_with_its_own_processes_is_not_other_work(tmp_path, monkeypatch):
    # Sixteen browsers on two cores, or Ray's actors, drive the load average far above 1.5: that is the bench's own
    # work, read from CPU seconds (the machine's against the bench's process tree), not from the queue length.
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(results, "LOAD_AT_START", 0.4)
    monkeypatch.setattr(results, "_one_minute_load", lambda: 7.5)
    monkeypatch.setattr(results, "ALLOW_LOAD", False)
    monkeypatch.setattr(results, "_WALL_AT_START", results.time.monotonic() - 100)
    monkeypatch.setattr(results, "_BUSY_AT_START", 1000.0)
    monkeypatch.setattr(results, "_OWN_AT_START", 50.0)
    monkeypatch.setattr(results, "_machine_busy", lambda: 1190.0)  # 190 CPU seconds in 100 s on the machine …
    monkeypatch.setattr(results, "_own_cpu", lambda: 230.0)  # … 180 of them the bench's own: other work 0.1
    doc = json.loads(results.save("encoder", _figures()).read_text())
    assert "measured_under_load" not in doc and doc["load_from_other_work"] == pytest.approx(0.4)
    assert doc["load_average_at_end"] == 7.5  # the raw figure is kept beside it
    monkeypatch.setattr(results, "_own_cpu", lambda: 80.0)  # the same machine with an idle bench: 1.6 cores of others
    with pytest.raises(results.BusyMachine):
        results.save("encoder", _figures())


def test_the_bench_counts_its_living_descendants():
    # A child still running (a server, a browser) is in no os.times() until it is waited for: /proc counts it.
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\ntime.sleep(30)",
        ]
    )
    try:
        deadline = results.time.monotonic() + 20
        while results._descendants_cpu() < 0.4 and results.time.monotonic() < deadline:
            results.time.sleep(0.1)
        assert results._descendants_cpu() >= 0.4
    finally:
        child.kill()
        child.wait()


ORPHAN = """
import os, subprocess, sys, time
import bench.results as r
if "adopt" in sys.argv:
    r._adopt_orphans()
def others():  # the tree's CPU less this process's own (its polling)
    return r._own_cpu() - sum(os.times()[:2])
before = others()
grandchild = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.5: pass"
subprocess.run([sys.executable, "-c", f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {grandchild!r}])"])
deadline = time.monotonic() + 20
while others() - before < 0.4 and time.monotonic() < deadline:
    time.sleep(0.2)
print(round(others() - before, 2))
"""


def test_an_orphaned_grandchild_stays_the_benchs_own():
    # Ray's workers outlive the raylet that started them: adopted, their CPU is the bench's, not other work.
    def gained(*args: str) -> float:
        cmd = [sys.executable, "-c", ORPHAN, *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=results.ROOT, check=True)
        return float(out.stdout.split()[-1])

    assert gained("adopt") >= 0.4
    assert gained() < 0.4  # not adopted, it leaves the tree: what the bench would count as other work
