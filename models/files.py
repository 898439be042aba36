"""Reading a user's file (a corpus, a mask, an attention file): regular files only, within the upload budget.

A device (/dev/zero), a FIFO or a folder is refused before anything is read, so nothing blocks or reads forever;
a file over ATTENTION_LENS_MAX_UPLOAD_MB is refused from its size, before its bytes are read. A .npy array (alone
or as an .npz member) is judged from its header (`read_npy_header`) before its data is read, never unpickled.
JSON is parsed within limits on values, keys, depth and the length of each number (`load_json`): a number of
5,000 digits is refused as text, never converted. A zip's members are counted from its bytes (`zip_members`)
before zipfile builds an object per member.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from tokenize import TokenError
from typing import IO, Any, Literal

import numpy as np

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


def read_user_file(path: str | os.PathLike[str], what: str = "file", max_bytes: int | None = None) -> bytes:
    """Return a regular file's bytes, at most ATTENTION_LENS_MAX_UPLOAD_MB (or `max_bytes`, when smaller);
    InputError / BudgetError otherwise. Every reader of a user's file (--file, --text-file, masks, attention files,
    the training text) comes through here or `read_text_prefix`: a FIFO, a device or a folder never blocks a read."""
    p = Path(path).expanduser()
    cap = current().max_upload_bytes
    size = regular_file_size(p, what)
    if max_bytes is not None and max_bytes < cap:
        if size > max_bytes:
            raise InputError(f"{what} {p} is {size:,} bytes; at most {max_bytes:,} are read")
        cap = max_bytes
    if size > cap:
        raise BudgetError(over_budget("max_upload_mb", round(size / 2**20, 1), f"{what} {p}"))
    data = _read_regular(p, what, cap + 1)
    if len(data) > cap:
        raise BudgetError(over_budget("max_upload_mb", round(len(data) / 2**20, 1), f"{what} {p}"))
    return data


def _read_regular(p: Path, what: str, n: int) -> bytes:
    """Return at most n bytes from the start of p (checked a regular file just before)."""
    try:
        # O_NONBLOCK: should the path turn into a FIFO between the check and the open, the read does not wait.
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped after the check: judge what was opened
                raise InputError(f"cannot read {what} {p}: it is not a regular file (a device, FIFO or socket)")
            return f.read(n)
    except OSError as err:
        raise InputError(f"cannot read {what} {p}: {err.strerror or err}") from None


@dataclass(frozen=True)
class TextPrefix:
    """The start of a text file, cut at a number of characters: what was read and what was left."""

    text: str
    size: int  # the file's bytes
    read: int  # bytes of it the text holds
    cut: bool  # whether the file goes on past `text`

    def note(self, what: str, limit: int) -> str:
        return (
            f"{what} holds more than {limit:,} characters ({self.size:,} bytes): its first {len(self.text):,} "
            f"characters ({self.read:,} bytes) are read (ATTENTION_LENS_MAX_TEXT_CHARS)"
        )


UTF8_MAX = 4  # bytes of one character in UTF-8


def read_text_prefix(path: str | os.PathLike[str], what: str, max_chars: int) -> TextPrefix:
    """Return the first `max_chars` characters of a regular UTF-8 file, reading at most 4 · max_chars + 4 bytes.

    One pass over at most that many bytes, whatever the file's size (a 50 MB file costs what its first 400 kB
    cost): no budget is asked of the size, since the rest is never read. A character cut in half at the end of
    what was read is dropped; bytes that are not UTF-8 inside it are refused with their offset (InputError).
    """
    p = Path(path).expanduser()
    size = regular_file_size(p, what)
    want = UTF8_MAX * max_chars + UTF8_MAX
    data = _read_regular(p, what, want)
    more = len(data) == want and size > want
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        # A character cut at the end of what was read (never more than 3 bytes of it) is not an error.
        if not (more and err.reason == "unexpected end of data" and err.start >= len(data) - (UTF8_MAX - 1)):
            raise InputError(f"{what} {p} is not UTF-8 text (byte {err.start:,}): save it as UTF-8") from None
        text = data[: err.start].decode("utf-8")
    cut = more or len(text) > max_chars
    if len(text) > max_chars:
        text = text[:max_chars]
    return TextPrefix(text, size, len(text.encode("utf-8")), cut)


def folder_file(folder: str | os.PathLike[str], name: str, what: str = "file") -> Path | None:
    """Return folder/name when it is a regular file that stays inside the folder; None when there is none.

    InputError for a FIFO, a device or a socket of that name (whose read would block or never end) and for a
    symbolic link that leads out of the folder, so that a model folder reads only its own files. A Hugging Face
    cache snapshot (…/snapshots/REV/) may link into its repository's blobs/ (the cache's own layout).
    """
    root = Path(folder).expanduser()
    p = root / name
    try:
        st = p.lstat()
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        inside = root.resolve()
        if inside.parent.name == "snapshots":
            inside = inside.parent.parent
        target = p.resolve()
        if not target.is_relative_to(inside):
            raise InputError(f"{what} {p} links out of its folder (to {target}): copy the file into the folder")
        try:
            st = target.stat()
        except OSError:
            return None
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"cannot read {what} {p}: it is not a regular file (a device, FIFO or socket)")
    return p


# ---- .npy headers -------------------------------------------------------------------------------------------

NPY_VERSIONS = ((1, 0), (2, 0), (3, 0))  # what np.save writes


@dataclass(frozen=True)
class NpyHeader:
    """What a .npy header declares: its format version, the array's shape and dtype."""

    version: tuple[int, int]
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """The declared size of the data, in Python ints (a lying shape cannot wrap around to a small number)."""
        return math.prod(self.shape) * self.dtype.itemsize


