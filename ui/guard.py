"""The page guard: nothing a visitor can do ends in Streamlit's error box or a traceback on the page.

app.py runs the sidebar and every page through `run`. Our own errors (models.AttnVizError: bad input, a budget, a
model that cannot load) become our message in the page's language; anything else is a bug: a short generic
message on the page, the traceback in the server's log (logger "attention_lens"), and a record in FAILURES that
tests read (tests/app/conftest.py fails any test during which one was recorded). Streamlit's own control flow
(st.rerun, st.stop, st.switch_page) passes through: those are BaseExceptions, not Exceptions.
"""

from __future__ import annotations

import collections
import logging
import traceback
from collections.abc import Callable
from typing import Any

import streamlit as st

from models import AttnVizError

from .safe import md
from .state import t

log = logging.getLogger("attention_lens")
FAILURES: collections.deque[str] = collections.deque(maxlen=20)  # the last unexpected tracebacks, for tests


def run(body: Callable[[], Any], where: str) -> None:
    """Run a page (or the sidebar) so that any error it raises is shown as our message, never as a traceback."""
    try:
        body()
    except AttnVizError as err:
        st.error(t("status.page_failed", reason=md(err)))
    except Exception:  # noqa: BLE001 - the guard's job: a bug must not reach the visitor as a traceback
        text = traceback.format_exc()
        FAILURES.append(f"{where}: {text}")
        log.error("unexpected error in %s:\n%s", where, text)
        st.error(t("status.unexpected"))
