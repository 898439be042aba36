"""Showing what a visitor typed or linked: markdown-escaped, so a link, an image or a colour directive in a URL
parameter, a file name or an error message that quotes them renders as plain text (no clickable link, no fetch)."""

from __future__ import annotations

import re

# What markdown could read mid-line (line breaks become spaces, so list and heading markers at a line's start never
# occur): emphasis, code, links and images ([, ], !), HTML and <autolinks>, tables, strike, $math$, Streamlit's
# :colour[…] (its [ is escaped). CommonMark lets a backslash escape any ASCII punctuation.
_SPECIAL = re.compile(r"([\\`*_\[\]<>#!|~$])")
# GFM's bare autolinks (http://…, www.…, name@host) ignore backslash escapes (Chromium showed a clickable
# http://evil.example/login behind "http\://"): a zero-width space breaks each pattern, invisibly.
_AUTOLINK = re.compile(r"(?i)(://|\bwww\.|@)")
_ZWSP = "\u200b"


def md(text: object) -> str:
    """Return text with every markdown special character escaped, bare links broken and line breaks made spaces."""
    escaped = _SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))
    return _AUTOLINK.sub(lambda m: m.group(1)[0] + _ZWSP + m.group(1)[1:], escaped)
