"""Memory and parameters of multi-head attention: the tutorial's formulas, their variants, and a measurement.

Formulas (docs/METRICS.md, "Memory of the score tensor"; the tutorial, section 6):

    score elements      batch · heads · seq²                      the (batch, heads, q_pos, k_pos) tensor
    score bytes         elements × 4 (fp32) or × 2 (fp16, bf16)   forward; training keeps it again (× 2)
    MHA parameters      4·d_model² weights + 4·d_model biases     W_q, W_k, W_v, W_o

and what the usual remedies change:

    FlashAttention      no seq² tensor is materialised; per row it keeps the softmax statistic (log-sum-exp,
                        fp32) for the backward pass: batch · heads · seq × 4 bytes
    KV cache            2 · layers · batch · seq · heads_kv · d_k × bytes (K and V of every past token)
    GQA / MQA           heads_kv < heads (MQA: heads_kv = 1): the K/V projections and the KV cache shrink by
                        heads_kv / heads; the score tensor does not (every query head still scores every key)

Sizes are in bytes; `fmt_bytes` prints decimal units (1 MB = 10⁶ B) as the tutorial does.

`measure_peak` runs our encoder's forward on the current device and reports its peak memory: on a GPU the
growth of `torch.cuda.max_memory_allocated` over the forward, on a CPU the growth of the process's resident
set size, sampled every millisecond from /proc/self/statm.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..errors import InputError
from ..network import KVCache

BYTES_PER_ELEMENT = {"fp32": 4, "fp16": 2, "bf16": 2}
LSE_BYTES = 4  # FlashAttention keeps its per-row log-sum-exp in fp32 whatever the input dtype


class MemoryInputError(InputError):
    """A size given to the estimator is not a positive whole number, or the heads do not split d_model."""


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MemoryInputError(f"{name} must be a whole number ≥ 1, got {value!r}")
    return value


def bytes_per_element(dtype: str) -> int:
    """Return 4 for fp32, 2 for fp16 and bf16."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        raise MemoryInputError(f"unknown dtype {dtype!r}: use {', '.join(BYTES_PER_ELEMENT)}") from None


def score_elements(batch: int, heads: int, seq: int) -> int:
    """Return batch · heads · seq², the elements of one layer's (batch, heads, q_pos, k_pos) score tensor."""
    return _positive("batch", batch) * _positive("heads", heads) * _positive("seq", seq) ** 2


def score_bytes(batch: int, heads: int, seq: int, dtype: str = "fp32", training: bool = False) -> int:
    """Return the bytes of one layer's score tensor; training keeps it again for the backward pass (× 2)."""
    return score_elements(batch, heads, seq) * bytes_per_element(dtype) * (2 if training else 1)


