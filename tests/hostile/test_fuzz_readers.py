"""Fuzzing issue 41's readers (hypothesis, seeded and bounded like tests/hostile/test_fuzz.py): the GGUF header
check, a model folder's config.json, and the long-text cut. The properties: a GGUF header is accepted or refused
with one line (ModelLoadError or an InputError such as a budget), within hypothesis's deadline and 64 MB traced; a
config.json gives a config within the bounds or one line; a text file's prefix is exactly the text's first
characters, and the cut at the model's positions keeps exactly the tokens the whole text would have kept.

    FUZZ_EXAMPLES=5000 python -m pytest -q tests/hostile/test_fuzz_readers.py     # a longer hunt, fresh examples
"""

from __future__ import annotations

import json
import math
import os
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lens_testing import crafted
from models import families, gguf
from models.cli.common import fit_to_positions
from models.config import read_config_json
from models.errors import AttnVizError, InputError, ModelLoadError
from models.files import read_text_prefix
from models.settings import CONFIG_BOUNDS, MAX_PARAMS

LONG_HUNT = int(os.environ.get("FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=LONG_HUNT or 100,
    derandomize=not LONG_HUNT,
    database=None,
    deadline=10_000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
PEAK = 64 << 20


def _one_line(err: Exception) -> None:
    assert "\n" not in str(err) and str(err).strip(), repr(str(err))


# ---- GGUF headers -------------------------------------------------------------------------------------------------


def _header(path: Path) -> None:
    tracemalloc.start()
    try:
        gguf.check_header(path)
    except (ModelLoadError, InputError) as err:
        _one_line(err)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < PEAK, f"{peak / 2**20:.0f} MB traced"


@pytest.fixture(scope="module")
def valid_gguf(tmp_path_factory) -> bytes:
    return crafted.gguf_file(tmp_path_factory.mktemp("g") / "v.gguf").read_bytes()


@FUZZ
@given(data=st.data())
def test_mutated_gguf_headers(valid_gguf, tmp_path, data):
    raw = bytearray(valid_gguf)
    head = 2048  # the header (metadata, tensor infos) lies in the first ~2 kB of the small file
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, head))
        op = data.draw(st.sampled_from(["flip", "int", "cut", "insert"]))
        if op == "flip":
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "int":
            value = data.draw(st.sampled_from([0, 1, 9, 2**31, 2**32 - 1, 2**63, 2**64 - 1, 10**12]))
            raw[at : at + 8] = value.to_bytes(8, "little")
        elif op == "cut":
            del raw[at : at + data.draw(st.integers(1, 64))]
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    path = tmp_path / "m.gguf"
    path.write_bytes(bytes(raw))
    _header(path)


VALUES = st.one_of(
    st.tuples(st.just(crafted.U32), st.integers(0, 2**32 - 1)),
    st.tuples(st.just(crafted.U64), st.integers(0, 2**64 - 1)),
    st.tuples(st.just(crafted.I32), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just(crafted.F32), st.floats(width=32)),
    st.tuples(st.just(crafted.F64), st.floats()),
    st.tuples(st.just(crafted.BOOL), st.booleans()),
    st.tuples(st.just(crafted.STR), st.text(max_size=8)),
    st.tuples(st.just(crafted.ARR), st.tuples(st.just(crafted.U32), st.lists(st.integers(0, 9), max_size=4))),
)
KEYS = st.sampled_from([f"llama.{k}" for k in gguf.ARCH_KEYS] + ["llama.rope.freq_base",
                        "llama.attention.layer_norm_rms_epsilon", "general.alignment", "tokenizer.ggml.tokens"])  # fmt: skip


@FUZZ
@given(over=st.dictionaries(KEYS, VALUES, max_size=5), tensors=st.integers(0, 3))
def test_random_architecture_numbers(tmp_path, over, tensors):
    meta = [m for m in crafted.llama_meta() if m[0] not in over] + [(k, t, v) for k, (t, v) in over.items()]
    path = crafted.gguf_file(tmp_path / "a.gguf", meta, crafted.llama_tensors()[: tensors * 2])
    _header(path)


# ---- config folders --------------------------------------------------------------------------------------------

NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.text(max_size=6), st.lists(st.integers(0, 5), max_size=3),
)  # fmt: skip
FIELDS = st.sampled_from(
    ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
     "max_position_embeddings", "num_key_value_heads", "head_dim", "rope_theta", "rms_norm_eps", "n_embd", "n_layer",
     "n_head", "n_inner", "n_positions", "type_vocab_size", "sliding_window", "rope_scaling", "layer_types",
     "layer_norm_eps", "layer_norm_epsilon"]
)  # fmt: skip
SMALL = {
    "bert": dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
    "gpt2": dict(vocab_size=100, n_embd=64, n_layer=2, n_head=4),
    "llama": dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
}


@FUZZ
@given(st.sampled_from(sorted(SMALL)), st.dictionaries(FIELDS, NUMBERS, max_size=5))
def test_random_config_json(tmp_path, model_type, fields):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type, **SMALL[model_type], **fields}))
    tracemalloc.start()
    try:
        hf = read_config_json(path)
        cfg = families.family(hf.get("model_type")).config.from_hf(hf)
    except AttnVizError as err:
        _one_line(err)
        return
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < PEAK
    for name in ("n_layers", "n_heads", "d_model", "d_ff", "vocab_size", "max_positions"):
        lo, hi = CONFIG_BOUNDS[name]
        assert lo <= getattr(cfg, name) <= hi, (name, getattr(cfg, name))
    assert cfg.n_layers * cfg.d_model * cfg.d_model < MAX_PARAMS
    for name in ("rope_theta", "rms_norm_eps", "layer_norm_eps"):  # finite and positive, as the bounds say
        if hasattr(cfg, name):
            assert math.isfinite(getattr(cfg, name)) and getattr(cfg, name) > 0, (name, getattr(cfg, name))


@FUZZ
@given(st.binary(max_size=256) | st.sampled_from([b"[]", b"1e999", b'{"a": NaN}', b"[" * 10_000, b'{"a":' * 5000]))
def test_random_config_bytes(tmp_path, raw):
    path = tmp_path / "config.json"
    path.write_bytes(raw)
    try:
        hf = read_config_json(path)
        families.family(hf.get("model_type")).config.from_hf(hf)
    except AttnVizError as err:
        _one_line(err)


# ---- the long-text cut -------------------------------------------------------------------------------------------

ALPHABET = st.sampled_from(
    list("ab cd.,\n") + ["\x00", "\u200b", "\u200c", "\u0301", "\u202e", "\u202c", "漢", "字", "é", "🙂", "\t", "ﬁ"]
)


@pytest.fixture(scope="module")
def tokenizer():
    from models.loading import load_tokenizer
    from models.weights import bundled_model_dir

    return load_tokenizer(bundled_model_dir())


@FUZZ
@given(text=st.lists(ALPHABET, max_size=400).map("".join), limit=st.integers(1, 300))
def test_a_text_prefix_is_the_texts_first_characters(tmp_path, text, limit):
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    prefix = read_text_prefix(path, "the text file", limit)
    assert prefix.text == text[:limit] and prefix.cut == (len(text) > limit)


@FUZZ
@given(text=st.lists(ALPHABET | st.sampled_from(["word ", "the ", "rivers "]), max_size=600).map("".join),
       positions=st.integers(4, 64))  # fmt: skip
def test_the_cut_keeps_the_tokens_the_whole_text_keeps(tokenizer, text, positions, monkeypatch):
    monkeypatch.setattr("models.cli.common.PREFIX_TOKENS", 1)  # prefixes small enough to be tried here
    enc = SimpleNamespace(tokenizer=tokenizer, max_tokens=positions)
    cut = fit_to_positions(enc, text)
    assert text.startswith(cut)
    whole = tokenizer(text, add_special_tokens=False)["input_ids"]
    kept = tokenizer(cut, add_special_tokens=False)["input_ids"]
    assert kept[:positions] == whole[:positions]


def test_the_cut_never_tokenizes_a_long_text_whole(tokenizer):
    seen = []

    class Counting:
        is_fast = True

        def __call__(self, text, **kw):
            seen.append(len(text))
            return tokenizer(text, **kw)

    for kind in crafted.TEXT_KINDS:
        seen.clear()
        text = crafted.long_text(kind, 400_000)
        cut = fit_to_positions(SimpleNamespace(tokenizer=Counting(), max_tokens=512), text)
        assert max(seen, default=0) <= 4 * 16 * 512 * 4, (kind, seen)  # at most a few prefixes, never the whole
        if kind in ("words", "cjk", "rtl"):
            assert len(cut) < len(text), kind
