"""The page guard (ui/guard.py) on its own: our error becomes our message; a bug becomes the generic message, a log
line and a record in guard.FAILURES, never Streamlit's exception element; Streamlit's control flow passes through."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from ui import guard


def _page(kind: str) -> None:
    import streamlit as st

    from models import BudgetError
    from ui import guard

    def body() -> None:
        st.write("before")
        if kind == "ours":
            raise BudgetError("the maps need 9 heads; the budget ATTENTION_LENS_FILE_HEADS allows 8 heads")
        if kind == "bug":
            raise ZeroDivisionError("division by zero")
        if kind == "stop":
            st.stop()
        st.write("after")

    guard.run(body, "a page")
    st.write("the app goes on")


def run(kind: str) -> AppTest:
    return AppTest.from_function(_page, args=(kind,)).run()


def test_our_error_is_our_message_and_the_app_goes_on():
    at = run("ours")
    assert not at.exception
    (err,) = at.error
    assert err.value.startswith("This page cannot show that: the maps need 9 heads") and "Traceback" not in err.value
    assert [m.value for m in at.markdown][-1] == "the app goes on"
    assert not guard.FAILURES


def test_a_bug_is_a_short_message_and_a_record_never_a_traceback(caplog):
    at = run("bug")
    assert not at.exception
    (err,) = at.error
    assert "Something went wrong on this page" in err.value and "ZeroDivisionError" not in err.value
    (record,) = guard.FAILURES
    assert record.startswith("a page: Traceback") and "ZeroDivisionError: division by zero" in record
    assert any("unexpected error in a page" in r.getMessage() for r in caplog.records)
    guard.FAILURES.clear()  # seen: tests/app/conftest.py would fail this test otherwise


def test_streamlit_control_flow_passes_through():
    at = run("stop")
    assert not at.exception and not at.error
    assert [m.value for m in at.markdown] == ["before"]  # st.stop() ended the run, as without the guard
