"""Streamlit glue shared by app.py and pages/: state, cached loaders, the sidebar, strings. Only the app imports it."""
