"""Lecture demonstrations: the inside-a-head steps, troubleshooting demos and the memory model."""
