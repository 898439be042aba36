"""Showing what a visitor typed or linked: markdown-escaped, so a link, an image or a colour directive in a URL
parameter, a file name or an error message that quotes them renders as plain text (no clickable link, no fetch)."""

from __future__ import annotations

import re

# What markdown could read mid-line (line breaks become spaces, so list and heading markers at a line's start never
# occur): emphasis, code, links and images ([, ], !), HTML and <autolinks>, tables, strike, $math$, Streamlit's
# :colour[…] (its [ is escaped), and GFM's bare autolinks of http://, mailto: and e-mail addresses (: and @) and of
# www. (below). CommonMark lets a backslash escape any ASCII punctuation.
_SPECIAL = re.compile(r"([\\`*_\[\]<>#!|~$:@])")
_WWW = re.compile(r"(?i)\b(www)\.")


def md(text: object) -> str:
    """Return text with every markdown special character escaped and line breaks made spaces."""
    return _WWW.sub(r"\1\\.", _SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines())))
