"""Issue 41's crafted inputs, written on demand: GGUF headers that declare too much, model folders that fit the
parameter bound but not the machine, long texts of every kind, and odd option spellings. Shared by
tests/hostile/test_readers.py, tests/hostile/test_fuzz_readers.py, lens_testing/hostile_cases.py and bench/hostile.py
(the replay).

GGUF files are written by `gguf_file` from plain Python (the spec: magic, version, counts, metadata key/type/value,
tensor infos, aligned data); the largest are sparse (their data is a hole), so a "24 GB" file costs nothing on disk.
"""

from __future__ import annotations

import json
import math
import random
import struct
from pathlib import Path
from typing import Any

# ---- GGUF -------------------------------------------------------------------------------------------------------

U32, I32, F32, BOOL, STR, ARR, U64, F64 = 4, 5, 6, 7, 8, 9, 10, 12
_PACK = {U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q", F64: "<d"}


def _string(b: bytes | str) -> bytes:
    raw = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(raw)) + raw


def _value(vtype: int, value: Any) -> bytes:
    if vtype in _PACK:
        return struct.pack(_PACK[vtype], value)
    if vtype == STR:
        return _string(value)
    item, items = value  # (item type, list of values)
    return struct.pack("<IQ", item, len(items)) + b"".join(_value(item, v) for v in items)


def llama_meta(**over: Any) -> list[tuple[str, int, Any]]:
    """A small Llama's metadata (2 layers, 4 heads, width 64, vocabulary 32), with `over` replacing values by key
    suffix (block_count=100000) or adding keys (a (type, value) pair)."""
    meta: dict[str, tuple[int, Any]] = {
        "general.architecture": (STR, "llama"),
        "llama.block_count": (U32, 2),
        "llama.context_length": (U32, 128),
        "llama.embedding_length": (U32, 64),
        "llama.feed_forward_length": (U32, 128),
        "llama.attention.head_count": (U32, 4),
        "llama.attention.head_count_kv": (U32, 2),
        "llama.rope.freq_base": (F32, 10000.0),
        "llama.attention.layer_norm_rms_epsilon": (F32, 1e-5),
        "tokenizer.ggml.model": (STR, "gpt2"),
        "tokenizer.ggml.tokens": (ARR, (STR, [f"t{i}" for i in range(32)])),
    }
    for key, value in over.items():
        full = next((k for k in meta if k.endswith("." + key)), key)
        meta[full] = value if isinstance(value, tuple) else (meta[full][0], value)
    return [(k, t, v) for k, (t, v) in meta.items()]


def llama_tensors(n_layers: int = 2, d: int = 64, vocab: int = 32) -> list[tuple[str, list[int], int]]:
    """(name, GGUF shape, GGML type) of the small Llama's tensors, in F32 (type 0)."""
    out = [("token_embd.weight", [d, vocab], 0), ("output_norm.weight", [d], 0)]
    for i in range(n_layers):
        out += [(f"blk.{i}.attn_q.weight", [d, d], 0), (f"blk.{i}.attn_norm.weight", [d], 0)]
    return out


