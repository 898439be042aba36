"""What every command shares: exit codes, the one-line error parser, model and text arguments, safe writes."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings
from ..errors import AttnVizError
from ..files import read_text_prefix

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(AttnVizError):
    """Bad command-line arguments."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # one line, not usage + message; raises instead of NoReturn exit
        raise UsageError(f"{self.prog}: {message}")


SEED_MAX = 2**64 - 1  # what torch.Generator.manual_seed takes (numpy's SeedSequence takes any whole number ≥ 0)
_DIGITS = frozenset("0123456789")


def ascii_digits(text: str) -> bool:
    """Return whether `text` is one or more ASCII digits 0-9 (str.isdigit also takes '²', '٣' and '१', which int()
    refuses or reads as another number; int() also takes '1_000' and surrounding spaces)."""
    return bool(text) and all(c in _DIGITS for c in text)


def parse_whole(text: str, low: int, high: int) -> int:
    """Return the whole number `text` spells if it is within [low, high]; ValueError (one line) otherwise.

    Judged from its characters before int() sees them: ASCII digits with an optional sign, nothing else; a number
    of more digits than the bounds have is refused from its length (int() of 5,000 digits raises Python's
    digit-limit error; torch's seed overflows past 2⁶⁴ − 1).
    """
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a whole number")
    body = text.strip()
    negative = body.startswith("-")
    if body[:1] in "+-" and body:
        body = body[1:]
    if not ascii_digits(body):
        raise ValueError(f"{text[:20]!r} is not a whole number (ASCII digits 0-9 only)")
    significant = body.lstrip("0") or "0"
    if len(significant) > max(len(str(abs(low))), len(str(abs(high)))):
        raise ValueError(f"a {len(significant)}-digit number is outside {low:,} … {high:,}")
    value = -int(significant) if negative else int(significant)
    if not low <= value <= high:
        raise ValueError(f"{value:,} is outside {low:,} … {high:,}")
    return value


def whole(low: int, high: int) -> Callable[[str], int]:
    """Return an argparse type: a whole number in [low, high] (`parse_whole`). Every integer option of every command
    takes its value through this, so that no spelling reaches int() or an overflow as a traceback."""

    def parse(text: str) -> int:
        try:
            return parse_whole(text, low, high)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = "whole number"  # argparse names the type in its message
    return parse


def integer() -> Callable[[str], int]:
    """Return an argparse type for a whole number that fits 64 bits (−2⁶³ … 2⁶³ − 1), for an option whose command
    checks its own range afterwards with a message of its own (`--steps`, `--item`, `--top`)."""
    return whole(-(2**63), 2**63 - 1)


def seed(high: int = SEED_MAX) -> Callable[[str], int]:
    """Return an argparse type for a seed: 0 … high (default 2⁶⁴ − 1, torch.Generator's range)."""
    return whole(0, high)


def number(low: float, high: float, *, above: bool = False) -> Callable[[str], float]:
    """Return an argparse type: a finite decimal number in [low, high] ((low, high] with `above`), spelt in ASCII
    (float() takes 'nan', 'inf', '1_0' and other scripts' digits)."""

    def parse(text: str) -> float:
        body = text.strip() if isinstance(text, str) else ""
        if not body or len(body) > 40 or not all(c in "0123456789+-.eE" for c in body):
            raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a decimal number")
        try:
            value = float(body)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a decimal number") from None
        if not math.isfinite(value) or value < low or value > high or (above and value == low):
            bound = f"above {low:g}" if above else f"from {low:g}"
            raise argparse.ArgumentTypeError(f"{body} is outside the range: {bound} to {high:g}")
        return value

    parse.__name__ = "number"
    return parse


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        default="minilm",
        help="minilm or smollm2 (bundled), an HF id (bert-base-uncased, gpt2, HuggingFaceTB/SmolLM2-135M, Qwen/Qwen2.5-0.5B, "
        "…), a folder, or random:tiny|minilm|bert-base|gpt2|gpt2-tiny|smollm2|llama-tiny",
    )
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:N")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"], help="half precision on GPU only")


def add_text_args(p: argparse.ArgumentParser, text_file: bool = False) -> None:
    p.add_argument("--text", required=not text_file, default=None, help="the sentence to encode")
    if text_file:
        p.add_argument(
            "--text-file",
            default=None,
            help="read the text from a UTF-8 file instead (a long text: up to the model's positions)",
        )
    p.add_argument("--text-b", default=None, help="optional second sentence (token type 1)")


def text_of(args: argparse.Namespace) -> str:
    """Return --text, or the start of --text-file: at most ATTENTION_LENS_MAX_TEXT_CHARS characters, read as a
    bounded prefix in one pass (`files.read_text_prefix`: a 50 MB file costs what its first 400 kB cost), with a
    warning on stderr when the file goes on. Regular UTF-8 files only."""
    path = getattr(args, "text_file", None)
    if path is not None and args.text is not None:
        raise UsageError("give --text or --text-file, not both")
    if path is None:
        if args.text is None:
            raise UsageError("--text or --text-file is required")
        return str(args.text)
    limit = int(settings.limit("max_text_chars"))
    prefix = read_text_prefix(Path(path), "the text file", limit)
    if prefix.cut:
        print(f"warning: {prefix.note(f'the text file {path}', limit)}", file=sys.stderr)
    return prefix.text


PREFIX_TOKENS = 16  # characters tried per position at first (a position rarely covers more), then 4× as many


def fit_to_positions(enc: Any, text: str, text_b: str | None = None) -> str:
    """Return `text` cut just past the model's positions, found by tokenizing growing prefixes (16 characters per
    position, then ×4), so that a text of 10⁵ tokens is never tokenized whole for a model of 512 or 8,192 positions.

    The encoder's own truncation then cuts the last few tokens and says so. A pair (text_b) and a tokenizer without
    offsets are left to the encoder as they are.
    """
    tokenizer = enc.tokenizer
    limit = int(enc.max_tokens)
    if text_b is not None or not getattr(tokenizer, "is_fast", False):
        return text
    n = max(1024, PREFIX_TOKENS * limit)
    while n < len(text):
        batch = tokenizer(text[:n], add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        offsets = batch["offset_mapping"]
        if len(offsets) > limit:
            end = int(offsets[limit][0])
            if end > 0:
                return text[:end]
        n *= 4
    return text


def id_list(spec: str | None, n: int, what: str) -> list[int] | None:
    """Return the indices of a comma list ("0,29", "3-5") checked against 0 … n − 1; None for all (no list)."""
    if spec is None or not spec.strip():
        return None
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        lo, _, hi = part.partition("-")
        if not ascii_digits(lo) or (hi and not ascii_digits(hi)) or len(lo) > 6 or len(hi) > 6:
            raise UsageError(f"--{what}: {part[:20]!r} is not an index or a range like 3-5 (0 … {n - 1})")
        a, b = int(lo), int(hi or lo)
        if not 0 <= a <= b < n:
            raise UsageError(f"--{what}: {part} is outside 0 … {n - 1}")
        out += [i for i in range(a, b + 1) if i not in out]
    return out


def write_file(path: Path, write: Callable) -> None:
    try:
        with open(path, "wb") as f:
            write(f)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from err
