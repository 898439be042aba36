"""Issue 41: a class opening the app at once on a fresh server. The first import of pandas raced plotly building a
figure in another session ("partially initialized module 'pandas' has no attribute 'Series'": the visitor saw
"Something went wrong"); app.py now imports it (and PIL.Image, the other module plotly looks up without importing)
before any page draws. Eight AppTest sessions start at once, in threads of a fresh process that has not imported
pandas, on pages that build figures; each must end without an exception or the guard's message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.long
def test_eight_sessions_at_once_on_a_fresh_server():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "app" / "sessions_at_once.py"), "8"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["fresh"], "pandas was imported before the sessions started: the test would not see the race"
    assert result["outcomes"] == ["ok"] * 8, result
    assert not result["guard_failures"], result["guard_failures"]