def gguf_file(
    path: Path,
    meta: list[tuple[str, int, Any]] | None = None,
    tensors: list[tuple[str, list[int], int]] | None = None,
    *,
    version: int = 3,
    n_tensors: int | None = None,
    n_kv: int | None = None,
    data: bool = True,
    raw_meta: bytes = b"",
) -> Path:
    """Write a GGUF file; the tensors' data is zeros (a hole when sparse: data=True writes the right size by seek)."""
    meta = llama_meta() if meta is None else meta
    tensors = llama_tensors() if tensors is None else tensors
    head = b"GGUF" + struct.pack("<I", version)
    head += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors, len(meta) if n_kv is None else n_kv)
    body = b"".join(_string(k) + struct.pack("<I", t) + _value(t, v) for k, t, v in meta) + raw_meta
    offset, infos = 0, b""
    sizes = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34)}
    for name, shape, ttype in tensors:
        block, nbytes = sizes.get(ttype, (1, 4))
        infos += _string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", n) for n in shape)
        infos += struct.pack("<IQ", ttype, offset)
        offset += -(-(math.prod(shape) // block * nbytes) // 32) * 32
    header = head + body + infos
    start = -(-len(header) // 32) * 32
    with open(path, "wb") as f:
        f.write(header + b"\0" * (start - len(header)))
        if data and offset:
            f.seek(start + offset - 1)
            f.write(b"\0")
    return path


def gguf_cases(folder: Path, big: bool = False) -> dict[str, tuple[Path, str]]:
    """Write the issue's crafted GGUF files; return name → (path, regular expression of the refusal).

    big: also the two large ones (a 256 MB header made of holes; three 2³¹-element F32 tensors, 24 GB sparse),
    which the bench replays; the tests read them under smaller budgets (`small_budget_cases`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    cases: dict[str, tuple[Path, str]] = {
        "gguf-valid-small": (gguf_file(folder / "valid.gguf"), ""),
        "gguf-100000-layers": (
            gguf_file(folder / "layers.gguf", llama_meta(block_count=100_000)),
            r"the GGUF header: n_layers is 100000; a model here has 1 to 128",
        ),
        "gguf-vocab-1e9": (
            gguf_file(folder / "vocab.gguf", llama_meta(**{"llama.vocab_size": (U32, 10**9)})),
            r"vocab_size is 1000000000; a model here has 1 to 1,000,000",
        ),
        "gguf-context-2^32": (
            gguf_file(folder / "context.gguf", llama_meta(context_length=(U64, 2**32))),
            r"max_positions is 4294967296",
        ),
        "gguf-2^21-nested-empty-arrays": (
            gguf_file(
                folder / "nested.gguf",
                n_kv=len(llama_meta()) + 1,
                raw_meta=_string("x.nested")
                + struct.pack("<IIQ", ARR, ARR, 2**21)
                + struct.pack("<IQ", U32, 0) * 2**21,
            ),
            r"holds 2,097,152 arrays; an array of arrays here has at most 4,096",
        ),
        "gguf-nan-rope-theta": (
            gguf_file(folder / "theta.gguf", llama_meta(**{"rope.freq_base": float("nan")})),
            r"rope\.freq_base \(rope θ\) is nan; it must be finite and > 0",
        ),
        "gguf-negative-rms-eps": (
            gguf_file(folder / "eps.gguf", llama_meta(layer_norm_rms_epsilon=-1e-5)),
            r"layer_norm_rms_epsilon is -1e-05; it must be > 0",
        ),
        "gguf-10^12-tensors": (
            gguf_file(folder / "count.gguf", n_tensors=10**12),
            r"declares 1,000,000,000,000 tensors",
        ),
        "gguf-string-past-the-end": (
            gguf_file(
                folder / "string.gguf",
                tensors=[],
                raw_meta=_string("x.big") + struct.pack("<IQ", STR, 1000) + b"abc",
                n_kv=len(llama_meta()) + 1,
            ),
            r"'x\.big' runs past the end of the file",
        ),
        "gguf-tensor-past-the-end": (
            gguf_file(folder / "short.gguf", data=False),
            r"lies past the end of the file",
        ),
        "gguf-version-99": (gguf_file(folder / "version.gguf", version=99), r"GGUF version 99"),
        "gguf-no-architecture": (
            gguf_file(folder / "noarch.gguf", [m for m in llama_meta() if m[0] != "general.architecture"]),
            r"declares no general\.architecture",
        ),
    }
    if big:
        cases.update(big_gguf_cases(folder))
    return cases


def _sparse_strings(path: Path, n: int, each: int) -> Path:
    """A GGUF whose metadata is n strings of `each` zero bytes (holes): a header of n · each bytes."""
    meta = llama_meta()
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta) + n)
    head += b"".join(_string(k) + struct.pack("<I", t) + _value(t, v) for k, t, v in meta)
    with open(path, "wb") as f:
        f.write(head)
        for i in range(n):
            f.write(_string(f"x.s{i}") + struct.pack("<IQ", STR, each))
            f.seek(each, 1)
        f.write(b"\0")
    return path


def big_gguf_cases(folder: Path) -> dict[str, tuple[Path, str]]:
    three = [(f"blk.0.t{i}.weight", [2**16, 2**15], 0) for i in range(3)]  # 2³¹ elements each, F32: 8 GiB
    return {
        "gguf-256MB-header": (
            _sparse_strings(folder / "header.gguf", 16, 16 << 20),
            r"ATTENTION_LENS_GGUF_HEADER_MB allows 64 MB",
        ),
        "gguf-three-2^31-F32-tensors (24 GB sparse)": (
            gguf_file(folder / "tensors24.gguf", tensors=three),
            r"ATTENTION_LENS_MODEL_MB allows",
        ),
    }


def small_budget_cases(folder: Path) -> dict[str, tuple[Path, str, dict[str, str]]]:
    """The large cases at test size: the same checks, under budgets a test can afford to exceed."""
    three = [(f"blk.0.t{i}.weight", [2**10, 2**10], 0) for i in range(3)]  # 12 MB sparse
    return {
        "gguf-header over ATTENTION_LENS_GGUF_HEADER_MB": (
            _sparse_strings(folder / "header-small.gguf", 3, 1 << 20),
            r"ATTENTION_LENS_GGUF_HEADER_MB allows 2 MB",
            {"ATTENTION_LENS_GGUF_HEADER_MB": "2"},
        ),
        "gguf-tensors over ATTENTION_LENS_MODEL_MB": (
            gguf_file(folder / "tensors-small.gguf", tensors=three),
            r"tensor list describes about .* billion parameters: loading them in float32 needs 12 MB; the budget "
            r"ATTENTION_LENS_MODEL_MB allows 8 MB",
            {"ATTENTION_LENS_MODEL_MB": "8"},
        ),
        "gguf-metadata over ATTENTION_LENS_GGUF_ITEMS": (
            gguf_file(folder / "items.gguf", llama_meta(**{"x.many": (ARR, (U32, list(range(5000))))})),
            r"ATTENTION_LENS_GGUF_ITEMS allows 1,000 values",
            {"ATTENTION_LENS_GGUF_ITEMS": "1000"},
        ),
    }


# ---- model folders ----------------------------------------------------------------------------------------------

BERT_HUGE_IN_BOUNDS = dict(
    model_type="bert",
    vocab_size=30522,
    hidden_size=4096,
    num_hidden_layers=12,
    num_attention_heads=32,
    intermediate_size=16384,
    max_position_embeddings=512,
)  # 3.35 billion parameters: under MAX_PARAMS (4 billion), 12.8 GB of float32: over ATTENTION_LENS_MODEL_MB


def model_folder(path: Path, config: dict[str, Any] | str | bytes, weights: bool = True) -> Path:
    """A model folder: config.json (a dict, or raw text/bytes), an empty model.safetensors and a vocab.txt."""
    path.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(config) if isinstance(config, dict) else config
    (path / "config.json").write_bytes(raw.encode() if isinstance(raw, str) else raw)
    if weights:
        (path / "model.safetensors").write_bytes(b"")
    (path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    return path


# ---- long texts -------------------------------------------------------------------------------------------------

TEXT_KINDS = ("words", "cjk", "nul", "zero-width", "combining", "rtl")


def long_text(kind: str, chars: int, seed: int = 0) -> str:
    """A text of `chars` characters of one kind (each ~1 token per 1–4 characters for the bundled models)."""
    rng = random.Random(seed)
    if kind == "words":
        words = "the cat sat on a mat by the river under mountains while people walk".split()
        out = " ".join(rng.choice(words) for _ in range(chars // 3))
    elif kind == "cjk":
        out = "".join(chr(0x4E00 + rng.randrange(20_000)) for _ in range(chars))
    elif kind == "nul":
        out = "a\x00b " * (chars // 4)
    elif kind == "zero-width":
        out = "a\u200bb\u200c" * (chars // 4)
    elif kind == "combining":
        out = ("e" + "\u0301\u0302\u0303") * (chars // 4)
    elif kind == "rtl":
        out = "\u202eabc\u202c def " * (chars // 10)
    else:
        raise ValueError(kind)
    return out[:chars]
