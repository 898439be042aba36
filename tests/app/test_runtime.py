"""ui.runtime: the server's long-lived objects are frozen out of the collector's way, and nothing else changes."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

from streamlit.testing.v1 import AppTest

from models import load_encoder
from ui import cache, runtime

ROOT = Path(__file__).resolve().parents[2]


def test_settle_freezes_what_exists_and_leaves_new_objects_collectable():
    gc.unfreeze()
    before = len(gc.get_objects())
    runtime.settle("a test")
    assert gc.get_freeze_count() >= before * 0.9  # what the process had is out of the collections' way
    assert len(gc.get_objects()) < before * 0.1  # a full collection now walks a small remainder

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a reference cycle made after settling: garbage the collector must still find
    ref = weakref.ref(a)
    del a, b
    gc.collect()
    assert ref() is None


def test_models_and_results_frozen_by_settle_are_freed_when_dropped(tiny_dir):
    """What a cache evicts (a model, an encode result) has no reference cycles: reference counting frees it even
    though it was frozen, so settling after a load does not keep evicted models alive."""
    enc = load_encoder(str(tiny_dir))
    out = enc.encode("The cat sat on the mat.")
    runtime.settle("a test")
    refs = [weakref.ref(x) for x in (enc, enc.model, next(enc.model.parameters()), out)]
    del enc, out
    assert [r() is None for r in refs] == [True] * 4  # no gc.collect(): refcounts alone


def test_settle_garbage_first():
    """Garbage that exists when settling is collected, not frozen for good."""

    class Node:
        pass

    a = Node()
    a.me = a
    ref = weakref.ref(a)
    del a
    runtime.settle("a test")
    assert ref() is None


def test_the_app_settles_after_its_imports_and_after_loading_a_model(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(runtime, "settle", lambda why: calls.append(why))
    monkeypatch.setattr(runtime, "_settled", False)
    cache.encoder.clear()  # loaded by an earlier test in this process: load it again
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["model"] = "random:tiny"
    at.run()
    assert not at.exception
    assert calls[0] == "the app's imports"
    assert "loading a model" in calls
    n = len(calls)
    at.run()  # a rerun: imported once, model cached
    assert len(calls) == n


def test_openmp_spinning_is_capped_before_torch_loads_unless_the_environment_says_otherwise():
    code = (
        "import os, sys; import ui; assert 'torch' not in sys.modules; "
        "print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}

    def run(**extra: str) -> str:
        r = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env={**env, **extra}, capture_output=True, text=True, check=True
        )
        return r.stdout.strip()

    assert run() == f"{runtime.SPIN_COUNT} None"
    assert run(GOMP_SPINCOUNT="5") == "5 None"  # the user's own setting stays
    assert run(OMP_WAIT_POLICY="ACTIVE") == "None ACTIVE"
