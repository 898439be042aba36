"""Hostile inputs for the command line, as a visitor or a careless script would give them (issue 13's measured cases
and more). Each runs `python -m models …` in its own bounded process; every one must end with exit 2 and one line on
stderr that says what stopped it. Shared by tests/cli/test_hostile.py (asserts) and bench/hostile.py (peaks, times).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The cat sat on the mat."
CORPUS = ROOT / "tests" / "hostile" / "corpus"
# The issue's own examples among the crafted files, each in its own process (exit 2, one line, bench's peak).
ATTENTION_FILES = {
    "st-no-offsets.safetensors": r"not a readable safetensors file: .*missing field `data_offsets`",
    "st-negative-shape.safetensors": r"not a readable safetensors file: .*expected usize",
    "st-layer-99999999999.safetensors": r"attentions\.99999999999 names a layer past the budget ATTENTION_LENS_FILE_LAYERS",
    "json-5000-digit-number.json": r"a JSON number of 5,001 characters; numbers here have at most 40",
    "json-type-ids-strings.json": r"token_type_ids must be whole numbers 0…1023",
    "heads-4096.npz": r"needs 4,096 heads; the budget ATTENTION_LENS_FILE_HEADS allows 256 heads",
}


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]  # after `python -m models`
    message: str  # a regular expression the one stderr line must match
    env: dict[str, str] = field(default_factory=dict)
    code: int = 2
    stdout: str | None = None  # a path to send stdout to (e.g. /dev/full); None = a pipe
    timeout: float = 120.0
    module: str = "models"  # what `python -m` runs (lens_testing.read_gguf for a GGUF file)


def _check(mask: str, expect: str = "causal", text: str = TEXT) -> list[str]:
    return ["check-mask", "--text", text, "--mask", mask, "--convention", "keep", "--expect", expect]


def _empty_dir(tmp: Path) -> Path:
    """A folder that holds no .txt, .jsonl or .parquet file (`stats --file` reads a folder of those)."""
    (tmp / "no-corpus").mkdir(exist_ok=True)
    return tmp / "no-corpus"


def _npy_header_only(path: Path, shape: tuple[int, ...]) -> Path:
    """An .npy whose header claims `shape` (float32) but holds 16 bytes of data."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
        f.write(b"\0" * 16)
    return path


def _npz_bomb(path: Path, mib: int) -> Path:
    """An .npz whose one member inflates to `mib` MiB of zeros (a few hundred kB on disk)."""
    n = mib << 20
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z, z.open("mask.npy", "w") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "|b1", "fortran_order": False, "shape": (n,)})
        chunk = b"\0" * (1 << 20)
        for _ in range(mib):
            f.write(chunk)
    return path