def mha_params(d_model: int, heads: int = 1, heads_kv: int | None = None, bias: bool = True) -> int:
    """Return the parameters of one attention block: W_q, W_k, W_v, W_o (d_model × d_model) and their biases.

    With GQA/MQA (heads_kv < heads) W_k and W_v shrink to d_model × heads_kv·d_k. Plain MHA:
    4·d_model² + 4·d_model — the same for 1 head of width d_model as for h heads of width d_model / h.
    """
    d_model, heads = _positive("d_model", d_model), _positive("heads", heads)
    if d_model % heads:
        raise MemoryInputError(f"d_model {d_model} is not a multiple of heads {heads}: the heads cannot split it")
    kv = heads if heads_kv is None else _positive("heads_kv", heads_kv)
    if kv > heads or heads % kv:
        raise MemoryInputError(f"heads_kv {kv} must divide heads {heads} (GQA groups query heads over K/V heads)")
    d_kv = kv * (d_model // heads)  # width of K and V: heads_kv heads of d_k each
    weights = 2 * d_model * d_model + 2 * d_model * d_kv  # W_q, W_o full; W_k, W_v narrower under GQA
    biases = 2 * d_model + 2 * d_kv
    return weights + (biases if bias else 0)


def kv_cache_bytes(layers: int, batch: int, seq: int, heads_kv: int, d_k: int, dtype: str = "fp16") -> int:
    """Return 2 · layers · batch · seq · heads_kv · d_k × bytes: K and V of every cached token in every layer."""
    n = 2 * _positive("layers", layers) * _positive("batch", batch) * _positive("seq", seq)
    return n * _positive("heads_kv", heads_kv) * _positive("d_k", d_k) * bytes_per_element(dtype)


def flash_bytes(batch: int, heads: int, seq: int) -> int:
    """Return what FlashAttention keeps instead of the score tensor: one fp32 log-sum-exp per query row."""
    return _positive("batch", batch) * _positive("heads", heads) * _positive("seq", seq) * LSE_BYTES


def encoder_maps_bytes(layers: int, batch: int, heads: int, seq: int) -> int:
    """Return the bytes of the maps our encoder returns: every layer's (batch, heads, q, k) probs in fp32.

    The app needs them all, so our forward keeps layers × one score tensor, always in fp32 (softmax runs in
    fp32 whatever the model dtype) — the term that dominates its measured peak at long sequences.
    """
    return _positive("layers", layers) * score_elements(batch, heads, seq) * 4


@dataclass(frozen=True)
class Estimate:
    """Everything the estimator says about one configuration; sizes in bytes."""

    batch: int
    heads: int
    seq: int
    d_model: int
    dtype: str
    layers: int
    heads_kv: int
    score_elements: int
    score_bytes: int  # forward
    score_bytes_training: int  # kept again for backward
    flash_bytes: int
    params: int  # one MHA block, weights and biases
    params_gqa: int  # with heads_kv K/V heads
    kv_cache_bytes: int  # heads_kv = heads (plain MHA)
    kv_cache_bytes_gqa: int  # with heads_kv


def estimate(
    batch: int, heads: int, seq: int, d_model: int, dtype: str = "fp32", layers: int = 1, heads_kv: int | None = None
) -> Estimate:
    """Return the estimate for one configuration (see the module docstring for every formula)."""
    kv = heads if heads_kv is None else heads_kv
    params = mha_params(d_model, heads)
    d_k = d_model // heads
    return Estimate(
        batch=batch,
        heads=heads,
        seq=seq,
        d_model=d_model,
        dtype=dtype,
        layers=layers,
        heads_kv=kv,
        score_elements=score_elements(batch, heads, seq),
        score_bytes=score_bytes(batch, heads, seq, dtype),
        score_bytes_training=score_bytes(batch, heads, seq, dtype, training=True),
        flash_bytes=flash_bytes(batch, heads, seq),
        params=params,
        params_gqa=mha_params(d_model, heads, kv),
        kv_cache_bytes=kv_cache_bytes(layers, batch, seq, heads, d_k, dtype),
        kv_cache_bytes_gqa=kv_cache_bytes(layers, batch, seq, kv, d_k, dtype),
    )


def fmt_bytes(n: float) -> str:
    """Return a size in decimal units, 3 significant digits: 12582912 → '12.6 MB', 805306368 → '805 MB'."""
    n = float(n)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            v = n / scale
            digits = max(0, 2 - int(math.floor(math.log10(abs(v)))))
            return f"{v:.{digits}f} {unit}"
    return f"{int(n)} B"


# ---- measuring our encoder ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """The measured peak memory of one forward of our encoder."""

    seq: int
    batch: int
    peak_bytes: int  # growth over the forward (weights and earlier allocations excluded)
    method: str  # what exactly was measured (see METHODS)
    device: str
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


METHODS = {
    "cuda_max_allocated": "torch.cuda.max_memory_allocated() during the forward − memory_allocated() before it",
    "rss_hwm": "peak resident set size during the forward (VmHWM, reset through /proc/self/clear_refs) − RSS before it",
    "rss_sampled": "peak resident set size (/proc/self/statm, sampled every 1 ms) during the forward − RSS before it",
    "ru_maxrss": "growth of the process's lifetime peak RSS (getrusage); 0 when the forward stays below an earlier peak",
}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (VmHWM) to the current RSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status")


class _RssSampler:
    """Background thread that records the highest RSS it sees (torch kernels release the GIL, so it runs)."""

    def __init__(self, interval: float = 0.001):
        self.interval = interval
        self.peak = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(self.interval)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


def _ids_of_length(encoder, batch: int, seq: int) -> torch.Tensor:
    """Return (batch, seq) token ids: [CLS] word … word [SEP], the same ids a real seq-token text would give.

    A model without [CLS]/[SEP] (capabilities.special_roles): its ids are one ordinary token repeated.
    """
    tok = encoder.tokenizer
    if encoder.capabilities.special_roles != "cls_sep":
        word_ids = tok(" attention", add_special_tokens=False)["input_ids"] or [0]
        return torch.full((batch, seq), int(word_ids[0]), dtype=torch.long)
    cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
    word = tok.convert_tokens_to_ids("attention")
    if word is None or word == tok.unk_token_id:
        word = tok.unk_token_id
    ids = torch.full((batch, seq), word, dtype=torch.long)
    ids[:, 0], ids[:, -1] = cls_id, sep_id
    return ids


@torch.inference_mode()
def measure_peak(encoder, seq: int, batch: int = 1) -> Measurement:
    """Return the peak memory of one forward of `encoder` on a (batch, seq) input, on the encoder's device.

    The forward is the one `Encoder.encode` runs (all layers' attention returned in fp32), on token ids built
    for exactly `seq` positions; the result is freed before returning.
    """
    _positive("batch", batch)
    if not 2 <= _positive("seq", seq) <= encoder.max_tokens:
        raise MemoryInputError(f"seq must be between 2 and the model's {encoder.max_tokens} tokens, got {seq}")
    dev = encoder.device
    ids = _ids_of_length(encoder, batch, seq).to(dev)
    types = torch.zeros_like(ids)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        t0 = time.perf_counter()
        res = encoder.model(ids, types)
        torch.cuda.synchronize(dev)
        seconds = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated(dev) - before
        method = "cuda_max_allocated"
    elif sys.platform.startswith("linux") and _reset_peak_rss():
        # The kernel's own high-water mark: exact, where a sampling thread can miss a short peak on a busy machine.
        before = _rss_bytes()
        t0 = time.perf_counter()
        res = encoder.model(ids, types)
        seconds = time.perf_counter() - t0
        peak = _peak_rss_bytes() - before
        method = "rss_hwm"
    elif sys.platform.startswith("linux") and os.path.exists("/proc/self/statm"):
        before = _rss_bytes()
        with _RssSampler() as sampler:
            t0 = time.perf_counter()
            res = encoder.model(ids, types)
            seconds = time.perf_counter() - t0
        peak = sampler.peak - before
        method = "rss_sampled"
    else:
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, kB on Linux/BSD
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
        t0 = time.perf_counter()
        res = encoder.model(ids, types)
        seconds = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale - before
        method = "ru_maxrss"
    del res
    return Measurement(
        seq=seq, batch=batch, peak_bytes=max(0, int(peak)), method=method, device=str(dev), seconds=seconds
    )


@dataclass(frozen=True)
class KVCacheFacts:
    """One model's KV cache at `seq` cached tokens: the formula for MHA, its own grouping and MQA, and the cache
    its forward actually filled (counted from the tensors)."""

    seq: int
    layers: int
    heads: int
    kv_heads: int
    d_k: int
    dtype: str
    mha_bytes: int  # kv_heads = heads
    model_bytes: int  # the model's own kv_heads (GQA where kv_heads < heads)
    mqa_bytes: int  # kv_heads = 1
    measured_bytes: int  # every layer's keys and values in the cache after a forward of seq tokens
    measured_shape: tuple[int, ...]  # one layer's keys: (batch, kv_heads, seq, d_k)


@torch.inference_mode()
def kv_cache_facts(encoder, seq: int) -> KVCacheFacts:
    """Return the KV cache of a model that generates, at `seq` cached tokens: formulas and the real cache."""
    if not encoder.capabilities.generation:
        raise MemoryInputError(f"{encoder.name} keeps no KV cache: it does not generate")
    if not 1 <= _positive("seq", seq) <= encoder.max_tokens:
        raise MemoryInputError(f"seq must be between 1 and the model's {encoder.max_tokens} tokens, got {seq}")
    c = encoder.config
    dtype = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(encoder.dtype, "fp32")
    cache = KVCache()
    encoder.model(_ids_of_length(encoder, 1, seq).to(encoder.device), cache=cache)
    return KVCacheFacts(
        seq=seq,
        layers=c.n_layers,
        heads=c.n_heads,
        kv_heads=c.n_kv_heads,
        d_k=c.d_k,
        dtype=dtype,
        mha_bytes=kv_cache_bytes(c.n_layers, 1, seq, c.n_heads, c.d_k, dtype),
        model_bytes=kv_cache_bytes(c.n_layers, 1, seq, c.n_kv_heads, c.d_k, dtype),
        mqa_bytes=kv_cache_bytes(c.n_layers, 1, seq, 1, c.d_k, dtype),
        measured_bytes=cache.nbytes,
        measured_shape=cache.shape(),
    )


def measure_curve(encoder, seqs: list[int], batch: int = 1) -> list[Measurement]:
    """Return measure_peak for each seq length (shortest first, so the allocator is not pre-grown)."""
    measure_peak(encoder, min(16, encoder.max_tokens), batch)  # warm-up: lazy inits, kernels, thread pools
    return [measure_peak(encoder, s, batch) for s in sorted(set(seqs))]


_CHILD = (
    "import json, sys; from models import load_encoder; from models.lecture import memory; a = json.loads(sys.argv[1]); "
    "e = load_encoder(a['spec'], device=a['device'], dtype=a['dtype']); "
    "print(json.dumps([m.as_dict() for m in memory.measure_curve(e, a['seqs'], a['batch'])]))"
)


def measure_curve_fresh(
    spec: str, device: str, dtype: str, seqs: list[int], batch: int = 1, timeout: float = 600
) -> list[Measurement]:
    """Return measure_curve run in a fresh Python process that loads `spec` itself.

    On the CPU a long-lived process (the app's server, a test run) reuses memory freed earlier, so the peak of a
    forward there can read as almost nothing; a fresh interpreter measures what the forward really needs.
    """
    arg = json.dumps({"spec": spec, "device": device, "dtype": dtype, "seqs": list(seqs), "batch": batch})
    root = Path(__file__).resolve().parents[2]  # the repository, so that `import models` works in the child
    try:
        r = subprocess.run(
            [sys.executable, "-c", _CHILD, arg],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except subprocess.TimeoutExpired as err:
        raise MemoryInputError(f"the measurement took longer than {timeout:.0f} s") from err
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        raise MemoryInputError(f"the measuring process failed: {lines[-1] if lines else r.returncode}")
    return [Measurement(**d) for d in json.loads(r.stdout.strip().splitlines()[-1])]
