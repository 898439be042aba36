"""Streamlit glue shared by app.py and app_pages/: state, cached loaders, the sidebar, strings. Only the app imports it."""

from . import runtime as _runtime

_runtime.before_torch()  # before any module of this package imports torch (see ui/runtime.py)
