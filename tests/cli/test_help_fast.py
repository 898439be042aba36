"""`attention-lens --help` answers before torch loads (issue 40: it took 16–22 s), and says what the full parser says."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.docs.blocks import ROOT


def test_help_loads_no_torch_and_matches_the_full_parser():
    code = (
        "import sys; from models.cli import main, _light_help; main(['--help']);"
        "assert 'torch' not in sys.modules, 'torch loaded for --help';"
        "from models.cli import build_parser; assert build_parser().format_help() == _light_help()"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "compare" in r.stdout and "the Llama family" in r.stdout


def test_commands_cap_openmp_spinning_before_torch_loads():
    """Issue 35: a command caps libgomp's spin-waiting (as the server does) before torch loads, and leaves a
    setting given in the environment alone."""
    code = (
        "import os, sys; from models.cli import cap_spinning; cap_spinning();"
        "assert 'torch' not in sys.modules; print(os.environ.get('GOMP_SPINCOUNT'))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    runs = [({}, "1000"), ({"GOMP_SPINCOUNT": "5"}, "5"), ({"OMP_WAIT_POLICY": "active"}, "None")]
    for extra, expected in runs:
        r = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env={**env, **extra}
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == expected, extra
