"""The crafted attention files of issue 26 (and round one's), as small files a regression test reads.

    python -m lens_testing.hostile_corpus        # rewrites tests/hostile/corpus/ and its manifest.json

Each case is (file name, bytes, what must happen): "read" (the maps open) or a regular expression the one-line
refusal must match (it names the field and the limit). Zips are written with a fixed date, so every file but the
torch ones (torch.save writes a fresh serialization id) comes out byte for byte the same on every run.
"""

from __future__ import annotations

import io
import json
import struct
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FOLDER = Path(__file__).resolve().parents[1] / "tests" / "hostile" / "corpus"  # the committed files
MANIFEST = FOLDER / "manifest.json"
READ = "read"
TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]


@dataclass(frozen=True)
class Crafted:
    name: str  # the file name (its suffix picks the reader for torch files)
    make: Callable[[], bytes]
    expect: str  # READ, or a regular expression the refusal must match


def maps(*shape: int, seed: int = 0) -> np.ndarray:
    """Return softmax-normalised random maps of `shape` (last axis = keys), float32."""
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32) * 3
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


REF = maps(2, 3, 5, 5)


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(a), allow_pickle=False)
    return buf.getvalue()


def npy_header(shape: tuple, descr: str = "<f4", data: bytes = b"\0" * 16, version: tuple = (1, 0)) -> bytes:
    """A .npy whose header declares `shape` and `descr` over `data` (which may be far shorter)."""
    buf = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    if version == (1, 0):
        np.lib.format.write_array_header_1_0(buf, header)
    else:
        np.lib.format.write_array_header_2_0(buf, header)
    return buf.getvalue() + data


