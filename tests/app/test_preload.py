"""ui.preload: the first session imports every page's modules alone, so that sessions starting together never
import them at the same moment (two threads deadlocked in plotly.offline's circular imports: ui/preload.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ui import preload

ROOT = Path(__file__).resolve().parents[2]

# In a fresh process: preload, then run every page's top-level imports and list what they still had to import.
LEFT_TO_IMPORT = """
import ast, json, sys
from pathlib import Path
from ui import preload
preload.preload()
before = set(sys.modules)
for path in sorted(Path("app_pages").glob("*.py")):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(body=imports, type_ignores=[]), str(path), "exec"), {"__name__": "page"})
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_after_the_preload_no_page_imports_anything():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", LEFT_TO_IMPORT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_the_pages_submodules_are_listed():
    """`from ui import why` imports the submodule ui.why: it is preloaded, not only the package ui."""
    names = preload.page_imports()
    assert {"ui.why", "ui.controls", "viz.export", "ui.state"} <= set(names)
    assert "ui.state.Selection" not in names and "models.AttnVizError" not in names  # names, not modules


def test_sessions_arriving_together_import_once_and_wait_for_it(monkeypatch):
    """Eight sessions call preload() at once: every module is imported once, by one of them, and none goes on
    before all are imported."""
    imported: list[str] = []
    monkeypatch.setattr(preload, "_done", False)
    monkeypatch.setattr(preload, "page_imports", lambda: ["a", "b", "c"])
    monkeypatch.setattr(preload, "ALSO", ("d",))

    def slow_import(name: str) -> None:
        time.sleep(0.02)
        imported.append(name)

    monkeypatch.setattr(preload, "_import", slow_import)
    seen_when_back: list[int] = []

    def session() -> None:
        preload.preload()
        seen_when_back.append(len(imported))

    threads = [threading.Thread(target=session) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert imported == ["a", "b", "c", "d"] and seen_when_back == [4] * 8