def _model_folder(path: Path, **config: object) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    cfg = dict(
        model_type="bert",
        vocab_size=100,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
    )
    cfg.update(config)
    (path / "config.json").write_text(json.dumps(cfg))
    (path / "model.safetensors").write_bytes(b"")
    (path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    return path


def build(tmp: Path) -> list[Case]:
    """Return every hostile case, writing the files they need under tmp."""
    import torch

    zero_d = tmp / "zero_d.npy"
    np.save(zero_d, np.array(1.0))
    sparse = tmp / "sparse.pt"
    torch.save(torch.tril(torch.ones(8, 8)).to_sparse(), sparse)
    fifo = tmp / "corpus.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    corpus = tmp / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence number {i} is here." for i in range(40)))
    big_text = "word " * 3000
    many_texts = [a for _ in range(17) for a in ("--text", "Hi.")]
    tuple43 = "(" + ",".join(["torch.ones(4096,4096)"] * 43) + ")[0][:seq,:seq]"  # 961 characters
    chain = "torch.arange(16777216)" + " % 3" * 120
    return [
        Case("mask window:<25 digits>", _check("window:" + "9" * 25), r"window:a 25-digit number is too large"),
        Case("expect window:<25 digits>", _check("causal", "window:" + "9" * 25), r"window"),
        Case("memory --seq <4000 digits>", ["memory", "--seq", "9" * 4000], r"--seq.*4000-digit"),
        Case("memory --batch 0", ["memory", "--batch", "0"], r"--batch: 0 is outside 1 … "),
        Case(
            "non-UTF-8 --text",
            ["export", "--text", os.fsdecode(b"\xff\xfe caf\xe9"), "--out", str(tmp / "x.npz")],
            r"not valid UTF-8",
        ),
        Case("stdout to /dev/full", ["info"], r"cannot write the output: No space left", stdout="/dev/full"),
        Case("stats --file /dev/zero", ["stats", "--file", "/dev/zero"], r"not a regular file"),
        Case("stats --file FIFO", ["stats", "--file", str(fifo)], r"not a regular file", timeout=60),
        Case("stats --file a folder without a corpus", ["stats", "--file", str(_empty_dir(tmp))], r"holds no \.txt"),
        Case(
            "expression: 43 tensors of 4096x4096",
            _check(tuple43),
            r"ATTENTION_LENS_EXPR_MB",
            env={"ATTENTION_LENS_EXPR_SECONDS": "120"},
        ),
        Case("expression: 120 chained % 3 on 16M", _check(chain), r"ATTENTION_LENS_EXPR_SECONDS"),
        Case("expression: int(inf)", _check("int(float('inf'))"), r"int\(\): cannot convert float infinity"),
        Case("expression: arange(0, 1e300, 1e-300)", _check("torch.arange(0, 1e300, 1e-300)"), r"arange"),
        Case("expression: huge integer product", _check(" * ".join(["4611686018427387904"] * 40)), r"too large"),
        Case(
            ".npy claiming (10^6, 10^6)",
            _check(str(_npy_header_only(tmp / "huge.npy", (10**6, 10**6)))),
            r"declares shape \(1000000, 1000000\)",
        ),
        Case(
            ".npz inflating past the budget",
            _check(str(_npz_bomb(tmp / "bomb.npz", 64))),
            r"once decompressed.*ATTENTION_LENS_MAX_UPLOAD_MB",
            env={"ATTENTION_LENS_MAX_UPLOAD_MB": "16"},
        ),
        Case("0-d .npy mask", _check(str(zero_d)), r"0-d"),
        Case(
            "sparse .pt mask (made dense, checked)",
            _check(str(sparse), text="a b c d e f"),
            r"",
            code=0,
        ),
        Case(
            "config: 10^9 layers",
            ["info", "--model", str(_model_folder(tmp / "layers", num_hidden_layers=10**9))],
            r"n_layers is 1000000000",
        ),
        Case(
            "config: 0 heads",
            ["info", "--model", str(_model_folder(tmp / "heads0", num_attention_heads=0))],
            r"n_heads is 0",
        ),
        Case(
            "config: -5 layers",
            ["info", "--model", str(_model_folder(tmp / "neg", num_hidden_layers=-5))],
            r"n_layers is -5",
        ),
        Case(
            "ATTENTION_LENS_MODELS=minilm, --model /etc",
            ["info", "--model", "/etc"],
            r"^error: this server offers only the models its operator listed in ATTENTION_LENS_MODELS: minilm$",
            env={"ATTENTION_LENS_MODELS": "minilm"},
        ),
        Case(
            "ATTENTION_LENS_MODELS=minilm, --model /no/such",
            ["info", "--model", "/no/such/folder"],
            r"^error: this server offers only the models its operator listed in ATTENTION_LENS_MODELS: minilm$",
            env={"ATTENTION_LENS_MODELS": "minilm"},
        ),
        Case(
            "text over the character budget",
            ["export", "--text", big_text, "--out", str(tmp / "y.npz")],
            r"ATTENTION_LENS_MAX_TEXT_CHARS allows 1,000",
            env={"ATTENTION_LENS_MAX_TEXT_CHARS": "1000"},
        ),
        Case(
            "17 texts in one padded batch",
            ["check-mask", *many_texts, "--mask", "causal", "--convention", "keep", "--expect", "causal"],
            r"ATTENTION_LENS_MAX_BATCH allows 16",
        ),
        Case(
            "corpus over the token budget",
            ["stats", "--file", str(corpus), "--no-importance"],
            r"ATTENTION_LENS_MAX_CORPUS_TOKENS allows 100",
            env={"ATTENTION_LENS_MAX_CORPUS_TOKENS": "100"},
        ),
        # Issue 26: generate's seed past torch's range, and crafted attention files (tests/hostile/corpus) as
        # `stats --attentions FILE`; every file of that corpus is also read in-process by tests/hostile.
        Case(
            "generate --seed 2**64",
            [
                "generate",
                "--model",
                "random:gpt2-tiny",
                "--prompt",
                "Hi",
                "--tokens",
                "2",
                "--top-k",
                "3",
                "--seed",
                str(2**64),
            ],
            r"--seed: 18,446,744,073,709,551,616 is outside 0 … 18,446,744,073,709,551,615",
        ),  # fmt: skip
        Case(
            "generate --seed 10**30",
            ["generate", "--model", "random:gpt2-tiny", "--prompt", "Hi", "--tokens", "2", "--seed", str(10**30)],
            r"--seed: a 31-digit number is outside 0",
        ),
        *[
            Case(f"stats --attentions {name}", ["stats", "--attentions", str(CORPUS / name), "--json"], message)
            for name, message in ATTENTION_FILES.items()
        ],
        Case(
            "stats --attentions heads-64x64.npz (4,096 heads, read)",
            ["stats", "--attentions", str(CORPUS / "heads-64x64.npz"), "--json"],
            r"",
            code=0,
        ),
        *issue41(tmp),
        Case(
            "a bad ATTENTION_LENS_* value",
            ["export", "--text", TEXT, "--out", str(tmp / "z.npz")],
            r"ATTENTION_LENS_MAX_BATCH must be a whole number",
            env={"ATTENTION_LENS_MAX_BATCH": "lots"},
        ),
    ]


