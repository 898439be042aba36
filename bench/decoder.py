"""Our decoders against transformers' eager models with output_attentions=True: same weights, device, token ids.

    python bench/decoder.py                              # GPT-2 small shape (random) and the bundled SmolLM2-135M
    python bench/decoder.py --model smollm2 --lengths 128,512,2048
    python bench/decoder.py --model gpt2                 # real GPT-2 weights, from the Hugging Face cache
    python bench/decoder.py --device cuda

Forward: both sides return every layer's attention (ours: float32 maps on the CPU, as the pages get them;
theirs: the tuple of per-layer maps, moved to the CPU). Generation (causal LMs with a head): our `generate`
with our KV cache (greedy, the newest row of every layer and head kept per step, no self-check) against
transformers' `generate(do_sample=False)` with its cache, for the same new tokens. Runs alternate in one
process (ours, theirs, …) after warm-up, so drift in the machine's speed hits both. Prints medians and
ours/theirs (≤ 1.0 = we are as fast or faster). Targets: ≤ 1.0 at every length, and for generation.
Writes bench/results/decoder.json.
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

from bench.results import save
from bench.timing import alternate
from models import load_model
from models.lecture.generate import generate
from models.loading import shipped_tokenizer
from models.weights import bundled_decoder_dir

TARGET = 1.0
LENGTHS = {"gpt2-small-shape": "128,512,1024", "smollm2": "128,512,2048"}
GEN_PROMPT_TOKENS = 32
GEN_NEW_TOKENS = 32


def gpt2_small_folder(path: Path) -> Path:
    """Save a random GPT-2-small-shaped checkpoint (vocabulary 50257) with the project's byte-level BPE."""
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    GPT2Model(GPT2Config()).save_pretrained(path)
    shipped_tokenizer().save_pretrained(path)
    return path


def token_ids(tokenizer, n_tokens: int) -> torch.Tensor:
    """Return (1, n_tokens) ids of an ordinary English text, cut to exactly n_tokens."""
    words = "the model looks at every token before it and weighs how much each one matters here . " * 1000
    ids = tokenizer(words, add_special_tokens=False)["input_ids"][:n_tokens]
    assert len(ids) == n_tokens
    return torch.tensor([ids])


def bench_model(spec: str, lengths: list[int], args: argparse.Namespace, tmp: Path) -> dict:
    import transformers
    from transformers import AutoModelForCausalLM

    from models import families

    folder = gpt2_small_folder(tmp / "gpt2") if spec == "gpt2-small-shape" else None
    if spec == "smollm2":
        folder = bundled_decoder_dir()  # the dequantised GGUF: the same tensors on both sides
    ours = load_model(str(folder) if folder else spec, device=args.device)
    source = str(folder) if folder else spec
    device = ours.device
    fam = families.family(ours.config.model_type)
    theirs = getattr(transformers, fam.hf_model).from_pretrained(source, attn_implementation="eager")
    theirs = theirs.to(device).eval()

    def run_ours(ids: torch.Tensor):
        with torch.inference_mode():
            return ours.model(ids.to(device)).attentions.cpu()

    def run_theirs(ids: torch.Tensor):
        with torch.inference_mode():
            out = theirs(input_ids=ids.to(device), output_attentions=True)
            return [a.cpu() for a in out.attentions]

    c = ours.config
    print(
        f"\nmodel {ours.name}: {c.n_layers} layers, {c.n_heads} heads ({c.n_kv_heads} key/value), d_model "
        f"{c.d_model}, d_k {c.d_k}; device {device}; torch {torch.__version__}; threads {torch.get_num_threads()}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'tokens':>6} {'ours ms':>9} {'transformers ms':>16} {'ratio':>6} {'max |Δattn|':>12}")
    rows = []
    for n in lengths:
        ids = token_ids(ours.tokenizer, n)
        err = float((run_ours(ids)[0] - torch.stack(run_theirs(ids))[:, 0]).abs().max())
        repeats = args.repeats if n <= 1024 else max(3, args.repeats // 3)
        mo, mt = alternate([partial(run_ours, ids), partial(run_theirs, ids)], args.warmup, repeats, device)
        verdict = "met" if mo / mt <= TARGET else "NOT met"
        print(f"{n:>6} {mo:>9.1f} {mt:>16.1f} {mo / mt:>6.2f} {err:>12.1e}   target ≤ {TARGET}: {verdict}")
        rows.append({"tokens": n, "ours_ms": mo, "transformers_ms": mt, "ratio": mo / mt, "max_abs_diff": err})

    generation = None
    if ours.capabilities.generation and not args.no_generate:
        lm = AutoModelForCausalLM.from_pretrained(source, attn_implementation="eager").to(device).eval()
        prompt = ours.tokenizer.decode(token_ids(ours.tokenizer, GEN_PROMPT_TOKENS)[0])
        g = generate(ours, prompt, GEN_NEW_TOKENS, check=False)
        ids = torch.tensor([g.prompt_ids], device=device)
        new = len(g.generated_ids)

        def gen_theirs():
            with torch.inference_mode():
                return lm.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)

        same = gen_theirs()[0, ids.shape[1] :].tolist() == g.generated_ids
        mo, mt = alternate(
            [partial(generate, ours, prompt, new, check=False), gen_theirs], 1, max(3, args.repeats // 3), device
        )
        verdict = "met" if mo / mt <= TARGET else "NOT met"
        print(
            f"generation: {new} new tokens after {len(g.prompt_ids)}: ours {new / mo * 1e3:.1f} tokens/s, "
            f"transformers {new / mt * 1e3:.1f} tokens/s; time ratio {mo / mt:.2f} (target ≤ {TARGET}: {verdict}); "
            f"same tokens: {same}"
        )
        generation = {
            "prompt_tokens": len(g.prompt_ids),
            "new_tokens": new,
            "ours_tokens_per_s": new / mo * 1e3,
            "transformers_tokens_per_s": new / mt * 1e3,
            "ratio": mo / mt,
            "same_tokens": same,
        }
    return {
        "model": ours.name,
        "shape": {"layers": c.n_layers, "heads": c.n_heads, "kv_heads": c.n_kv_heads, "d_model": c.d_model},
        "forward": rows,
        "generation": generation,
        "target": TARGET,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", default="gpt2-small-shape,smollm2", help="comma list: gpt2-small-shape (random), smollm2, or specs"
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--lengths", default="", help="comma list of token counts (default: per model, see LENGTHS)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, one per core)")
    ap.add_argument("--no-generate", action="store_true", help="skip the generation comparison")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in [s.strip() for s in args.model.split(",") if s.strip()]:
            lengths = [int(x) for x in (args.lengths or LENGTHS.get(spec, "128,512,1024")).split(",")]
            results.append(bench_model(spec, lengths, args, Path(tmp)))
    save("decoder", {"models": results, "load_average": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
