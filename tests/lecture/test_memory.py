"""The memory and parameter estimator: the tutorial's own numbers exactly, its formulas, the CLI, and a measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from models.bert import SelfAttention, SelfOutput
from models.cli import main
from models.config import BertConfig
from models.lecture import memory

ROOT = Path(__file__).resolve().parents[2]


# ---- the tutorial's examples (section 6), exactly ----------------------------------------------------


def test_tutorial_seq_512_fp16():
    assert memory.score_elements(2, 12, 512) == 6_291_456
    assert memory.score_bytes(2, 12, 512, "fp16") == 12_582_912
    assert memory.fmt_bytes(memory.score_bytes(2, 12, 512, "fp16")) == "12.6 MB"


def test_tutorial_seq_4096_fp16():
    assert memory.score_elements(2, 12, 4096) == 402_653_184
    assert memory.score_bytes(2, 12, 4096, "fp16") == 805_306_368
    assert memory.fmt_bytes(memory.score_bytes(2, 12, 4096, "fp16")) == "805 MB"


def test_tutorial_parameters_d_model_768():
    # "以 d_model=768 为例，参数约 236 万": 4·768² = 2,359,296 weights, + 4·768 biases
    assert memory.mha_params(768, bias=False) == 2_359_296
    assert memory.mha_params(768) == 2_362_368


def test_bytes_per_dtype_and_training():
    e = memory.score_elements(2, 12, 512)
    assert memory.score_bytes(2, 12, 512, "fp32") == 4 * e
    assert memory.score_bytes(2, 12, 512, "bf16") == 2 * e
    assert memory.score_bytes(2, 12, 512, "fp16", training=True) == 4 * e  # kept again for backward


def test_params_do_not_depend_on_the_number_of_heads():
    assert memory.mha_params(768, heads=1) == memory.mha_params(768, heads=12) == memory.mha_params(768, heads=64)


@pytest.mark.parametrize("d_model,heads", [(768, 12), (384, 12), (128, 4)])
def test_params_formula_counts_our_encoders_modules(d_model, heads):
    cfg = BertConfig(d_model=d_model, n_heads=heads)
    with torch.device("meta"):
        attn, out = SelfAttention(cfg), SelfOutput(cfg)
    counted = sum(p.numel() for m in (attn.query, attn.key, attn.value, out.dense) for p in m.parameters())
    assert counted == memory.mha_params(d_model, heads)


def test_score_elements_match_the_encoders_score_tensor(minilm):
    out = minilm.encode("Attention is all you need.", internals=True)
    assert out.scores[0].numel() == memory.score_elements(1, out.n_heads, out.seq)


def test_flash_kv_cache_and_gqa_formulas():
    # FlashAttention: no seq² tensor, one fp32 log-sum-exp per query row.
    assert memory.flash_bytes(2, 12, 4096) == 2 * 12 * 4096 * 4
    # KV cache: 2 · layers · batch · seq · heads_kv · d_k · bytes
    assert memory.kv_cache_bytes(12, 2, 512, 12, 64, "fp16") == 2 * 12 * 2 * 512 * 12 * 64 * 2
    mha = memory.kv_cache_bytes(32, 1, 4096, 32, 128, "bf16")
    assert memory.kv_cache_bytes(32, 1, 4096, 8, 128, "bf16") * 4 == mha  # GQA, 8 K/V heads for 32
    assert memory.kv_cache_bytes(32, 1, 4096, 1, 128, "bf16") * 32 == mha  # MQA
    # GQA shrinks W_k, W_v to d_model × heads_kv·d_k (and their biases); W_q, W_o stay.
    d, kv = 768, 4 * 64
    assert memory.mha_params(768, 12, 4) == 2 * d * d + 2 * d * kv + 2 * d + 2 * kv
    assert memory.mha_params(768, 12, 1) < memory.mha_params(768, 12, 4) < memory.mha_params(768, 12)


def test_estimate_gathers_everything():
    e = memory.estimate(2, 12, 512, 768, "fp16", layers=12, heads_kv=4)
    assert (e.score_elements, e.score_bytes, e.score_bytes_training) == (6_291_456, 12_582_912, 25_165_824)
    assert e.params == 2_362_368 and e.params_gqa == memory.mha_params(768, 12, 4)
    assert e.kv_cache_bytes_gqa * 3 == e.kv_cache_bytes
    assert memory.encoder_maps_bytes(12, 2, 12, 512) == 12 * 6_291_456 * 4


@pytest.mark.parametrize(
    "call",
    [
        lambda: memory.score_elements(0, 12, 512),
        lambda: memory.score_elements(2, -1, 512),
        lambda: memory.score_elements(2, 12, 2.5),
        lambda: memory.score_elements(True, 12, 512),
        lambda: memory.score_bytes(2, 12, 512, "fp8"),
        lambda: memory.mha_params(100, 12),
        lambda: memory.mha_params(768, 12, heads_kv=5),
        lambda: memory.mha_params(768, 12, heads_kv=24),
    ],
)
def test_bad_sizes_raise_a_clear_error(call):
    with pytest.raises(memory.MemoryInputError):
        call()


def test_fmt_bytes_decimal_units():
    assert memory.fmt_bytes(999) == "999 B"
    assert memory.fmt_bytes(49_152) == "49.2 kB"
    assert memory.fmt_bytes(1_610_612_736) == "1.61 GB"


# ---- CLI -------------------------------------------------------------------------------------------


def test_cli_json_tutorial_example(capsys):
    code = main(
        ["memory", "--batch", "2", "--heads", "12", "--seq", "512", "--d-model", "768", "--dtype", "fp16", "--json"]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "score_elements": 6_291_456,
        "score_bytes": 12_582_912,
        "params": 2_362_368,
    }


def test_cli_json_seq_4096_and_training(capsys):
    assert main(["memory", "--seq", "4096", "--dtype", "fp16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["score_bytes"] == 805_306_368
    assert main(["memory", "--seq", "4096", "--dtype", "fp16", "--training", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["score_bytes"] == 2 * 805_306_368


def test_cli_table_names_the_formulas(capsys):
    assert main(["memory", "--dtype", "fp16", "--heads-kv", "4"]) == 0
    text = capsys.readouterr().out
    assert "6,291,456" in text and "12.6 MB" in text and "2,362,368" in text and "4 K/V heads" in text


@pytest.mark.parametrize(
    "args",
    [
        ["--heads", "0"],
        ["--seq", "-5"],
        ["--seq", "abc"],
        ["--dtype", "fp8"],
        ["--d-model", "100"],
        ["--heads-kv", "5"],
        ["--batch", "2.5"],
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args, capsys):
    assert main(["memory", *args, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_cli_as_a_process():
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "models",
            "memory",
            "--batch",
            "2",
            "--heads",
            "12",
            "--seq",
            "512",
            "--d-model",
            "768",
            "--dtype",
            "fp16",
            "--json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"score_elements": 6_291_456, "score_bytes": 12_582_912, "params": 2_362_368}
    bad = subprocess.run(
        [sys.executable, "-m", "models", "memory", "--heads", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


# ---- measured peak ---------------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS sampling reads /proc/self/statm (Linux)")
def test_measured_peak_on_cpu_follows_the_maps_our_encoder_keeps():
    """At 512 tokens the 6 layers' fp32 maps (75.5 MB) dominate MiniLM's forward: the RSS peak must cover them.

    Measured in a fresh interpreter (measure_curve_fresh): in this long-lived test process memory freed by earlier
    tests stays resident and is reused, so a process-level peak would say little.
    """
    by_seq = {m.seq: m.as_dict() for m in memory.measure_curve_fresh("minilm", "cpu", "fp32", [128, 512])}
    maps = memory.encoder_maps_bytes(6, 1, 12, 512)
    assert by_seq[512]["method"] in ("rss_hwm", "rss_sampled") and by_seq[512]["device"] == "cpu"
    assert 0.9 * maps <= by_seq[512]["peak_bytes"] <= 2.5 * maps
    assert by_seq[512]["peak_bytes"] > by_seq[128]["peak_bytes"]


def test_measure_rejects_lengths_the_model_cannot_take(minilm):
    with pytest.raises(memory.MemoryInputError):
        memory.measure_peak(minilm, minilm.max_tokens + 1)
    with pytest.raises(memory.MemoryInputError):
        memory.measure_peak(minilm, 128, batch=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_measured_peak_on_gpu():
    from models import load_encoder

    enc = load_encoder("minilm", device="cuda")
    m = memory.measure_curve(enc, [128, 512])[-1]
    maps = memory.encoder_maps_bytes(enc.config.n_layers, 1, enc.config.n_heads, 512)
    assert m.method == "cuda_max_allocated" and m.device.startswith("cuda")
    assert maps <= m.peak_bytes <= 2 * maps
