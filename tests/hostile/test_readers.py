"""Issue 41's readers, in process: GGUF headers checked before transformers' reader (counts, sizes, nesting, the
architecture's numbers against config.json's bounds, the tensors against the file and ATTENTION_LENS_MODEL_MB); model
folders bounded by the machine's memory budget; regular files only (FIFOs, devices, links out of a folder); long
texts read as a bounded prefix, cut with a note."""

from __future__ import annotations

import os
import re
import time
import tracemalloc

import pytest

from lens_testing import crafted
from models import gguf
from models.errors import AttnVizError, BudgetError, InputError, ModelLoadError
from models.files import folder_file, read_text_prefix, read_user_file
from models.settings import check_model_shape

SECONDS, PEAK = 10, 64 << 20  # a header check reads a few kB: far below, a hang or an allocation shows


@pytest.fixture(scope="module")
def gguf_files(tmp_path_factory):
    return crafted.gguf_cases(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="module")
def small_budget_files(tmp_path_factory):
    return crafted.small_budget_cases(tmp_path_factory.mktemp("gguf-small"))


def _check(path) -> str:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        gguf.check_header(path)
        return ""
    except AttnVizError as err:
        message = str(err)
        assert isinstance(err, (ModelLoadError, InputError)) and "\n" not in message, message
        return message
    finally:
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert seconds < SECONDS and peak < PEAK, (seconds, peak)


@pytest.mark.parametrize("name", [
    "gguf-valid-small", "gguf-100000-layers", "gguf-vocab-1e9", "gguf-context-2^32", "gguf-2^21-nested-empty-arrays",
    "gguf-nan-rope-theta", "gguf-negative-rms-eps", "gguf-10^12-tensors", "gguf-string-past-the-end",
    "gguf-tensor-past-the-end", "gguf-version-99", "gguf-no-architecture",
])  # fmt: skip
def test_crafted_gguf_headers_are_refused_in_one_line(gguf_files, name):
    path, expect = gguf_files[name]
    message = _check(path)
    if not expect:
        assert message == "", message
    else:
        assert message.startswith(path.name) and re.search(expect, message), message


@pytest.mark.parametrize(
    "name",
    [
        "gguf-header over ATTENTION_LENS_GGUF_HEADER_MB",
        "gguf-tensors over ATTENTION_LENS_MODEL_MB",
        "gguf-metadata over ATTENTION_LENS_GGUF_ITEMS",
    ],
)
def test_gguf_budgets_are_asked_from_the_header(small_budget_files, name, monkeypatch):
    path, expect, env = small_budget_files[name]
    assert _check(path) == ""  # within the default budgets it passes: the budget, not the shape, refuses it
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    message = _check(path)
    assert re.search(expect, message), message


def test_the_bundled_gguf_passes_its_header_check():
    header = gguf.check_header(gguf.bundled_file())
    assert header.architecture == "llama" and header.n_tensors == 272


def test_the_architecture_gets_config_json_bounds(tmp_path):
    ok = crafted.gguf_file(tmp_path / "ok.gguf")
    gguf.check_header(ok)
    for over, expect in [
        ({"attention.head_count": 0}, r"n_heads is 0"),
        ({"attention.head_count_kv": 3}, r"4 query heads cannot share 3 key/value heads"),
        ({"embedding_length": 63}, r"d_model 63 is not a multiple of n_heads 4"),
        ({"rope.freq_base": float("inf")}, r"rope θ\) is inf"),
        ({"rope.freq_base": -1.0}, r"rope θ\) is -1"),
        ({"layer_norm_rms_epsilon": 0.0}, r"layer_norm_rms_epsilon is 0"),
        ({"layer_norm_rms_epsilon": float("nan")}, r"layer_norm_rms_epsilon is nan"),
        ({"block_count": (crafted.F32, 2.0)}, r"n_layers is 2\.0, not a whole number"),
    ]:
        meta = crafted.llama_meta(**over)
        with pytest.raises((ModelLoadError, BudgetError), match=expect):
            gguf.check_header(crafted.gguf_file(tmp_path / "x.gguf", meta))


def test_a_gguf_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "x.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ModelLoadError, match="not a regular file"):
        gguf.check_header(fifo)


# ---- model folders: the machine's memory budget ------------------------------------------------------------------


def test_a_model_within_the_parameter_bound_but_over_the_memory_budget_is_refused(monkeypatch):
    c = crafted.BERT_HUGE_IN_BOUNDS
    shape = dict(
        n_layers=c["num_hidden_layers"],
        n_heads=c["num_attention_heads"],
        d_model=c["hidden_size"],
        d_ff=c["intermediate_size"],
        vocab_size=c["vocab_size"],
        max_positions=c["max_position_embeddings"],
    )
    with pytest.raises(BudgetError, match=r"3\.35 billion parameters: loading them in float32 needs 12,773 MB; the "
                       r"budget ATTENTION_LENS_MODEL_MB allows 8,192 MB"):  # fmt: skip
        check_model_shape(**shape)
    monkeypatch.setenv("ATTENTION_LENS_MODEL_MB", "13000")
    check_model_shape(**shape)  # the budget is the bound: raised, the same folder passes


