"""docs/cli.md from the argparse parsers themselves, so the reference cannot drift: `python tools/cli_docs.py`.

Every command of models.cli.COMMANDS gets its help line, a usage line and a table of its options (flag, default,
what it does) read from its parser, one example (EXAMPLES below; tests/docs/test_commands.py runs it like every
command block of the docs) and, where there is more to say, a few lines from NOTES. `--check` exits 1 when
docs/cli.md differs from what this would write (tests/docs/test_generated.py runs it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from models.cli import COMMANDS, build_parser  # noqa: E402

OUT = ROOT / "docs" / "cli.md"

# One example per command, run by the docs test on the bundled models (a trailing "# exit N" names another code).
EXAMPLES = {
    "export": 'python -m models export --model minilm --text "The cat sat on the mat." --out a.npz',
    "info": "python -m models info --model random:gpt2-tiny",
    "check-mask": 'python -m models check-mask --text "One two three four." --mask "torch.tril(torch.ones(seq, seq))" '
    "--convention keep --expect causal",
    "check-attention": 'python -m models check-attention --target "examples/causal_attention.py:CausalSelfAttention()" '
    "--expect causal",
    "memory": "python -m models memory --seq 4096 --dtype fp16 --heads-kv 4",
    "stats": 'python -m models stats --model minilm --text "The cat sat on the mat." --no-importance',
    "generate": 'python -m models generate --model random:gpt2-tiny --prompt "The cat sat on the mat. The cat" --tokens 8',
    "compare": 'python -m models compare --model minilm --text "The keys to the cabinet are here." '
    '--against-text "The keys to the cabinet is here."',
    "train": "python -m models train --task induction --steps 200 --seed 0",
    "perplexity": 'python -m models perplexity --model smollm2 --text "The cat sat on the mat. The cat sat on the mat." '
    "--cache sink:2+window:4 --json",
    "needle": "python -m models needle --model smollm2 --context 256 --depths 0,1 --json",
    "explain": 'python -m models explain --model smollm2 --text "The cat sat on the mat because it was tired." '
    "--layer 6 --head 4 --query -1 --key 2",
    "ablate": 'python -m models ablate --model smollm2 --text "The capital of France is" --heads 0.4 --kv-groups 3.1',
}

NOTES = {
    "export": """Writes `tokens`, `token_type_ids`, `attentions` (layers, heads, seq, seq) float32, `hidden_states`
(seq, d_model) float32 and `mask` (seq, seq) bool — no pickled objects: `np.load(path, allow_pickle=False)`.
With `--json` (and `--out FILE.json`) the same as JSON. `--mask FILE|EXPRESSION --convention keep|drop|additive`
runs the model under that mask and stores it converted, True = may attend ([Masks](pages/masks.md)).""",
    "info": """Prints the model's shape as JSON: layers, heads, d_model, d_k, vocabulary, positions, its kind
(`encoder` or `decoder`) and what it can do.""",
    "check-mask": """Judges a mask against what it is meant to be, on the real model: exit 0 PASS, 1 a check
fails (the report says which and why), 2 bad input. A predicate mask — an expression over `q_idx`, `kv_idx`, `b`,
`h` such as `"(kv_idx <= q_idx) & (q_idx - kv_idx < 4)"`, or `FILE.py:NAME` naming a FlexAttention `mask_mod`, a
transformers mask function or a `BlockMask` (importing the file runs its code) — needs no `--convention`.
Everything it checks: [Masks](pages/masks.md).""",
    "check-attention": """Judges your own attention module, function or a transformers model by what each output
depends on; exit 0 / 1 / 2 like `check-mask`. Importing a target runs its code. More targets (an instance, a function,
transformers folders) and what the report means: [Checking your own attention code](check-attention.md).""",
    "memory": """The tutorial's memory formulas; `--json` prints exactly `{"score_elements", "score_bytes",