def issue41(tmp: Path, full: bool = False) -> list[Case]:
    """Issue 41's sweep, the cases a test can afford (full: also those only the bench replays, on SmolLM2)."""
    from lens_testing import crafted

    fifo = tmp / "train.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    texts = {}
    for kind in crafted.TEXT_KINDS:
        texts[kind] = tmp / f"long-{kind}.txt"
        if full or kind in ("cjk", "nul"):
            texts[kind].write_text(crafted.long_text(kind, 400_000 if full else 120_000), encoding="utf-8")
    huge = crafted.model_folder(tmp / "bert-huge-in-bounds", crafted.BERT_HUGE_IN_BOUNDS)
    heads0 = crafted.model_folder(
        tmp / "llama-heads0",
        dict(model_type="llama", vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=0,
             intermediate_size=128),
    )  # fmt: skip
    nan_theta = crafted.model_folder(
        tmp / "llama-nan-theta",
        '{"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2, '
        '"num_attention_heads": 4, "intermediate_size": 128, "rope_theta": NaN}',
    )
    fifo_folder = crafted.model_folder(tmp / "config-fifo", {"model_type": "bert"})
    (fifo_folder / "config.json").unlink()
    os.mkfifo(fifo_folder / "config.json")
    out = str(tmp / "o.npz")
    import torch

    maps = torch.full((1, 1, 4, 4), 0.25)
    csr, quantized = tmp / "attn-sparse-csr.pt", tmp / "attn-quantized.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.save({"attentions": maps[0, 0].to_sparse_csr()}, csr)
        torch.save({"attentions": torch.quantize_per_tensor(maps, 0.01, 0, torch.quint8)}, quantized)
    cases = [
        Case(
            "stats --attentions sparse-CSR .pt",
            ["stats", "--attentions", str(csr)],
            r"sparse_csr tensor: save it dense",
        ),
        Case("stats --attentions quantized .pt", ["stats", "--attentions", str(quantized)], r"holds quint8 values"),
        Case("train --seed 2**64", ["train", "--seed", str(2**64)], r"--seed: a 20-digit number is outside 0"),
        Case("train --seed 10**30", ["train", "--seed", str(10**30)], r"--seed: a 31-digit number is outside 0"),
        Case("train --steps ²", ["train", "--steps", "²"], r"--steps: '²' is not a whole number"),
        Case("train --lr nan", ["train", "--lr", "nan"], r"--lr: 'nan' is not a decimal number"),
        Case(
            "export --layers ²",
            ["export", "--model", "random:tiny", "--text", TEXT, "--layers", "²", "--out", out],
            r"--layers: '²' is not an index or a range",
        ),
        Case(
            "export --heads ¹",
            ["export", "--model", "random:tiny", "--text", TEXT, "--heads", "¹", "--out", out],
            r"--heads: '¹' is not an index or a range",
        ),
        Case("stats --item ٣", ["stats", "--attentions", "x.npz", "--item", "٣"], r"--item: '٣' is not a whole number"),
        Case(
            "train --text-file FIFO",
            ["train", "--task", "text", "--text-file", str(fifo), "--steps", "1"],
            r"cannot read the training text .*: it is not a regular file",
            timeout=60,
        ),
        Case("info: bert-huge-in-bounds", ["info", "--model", str(huge)], r"ATTENTION_LENS_MODEL_MB allows 8,192 MB"),
        Case("info: llama with 0 heads", ["info", "--model", str(heads0)], r"n_heads is 0"),
        Case("info: a FIFO config.json", ["info", "--model", str(fifo_folder)], r"not a regular file", timeout=60),
        Case(
            "info: rope_theta NaN", ["info", "--model", str(nan_theta)], r"rope_theta is nan; it must be finite and > 0"
        ),
    ]
    if not full:  # in processes, the issue's own examples; every spelling is tested in process (test_options.py)
        lean = ("train --seed 2**64", "export --layers ²", "train --text-file FIFO", "info: bert-huge-in-bounds",
                "info: a FIFO config.json", "info: rope_theta NaN", "stats --attentions sparse-CSR .pt",
                "stats --attentions quantized .pt")  # fmt: skip
        cases = [c for c in cases if c.name in lean]
    models = ["random:tiny"] + (["minilm", "smollm2"] if full else [])
    for model in models:
        for kind, path in texts.items():
            if not path.exists():
                continue
            cases.append(
                Case(
                    f"export --model {model} --text-file {kind}",
                    ["export", "--model", model, "--text-file", str(path), "--layers", "0", "--heads", "0",
                     "--out", out],
                    r"",
                    code=0,
                )
            )  # fmt: skip
        if full:
            for kind, path in texts.items():
                cases.append(
                    Case(
                        f"stats --model {model} --text-file {kind}",
                        ["stats", "--model", model, "--text-file", str(path), "--json", "--no-importance"],
                        r"",
                        code=0,
                        stdout=os.devnull,
                    )
                )
    return cases


def command(case: Case) -> list[str]:
    return [sys.executable, "-m", case.module, *case.argv]


def gguf_cases(tmp: Path, big: bool = False) -> list[Case]:
    """Issue 41's crafted GGUF files, each read by `python -m lens_testing.read_gguf` (big: the sparse 24 GB one and
    the 256 MB header too)."""
    from lens_testing import crafted

    return [
        Case(name, [str(path)], expect, code=2 if expect else 0, module="lens_testing.read_gguf", timeout=60)
        for name, (path, expect) in crafted.gguf_cases(tmp / "gguf", big=big).items()
        if expect  # the valid small file is not a model transformers can build: its header passing is tested in process
    ]


def environment(case: Case) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_LENS_")}
    return {**keep, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **case.env}
