"""Our GPT-2 `encode` against transformers' eager GPT2Model with output_attentions=True: same weights, device, ids.

    python bench/decoder.py                        # GPT-2 small shape (random weights, saved and loaded as a folder)
    python bench/decoder.py --model gpt2           # real weights, from the Hugging Face cache
    python bench/decoder.py --device cuda

Both sides tokenize the text and return every layer's attention (ours: float32 maps on the CPU, as the pages get
them; theirs: the tuple of per-layer maps, moved to the CPU). Runs alternate in one process (ours, theirs, ours,
…) after warm-up, so drift in the machine's speed hits both. Prints medians and ours/theirs (≤ 1.0 = we are as
fast or faster). Target: ratio ≤ 1.0 at 128, 512 and 1024 tokens.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from functools import partial
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.results import Record, load_average, variant
from bench.timing import alternate
from models import load_model
from models.weights import shipped_tokenizer


def gpt2_small_folder(path: Path) -> Path:
    """Save a random GPT-2-small-shaped checkpoint (vocabulary 50257) with the project's byte-level BPE."""
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    GPT2Model(GPT2Config()).save_pretrained(path)
    shipped_tokenizer().save_pretrained(path)
    return path


def text_of(tokenizer, n_tokens: int) -> str:
    """Return a text that tokenizes to exactly n_tokens."""
    words = "the model looks at every token before it and weighs how much each one matters here . " * 400
    ids = tokenizer(words, add_special_tokens=False)["input_ids"][:n_tokens]
    text = tokenizer.decode(ids)
    assert len(tokenizer(text)["input_ids"]) == n_tokens, "the text does not round-trip to the same tokens"
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt2-small-shape", help="gpt2-small-shape (random weights) or a spec")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--lengths", default="128,512,1024")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, one per core)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from transformers import AutoTokenizer, GPT2Model
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    with tempfile.TemporaryDirectory() as tmp:
        path = gpt2_small_folder(Path(tmp)) if args.model == "gpt2-small-shape" else None
        spec = str(path) if path else args.model
        ours = load_model(spec, device=args.device)
        device = ours.device
        theirs = GPT2Model.from_pretrained(spec, attn_implementation="eager").to(device).eval()
        tok = AutoTokenizer.from_pretrained(spec)

        def run_theirs(text: str):
            with torch.inference_mode():
                enc = tok(text, return_tensors="pt").to(device)
                out = theirs(input_ids=enc["input_ids"], output_attentions=True)
                return [a.cpu() for a in out.attentions], out.last_hidden_state.cpu()

        c = ours.config
        print(
            f"model {ours.name}: {c.n_layers} layers, {c.n_heads} heads, d_model {c.d_model}, d_k {c.d_k}; "
            f"device {device}; torch {torch.__version__}; threads {torch.get_num_threads()}"
        )
        print(f"{'tokens':>6} {'ours ms':>9} {'transformers ms':>16} {'ratio':>6} {'max |Δattn|':>12}")
        shape = "GPT-2 small shape" if args.model == "gpt2-small-shape" else ours.name
        rec = Record(
            variant(
                "decoder",
                None if args.model == "gpt2-small-shape" else args.model,
                None if device.type == "cpu" else device.type,
            ),
            f"Our GPT-2 decoder against transformers' eager GPT2Model ({shape}, {device})",
        )
        table = rec.table(
            f"{shape}: {c.n_layers} layers, {c.n_heads} heads, d_model {c.d_model}; medians of {args.repeats}",
            ["tokens", "ours ms", "transformers ms", "ratio", "max |Δattn|"],
        )
        lengths = [int(x) for x in args.lengths.split(",")]
        curve: dict[str, list[float]] = {"ours": [], "transformers": []}
        for n in lengths:
            text = text_of(tok, n)
            mine, (ref, _) = ours.encode(text), run_theirs(text)
            err = float((mine.attentions - torch.stack(ref)[:, 0]).abs().max())
            mo, mt = alternate(
                [partial(ours.encode, text), partial(run_theirs, text)], args.warmup, args.repeats, device
            )
            print(f"{n:>6} {mo:>9.1f} {mt:>16.1f} {mo / mt:>6.2f} {err:>12.1e}")
            table.add(n, mo, mt, mo / mt, f"{err:.1e}")
            curve["ours"].append(mo)
            curve["transformers"].append(mt)
            if n == 512:
                rec.headline(f"decoder ÷ transformers eager, {n} tokens, {shape}, {device}", mo / mt, "×", "≤ 1.0",
                             mo / mt <= 1.0)  # fmt: skip
        rec.series(f"Decoder time against tokens ({shape}, {device})", "tokens", "ms", lengths, curve)
        rec.note(
            f"torch {torch.__version__}, {torch.get_num_threads()} threads; load average {load_average()} at the end"
        )
        rec.save()


if __name__ == "__main__":
    main()
