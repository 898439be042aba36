"""Every crafted attention file of issue 26 (lens_testing/hostile_corpus.py; the files under tests/hostile/corpus/) reads, or
is refused with an InputError whose one line names the field and the limit: through the reader and through
`python -m models stats --attentions FILE` (exit 2, one line on stderr), within the issue's 30 s and 1.5 GB."""

from __future__ import annotations

import re
import time
import tracemalloc

import pytest

from lens_testing import hostile_corpus as corpus
from models.attention_file import AttentionMaps, read
from models.cli import main as cli_main
from models.errors import InputError

MANIFEST = corpus.load()
CASES = MANIFEST["cases"]
BUILT = {c.name: c for c in corpus.cases() if c.name in MANIFEST["built_by_the_tests"]}
SECONDS, PEAK = 30, 1.5 * 2**30  # the bounds for one file (a hang detector, not a speed target)


@pytest.fixture
def crafted(request, monkeypatch, tmp_path):
    """Return (path, expectation) of one case, under the environment its manifest entry names."""
    name = request.param
    for key, value in MANIFEST["env"].get(name, {}).items():
        monkeypatch.setenv(key, value)
    path = corpus.FOLDER / name
    if name in BUILT:  # too large to keep in the repository: made now by the same script
        path = tmp_path / name
        path.write_bytes(BUILT[name].make())
    return path, CASES[name]


@pytest.mark.parametrize("crafted", list(CASES), indirect=True)
def test_the_reader_reads_or_refuses_in_one_line(crafted):
    path, expect = crafted
    tracemalloc.start()
    started = time.perf_counter()
    try:
        outcome: AttentionMaps | InputError = read(path)
    except InputError as err:
        outcome = err
    finally:
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert seconds < SECONDS and peak < PEAK, (seconds, peak)
    if expect == corpus.READ:
        assert isinstance(outcome, AttentionMaps), outcome
    else:
        assert isinstance(outcome, InputError), f"read, expected a refusal matching {expect!r}"
        message = str(outcome)
        assert "\n" not in message and message.startswith(path.name), message
        assert re.search(expect, message), message


@pytest.mark.parametrize("crafted", list(CASES), indirect=True)
def test_stats_exits_2_with_one_line_or_reads(crafted, capsys):
    path, expect = crafted
    code = cli_main(["stats", "--attentions", str(path), "--json"])
    err = capsys.readouterr().err.strip()
    if expect == corpus.READ:
        assert code == 0, err
        assert "Traceback" not in err and all(line.startswith(("warning:", "notice:")) for line in err.splitlines())
    else:
        assert code == 2, err
        assert len(err.splitlines()) == 1 and err.startswith("error: "), err
        assert re.search(expect, err), err


def test_the_committed_files_are_what_the_script_writes(tmp_path, monkeypatch):
    """The corpus is generated, not hand-edited: the script rewrites the same manifest and the same bytes (torch
    files aside: torch.save writes a fresh serialization id each time)."""
    monkeypatch.setattr(corpus, "MANIFEST", tmp_path / "manifest.json")
    written = corpus.write(tmp_path)
    assert written == CASES
    assert corpus.load() == MANIFEST
    for name in CASES:
        committed = corpus.FOLDER / name
        assert committed.exists() == (tmp_path / name).exists(), name
        if committed.exists() and not name.endswith(".pt"):
            assert committed.read_bytes() == (tmp_path / name).read_bytes(), (
                f"{name}: rerun python -m lens_testing.hostile_corpus"
            )
