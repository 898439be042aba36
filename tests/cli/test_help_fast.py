"""`attention-lens --help` answers before torch loads (issue 40: it took 16–22 s), and says what the full parser says."""

from __future__ import annotations

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
