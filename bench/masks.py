"""The mask checker's figures: every teaching example's verdict and evidence, and what a check costs.

    python bench/masks.py                               # bundled all-MiniLM-L6-v2, the sidebar's default sentence
    python bench/masks.py --model random:bert-base --tokens 128 512 --device cuda

Prints, per example in models.masks.checker.EXAMPLES: the verdict, the checks that fail, the diagnosis, the largest change
of a shielded output in the behavioural test (0 for a correct mask), the largest attention mass on forbidden keys
after softmax (0 for a correct mask) and the wall time of the whole check. Then the time of one causal check at
each --tokens length (median of 5 after a warm-up).
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

from models import load_encoder
from models.masks.checker import EXAMPLES, check_mask

SENTENCE = "The animal didn't cross the street because it was too tired."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tokens", type=int, nargs="*", default=[16, 128, 512])
    args = ap.parse_args()
    enc = load_encoder(args.model, device=args.device)
    check_mask(enc, SENTENCE, "causal", "keep", "causal")  # warm-up

    print(f"{enc.name} on {enc.device}: {SENTENCE!r}")
    print(
        f"{'example':<22} {'verdict':<7} {'behaviour Δ':>12} {'forbidden mass':>14} {'ms':>6}  failing checks / diagnosis"
    )
    for key, (expr, convention, expect, _) in EXAMPLES.items():
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


if __name__ == "__main__":
    main()
