"""Streamlit glue shared by app.py and app_pages/: state, cached loaders, the sidebar, strings. Only the app imports it."""
