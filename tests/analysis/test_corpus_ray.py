"""`--engine ray` on a local Ray with 2 CPUs: the local engine's statistics, whatever order batches finish in,
with an actor killed mid-run. Small corpora and minilm."""

from __future__ import annotations

import json
import os
import signal

import pytest

ray = pytest.importorskip("ray")

from models.analysis.corpus import CorpusSums, read_corpus, redundancy_cut, stream_corpus  # noqa: E402
from models.analysis.corpus_ray import run_ray  # noqa: E402
from tests.analysis.test_corpus import EXAMPLE, assert_same_statistics  # noqa: E402

pytestmark = pytest.mark.long


CUT = redundancy_cut(26, 12)  # the redundancy over ~12 of the 26 rows: the sample is the same on every engine


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, minilm):
    """24 lines in three formats (with two bad rows), and the local engine's sums of them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = read_corpus(EXAMPLE.read_text(encoding="utf-8"))[:24]
    folder = tmp_path_factory.mktemp("corpus")
    text = "".join(f"{ln.text}\t{ln.text_b}\n" if ln.text_b else f"{ln.text}\n" for ln in lines[:12])
    (folder / "a.txt").write_bytes(text.encode() + b"\n\xff\xfe not UTF-8\n")
    (folder / "b.jsonl").write_text(
        "".join(json.dumps({"text": ln.text, "text_b": ln.text_b}) + "\n" for ln in lines[12:18])
    )
    pq.write_table(
        pa.table({"text": [ln.text for ln in lines[18:]], "text_b": [ln.text_b for ln in lines[18:]]}),
        folder / "c.parquet",
    )
    return folder, stream_corpus(minilm, folder, batch_rows=5, pair_cut=CUT)


def _same(sums: CorpusSums, local: CorpusSums, minilm) -> None:
    assert sums.input_json() == local.input_json()
    assert sums.input_json()["skipped"]["empty"] == 1 and sums.input_json()["skipped"]["undecodable"] == 1
    assert sums.sample == local.sample  # the tokens sample: the same lines, in the same order
    assert_same_statistics(sums.report(minilm), local.report(minilm))


def test_ray_gives_the_local_engines_statistics_with_an_actor_killed(local_ray, corpus, minilm):
    """Two actors, batches finishing in any order, and the first actor seen killed mid-run (its queued batches not
    yet run): the statistics are the local engine's, every row counted once. One run for both properties: each
    Ray run here costs two actor starts (torch and minilm) on CI's two cores."""
    folder, local = corpus
    pids: list[int] = []

    def kill_the_first(part: CorpusSums, total: CorpusSums, pid: int) -> None:
        if not pids:
            os.kill(pid, signal.SIGKILL)
        pids.append(pid)

    sums = run_ray("minilm", folder, 6, 12, workers=2, batch_rows=4, on_batch=kill_the_first, pair_cut=CUT)
    assert len(set(pids)) >= 2 and sums.batches >= 6 and sums.read == local.read == 26
    assert 0 < sums.pair_sentences == local.pair_sentences < local.sentences
    _same(sums, local, minilm)


def test_a_local_ray_starts_with_a_store_sized_to_the_batches_in_flight(corpus, monkeypatch):
    """Started here, Ray's object store holds the batches in flight, not 30 % of RAM: the driver maps the pages it
    reads, and with the default store its peak grew with the corpus. A cluster's own settings are left alone."""
    from models.analysis.corpus_ray import batch_bytes, store_bytes

    folder, _ = corpus
    seen: list[dict] = []

    class Stop(Exception):
        pass

    def init(address=None, **kw):
        seen.append(dict(kw, address=address))
        raise Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for address in (None, "ray://head:10001"):
        with pytest.raises(Stop):
            run_ray("minilm", folder, 6, 12, workers=2, context_width=384, address=address)
    assert seen[0]["object_store_memory"] == store_bytes(2, batch_bytes(6, 12, 384))
    assert seen[1]["address"] == "ray://head:10001" and "object_store_memory" not in seen[1]
