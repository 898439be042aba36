"""Fuzzing the attention-file reader (hypothesis, seeded and bounded): mutated valid files of every format, files
built from random structure (JSON documents, safetensors headers, NPZ members, torch objects) and random bytes
behind each format's magic. The property: `read` returns maps or raises an InputError, one line, within the time
hypothesis allows an example and with less than 512 MB traced by tracemalloc (numpy's allocations included).

    FUZZ_EXAMPLES=5000 python -m pytest -q tests/hostile/test_fuzz.py     # a longer hunt with fresh examples
"""

from __future__ import annotations

import io
import json
import os
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lens_testing import hostile_corpus as corpus
from models.analysis.heads import analyse_maps
from models.attention_file import FIELDS, AttentionMaps, read
from models.errors import InputError

# CI runs 120 fixed examples per property; FUZZ_EXAMPLES=5000 runs that many fresh ones (a longer hunt).
LONG_HUNT = int(os.environ.get("FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=LONG_HUNT or 120,
    derandomize=not LONG_HUNT,  # the same examples on every run: a failure reproduces
    database=None,
    deadline=10_000,  # ms per example: far above the slowest legitimate read here (~50 ms), well below a hang
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PEAK = 512 << 20
SEEDS = {
    "a.npz": corpus.npz(
        attentions=corpus.REF, tokens=np.array(corpus.TOKENS), token_type_ids=np.array([0, 0, 0, 1, 1])
    ),
    "a.npy": corpus.npy(corpus.REF),
    "a.json": corpus.js(
        {"attentions": corpus.REF.round(3).tolist(), "tokens": corpus.TOKENS, "token_type_ids": [0] * 5}
    ),
    "a.safetensors": corpus.st_good(
        {"attentions.0": corpus.REF[0], "attentions.1": corpus.REF[1], "mask": np.ones((5, 5), bool)},
        {"tokens": json.dumps(corpus.TOKENS)},
    ),
    "a.pt": corpus.torch_file({"attentions": corpus._t(corpus.REF), "tokens": corpus.TOKENS}),
}


def outcome(data: bytes, name: str) -> AttentionMaps | InputError:
    """Read the bytes; return the maps or the InputError; anything else (and too much memory) fails the test.

    Maps that were read also go through what `stats --attentions` does with them: the report, and its JSON with
    no NaN or infinity (which json.dumps(allow_nan=False) would refuse with a traceback).
    """
    tracemalloc.start()
    try:
        maps = read(data, name=name)
        report = analyse_maps(maps.attentions, maps.q_tokens, maps.k_tokens, maps.token_type_ids, causal=maps.causal)
        json.dumps(report.to_json(), allow_nan=False)
        return maps
    except InputError as err:
        assert "\n" not in str(err) and str(err).strip(), repr(str(err))
        return err
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < PEAK, f"{peak / 2**20:.0f} MB traced reading {len(data)} bytes"


def test_every_seed_reads():
    for name, data in SEEDS.items():
        assert isinstance(outcome(data, name), AttentionMaps), name


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    """A valid file of one format with a few bytes flipped, overwritten, inserted, cut or repeated."""
    name = draw(st.sampled_from(sorted(SEEDS)))
    data = bytearray(SEEDS[name])
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "overwrite", "insert", "cut", "repeat", "int"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[at : at + len(chunk)] = chunk
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=32))
        elif op == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "repeat":
            data[at:at] = data[at : at + draw(st.integers(1, 64))] * draw(st.integers(2, 8))
        else:  # a little-endian integer where sizes and offsets live: 0, −1, 2³¹, 2⁶³…
            value = draw(st.sampled_from([0, 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, 10**12]))
            data[at : at + 8] = value.to_bytes(8, "little")
    return name, bytes(data)


@FUZZ
@given(mutated())
def test_mutated_valid_files(case):
    outcome(case[1], case[0])


@FUZZ
@given(
    st.sampled_from([b"\x93NUMPY", b"PK\x03\x04", b"{", b"[", b"\x80\x02", b"\x08\0\0\0\0\0\0\0{"]),
    st.binary(max_size=512),
)
def test_random_bytes_behind_each_magic(magic, tail):
    for name in ("x.npz", "x.pt", "x.safetensors"):
        outcome(magic + tail, name)


# ---- random structure ----------------------------------------------------------------------------

KEYS = st.sampled_from(
    [*FIELDS, "attentions.0", "attentions.1", "attentions.7", "attentions.99999999999", "__metadata__"]
)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none()
)
JSON_VALUES = st.recursive(
    st.one_of(NUMBERS, st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(KEYS, inner, max_size=6)),
    max_leaves=60,
)


@FUZZ
@given(st.dictionaries(KEYS, JSON_VALUES, max_size=6))
def test_random_json_documents(doc):
    outcome(json.dumps(doc).encode(), "x.json")


DTYPES = st.sampled_from(["F32", "F16", "BF16", "F64", "I64", "U8", "BOOL", "F8_E4M3", "C64", "XYZ", 5, None])
SHAPES = st.lists(st.integers(-3, 2**40), max_size=6) | st.just("x")
SPEC = st.fixed_dictionaries(
    {}, optional={"dtype": DTYPES, "shape": SHAPES, "data_offsets": st.lists(st.integers(-5, 2**40), max_size=3)}
)


@FUZZ
@given(st.dictionaries(KEYS, SPEC | JSON_VALUES, max_size=5), st.binary(max_size=256))
def test_random_safetensors_headers(header, body):
    raw = json.dumps(header).encode()
    outcome(struct.pack("<Q", len(raw)) + raw + body, "x.safetensors")


DESCRS = st.sampled_from(["<f4", ">f8", "|b1", "<i8", "<U3", "|S0", "<c8", "|O", "<M8[s]", "|V8", "<f2", "xx"])
NPY_SHAPES = st.lists(st.integers(0, 2**40), max_size=7)


@FUZZ
@given(st.dictionaries(KEYS, st.tuples(DESCRS, NPY_SHAPES, st.binary(max_size=128)), min_size=1, max_size=4))
def test_random_npz_members(members):
    files = {}
    for key, (descr, shape, data) in members.items():
        buf = io.BytesIO()
        header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}".encode()
        header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
        buf.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data)
        files[f"{key}.npy"] = buf.getvalue()
    outcome(corpus.zipped(files), "x.npz")


TORCH_LEAVES = st.one_of(
    NUMBERS,
    st.text(max_size=4),
    st.tuples(
        st.lists(st.integers(0, 5), min_size=0, max_size=5), st.sampled_from(["float32", "float16", "int64", "bool"])
    ),
)


def _torch_objects(x):
    import torch

    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], str):
        shape, dtype = x
        return torch.ones(tuple(shape), dtype=getattr(torch, dtype))
    if isinstance(x, list):
        return [_torch_objects(v) for v in x]
    if isinstance(x, dict):
        return {k: _torch_objects(v) for k, v in x.items()}
    return x


@FUZZ
@given(
    st.recursive(
        TORCH_LEAVES,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
        max_leaves=20,
    )
)
def test_random_torch_objects(obj):
    outcome(corpus.torch_file(_torch_objects(obj)), "x.pt")


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_prefix_of_a_valid_file(name):
    """Truncated anywhere (a download cut short): read or refused, never a traceback."""
    data = SEEDS[name]
    for end in sorted({*range(0, min(len(data), 64)), *range(64, len(data), max(1, len(data) // 97))}):
        outcome(data[:end], name)