def zipped(members: dict[str, bytes], deflate: bool = True) -> bytes:
    """A zip of members with a fixed date: the same bytes every run."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            z.writestr(info, data)
    return buf.getvalue()


def npz(**arrays: np.ndarray) -> bytes:
    return zipped({f"{k}.npy": npy(v) for k, v in arrays.items()})


def safetensors(header: dict, body: bytes = b"") -> bytes:
    """A safetensors file with this header (as given: it may lie) and body."""
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def st_tensor(a: np.ndarray, dtype: str = "F32", begin: int = 0) -> dict:
    return {"dtype": dtype, "shape": list(a.shape), "data_offsets": [begin, begin + a.nbytes]}


def st_good(tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> bytes:
    from safetensors.numpy import save

    return save(tensors, metadata=metadata)


def torch_file(obj: object, legacy: bool = False) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


def _t(a: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))


def js(doc: object) -> bytes:
    return json.dumps(doc).encode()


def _sparse() -> bytes:

    return torch_file({"attentions": _t(REF).to_sparse(), "tokens": TOKENS})


def _strided_huge() -> bytes:
    import torch

    return torch_file({"attentions": torch.ones(1).expand(4096, 4096, 64, 64)})  # one float, 2.7·10¹¹ as a view


def _complex() -> bytes:
    import torch

    return torch_file(torch.ones(1, 1, 2, 2, dtype=torch.complex64))


def _shared_lists() -> bytes:
    inner = list(range(400))
    nest: list = inner
    for _ in range(4):  # 400⁵ entries when walked, a few kB pickled: one list shared at every level
        nest = [nest] * 400
    return torch_file({"attentions": _t(REF), "tokens": nest})


def _big_pickle() -> bytes:
    return torch_file({"attentions": _t(REF), "tokens": TOKENS, "junk": list(range(600_000))})


def _legacy_big() -> bytes:
    return torch_file({"attentions": _t(maps(8, 12, 128, 128))}, legacy=True)


def _evil_pickle() -> bytes:
    # A legacy-format pickle that would call os.system: weights_only refuses the global before anything runs.
    return b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."


def _many_members() -> bytes:
    return zipped({f"x{i}.npy": b"" for i in range(100)}, deflate=False)  # read with a 16-layer budget (ENV)


def _bad_crc() -> bytes:
    data = bytearray(zipped({"attentions.npy": npy(REF)}, deflate=False))
    at = data.index(b"\x93NUMPY") + 200
    data[at] ^= 0xFF  # one byte of the stored member: its CRC no longer matches
    return bytes(data)


def _bad_deflate() -> bytes:
    data = bytearray(zipped({"attentions.npy": npy(REF)}))
    start = data.index(b"attentions.npy") + len("attentions.npy")
    for i in range(start + 4, start + 40):
        data[i] = 0xFF
    return bytes(data)


def _zip_bomb() -> bytes:
    # One member that inflates to 32 MB of zeros, a header declaring as much: refused from the header.
    header = npy_header((1, 1, 2048, 4096), "<f4", b"")
    raw = header + b"\0" * (32 << 20)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo("attentions.npy", date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, raw, compresslevel=9)
    return buf.getvalue()


def _heads_4096() -> bytes:
    # Issue 26's 500-byte upload: one layer of 4,096 heads of 2 × 2, which sent the Heads page into all-pairs work.
    return npz(attentions=np.full((1, 4096, 2, 2), 0.5, np.float32), tokens=np.array(["a", "b"]))


def _heads_64x64() -> bytes:
    # The same 4,096 heads as 64 layers × 64: within the file budgets, so it opens; heads² work asks its own.
    return npz(attentions=maps(64, 64, 2, 2, seed=4), tokens=np.array(["a", "b"]))


def _heads_2048_json() -> bytes:
    return js({"attentions": np.full((32, 64, 2, 2), 0.5).tolist(), "tokens": ["a", "b"]})


def _big_json_number() -> bytes:
    return b'{"attentions": [[[[1' + b"0" * 5000 + b', 0.0]]]], "tokens": ["a"]}'


def _deep_json() -> bytes:
    return b"[" * 20_000 + b"]" * 20_000  # past Python's recursion limit


def _many_commas() -> bytes:
    return b"[" + b"0," * 40_000 + b"0]"  # read with a 1 MB upload budget (ENV): 32,768 values


def cases() -> list[Crafted]:
    """Return every crafted case."""
    one = maps(1, 1, 4, 4)  # one layer × one head: a real user's single-head model
    two = maps(2, 1, 4, 4)  # two layers × one head
    tok4 = ["a", "b", "c", "d"]
    good_st = st_tensor(REF)
    body = REF.tobytes()
    c = [
        # ---- valid small files (they must open; the app's pages use them too) ----
        Crafted("one-layer-one-head.npz", lambda: npz(attentions=one, tokens=np.array(tok4)), READ),
        Crafted("two-layers-one-head.npz", lambda: npz(attentions=two, tokens=np.array(tok4)), READ),
        Crafted("one-layer-one-head.json", lambda: js({"attentions": one.tolist(), "tokens": tok4}), READ),
        Crafted("one-head.npy", lambda: npy(one[0, 0]), READ),
        Crafted(
            "one-layer-one-head.safetensors", lambda: st_good({"attentions": one}, {"tokens": js(tok4).decode()}), READ
        ),
        Crafted("two-layers-one-head.pt", lambda: torch_file({"attentions": _t(two), "tokens": tok4}), READ),
        Crafted(
            "pair.npz",
            lambda: npz(attentions=REF, tokens=np.array(TOKENS), token_type_ids=np.array([0, 0, 0, 1, 1])),
            READ,
        ),
        Crafted("big-endian.npy", lambda: npy(REF.astype(">f4")), READ),
        Crafted(
            "nan-constant.json",
            lambda: b'{"attentions": [[[[NaN, 1.0], [0.5, 0.5]]]]}',
            r"NaN or infinite value\(s\), the first at layer 0, head 0, query 0, key 0",
        ),
        Crafted(
            "overflow-number.json",
            lambda: b'{"attentions": [[[[1e999, 0.0], [0.5, 0.5]]]]}',
            r"NaN or infinite.*layer 0, head 0, query 0, key 0",
        ),
        # ---- safetensors with a lying header: the safetensors library refuses it ----
        Crafted(
            "st-no-offsets.safetensors",
            lambda: safetensors({"attentions": {"dtype": "F32", "shape": [1, 1, 1, 1]}}, b"\0" * 4),
            r"not a readable safetensors file: .*missing field `data_offsets`",
        ),
        Crafted(
            "st-spec-int.safetensors",
            lambda: safetensors({"attentions": 5}),
            r"not a readable safetensors file: .*invalid type: integer",
        ),
        Crafted(
            "st-spec-list.safetensors", lambda: safetensors({"attentions": [1, 2]}), r"not a readable safetensors file"
        ),
        Crafted(
            "st-metadata-list.safetensors",
            lambda: safetensors({"__metadata__": [1], "attentions": good_st}, body),
            r"not a readable safetensors file: .*sequence, expected a map",
        ),
        Crafted(
            "st-metadata-int.safetensors",
            lambda: safetensors({"__metadata__": {"tokens": 5}, "attentions": good_st}, body),
            r"not a readable safetensors file: .*expected a string",
        ),
        Crafted(
            "st-negative-shape.safetensors",
            lambda: safetensors(
                {"attentions": {"dtype": "F32", "shape": [-2, -2], "data_offsets": [0, 16]}}, b"\0" * 16
            ),
            r"not a readable safetensors file: .*expected usize",
        ),
        Crafted(
            "st-overflowing-shape.safetensors",
            lambda: safetensors(
                {"attentions": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 16]}}, b"\0" * 16
            ),
            r"not a readable safetensors file: .*overflow",
        ),
        Crafted(
            "st-shape-lies.safetensors",
            lambda: safetensors(
                {"attentions": {"dtype": "F32", "shape": [10, 10, 1000, 1000], "data_offsets": [0, 16]}}, b"\0" * 16
            ),
            r"not a readable safetensors file",
        ),
        Crafted(
            "st-offsets-past-end.safetensors",
            lambda: safetensors({"attentions": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 4),
            r"not a readable safetensors file: .*not fully covered",
        ),
        Crafted(
            "st-overlapping.safetensors",
            lambda: safetensors({"attentions": good_st, "mask": good_st}, body),
            r"not a readable safetensors file: .*invalid offset",
        ),
        Crafted(
            "st-header-length-lies.safetensors",
            lambda: struct.pack("<Q", 10**9) + b"{}",
            r"not a readable safetensors file: header too large",
        ),
        Crafted(
            "st-header-not-json.safetensors",
            lambda: struct.pack("<Q", 6) + b"{abcde",
            r"not a readable safetensors file: .*key must be a string",
        ),
        Crafted(
            "st-unknown-dtype.safetensors",
            lambda: safetensors({"attentions": {"dtype": "XYZ", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
            r"not a readable safetensors file: .*unknown variant `XYZ`",
        ),
        Crafted(
            "st-float8.safetensors",
            lambda: safetensors(
                {"attentions": {"dtype": "F8_E4M3", "shape": [1, 1, 2, 2], "data_offsets": [0, 4]}}, b"\0" * 4
            ),
            r"tensor attentions has dtype F8_E4M3; attentions takes F64, F32",
        ),
        Crafted(
            "st-layer-99999999999.safetensors",
            lambda: safetensors({"attentions.99999999999": st_tensor(REF[0])}, REF[0].tobytes()),
            r"key attentions\.99999999999 names a layer past the budget ATTENTION_LENS_FILE_LAYERS, which allows 256 layers",
        ),
        Crafted(
            "st-layer-5000-nines.safetensors",
            lambda: safetensors({"attentions." + "9" * 5000: st_tensor(REF[0])}, REF[0].tobytes()),
            r"key attentions\.a 5,000-digit number names a layer past the budget ATTENTION_LENS_FILE_LAYERS",
        ),
        Crafted(
            "st-layers-gap.safetensors",
            lambda: st_good({"attentions.0": REF[0], "attentions.2": REF[1]}),
            r"up to attentions\.2 but attentions\.1 is missing",
        ),
        Crafted(
            "st-tokens-not-json.safetensors",
            lambda: st_good({"attentions": REF}, {"tokens": "[the cat"}),
            r"metadata 'tokens' is not valid JSON.*it must be a JSON list of strings",
        ),
        Crafted(
            "st-tokens-5000-digits.safetensors",
            lambda: st_good({"attentions": REF}, {"tokens": "[1" + "0" * 5000 + "]"}),
            r"metadata 'tokens' holds a JSON number of 5,001 characters; numbers here have at most 40",
        ),
        Crafted(
            "st-tokens-object.safetensors",
            lambda: st_good({"attentions": REF}, {"tokens": '{"a": 1}'}),
            r"metadata 'tokens' holds a JSON object with 1 keys; at most 0",
        ),
        Crafted(
            "st-tokens-numbers.safetensors",
            lambda: st_good({"attentions": REF}, {"tokens": "[1.5, 2, 3, 4, 5]"}),
            r"tokens\[0\] is float: tokens must be one flat list of strings",
        ),
        Crafted("st-bool-attention.safetensors", lambda: st_good({"attentions": REF > 0.5}), READ),
        Crafted(
            "st-nan.safetensors",
            lambda: st_good({"attentions": np.where(REF > 0.5, np.nan, REF).astype(np.float32)}),
            r"NaN or infinite value\(s\), the first at layer 0",
        ),
        Crafted(
            "st-type-ids-float.safetensors",
            lambda: st_good({"attentions": REF, "token_type_ids": np.array([0, 0, 0.5, 1, 1], np.float32)}),
            r"token_type_ids must be whole numbers 0…1023.*token_type_ids\[2\] is 0.5",
        ),
        Crafted(
            "st-type-ids-negative.safetensors",
            lambda: st_good({"attentions": REF, "token_type_ids": np.array([0, 0, -1, 1, 1], np.int64)}),
            r"token_type_ids must be whole numbers 0…1023.*token_type_ids\[2\] is -1",
        ),
        Crafted(
            "st-mask-shape.safetensors",
            lambda: st_good({"attentions": REF, "mask": np.ones((4, 4), bool)}),
            r"mask has shape \(4, 4\), the maps are \(q_pos, k_pos\) = \(5, 5\)",
        ),
        Crafted(
            "st-4096-heads.safetensors",
            lambda: st_good({"attentions": np.full((1, 4096, 2, 2), 0.5, np.float32)}),
            r"\(4096 heads per layer\) needs 4,096 heads; the budget ATTENTION_LENS_FILE_HEADS allows 256",
        ),
        Crafted(
            "st-bf16.safetensors",
            lambda: safetensors(
                {"attentions": {"dtype": "BF16", "shape": [1, 1, 2, 2], "data_offsets": [0, 8]}},
                np.array([0x3F00] * 4, "<u2").tobytes(),
            ),
            READ,
        ),
        # ---- JSON ----
        Crafted(
            "json-5000-digit-number.json",
            _big_json_number,
            r"holds a JSON number of 5,001 characters; numbers here have at most 40",
        ),
        Crafted(
            "json-5000-digit-float.json",
            lambda: b'{"attentions": [[[[0.' + b"1" * 5000 + b"]]]]}",
            r"JSON number of 5,002 characters",
        ),
        Crafted(
            "json-layer-99999999999.json",
            lambda: js({"attentions.99999999999": REF[0].tolist()}),
            r"key attentions\.99999999999 names a layer past the budget ATTENTION_LENS_FILE_LAYERS",
        ),
        Crafted(
            "json-layer-5000-nines.json",
            lambda: js({"attentions." + "9" * 5000: REF[0].tolist()}),
            r"key attentions\.a 5,000-digit number names a layer past the budget",
        ),
        Crafted(
            "json-layer-superscript.json", lambda: js({"attentions.²": REF[0].tolist()}), r"holds no attention maps"
        ),
        Crafted(
            "json-layers-twice.json",
            lambda: js(
                {"attentions.1": REF[0].tolist(), "attentions.01": REF[1].tolist(), "attentions.0": REF[0].tolist()}
            ),
            r"both name layer 1",
        ),
        Crafted(
            "json-type-ids-strings.json",
            lambda: js(
                {"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "tokens": ["x", "y"], "token_type_ids": ["a", "b"]}
            ),
            r"token_type_ids must be whole numbers 0…1023.*token_type_ids\[0\] is a",
        ),
        Crafted(
            "json-type-ids-huge.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "token_type_ids": [0, 10**30]}),
            r"token_type_ids\[1\] is 1000000000000000000000000000000",
        ),
        Crafted(
            "json-type-ids-null.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "token_type_ids": [None, 0]}),
            r"token_type_ids\[0\] is None",
        ),
        Crafted(
            "json-type-ids-count.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "token_type_ids": [0, 0, 1]}),
            r"token_type_ids has 3 entries, the attention 2 positions",
        ),
        Crafted("json-deep.json", _deep_json, r"nested deeper than 8 levels"),
        Crafted(
            "json-nine-levels.json",
            lambda: b'{"attentions": [[[[[[[[[1.0]]]]]]]]]}',
            r"nested 10 levels deep; at most 8",
        ),
        Crafted("json-many-values.json", _many_commas, r"holds about 40,001 JSON values; at most 32,768 are read"),
        Crafted(
            "json-tokens-numbers.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "tokens": [None, 1]}),
            r"tokens\[0\] is NoneType",
        ),
        Crafted(
            "json-tokens-nested.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "tokens": [["a"], ["b"]]}),
            r"tokens\[0\] is a list",
        ),
        Crafted(
            "json-tokens-string.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "tokens": "ab"}),
            r"tokens must be a list of strings, got str",
        ),
        Crafted(
            "json-token-too-long.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "tokens": ["a" * 5000, "b"]}),
            r"tokens\[0\] has 5,000 characters; a token here has at most 1,000",
        ),
        Crafted(
            "json-tokens-count.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "tokens": ["a"]}),
            r"2 query positions, while the tokens number 1",
        ),
        Crafted(
            "json-attention-strings.json",
            lambda: js({"attentions": [[[["0.5", "0.5"]]]]}),
            r"holds <U3 values, not numbers",
        ),
        Crafted(
            "json-attention-ragged.json", lambda: b'{"attentions": [[[[1.0, 0.0], [1.0]]]]}', r"ragged or not numbers"
        ),
        Crafted("json-attention-objects.json", lambda: b'{"attentions": [[[{"a": 1}]]]}', r"ragged or not numbers"),
        Crafted(
            "json-attention-huge-int.json", lambda: js({"attentions": [[[[10**30, 0]]]]}), r"ragged or not numbers"
        ),
        Crafted("json-not-object.json", lambda: b'"attentions"', r"not an attention file"),
        Crafted("json-number.json", lambda: b"[1]", r"attention of shape \(1,\)"),
        Crafted("json-bad-utf8.json", lambda: b'{"attentions": "\xff"}', r"not valid JSON"),
        Crafted(
            "json-mask-string.json",
            lambda: js({"attentions": [[[[1.0, 0.0], [0.5, 0.5]]]], "mask": "all"}),
            r"mask must be a \(q_pos, k_pos\) array",
        ),
        Crafted(
            "json-many-keys.json",
            lambda: js({f"k{i}": 0 for i in range(500)}),
            r"JSON object with 500 keys; at most 272 are read",
        ),
        Crafted("json-2048-heads.json", _heads_2048_json, READ),
        Crafted(
            "json-layers-257.json",
            lambda: js({f"attentions.{i}": [[[1.0]]] for i in range(257)}),
            r"attentions\.256 names a layer past the budget",
        ),
        # ---- NPZ / NPY ----
        Crafted(
            "heads-4096.npz",
            _heads_4096,
            r"\(4096 heads per layer\) needs 4,096 heads; the budget ATTENTION_LENS_FILE_HEADS allows 256",
        ),
        Crafted("heads-64x64.npz", _heads_64x64, READ),
        Crafted(
            "heads-per-layer-300.npz",
            lambda: npz(attentions=np.full((1, 300, 2, 2), 0.5, np.float32)),
            r"300 heads per layer\) needs 300 heads; the budget ATTENTION_LENS_FILE_HEADS allows 256 heads",
        ),
        Crafted(
            "maps-8193.npz",
            lambda: npz(attentions=np.full((33, 250, 1, 1), 1.0, np.float32)),
            r"33 layers × 250 heads\) needs 8,250 maps; the budget ATTENTION_LENS_FILE_MAPS allows 8,192",
        ),
        Crafted(
            "positions-20000.npz",
            lambda: npz(attentions=np.full((1, 1, 1, 20_000), 1 / 20_000, np.float32)),
            r"\(1, 1, 1, 20000\): one of its axes needs 20,000 positions; the budget ATTENTION_LENS_FILE_POSITIONS allows 16,384",
        ),
        Crafted(
            "npz-layer-99999999999.npz",
            lambda: npz(**{"attentions.99999999999": REF[0]}),
            r"attentions\.99999999999 names a layer past the budget",
        ),
        Crafted(
            "npz-many-members.npz",
            _many_members,
            r"holds about 100 zip members; an attention file has at most 32 \(one per layer within ATTENTION_LENS_FILE_LAYERS = 16",
        ),
        Crafted(
            "npz-objects.npz",
            lambda: zipped({"attentions.npy": npy(REF), "tokens.npy": npy_header((5,), "|O")}),
            r"tokens holds Python objects, which need pickle",
        ),
        Crafted(
            "npz-tokens-U0.npz",
            lambda: zipped({"attentions.npy": npy(REF), "tokens.npy": npy_header((10**12,), "<U0", b"")}),
            r"tokens \(1000000000000,\): one of its axes needs 1,000,000,000,000 positions; the budget ATTENTION_LENS_FILE_POSITIONS",
        ),
        Crafted(
            "npz-complex.npz",
            lambda: npz(attentions=REF.astype(np.complex64)),
            r"holds complex values; attentions takes numbers",
        ),
        Crafted(
            "npz-datetime.npz",
            lambda: npz(attentions=np.zeros((1, 1, 2, 2), "datetime64[s]")),
            r"holds datetime values",
        ),
        Crafted(
            "npz-structured.npz",
            lambda: npz(attentions=np.zeros((1, 1, 2, 2), [("a", "<f4"), ("b", "<f4")])),
            r"holds structured values",
        ),
        Crafted(
            "npz-ndim-32.npz",
            lambda: zipped({"attentions.npy": npy_header((1,) * 32, "<f4", b"\0" * 4)}),
            r"has 32 dimensions; attentions has at most 5",
        ),
        Crafted(
            "npz-zero-and-huge.npz",
            lambda: zipped({"attentions.npy": npy_header((0, 10**18, 10**18, 2), "<f4", b"")}),
            r"one of its axes needs 1,000,000,000,000,000,000 positions; the budget ATTENTION_LENS_FILE_POSITIONS allows 16,384",
        ),
        Crafted(
            "npz-lying-header.npz",
            lambda: zipped({"attentions.npy": npy_header((10, 10, 1000, 1000))}),
            r"attentions, \(10, 10, 1000, 1000\) float32\) is 381 MB, over this server's limit of 256 MB",
        ),
        Crafted(
            "npz-short-data.npz",
            lambda: zipped({"attentions.npy": npy_header((1, 1, 4, 4), "<f4", b"\0" * 16)}),
            r"is damaged: attentions: EOF",
        ),
        Crafted(
            "npz-version-9.npz",
            lambda: zipped({"attentions.npy": b"\x93NUMPY\x09\x00" + b"\0" * 32}),
            r"unknown \.npy version",
        ),
        Crafted(
            "npz-damaged-header.npz",
            lambda: zipped({"attentions.npy": b"\x93NUMPY\x01\x00\x10\x00{'descr': <f4'}" + b"\0" * 8}),
            r"attentions is not a readable \.npy array",
        ),
        Crafted("npz-bad-crc.npz", _bad_crc, r"is damaged: attentions: .*CRC"),
        Crafted("npz-bad-deflate.npz", _bad_deflate, r"damaged|not a readable"),
        Crafted(
            "npz-bomb.npz",
            _zip_bomb,
            r"\(attentions, \(1, 1, 2048, 4096\) float32\) is 32 MB, over this server's limit of 8 MB",
        ),
        Crafted("npz-not-a-zip.npz", lambda: b"PK\x03\x04" + b"\0" * 100, r"not a readable zip file"),
        Crafted(
            "npz-type-ids-float.npz",
            lambda: npz(attentions=REF, token_type_ids=np.array([0, 0, 1.5, 1, 1])),
            r"token_type_ids\[2\] is 1.5",
        ),
        Crafted(
            "npz-type-ids-huge.npz",
            lambda: npz(attentions=REF, token_type_ids=np.array([0, 0, 2**40, 1, 1])),
            r"token_type_ids\[2\] is 1099511627776",
        ),
        Crafted(
            "npz-type-ids-strings.npz",
            lambda: npz(attentions=REF, token_type_ids=np.array(list("abcde"))),
            r"token_type_ids \(5,\) holds string values; token_type_ids takes whole numbers 0…1023",
        ),
        Crafted(
            "npz-tokens-2d.npz",
            lambda: npz(attentions=REF, tokens=np.array([TOKENS])),
            r"tokens \(1, 5\) has 2 dimensions; tokens has at most 1",
        ),
        Crafted(
            "npz-mask-strings.npz",
            lambda: npz(attentions=REF, mask=np.array([["a"] * 5] * 5)),
            r"mask \(5, 5\) holds string values; mask takes numbers",
        ),
        Crafted("npz-negative.npz", lambda: npz(attentions=REF - 0.1), r"negative value\(s\)"),
        Crafted(
            "npz-huge-weights.npz",
            lambda: npz(attentions=np.full((1, 1, 2, 2), 3e38, np.float32)),
            r"4 value\(s\) above 1, the first 3e\+38 at layer 0, head 0, query 0, key 0",
        ),
        Crafted("npy-lying-header.npy", lambda: npy_header((10**6, 10**6)), r"over this server's limit of 256 MB"),
        Crafted("npy-zero-d.npy", lambda: npy(np.array(1.0)), r"attention of shape \(\)"),
        Crafted("npy-fortran.npy", lambda: npy(np.asfortranarray(REF)), READ),
        Crafted("npy-int-maps.npy", lambda: npy(np.eye(3, dtype=np.int64)[None, None]), READ),
        # ---- torch ----
        Crafted(
            "torch-sparse.pt",
            _sparse,
            r"attentions is a sparse_coo tensor: save it dense|the attention is a sparse_coo tensor",
        ),
        Crafted(
            "torch-huge-view.pt", _strided_huge, r"would take 262144 MB as float32, over this server's limit of 256 MB"
        ),
        Crafted("torch-complex.pt", _complex, r"holds complex64 values; maps take float64"),
        Crafted("torch-shared-lists.pt", _shared_lists, r"holds more than 100,000 objects"),
        Crafted(
            "torch-big-pickle.pt",
            _big_pickle,
            r"its pickle is \d\.\d MB; a torch file of attention keeps at most 2 MB there",
        ),
        Crafted("torch-legacy-big.pt", _legacy_big, r"in torch's legacy format \(one pickle\), read up to 4 MB"),
        Crafted("torch-os-system.pt", _evil_pickle, r"weights_only=True; pickled objects are never run"),
        Crafted("torch-string.pt", lambda: torch_file("attentions"), r"attention of shape \(\)|not numbers"),
        Crafted(
            "torch-type-ids-strings.pt",
            lambda: torch_file({"attentions": _t(REF), "token_type_ids": ["a"] * 5}),
            r"token_type_ids\[0\] is a",
        ),
        Crafted(
            "torch-tokens-dict.pt",
            lambda: torch_file({"attentions": _t(REF), "tokens": {"a": 1}}),
            r"tokens must be a list of strings, got dict",
        ),
        Crafted(
            "torch-deep.pt",
            lambda: torch_file({"attentions": _t(REF), "x": [[[[[[[[[[1]]]]]]]]]]}),
            r"nests lists or dicts more than 7 levels deep",
        ),
        Crafted(
            "torch-4096-layers.pt",
            lambda: torch_file([_t(np.ones((1, 1, 1), np.float32))] * 4096),
            r"4096 per-layer arrays\) needs 4,096 layers; the budget ATTENTION_LENS_FILE_LAYERS allows 256",
        ),
        # ---- neither ----
        Crafted("random.bin", lambda: bytes(range(256)) * 4, r"could not be read as tensors"),
        Crafted("text.txt", lambda: b"hello there", r"not an attention file this app reads"),
        Crafted("empty.npz", lambda: b"", r"is empty"),
    ]
    return c


# A case's file is read under these settings: smaller budgets keep its file small while it goes over them.
ENV = {
    "npz-bomb.npz": {"ATTENTION_LENS_MAX_UPLOAD_MB": "8"},
    "json-many-values.json": {"ATTENTION_LENS_MAX_UPLOAD_MB": "1"},
    "npz-many-members.npz": {"ATTENTION_LENS_FILE_LAYERS": "16"},
}
SMALL = 100 * 1024  # files up to this size are kept in the repository; larger ones are built by the tests


def write(folder: Path = FOLDER) -> dict[str, str]:
    """Write every small case's file into folder with manifest.json ({name: expectation}); return the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest, built = {}, []
    for case in cases():
        data = case.make()
        manifest[case.name] = case.expect
        if len(data) <= SMALL:
            (folder / case.name).write_bytes(data)
        else:
            built.append(case.name)
    doc = {"cases": manifest, "env": ENV, "built_by_the_tests": built}
    MANIFEST.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def load() -> dict:
    """Return the committed manifest: {"cases": {file name: expectation}, "env": {file name: environment},
    "built_by_the_tests": [names of the cases too large to keep as files]}."""
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


if __name__ == "__main__":
    m = write()
    files = [n for n in m if (FOLDER / n).exists()]
    total = sum((FOLDER / n).stat().st_size for n in files)
    print(f"wrote {len(files)} of {len(m)} cases to {FOLDER} ({total / 1024:.0f} kB)", file=sys.stderr)
