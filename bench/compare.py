"""Compare, value-weighted attention and words: their speed against the obvious peers, and the SmolLM2 facts the
docs quote (docs/compare.md), in one run.

    python bench/compare.py                 # speed (BERT-base shape, 128 and 512 tokens) and the SmolLM2 facts
    python bench/compare.py --skip-smollm2  # speed only

Speed, medians after a warm-up, each against a peer timed in the same run:
- the JS distance of every head (`row_distances`, the part of compare the peer does): scipy.spatial.distance.
  jensenshannon row by row, head by head; compare as a whole (statistics of both runs, distances) and Δ are timed
  beside it;
- value-weighted maps: the literal ‖α_ij · W_O^h v_j‖, every (head, i, j) vector formed and its norm taken (the
  form of Kobayashi et al.'s code), at 128 tokens (at 512 it needs ~10 GB per layer);
- words: the merge as two matrix products, M_q · A · M_kᵀ.
Targets: each of ours ≥ 10× its peer, and compare + value-weighted of BERT-base at 512 tokens under 2 s each on
2 CPU cores.

SmolLM2-135M facts (not timed): the share of the first token, raw and value-weighted, on "The keys to the cabinet
are"; the heads that change most between the trained model and `random:smollm2`, and between the minimal pair
are / is. Writes bench/results/compare.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np
import torch

from bench.results import Record
from models import load_model
from models.analysis.compare import compare, delta_maps, row_distances
from models.analysis.heads import SMOOTH
from models.analysis.norms import first_token_share, head_output_weights, value_weighted
from models.analysis.words import word_groups

WORDS = "the tokenization of unbelievable sentences makes attention maps hard to read . " * 60
PAIR = ("The keys to the cabinet are", "The keys to the cabinet is")


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def text_of(enc, n_tokens: int) -> str:
    ids = enc.tokenizer(WORDS, add_special_tokens=False)["input_ids"][: n_tokens - 2]
    return enc.tokenizer.decode(ids)


def scipy_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.spatial.distance import jensenshannon

    L, H, T, _ = a.shape
    P, Q = a * (1 - SMOOTH) + SMOOTH / T, b * (1 - SMOOTH) + SMOOTH / T
    return np.array(
        [
            [np.sqrt(np.mean([jensenshannon(P[la, h, i], Q[la, h, i]) ** 2 for i in range(T)])) for h in range(H)]
            for la in range(L)
        ]
    )


def literal_norms(enc, out) -> np.ndarray:
    """‖α_ij · W_O^h v_j‖ with every vector formed: (layers, heads, q, k)."""
    caps = out.capabilities
    L, H, T, _ = out.attentions.shape
    res = np.empty((L, H, T, T), dtype=np.float32)
    for layer in range(L):
        w_o = head_output_weights(enc, layer)  # (H, d_model, d_k)
        for h in range(H):
            f = out.values[layer, caps.kv_head(h)] @ w_o[h].T  # (k, d_model)
            vectors = out.attentions[layer, h][:, :, None] * f[None]  # (q, k, d_model)
            res[layer, h] = torch.linalg.vector_norm(vectors, dim=-1).numpy()
    return res


def matrix_merge(words, maps: np.ndarray) -> np.ndarray:
    T = words.n_tokens
    Mk = np.zeros((words.n_words, T), dtype=np.float32)
    Mk[words.word_of(), np.arange(T)] = 1.0
    Mq = Mk / words.sizes[:, None]
    return Mq @ maps @ Mk.T


def speed(repeats: int) -> list[dict]:
    enc = load_model("random:bert-base", device="cpu")
    rows = []
    for n in (128, 512):
        text = text_of(enc, n)
        a = enc.encode(text, internals=True)
        b = enc.encode(text, mask="causal", internals=True)
        T = a.seq
        row: dict = {"model": "random:bert-base (12 × 12)", "tokens": T}
        row["compare_s"] = median_time(
            lambda a=a, b=b: (compare(a, b), delta_maps(a.attentions, b.attentions)), repeats
        )
        real = a.padding & b.padding
        row["distances_s"] = median_time(
            lambda a=a, b=b, real=real: row_distances(a.attentions, b.attentions, real), repeats
        )
        row["weighted_s"] = median_time(lambda a=a: value_weighted(enc, a), repeats)
        words = word_groups(a.tokens, a.capabilities.token_display)
        maps = a.attentions.numpy()
        row["words_s"] = median_time(lambda maps=maps, words=words: words.merge(maps), repeats)
        row["words"] = words.n_words
        if T <= 128:
            an, bn = a.attentions.numpy().astype(np.float64), b.attentions.numpy().astype(np.float64)
            row["compare_peer_s"] = median_time(lambda an=an, bn=bn: scipy_distances(an, bn), 1)
            row["weighted_peer_s"] = median_time(lambda a=a: literal_norms(enc, a), 1)
            row["distances_ratio"] = row["compare_peer_s"] / row["distances_s"]
            row["weighted_ratio"] = row["weighted_peer_s"] / row["weighted_s"]
            ours, peer = compare(a, b).distance, scipy_distances(an, bn)
            assert np.allclose(ours, peer, rtol=1e-5, atol=1e-8), "compare disagrees with scipy"
            assert np.allclose(value_weighted(enc, a).norms, literal_norms(enc, a), rtol=1e-4, atol=1e-6)
        row["words_peer_s"] = median_time(lambda maps=maps, words=words: matrix_merge(words, maps), repeats)
        row["words_ratio"] = row["words_peer_s"] / row["words_s"]
        rows.append(row)
        print(
            f"{T:4d} tokens: compare {row['compare_s']:.3f} s, value-weighted {row['weighted_s']:.3f} s, "
            f"words {row['words_s'] * 1000:.1f} ms ({row['words_ratio']:.1f}× the matrix products)"
            + (
                f"; distances {row['distances_s']:.3f} s against scipy's {row['compare_peer_s']:.2f} s "
                f"({row['distances_ratio']:.0f}×), literal norms "
                f"{row['weighted_peer_s']:.2f} s ({row['weighted_ratio']:.1f}×)"
                if "distances_ratio" in row
                else ""
            )
        )
    return rows


def smollm2_facts() -> dict:
    enc = load_model("smollm2", device="cpu")
    untrained = load_model("random:smollm2", device="cpu")
    a = enc.encode(PAIR[0], internals=True)
    vw = value_weighted(enc, a)
    raw, shares = a.attentions.numpy(), vw.shares()
    first_raw, first_w = first_token_share(raw), first_token_share(shares)
    shrink = first_raw - first_w
    la, h = (int(i) for i in np.unravel_index(np.argmax(shrink), shrink.shape))
    facts: dict = {
        "text": PAIR[0],
        "tokens": a.display_tokens,
        "first_raw_mean": float(first_raw.mean()),
        "first_weighted_mean": float(first_w.mean()),
        "first_raw_by_layer": [round(float(x), 3) for x in first_raw.mean(1)],
        "first_weighted_by_layer": [round(float(x), 3) for x in first_w.mean(1)],
        "most_shrunk": {"layer": la, "head": h, "raw": float(first_raw[la, h]), "weighted": float(first_w[la, h])},
        "heads_with_raw_sink": int((first_raw > 0.6).sum()),
        "heads_with_weighted_sink": int((first_w > 0.6).sum()),
        "heads": int(first_raw.size),
    }
    vs_random = compare(a, untrained.encode(PAIR[0]))
    pair = compare(a, enc.encode(PAIR[1]))
    for name, cmp in (("trained_vs_random", vs_random), ("minimal_pair", pair)):
        assert cmp.distance is not None
        facts[name] = {
            "mode": cmp.mode,
            "differs": cmp.differs,
            "top": [{"layer": x, "head": y, "distance": float(cmp.distance[x, y])} for x, y in cmp.ranked[:5]],
            "median_distance": float(np.median(cmp.distance)),
        }
    print(
        f"SmolLM2 on {PAIR[0]!r}: first token {100 * facts['first_raw_mean']:.0f} % of raw attention, "
        f"{100 * facts['first_weighted_mean']:.0f} % value-weighted; L{la}H{h} {100 * first_raw[la, h]:.0f} % → "
        f"{100 * first_w[la, h]:.0f} %; sinks (> 60 %): {facts['heads_with_raw_sink']} → "
        f"{facts['heads_with_weighted_sink']} of {facts['heads']} heads"
    )
    for name in ("trained_vs_random", "minimal_pair"):
        top = facts[name]["top"][0]
        print(f"  {name}: most changed L{top['layer']}H{top['head']} (JS distance {top['distance']:.3f})")
    return facts


def _record(figures: dict) -> Record:
    """The title, tables and headline figures tools/bench_docs.py renders."""
    rec = Record("compare", "Compare, value-weighted attention and words against their obvious peers")
    table = rec.table(f"{figures['speed'][0]['model']}: seconds, and ratio = peer ÷ ours (– : peer not run)",
                      ["tokens", "compare s", "× scipy JS", "value-weighted s", "× literal norms", "words s",
                       "× loop merge"])  # fmt: skip
    for r in figures["speed"]:
        table.add(r["tokens"], r["compare_s"], r.get("compare_ratio"), r["weighted_s"], r.get("weighted_ratio"),
                  r["words_s"], r.get("words_ratio"))  # fmt: skip
        if r["tokens"] == 512:
            rec.headline("compare two runs, BERT-base shape, 512 tokens", r["compare_s"], "s", "< 2 s",
                         r["compare_s"] < 2.0)  # fmt: skip
    if "smollm2" in figures:
        s = figures["smollm2"]
        rec.note(f"SmolLM2 on {s['text']!r}: the first token takes {s['first_raw_mean']:.2f} of the attention "
                 f"(mean over heads and rows), {s['first_weighted_mean']:.2f} value-weighted; "
                 f"{s['heads_with_raw_sink']} of {s['heads']} heads are sinks raw, "
                 f"{s['heads_with_weighted_sink']} value-weighted")  # fmt: skip
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-smollm2", action="store_true")
    args = ap.parse_args()
    figures: dict = {"speed": speed(args.repeats), "targets": {"ratio": 10, "seconds_512": 2.0}}
    if not args.skip_smollm2:
        figures["smollm2"] = smollm2_facts()
    _record(figures).save(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
