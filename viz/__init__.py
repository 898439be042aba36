"""Figures: numpy arrays and token lists in, plotly figures (or PNG/HTML) out. No torch, no streamlit."""
