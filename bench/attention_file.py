"""Reading attention files: our checked reader against a bare load of the same file, per format, and lens.show.

    python bench/attention_file.py              # BERT-base shape (12 layers × 12 heads) at 128 and 512 tokens

The peer for each format is the plain library call with no checks at all (np.load(allow_pickle=False),
safetensors.numpy.load, torch.load(weights_only=True)); ours adds the size checks from headers, the layout
normaliser, NaN/negative/row-sum checks and causal detection. The ratio is ours / bare: what the checks cost.
Target: ratio ≤ 2 for every format at 512 tokens. Medians of 5 after one warm-up.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.numpy import load as st_load  # noqa: E402
from safetensors.numpy import save as st_save  # noqa: E402

from bench.results import Record, load_average  # noqa: E402
from lens import show  # noqa: E402
from models.attention_file import read  # noqa: E402


def median_ms(fn: Callable[[], object], repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def maps(seq: int) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 12, seq, seq)).astype(np.float32)
    x = np.exp(x - x.max(-1, keepdims=True))
    return x / x.sum(-1, keepdims=True), [f"t{i}" for i in range(seq)]


def main() -> None:
    print(
        f"{os.cpu_count()} cores visible, torch {torch.__version__}; load average "
        + " ".join(f"{v:.1f}" for v in os.getloadavg())
    )
    print(f"{'tokens':>6} {'format':<12} {'MB on disk':>10} {'ours ms':>9} {'bare ms':>9} {'ratio':>6}")
    rec = Record("attention_file", "Reading attention files: our checked reader against a bare load, per format")
    table = rec.table(
        "BERT-base shape (12 layers × 12 heads); medians of 5",
        ["tokens", "format", "MB on disk", "ours ms", "bare ms", "ratio"],
    )
    shows = rec.table("lens.show with both notebook renderings", ["tokens", "view", "ms"])
    with tempfile.TemporaryDirectory() as tmp:
        for seq in (128, 512):
            attn, tokens = maps(seq)
            files: dict[str, tuple[Path, Callable[[Path], object]]] = {}
            p = Path(tmp) / f"a{seq}.npz"
            np.savez_compressed(p, attentions=attn, tokens=np.array(tokens))  # what `export` writes
            files["npz"] = (p, lambda q: np.load(q, allow_pickle=False)["attentions"])
            p = Path(tmp) / f"a{seq}.safetensors"
            p.write_bytes(st_save({"attentions": attn}, metadata={"tokens": json.dumps(tokens)}))
            files["safetensors"] = (p, lambda q: st_load(q.read_bytes())["attentions"])
            p = Path(tmp) / f"a{seq}.pt"
            torch.save(tuple(torch.from_numpy(attn[i])[None] for i in range(12)), p)  # transformers' tuple
            files["pt"] = (p, lambda q: torch.load(q, weights_only=True))
            for name, (path, bare) in files.items():
                ours = median_ms(lambda path=path: read(path))
                peer = median_ms(lambda path=path, bare=bare: bare(path))
                mb = path.stat().st_size / 2**20
                print(f"{seq:>6} {name:<12} {mb:>10.1f} {ours:>9.1f} {peer:>9.1f} {ours / peer:>6.2f}")
                table.add(seq, name, mb, ours, peer, ours / peer)
                if seq == 512:
                    rec.headline(
                        f"checked read ÷ bare load, {name}, 512 tokens", ours / peer, "×", "≤ 2", ours / peer <= 2
                    )
            for view in ("overview", "head"):
                ms = median_ms(
                    lambda view=view, attn=attn, tokens=tokens: show(
                        attn, tokens, view=view, layer=3, head=4
                    )._repr_mimebundle_()
                )
                print(f"{seq:>6} show({view!r}) with both notebook renderings: {ms:.0f} ms")
                shows.add(seq, view, ms)
            del attn
    rec.note(f"{os.cpu_count()} cores visible, torch {torch.__version__}; load average {load_average()} at the end")
    rec.save()


if __name__ == "__main__":
    main()
