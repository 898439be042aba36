"""The mask checker's figures: every teaching example's verdict and evidence, and what a check costs.

    python bench/masks.py                               # bundled all-MiniLM-L6-v2, the sidebar's default sentence
    python bench/masks.py --model random:bert-base --tokens 128 512 --device cuda

    python bench/masks.py --part attention              # check-attention only: planted bugs and the speed target
    python bench/masks.py --part speed                  # the speed target alone

Prints, per example in models.analysis.mask_checker.EXAMPLES: the verdict, the checks that fail, the diagnosis, the largest change
of a shielded output in the behavioural test (0 for a correct mask), the largest attention mass on forbidden keys
after softmax (0 for a correct mask) and the wall time of the whole check. Then the time of one causal check at
each --tokens length (median of 5 after a warm-up).

check-attention (models.masks.harness): every planted target of tests/masks/attention_targets.py with its verdict,
likely cause and time, then the speed target — a 2-layer pre-norm block stack at seq 64, d_model 256, batch 2,
judged in ≤ 10 s on 2 CPU cores — against the obvious peer: one backward pass per output position (what
torch.autograd.grad in a loop does), which measures the same dependency pattern.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.results import Record, load_average, variant
from models import load_encoder
from models.analysis.mask_checker import EXAMPLES, check_mask, example_expect
from models.masks.harness import check_attention

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "masks"))
import attention_targets as at

SENTENCE = "The animal didn't cross the street because it was too tired."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tokens", type=int, nargs="*", default=[16, 128, 512])
    ap.add_argument("--part", choices=("all", "masks", "attention", "speed"), default="all")
    args = ap.parse_args()
    print(
        f"{os.cpu_count()} cores visible, torch {torch.__version__} with {torch.get_num_threads()} threads; "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    rec = Record(
        variant("masks", None if args.part == "all" else args.part, None if args.model == "minilm" else args.model,
                None if args.device == "cpu" else args.device),
        "The mask checker and check-attention: every teaching example, and what a check costs",
    )  # fmt: skip
    if args.part in ("all", "masks"):
        bench_checker(rec, args)
    if args.part in ("all", "attention", "speed"):
        bench_attention(rec, planted=args.part != "speed")
    rec.note(
        f"torch {torch.__version__} with {torch.get_num_threads()} threads; load average {load_average()} at the end"
    )
    rec.save()


def bench_checker(rec: Record, args: argparse.Namespace) -> None:
    enc = load_encoder(args.model, device=args.device)
    check_mask(enc, SENTENCE, "causal", "keep", "causal")  # warm-up

    print(f"{enc.name} on {enc.device}: {SENTENCE!r}")
    print(
        f"{'example':<22} {'verdict':<7} {'behaviour Δ':>12} {'forbidden mass':>14} {'ms':>6}  failing checks / diagnosis"
    )
    seq = enc.encode(SENTENCE).seq
    table = rec.table(
        f"Every example of the Masks page on {enc.name} ({enc.device})",
        ["example", "verdict", "behaviour Δ", "forbidden mass", "ms", "failing checks / diagnosis"],
    )
    caught = True
    for key, (expr, convention, _, _) in EXAMPLES.items():
        expect = example_expect(key, seq)
        texts = [SENTENCE, "Too tired."] if "padding" in expect else [SENTENCE]
        t0 = time.perf_counter()
        r = check_mask(enc, texts, expr, convention, expect)
        ms = (time.perf_counter() - t0) * 1e3
        b = r.finding("behaviour").data.get("max_change")
        mass = r.finding("mass").data.get("max_mass", 0.0)
        diag = "; ".join(d.english().split(":")[0] for d in r.diagnosis)
        print(
            f"{key:<22} {r.verdict:<7} {'-' if b is None else f'{b:.3g}':>12} {mass:>14.3g} {ms:>6.0f}  "
            f"{', '.join(r.failed()) or '-'}{' / ' + diag if diag else ''}"
        )
        table.add(key, r.verdict, "-" if b is None else b, mass, ms,
                  f"{', '.join(r.failed()) or '-'}{' / ' + diag if diag else ''}")  # fmt: skip
        caught &= r.verdict == ("pass" if key.startswith("ok") else "fail")
    rec.headline(f"teaching examples judged right ({len(EXAMPLES)})", len(EXAMPLES) if caught else 0, "of " +
                 str(len(EXAMPLES)), "all", caught)  # fmt: skip
    cost = rec.table("One causal check (median of 5)", ["tokens", "ms"])

    print("\ntokens  causal check ms (median of 5)")
    for n in args.tokens:
        text = " ".join(["word"] * (n - 2))
        times = []
        for i in range(6):
            t0 = time.perf_counter()
            r = check_mask(enc, text, "causal", "keep", "causal")
            if i:
                times.append((time.perf_counter() - t0) * 1e3)
        assert r.ok and len(r.tokens[0]) == n
        print(f"{n:>6}  {statistics.median(times):>8.0f}")
        cost.add(n, statistics.median(times))


PLANTED = [
    ("ok hand-written tril", lambda: at.Attention(), "causal", {}),
    ("ok SDPA is_causal", lambda: at.SDPACausal(), "causal", {}),
    ("ok nn.MultiheadAttention", lambda: at.MHACausal(), "causal", {}),
    ("ok after softmax + renorm", lambda: at.Attention(how="after_renorm"), "causal", {}),
    ("ok 2-layer stack", lambda: at.Stack(), "causal", {}),
    ("ok cumulative mean", lambda: at.cumulative_mean, "causal", {}),
    ("ok sliding window", lambda: at.Attention(keep=lambda T: at.band(T, 3)), "causal+window:3", {}),
    ("ok chunked", lambda: at.Attention(keep=lambda T: at.blocks(T, 4)), "causal+chunk:4", {}),
    ("ok left padding", lambda: at.Attention(), "causal+padding", {"pad": 4, "padding_side": "left"}),
    ("bug transposed", lambda: at.Attention(keep=lambda T: at.tril(T).T), "causal", {}),
    ("bug next visible", lambda: at.Attention(keep=lambda T: at.tril(T, 1)), "causal", {}),
    ("bug window + 1", lambda: at.Attention(keep=lambda T: at.band(T, 4)), "causal+window:3", {}),
    ("bug chunk boundary", lambda: at.Attention(keep=lambda T: at.blocks(T, 4, 1)), "causal+chunk:4", {}),
    ("bug after softmax", lambda: at.Attention(how="after"), "causal", {}),
    ("bug softmax dim=-2", lambda: at.Attention(how="queries"), "causal", {}),
    ("bug norm over seq", lambda: at.Attention(seq_norm=True), "causal", {}),
    (
        "bug pad on queries",
        lambda: at.Attention(padding="queries"),
        "causal+padding",
        {"pad": 4, "padding_side": "left"},
    ),
    (
        "bug left pad as right",
        lambda: at.Attention(padding="lengths"),
        "causal+padding",
        {"pad": 4, "padding_side": "left"},
    ),
    ("bug batch_first", lambda: at.MHACausal(batch_first=False, causal=False), "bidirectional", {}),
    ("bug -inf empty row", lambda: at.Attention(keep=lambda T: at.tril(T, -1), how="neg_inf"), "causal", {}),
]


def _loop_dependence(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The peer: one backward pass per output position (batch · seq of them), same random cotangents."""
    B, T, _ = x.shape
    x = x.detach().requires_grad_(True)
    y = model(x)
    u = torch.randn(B, T, y.shape[-1])
    dep = torch.zeros(B, T, B, T)
    for b in range(B):
        for i in range(T):
            (g,) = torch.autograd.grad(y[b, i] @ u[b, i], x, retain_graph=True)
            dep[b, i] = g.norm(dim=-1)
    return dep