def test_bert_huge_in_bounds_is_refused_before_any_weight(tmp_path):
    from models.weights import load_model

    folder = crafted.model_folder(tmp_path / "bert-huge-in-bounds", crafted.BERT_HUGE_IN_BOUNDS)
    tracemalloc.start()
    try:
        with pytest.raises(BudgetError, match="ATTENTION_LENS_MODEL_MB"):
            load_model(str(folder))
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < PEAK


# ---- files: regular files only ------------------------------------------------------------------------------------


def test_fifos_devices_and_folders_are_refused_before_a_read(tmp_path):
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero", tmp_path):
        with pytest.raises(InputError, match=r"not a regular file|a folder"):
            read_user_file(path, "the text file")
        with pytest.raises(InputError, match=r"not a regular file|a folder"):
            read_text_prefix(path, "the text file", 100)


def test_the_training_text_goes_through_the_regular_file_check(tmp_path, capsys):
    from models.cli import main

    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    assert main(["train", "--task", "text", "--text-file", str(fifo), "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: cannot read the training text {fifo}: it is not a regular file (a device, FIFO or socket)"


def test_a_model_folder_reads_only_its_own_regular_files(tmp_path):
    folder = crafted.model_folder(tmp_path / "m", {"model_type": "bert"})
    assert folder_file(folder, "config.json") == folder / "config.json"
    assert folder_file(folder, "missing.json") is None
    outside = tmp_path / "secret.json"
    outside.write_text("{}")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(outside)
    with pytest.raises(InputError, match="links out of its folder"):
        folder_file(folder, "config.json")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to("/dev/zero")
    with pytest.raises(InputError, match="links out of its folder"):
        folder_file(folder, "config.json")
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")
    with pytest.raises(InputError, match="not a regular file"):
        folder_file(folder, "config.json")
    inner = folder / "real.json"
    inner.write_text("{}")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(inner)
    assert folder_file(folder, "config.json") is not None  # a link inside the folder is its own file


def test_a_hugging_face_snapshot_may_link_into_its_blobs(tmp_path):
    repo = tmp_path / "models--x--y"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc").write_text("{}")
    snap = repo / "snapshots" / "rev"
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to("../../blobs/abc")
    assert folder_file(snap, "config.json") == snap / "config.json"


# ---- long texts: a bounded prefix, one pass ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", crafted.TEXT_KINDS)
def test_a_long_text_file_is_read_as_a_bounded_prefix(tmp_path, kind):
    text = crafted.long_text(kind, 50_000)
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    whole = read_text_prefix(path, "the text file", 100_000)
    assert whole.text == text and not whole.cut
    part = read_text_prefix(path, "the text file", 1000)
    assert part.text == text[:1000] and part.cut and part.read == len(text[:1000].encode())
    assert "its first 1,000 characters" in part.note("the text file", 1000)


def test_a_50_mb_file_costs_what_its_prefix_costs(tmp_path):
    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        f.write("漢字".encode() * ((50 << 20) // 6))
    tracemalloc.start()
    try:
        part = read_text_prefix(path, "the text file", 10_000)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert len(part.text) == 10_000 and part.cut and peak < 1 << 20


def test_a_character_cut_by_the_prefix_is_dropped_but_bad_bytes_are_refused(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("é".encode() * 10)  # 20 bytes; 3 characters read as at most 16 bytes
    assert read_text_prefix(path, "the text file", 3).text == "ééé"
    path.write_bytes(b"abc\xff" + b"d" * 100)
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 3\)"):
        read_text_prefix(path, "the text file", 10)


@pytest.mark.parametrize(
    ("model_type", "field", "value", "message"),
    [
        ("llama", "rope_theta", float("nan"), r"rope_theta is nan; it must be finite and > 0"),
        ("llama", "rope_theta", -1.0, r"rope_theta is -1"),
        ("llama", "rms_norm_eps", -1e-5, r"rms_norm_eps is -1e-05; it must be finite and > 0 and < 1"),
        ("llama", "num_attention_heads", 0, r"n_heads is 0"),
        ("bert", "layer_norm_eps", float("inf"), r"layer_norm_eps is inf"),
        ("gpt2", "layer_norm_epsilon", 0.0, r"layer_norm_epsilon is 0"),
    ],
)
def test_config_json_floats_get_the_bounds_sizes_get(model_type, field, value, message):
    from models import families

    small = {
        "bert": dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
        "gpt2": dict(vocab_size=100, n_embd=64, n_layer=2, n_head=4),
        "llama": dict(
            vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128
        ),
    }[model_type]
    hf = {"model_type": model_type, **small, field: value}
    with pytest.raises(ModelLoadError, match=message):
        families.family(model_type).config.from_hf(hf)
