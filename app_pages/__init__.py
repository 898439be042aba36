"""The app's pages, run by `st.navigation` as scripts. A package only so that import-linter sees them."""
