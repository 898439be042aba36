"""models.files.read_npy_header: the one reader of .npy headers (masks and attention files), judged before data."""

from __future__ import annotations

import io

import numpy as np
import pytest

from models.errors import InputError
from models.files import NpyHeader, NpyHeaderError, read_npy_header


def _npy(arr: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=True)
    return buf.getvalue()


def _header_only(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    """A .npy header declaring `shape` with no data after it: reading any data would hit EOF."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_a_good_header_is_read_and_the_stream_left_at_the_data(version):
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = io.BytesIO(_npy(arr, version))
    h = read_npy_header(f, max_bytes=arr.nbytes)  # exactly at the budget is allowed
    assert h == NpyHeader(version, (3, 4), np.dtype("<f4"))
    assert h.nbytes == 48
    np.testing.assert_array_equal(np.frombuffer(f.read(), dtype="<f4").reshape(3, 4), arr)


def _explode() -> None:
    raise AssertionError("pickled data was loaded")


class _Boom:
    def __reduce__(self):
        return (_explode, ())  # runs only if the array's pickle is loaded


def test_an_object_dtype_is_refused_without_unpickling():
    data = _npy(np.array([_Boom()], dtype=object))
    f = io.BytesIO(data)
    with pytest.raises(NpyHeaderError, match="Python objects, which need pickle") as info:
        read_npy_header(f)
    assert isinstance(info.value, InputError)
    assert info.value.reason == "objects" and info.value.header is not None
    assert info.value.header.dtype == np.dtype(object)
    assert f.tell() < len(data)  # stopped at the header: the pickle after it was never read


def test_a_declared_size_over_the_budget_is_refused_before_the_data_is_read():
    data = _header_only((10**6, 10**6))  # declares 4 TB, holds none of it
    f = io.BytesIO(data)
    with pytest.raises(NpyHeaderError, match="4,000,000,000,000 bytes, over the limit of 1,024") as info:
        read_npy_header(f, max_bytes=1024)
    assert info.value.reason == "size" and info.value.header is not None
    assert info.value.header.shape == (10**6, 10**6)
    assert f.tell() == len(data)  # only the header was consumed
    # Sizes are Python ints: a shape whose product wraps around in int64 (2**64 → 0) is still refused.
    with pytest.raises(NpyHeaderError, match="over the limit"):
        read_npy_header(io.BytesIO(_header_only((2**32, 2**32), "|u1")), max_bytes=1024)
    assert read_npy_header(io.BytesIO(data)).shape == (10**6, 10**6)  # no budget given: the header is returned


def test_unknown_versions_and_damaged_headers_are_refused_with_a_reason():
    data = bytearray(_npy(np.zeros(3, np.float32)))
    data[6:8] = bytes((4, 0))
    with pytest.raises(NpyHeaderError, match=r"unknown \.npy version \(4, 0\)") as info:
        read_npy_header(io.BytesIO(bytes(data)))
    assert info.value.reason == "version" and info.value.header is None


def _damaged_headers() -> dict[str, bytes]:
    good = _npy(np.zeros((2, 3), np.float32))
    end = good.index(b"\n")
    return {
        # numpy's parser fails on each of these with a different exception type
        "magic": b"not numpy at all",  # ValueError
        "cut in the header": good[:20],  # ValueError (EOF)
        "magic only": good[:8],  # ValueError (EOF in the length)
        "unbalanced": good[:10] + b"garbage!!" + good[19:],  # tokenize.TokenError
        "not a literal": good[:10] + b"{'descr': <f4}".ljust(end - 10) + good[end:],  # SyntaxError
    }


@pytest.mark.parametrize("what", list(_damaged_headers()))
def test_a_damaged_header_is_refused_as_damaged_whatever_numpy_raises(what):
    with pytest.raises(NpyHeaderError, match="damaged header") as info:
        read_npy_header(io.BytesIO(_damaged_headers()[what]))
    assert info.value.reason == "damaged" and info.value.header is None
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("what", list(_damaged_headers()))
def test_damaged_files_give_the_readers_own_errors(what):
    from models.attention_file import AttentionFileError
    from models.attention_file import read as read_attention
    from models.errors import MaskError
    from models.masks.sources import load_mask_bytes

    data = _damaged_headers()[what]
    with pytest.raises(AttentionFileError, match="not a readable .npy array: damaged header"):
        read_attention(data, name="maps.npy") if data[:6] == b"\x93NUMPY" else read_attention(_zip(data))
    with pytest.raises(MaskError, match="m.npy is not a readable .npy file"):
        load_mask_bytes(data, "m.npy")


def test_data_shorter_than_its_header_declares_is_damaged():
    from models.attention_file import AttentionFileError
    from models.attention_file import read as read_attention
    from models.errors import MaskError
    from models.masks.sources import load_mask_bytes

    maps = _npy(np.full((1, 1, 3, 3), 1 / 3, np.float32))[:-8]
    with pytest.raises(AttentionFileError, match="maps.npy is damaged: EOF"):
        read_attention(maps, name="maps.npy")
    with pytest.raises(AttentionFileError, match="maps.npz is damaged: attentions: EOF"):
        read_attention(_zip(maps), name="maps.npz")
    with pytest.raises(MaskError, match="m.npy is damaged: EOF"):
        load_mask_bytes(_npy(np.ones((3, 3), bool))[:-4], "m.npy")


def _zip(member: bytes) -> bytes:
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("attentions.npy", member)
    return out.getvalue()