class NpyHeaderError(InputError):
    """A .npy header refused before its data is read. `reason` says why (`damaged`: not a .npy header numpy can
    parse; `version`: not one np.save writes; `objects`: a dtype holding Python objects, which only pickle can load;
    `size`: over the caller's budget) and `header` holds what was declared (None for a damaged header or an unknown
    version; `version` None when not even the magic string was read), so a caller can word it for its own users."""

    def __init__(
        self,
        reason: Literal["damaged", "version", "objects", "size"],
        message: str,
        version: tuple[int, int] | None = None,
        header: NpyHeader | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.version = version
        self.header = header


def read_npy_header(f: IO[bytes], max_bytes: int | None = None) -> NpyHeader:
    """Return the header of the .npy stream `f`, leaving `f` at the start of the data, none of which is read.

    NpyHeaderError refuses bytes that are not a .npy header (numpy's parser fails on them with ValueError,
    SyntaxError, tokenize's TokenError or EOFError: all become reason `damaged`), an unknown version, a dtype that
    holds Python objects and, when `max_bytes` is given, a declared size over it. The stream's own OSError passes.
    """
    try:
        version = np.lib.format.read_magic(f)
        if version not in NPY_VERSIONS:
            raise NpyHeaderError("version", f"unknown .npy version {version}", version)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(f)
    except (ValueError, SyntaxError, EOFError, TokenError) as err:  # NpyHeaderError is not a ValueError
        detail = str(err.args[0]).splitlines()[0] if err.args and str(err.args[0]) else type(err).__name__
        raise NpyHeaderError("damaged", f"damaged header ({detail})") from None
    header = NpyHeader(version, tuple(int(n) for n in shape), dtype)
    if dtype.hasobject:
        raise NpyHeaderError(
            "objects", "the array holds Python objects, which need pickle to load; they are refused", version, header
        )
    if max_bytes is not None and header.nbytes > max_bytes:
        raise NpyHeaderError(
            "size",
            f"the array declares {header.shape} {dtype}: {header.nbytes:,} bytes, over the limit of {max_bytes:,}",
            version,
            header,
        )
    return header


# ---- JSON within limits ----------------------------------------------------------------------------------------

JSON_NUMBER_CHARS = 40  # float32 needs 9 significant digits; 40 characters leave room for signs and any exponent
JSON_DEPTH = 8  # (layers, batch, heads, q_pos, k_pos) inside an object is 6 levels
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')  # linear on valid JSON: strings do not overlap
_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class _Refused(Exception):
    """Raised inside json's hooks, so that the parser stops at the first value over a limit."""


def _number(text: str) -> str:
    if len(text) > JSON_NUMBER_CHARS:
        raise _Refused(f"a JSON number of {len(text):,} characters; numbers here have at most {JSON_NUMBER_CHARS}")
    return text


def _constant(text: str) -> float:
    return float(text)  # NaN and ±Infinity (not JSON, but Python writes them): the caller reports where they are


def load_json(data: bytes, what: str, *, max_values: int, max_keys: int, max_depth: int = JSON_DEPTH) -> Any:
    """Return the JSON document in `data`, parsed within limits; InputError names the limit a document went over.

    max_values bounds the values (counted from the commas before parsing: each parsed number costs Python ~32
    bytes); max_keys the keys of any one object; max_depth the nesting of arrays and objects; every number has at
    most JSON_NUMBER_CHARS characters (checked as text, before int() or float() sees it).
    """
    values = data.count(b",") + 1  # an upper bound (a comma inside a string counts too)
    if values > max_values:
        raise InputError(f"{what} holds about {values:,} JSON values; at most {max_values:,} are read")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if len(items) > max_keys:
            raise _Refused(f"a JSON object with {len(items):,} keys; at most {max_keys:,} are read")
        return dict(items)

    try:
        doc = json.loads(
            data,
            parse_int=lambda s: int(_number(s)),
            parse_float=lambda s: float(_number(s)),
            parse_constant=_constant,
            object_pairs_hook=pairs,
        )
    except _Refused as err:
        raise InputError(f"{what} holds {err}") from None
    except RecursionError:
        raise InputError(f"{what} is nested deeper than {max_depth} levels of arrays and objects") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{what} is not valid JSON: {str(err).splitlines()[0][:200]}") from None
    # Depth from the brackets outside strings: the document is valid, so strings are found in one pass.
    brackets = _JSON_STRING.sub(b"0", data).translate(None, _BRACKETS)
    opens = np.frombuffer(brackets, dtype=np.uint8)
    top = int(np.cumsum(np.where((opens == ord("[")) | (opens == ord("{")), 1, -1), dtype=np.int64).max(initial=0))
    if top > max_depth:
        raise InputError(f"{what} is nested {top} levels deep; at most {max_depth} levels of arrays and objects")
    return doc


# ---- zip archives (NPZ, torch.save) -----------------------------------------------------------------------------

_CENTRAL = b"PK\x01\x02"  # the signature every central-directory entry starts with


def zip_members(data: bytes) -> int:
    """Return an upper bound on the members of the zip archive in data (zipfile reads no more entries than this)."""
    return data.count(_CENTRAL)
