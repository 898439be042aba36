"""Showing what a visitor typed or linked: markdown-escaped, so a link, an image or a colour directive in a URL
parameter, a file name or an error message that quotes them renders as plain text (no clickable link, no fetch)."""

from __future__ import annotations

import re

# Every ASCII punctuation mark markdown (and Streamlit's :colour[…] / :material/…: / $math$ extensions) could
# read; CommonMark lets a backslash escape any of them.
_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:&\"'=])")


def md(text: object) -> str:
    """Return text with every markdown special character escaped and line breaks made spaces."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))
