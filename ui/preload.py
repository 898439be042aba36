"""The pages' imports, made once, by one thread, before any page draws (a class opening the app at once).

Streamlit runs each session's script in a thread of its own. On a fresh server the first sessions imported their
pages' modules at the same moment, in different orders, and two threads entering plotly.offline's circular imports
from two ends deadlocked: Python broke the cycle with a `_DeadlockError` in one session ("Something went wrong"),
and the next one read a half-made package ("cannot import name 'why' from 'ui'"). Seen in
tests/app/test_sessions_at_once.py about once in twelve runs with the machine busy.

app.py calls `preload()` before anything else: the first session imports every module a page imports at its top
(read from the pages' own files with `ast`, so a new import is covered without a list to keep), holding a lock; the
sessions that arrive meanwhile wait for it and then find every module in sys.modules. After that the call costs
one flag check per script run.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import threading
from pathlib import Path

PAGES = Path(__file__).resolve().parents[1] / "app_pages"
# Imported by the figures the pages build rather than by the pages themselves: plotly's offline bundle and its
# renderers (viz.export), whose circular imports deadlocked.
ALSO = ("plotly.offline", "plotly.io", "plotly.graph_objects")

_lock = threading.Lock()
_done = False
_import = importlib.import_module


def page_imports(folder: Path = PAGES) -> list[str]:
    """Return the modules the pages in `folder` import at their top level, in order, each once.

    `from ui import why` names the submodule ui.why as well as the package: both are listed.
    """
    names: list[str] = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module not in (None, "__future__"):
                assert node.module is not None
                names.append(node.module)
                names += [f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}")]
    return list(dict.fromkeys(names))


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a name imported from a module (a function, a class), not a submodule
        return False


def preload() -> None:
    """Import every page's modules (and ALSO) once; a thread arriving meanwhile waits until they are imported."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        for name in (*page_imports(), *ALSO):
            _import(name)
        _done = True
