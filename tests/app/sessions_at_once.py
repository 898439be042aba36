"""Run in a fresh process (tests/app/test_sessions_at_once.py): N AppTest sessions of app.py at once, in threads, on
pages that build figures, before anything has imported pandas. Prints one JSON line: each session's outcome."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["app_pages/memory.py", "app_pages/explore.py", "app_pages/heads.py", "app_pages/inside_head.py"]


def main(n: int) -> int:
    from streamlit.testing.v1 import AppTest

    from ui import guard

    fresh = "pandas" not in sys.modules
    outcomes: list[str] = [""] * n
    tests = []
    for i in range(n):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.switch_page(PAGES[i % len(PAGES)])
        tests.append(at)

    def session(i: int) -> None:
        try:
            at = tests[i]
            at.run()
            errors = [e.value for e in at.exception] + [str(e.value)[:200] for e in at.error]
            outcomes[i] = "ok" if not errors else "; ".join(map(str, errors))[:300]
        except Exception as err:  # noqa: BLE001 - reported, not raised: every session's outcome is wanted
            outcomes[i] = f"{type(err).__name__}: {err}"[:300]

    threads = [threading.Thread(target=session, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failures = [f[-1500:] for f in guard.FAILURES]  # a traceback's end says why
    print(json.dumps({"fresh": fresh, "outcomes": outcomes, "guard_failures": failures}))
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
