"""The memory estimator against the measured peak of our encoder's forward, on the current device.

    python bench/memory.py                          # bundled MiniLM (6 layers × 12 heads), batch 1
    python bench/memory.py --model random:bert-base --batch 2
    python bench/memory.py --device cuda --dtype fp16

First the tutorial's examples (section 6), computed by the estimator. Then, per sequence length: the tutorial's
formula for one layer's score tensor, the estimate for what our encoder keeps (every layer's map, fp32: the
app shows them all), the measured peak of one forward pass, and measured / estimate. Target: the estimate
explains the measurement — measured / estimate between 1.0 and 1.3 at 512 tokens, batch 1, where the maps
dominate (the rest: per-layer activations, the FFN's d_ff-wide one the largest).

Measured: on a GPU, torch.cuda.max_memory_allocated() during the forward minus memory_allocated() before it; on
a CPU, the process's peak RSS (read from /proc/self/statm every millisecond) during the forward minus the RSS
before it. Weights are loaded before and not counted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import Record, load_average, variant
from models import load_encoder
from models.lecture import memory


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="minilm")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="fp32", choices=list(memory.BYTES_PER_ELEMENT))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seqs", default="64,128,256,512", help="comma-separated sequence lengths")
    args = p.parse_args()

    rec = Record(
        variant(
            "memory",
            None if args.model == "minilm" else args.model,
            None if args.device in ("auto", "cpu") else args.device,
            None if args.dtype == "fp32" else args.dtype,
            None if args.batch == 1 else f"batch{args.batch}",
        ),
        "The memory estimator against the measured peak of our encoder's forward",
    )
    tutorial = rec.table(
        "The tutorial's examples (batch 2, 12 heads, fp16), from the estimator",
        ["seq", "score elements", "score bytes", "training keeps"],
    )
    print("The tutorial's examples (batch 2, 12 heads, fp16):")
    for seq in (512, 4096):
        e = memory.estimate(2, 12, seq, 768, "fp16")
        tutorial.add(seq, e.score_elements, memory.fmt_bytes(e.score_bytes), memory.fmt_bytes(e.score_bytes_training))
        print(
            f"  seq {seq:>4}: {e.score_elements:>11,} elements, {memory.fmt_bytes(e.score_bytes):>7} "
            f"(training {memory.fmt_bytes(e.score_bytes_training)})"
        )
    print(f"  MHA parameters, d_model 768: {memory.mha_params(768):,} (4·d_model² + 4·d_model)\n")

    enc = load_encoder(args.model, device=args.device, dtype=args.dtype)
    c = enc.config
    seqs = [int(s) for s in args.seqs.split(",")]
    found = memory.measure_curve(enc, seqs, args.batch)
    print(f"{enc.name}: {c.n_layers} layers × {c.n_heads} heads on {enc.device} ({args.dtype}), batch {args.batch}")
    print(f"method: {memory.METHODS[found[0].method]}")
    print(
        f"{'tokens':>6} {'one layer (formula)':>20} {'all maps, fp32':>15} {'measured':>10} {'measured/estimate':>18}"
    )
    table = rec.table(
        f"{enc.name}: {c.n_layers} layers × {c.n_heads} heads on {enc.device} ({args.dtype}), batch {args.batch}",
        ["tokens", "one layer (formula)", "all maps, fp32", "measured", "measured/estimate"],
    )
    curve: dict[str, list[float]] = {"estimate: all maps, fp32": [], "measured peak": []}
    for m in found:
        one = memory.score_bytes(args.batch, c.n_heads, m.seq, args.dtype)
        maps = memory.encoder_maps_bytes(c.n_layers, args.batch, c.n_heads, m.seq)
        print(
            f"{m.seq:>6} {memory.fmt_bytes(one):>20} {memory.fmt_bytes(maps):>15} {memory.fmt_bytes(m.peak_bytes):>10} "
            f"{m.peak_bytes / maps:>18.2f}"
        )
        table.add(
            m.seq, memory.fmt_bytes(one), memory.fmt_bytes(maps), memory.fmt_bytes(m.peak_bytes), m.peak_bytes / maps
        )
        curve["estimate: all maps, fp32"].append(maps / 2**20)
        curve["measured peak"].append(m.peak_bytes / 2**20)
        if m.seq == 512:
            ratio = m.peak_bytes / maps
            rec.headline(f"measured ÷ estimated forward memory, 512 tokens, {enc.name}", ratio, "×", "1.0–1.3",
                         1.0 <= ratio <= 1.3)  # fmt: skip
    rec.series(f"Forward memory against tokens ({enc.name}, batch {args.batch})", "tokens", "MiB",
               [m.seq for m in found], curve)  # fmt: skip
    rec.note(f"method: {memory.METHODS[found[0].method]}; load average {load_average()} at the end")
    rec.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
