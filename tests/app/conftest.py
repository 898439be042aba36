"""Every AppTest here also fails when the page guard (ui/guard.py) caught an unexpected exception: the guard shows a
visitor a short message instead of a traceback, so `not at.exception` alone would no longer see a bug."""

from __future__ import annotations

import pytest

from ui import guard


@pytest.fixture(autouse=True)
def no_unexpected_errors():
    guard.FAILURES.clear()
    yield
    failures = list(guard.FAILURES)
    guard.FAILURES.clear()
    assert not failures, "the page guard caught an unexpected exception:\n" + "\n".join(failures)