"params"}`. The page and what the figures mean: [Memory](pages/memory.md).""",
    "stats": """Per-head statistics, pattern labels, redundancy and importance for `--text` (and `--text-b`), a
corpus `--file` or attention saved from any model (`--attentions`); a table for people, or `--json`. The JSON's
keys and units: [Heads](pages/heads.md#from-the-command-line). A corpus of any size (.txt, .jsonl, .parquet or a
folder) streams on this machine or on Ray (`--engine ray`): [Corpus at scale](corpus-at-scale.md).""",
    "compare": """Compares two runs head by head: any two of `--against-model`, `--against-text`, `--against-mask`
differ from run A. Same tokens: heads ranked by the Jensen–Shannon distance of their maps; other lengths: by how
far each statistic moved; `--weighted` compares value-weighted maps; `--json` ranks every head. Definitions:
[Metrics](METRICS.md#comparing-two-runs); the page: [Compare](compare.md).""",
    "train": """Trains a small decoder (GPT-2 or Llama family, `--family`) with plain PyTorch on a task whose
targets say which head must form; prints a line per record and a summary, `--out DIR` saves a checkpoint folder
transformers reads. Tasks, diagnostics and the §7 switches: [Training lab](training.md).""",
    "generate": """Needs a decoder. Greedy, or `--top-k K` sampling with `--seed S`; what `--json` and `--out`
hold: [Generation](pages/generation.md#from-the-command-line).""",
    "perplexity": """Needs a decoder. `nll` holds −log p(token t+1 | tokens ≤ t) for every token but the last; a bounded
cache evicts keys (their positions stay their own), so its result equals one pass under the matching mask and its
`cache_bytes_max` does not grow with the text: [Long-context lab](long-context-lab.md).""",
    "needle": """Needs a decoder. Each case's `prompt` is the exact text the model read; `heads` are sorted by
retrieval score (Wu et al. 2024): [Long-context lab](long-context-lab.md).""",
    "explain": """Splits one attention score (the pre-softmax logit q·k × scale, after rotation, before the mask) into
exact parts: by dimension, by rotary frequency pair (null without rotary) and by pairs of residual-stream components
(embeddings, each earlier head, each MLP, biases) with every norm's per-token scale frozen; each sums to the score.
`--json` holds the whole table. Worked example and definitions: [Why here](why-here.md),
[Metrics](METRICS.md#why-here-one-score-in-exact-parts).""",
    "ablate": """Removes query heads (`--heads L.H,…`) or every query head of a key/value group (`--kv-groups L.G,…`)
by zeroing their context before the output projection, and reports KL(original ‖ ablated) of the next-token
distribution (last position, nats), the top token's logit change and the KL at every position; `--texts-file`
adds the mean over its prompts with a 95 % bootstrap interval. Needs a decoder. [Why here](why-here.md#what-if).""",
}


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.dest}`"
    name = max(action.option_strings, key=len)
    if action.nargs == 0:
        return f"`{name}`"
    if action.choices:
        return f"`{name} {{{','.join(map(str, action.choices))}}}`"
    return f"`{name} {action.metavar or action.dest.upper()}`"


def _usage(name: str, parser: argparse.ArgumentParser) -> str:
    parts = [f"python -m models {name}"]
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        flag = _flag(a).strip("`")
        parts.append(flag if a.required else f"[{flag}]")
    return " ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return "required" if action.required else ""
    return f"`{action.default}`"


def commands() -> dict[str, argparse.ArgumentParser]:
    """Return each command's own parser, in COMMANDS order."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub.choices[name] for name in COMMANDS}


def render() -> str:
    lines = [
        "# Command line",
        "",
        "<!-- Generated by tools/cli_docs.py from the argparse parsers: edit those (or the tool), not this file. -->",
        "",
        "`python -m models COMMAND …` from the checkout, or `attention-lens COMMAND …` from any folder after",
        "`pip install -e .` (the same program). Exit codes: **0** done (a checker: PASS), **1** a checker says",
        "FAIL, **2** bad input, with one line on stderr. Every command that loads a model takes `--model`",
        "(a spec: see [Models](models.md)), `--device` and `--dtype`.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    parsers = commands()
    for name, p in parsers.items():
        lines.append(f"| [`{name}`](#{name}) | {_cell(p.description or '')} |")
    for name, p in parsers.items():
        about = (p.description or "").rstrip(".")
        lines += ["", f"## {name}", "", about[:1].upper() + about[1:] + ".", ""]
        lines += ["```text", _usage(name, p), "```", ""]
        lines += ["| option | default | what |", "|---|---|---|"]
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            lines.append(f"| {_flag(a)} | {_default(a)} | {_cell(a.help or '')} |")
        lines += ["", "```bash", EXAMPLES[name], "```"]
        if name in NOTES:
            lines += ["", NOTES[name]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is not what this would write")
    args = ap.parse_args()
    missing = [name for name in COMMANDS if name not in EXAMPLES]
    if missing:
        print(f"error: no example for {', '.join(missing)}: add one to EXAMPLES in tools/cli_docs.py", file=sys.stderr)
        return 2
    text = render()
    if args.check:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python tools/cli_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
