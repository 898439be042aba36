"""Reading a user's file (a corpus, a mask, an attention file): regular files only, within the upload budget.

A device (/dev/zero), a FIFO or a folder is refused before anything is read, so nothing blocks or reads forever;
a file over ATTENTION_LENS_MAX_UPLOAD_MB is refused from its size, before its bytes are read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import BudgetError, InputError
from .settings import current, over_budget


def regular_file_size(path: str | os.PathLike[str], what: str = "file") -> int:
    """Return the size of a regular file; InputError for a missing path, a folder, a device or a FIFO."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except OSError as err:
        raise InputError(f"cannot read {what} {p}: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise InputError(f"cannot read {what} {p}: it is {kind}")
    return st.st_size


def read_user_file(path: str | os.PathLike[str], what: str = "file") -> bytes:
    """Return a regular file's bytes, at most ATTENTION_LENS_MAX_UPLOAD_MB; InputError / BudgetError otherwise."""
    p = Path(path).expanduser()
    cap = current().max_upload_bytes
    size = regular_file_size(p, what)
    if size > cap:
        raise BudgetError(over_budget("max_upload_mb", round(size / 2**20, 1), f"{what} {p}"))
    try:
        # O_NONBLOCK: should the path turn into a FIFO between the check and the open, the read does not wait.
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(cap + 1)
    except OSError as err:
        raise InputError(f"cannot read {what} {p}: {err.strerror or err}") from None
    if len(data) > cap:
        raise BudgetError(over_budget("max_upload_mb", round(len(data) / 2**20, 1), f"{what} {p}"))
    return data
