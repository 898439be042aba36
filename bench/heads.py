"""Head analysis speed: all-pairs redundancy of 144 heads at 128 tokens, and corpus mode in sentences per second.

    python bench/heads.py                  # CPU: both targets
    python bench/heads.py --device cuda    # the same on a GPU

Targets (issue 5): the three redundancy matrices (JS, cosine, CKA) for all pairs of BERT-base's 12 × 12 heads
at 128 tokens in ≤ 1 s on 2 CPU cores; corpus mode ≥ 50 sentences/s with the bundled all-MiniLM-L6-v2 on
the CPU. Peers, timed in the same run: Clark et al.'s head_distances.py loop (numpy, one head against all
per step) for JS, and the corpus sentence by sentence (no batching) for corpus mode. Medians after warm-up.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np
import torch

from bench.results import Record, load_average, variant
from models import load_encoder
from models.analysis.corpus import analyse_corpus, read_corpus
from models.analysis.heads import Accumulator, Roles, cka_matrix, cosine_matrix, js_matrix

ROOT = Path(__file__).resolve().parents[1]


def machine(device: torch.device) -> str:
    cpu = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = [f"{cpu}, {os.cpu_count()} cores visible, torch {torch.__version__} with {torch.get_num_threads()} threads"]
    if device.type == "cuda":
        facts.append(f"GPU {torch.cuda.get_device_name(device)}")
    if hasattr(os, "getloadavg"):  # other work on the machine slows every figure below
        facts.append("load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    return "; ".join(facts)


def timed(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int) -> float:
    """Return the median seconds of fn() after warm-up (synchronising a GPU around each run)."""
    times = []
    for i in range(warmup + repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def clark_js(attn: np.ndarray) -> np.ndarray:
    """Clark et al.'s head_distances.py for one document (float32 numpy, one head against all per step)."""
    flat = attn.reshape(-1, attn.shape[-2], attn.shape[-1])
    N, n = flat.shape[0], flat.shape[1]
    out = np.zeros((N, N))
    P = 0.001 / n + flat * 0.999
    for h in range(N):
        m = (P[h][None] + P) / 2
        js = -P[h][None] * np.log(m / P[h][None]) - P * np.log(m / P)
        out[h] = (js / 2).sum(-1).sum(-1)
    return out


def text_of(tokenizer, n_tokens: int) -> str:
    """Return a text that tokenizes to exactly n_tokens, [CLS] and [SEP] included."""
    words = ("the model looks at every token and weighs how much each other token matters here . " * 40).split()
    ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"][: n_tokens - 2]
    return tokenizer.decode(ids)


def redundancy(rec: Record, device: str, tokens: int, repeats: int) -> None:
    enc = load_encoder("random:bert-base", device=device)  # BERT-base's shape; the timing does not depend on weights
    out = enc.encode(text_of(enc.tokenizer, tokens), internals=True)
    dev = enc.device
    attn, ctx = out.attentions.to(dev), out.context.to(dev)
    L, H = out.n_layers, out.n_heads
    print(f"\nredundancy: all pairs of {L * H} heads ({L} layers × {H}) at {out.seq} tokens on {dev}")
    t_js = timed(lambda: js_matrix(attn), dev, repeats, 2)
    t_cos = timed(lambda: cosine_matrix(attn), dev, repeats, 2)
    t_cka = timed(lambda: cka_matrix(ctx), dev, repeats, 2)
    total = t_js + t_cos + t_cka
    peer = timed(lambda: clark_js(out.attentions.numpy()), torch.device("cpu"), max(1, repeats // 5), 0)
    print(f"{'matrix':<28} {'seconds':>8}")
    print(f"{'JS (ours)':<28} {t_js:>8.3f}")
    print(f"{'cosine':<28} {t_cos:>8.3f}")
    print(f"{'CKA':<28} {t_cka:>8.3f}")
    print(f"{'all three':<28} {total:>8.3f}   target ≤ 1.000 s: {'met' if total <= 1.0 else 'MISSED'}")
    print(f"{'JS, Clark et al. loop (CPU)':<28} {peer:>8.3f}   ours is {peer / t_js:.0f}× faster")
    table = rec.table(
        f"Redundancy: all pairs of {L * H} heads ({L} layers × {H}) at {out.seq} tokens on {dev}", ["matrix", "seconds"]
    )
    for name, t in [("JS (ours)", t_js), ("cosine", t_cos), ("CKA", t_cka), ("all three", total),
                    ("JS, Clark et al. loop (CPU)", peer)]:  # fmt: skip
        table.add(name, t)
    rec.headline(f"all-pairs JS + cosine + CKA, {L * H} heads, {out.seq} tokens, {dev}", total, "s", "≤ 1 s",
                 total <= 1.0)  # fmt: skip


def corpus(rec: Record, device: str, n_sentences: int, repeats: int) -> None:
    enc = load_encoder("minilm", device=device)
    base = read_corpus((ROOT / "examples" / "corpus_en.txt").read_text(encoding="utf-8"))
    lines = (base * (n_sentences // len(base) + 1))[:n_sentences]
    dev = enc.device
    report, _ = analyse_corpus(enc, lines[:20])  # warm-up
    t = timed(lambda: analyse_corpus(enc, lines), dev, repeats, 1)
    report, _ = analyse_corpus(enc, lines)
    per = report.rows / report.sentences

    def one_by_one() -> None:
        acc = Accumulator(report.n_layers, report.n_heads)
        for ln in lines:
            out = enc.encode(ln.text, ln.text_b, internals=True)
            roles = Roles.of_output(out, dev)
            acc.add(out.attentions[None].to(dev), roles, out.context[None].to(dev))
        acc.report(enc.name)

    t_peer = timed(one_by_one, dev, 1, 0)
    rate = len(lines) / t
    print(
        f"\ncorpus mode: {len(lines)} sentences ({report.pairs and 'with pairs, ' or ''}{per:.1f} tokens each on average), "
        f"{enc.name} on {dev}: statistics, JS, cosine and pooled CKA"
    )
    print(f"{'':<28} {'seconds':>8} {'sentences/s':>12}")
    print(f"{'batched, length-sorted':<28} {t:>8.2f} {rate:>12.0f}   target ≥ 50: {'met' if rate >= 50 else 'MISSED'}")
    print(
        f"{'one sentence at a time':<28} {t_peer:>8.2f} {len(lines) / t_peer:>12.0f}   batching is {t_peer / t:.1f}× faster"
    )
    table = rec.table(
        f"Corpus mode: {len(lines)} sentences ({per:.1f} tokens each on average), {enc.name} on {dev}",
        ["", "seconds", "sentences/s"],
    )
    table.add("batched, length-sorted", t, rate)
    table.add("one sentence at a time", t_peer, len(lines) / t_peer)
    rec.headline(f"corpus mode, {enc.name}, {dev}", rate, "sentences/s", "≥ 50", rate >= 50)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    from models.device import resolve_device

    print(machine(resolve_device(args.device)))
    rec = Record(
        variant("heads", None if args.device == "cpu" else args.device),
        "Head analysis: all-pairs redundancy and corpus mode",
    )
    redundancy(rec, args.device, args.tokens, args.repeats)
    corpus(rec, args.device, args.sentences, max(3, args.repeats // 3))
    rec.note(f"load average {load_average()} at the end")
    rec.save()


if __name__ == "__main__":
    main()
