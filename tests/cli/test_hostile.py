"""Every hostile command-line input ends with exit 2 and one line on stderr naming what stopped it, in bounded time.

Each case runs in its own process (lens_testing/hostile_cases.py), killed after its timeout; a traceback, a hang or
exit 1 (the checker's FAIL) fails the test. A `python -m models` case is forked from a warm interpreter that
imported torch once (tests/warm.py); `bench/hostile.py --only replay` runs every case as a cold process and
measures its time and memory.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from lens_testing import hostile_cases
from tests.warm import Warm


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    server = Warm(tmp_path_factory.mktemp("warm"), hostile_cases.environment(hostile_cases.Case("", [], "")))
    try:
        yield server
    finally:
        server.close()


def _command(case: hostile_cases.Case, warm: Warm) -> list[str]:
    return warm.command(case.argv) if case.module == "models" else hostile_cases.command(case)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return {c.name: c for c in hostile_cases.build(tmp_path_factory.mktemp("hostile"))}


def _names() -> list[str]:
    # Names only (files are built once per module in the fixture); build() into a throwaway folder to list them.
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        return [c.name for c in hostile_cases.build(Path(tmp))]


@pytest.mark.parametrize("name", _names())
def test_hostile_input_is_answered_in_one_line(cases, warm, name):
    case = cases[name]
    stdout = open(case.stdout, "w") if case.stdout else subprocess.PIPE
    try:
        proc = subprocess.run(
            _command(case, warm),
            cwd=hostile_cases.ROOT,
            env=hostile_cases.environment(case),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=case.timeout,
            text=True,
        )
    finally:
        if case.stdout:
            stdout.close()
    err = proc.stderr.strip()
    assert "Traceback" not in err, err[-2000:]
    assert proc.returncode == case.code, f"exit {proc.returncode}: {err[-500:]}"
    if case.code == 2:
        assert len(err.splitlines()) == 1, err
        assert err.startswith("error: "), err
        assert re.search(case.message, err), err


def test_refusal_is_the_same_whether_the_folder_exists(cases, warm):
    """With ATTENTION_LENS_MODELS set, /etc (exists) and a missing folder give byte-identical refusals."""
    outs = []
    for name in ("ATTENTION_LENS_MODELS=minilm, --model /etc", "ATTENTION_LENS_MODELS=minilm, --model /no/such"):
        case = cases[name]
        proc = subprocess.run(
            _command(case, warm),
            cwd=hostile_cases.ROOT,
            env=hostile_cases.environment(case),
            capture_output=True,
            text=True,
            timeout=case.timeout,
        )
        outs.append((proc.returncode, proc.stderr, proc.stdout))
    assert outs[0] == outs[1]