def bench_attention(rec: Record, planted: bool = True) -> None:
    check_attention(at.cumulative_mean, "causal")  # warm-up
    if planted:
        print("\ncheck-attention: planted targets (seq 16, d_model 64, batch 2)")
        print(f"{'target':<26} {'verdict':<7} {'s':>6}  likely cause")
        table = rec.table("check-attention: planted targets (seq 16, d_model 64, batch 2)",
                          ["target", "verdict", "s", "likely cause"])  # fmt: skip
    for name, make, expect, kw in PLANTED if planted else []:
        t0 = time.perf_counter()
        r = check_attention(make(), expect, **kw)
        cause = (r.cause or "-").split(":")[0]
        print(f"{name:<26} {r.verdict:<7} {time.perf_counter() - t0:>6.2f}  {cause}")
        table.add(name, r.verdict, time.perf_counter() - t0, cause)

    torch.manual_seed(0)
    model = at.Stack(d_model=256, heads=4, layers=2).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = check_attention(model, "causal", seq=64, d_model=256, batch=2)
        times.append(time.perf_counter() - t0)
    assert r.ok, r.text()
    ours = statistics.median(times)
    x = torch.randn(2, 64, 256)
    fwd = []
    for _ in range(5):
        t0 = time.perf_counter()
        model(x)
        fwd.append(time.perf_counter() - t0)
    forward = statistics.median(fwd)
    t0 = time.perf_counter()
    _loop_dependence(model, torch.randn(2, 64, 256))
    peer = time.perf_counter() - t0
    verdict = "met" if ours <= 10 else "NOT met"
    print("\nspeed: 2-layer block stack, seq 64, d_model 256, batch 2, expect causal (median of 3)")
    print(f"{'check_attention (whole verdict)':<40} {ours:>7.2f} s   target ≤ 10 s: {verdict}  [{r.method}]")
    print(
        f"{'peer: one backward per output (B·T=128)':<40} {peer:>7.2f} s   dependency only; ours is {peer / ours:.1f}× faster"
    )
    print(
        f"{'one forward pass of the target':<40} {forward:>7.3f} s   the verdict costs {ours / forward:.0f} forward "
        f"passes, the peer {peer / forward:.0f}"
    )
    speed = rec.table("Speed: 2-layer block stack, seq 64, d_model 256, batch 2, expect causal (median of 3)",
                      ["", "s", "forward passes"])  # fmt: skip
    speed.add(f"check_attention (whole verdict) [{r.method}]", ours, ours / forward)
    speed.add("peer: one backward per output (B·T=128)", peer, peer / forward)
    speed.add("one forward pass of the target", forward, 1)
    rec.headline("check_attention, 2-layer target, seq 64, d_model 256", ours, "s", "≤ 10 s", ours <= 10)


if __name__ == "__main__":
    main()
