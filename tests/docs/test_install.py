"""`pip install -e .` (README's install) makes the project work from any folder: `import lens` and `models`, the
`attention-lens` command and `python -m models`. Runs where the project is installed (CI, a reader's venv); the
shared development venv never installs it, so there it skips."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT

try:
    DIST = importlib.metadata.distribution("attention-lens")
except importlib.metadata.PackageNotFoundError:
    DIST = None

pytestmark = pytest.mark.skipif(DIST is None, reason="the project is not installed (pip install -e .)")


def _elsewhere(tmp_path: Path) -> dict[str, str]:
    """The environment minus any path to this checkout: only the install may lead an import here."""
    keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(keep), "HF_HUB_OFFLINE": "1"}


def test_imports_resolve_from_another_folder(tmp_path):
    code = "import lens, models, viz, ui; print(lens.__file__); print(models.__file__)"
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_elsewhere(tmp_path), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    for line in r.stdout.split():
        assert Path(line).resolve().is_relative_to(ROOT), f"{line} is not this checkout's"


def test_console_script_is_the_cli(tmp_path):
    script = Path(sys.executable).with_name("attention-lens")
    assert script.is_file(), "pip install -e . did not install the attention-lens command"
    r = subprocess.run([str(script), "memory", "--seq", "512", "--json"], cwd=tmp_path, env=_elsewhere(tmp_path),
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert '"score_elements": 6291456' in r.stdout  # batch 2 · heads 12 · 512²: the tutorial's example
    bad = subprocess.run([str(script), "no-such-command"], cwd=tmp_path, env=_elsewhere(tmp_path), capture_output=True,
                         text=True)  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_python_dash_m_models_still_works_from_another_folder(tmp_path):
    r = subprocess.run([sys.executable, "-m", "models", "info", "--model", "random:tiny"], cwd=tmp_path,
                       env=_elsewhere(tmp_path), capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert '"kind": "encoder"' in r.stdout
