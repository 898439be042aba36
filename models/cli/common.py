"""What every command shares: exit codes, the one-line error parser, model and text arguments, safe writes."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from .. import settings
from ..errors import AttnVizError
from ..files import read_user_file

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(AttnVizError):
    """Bad command-line arguments."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # one line, not usage + message; raises instead of NoReturn exit
        raise UsageError(f"{self.prog}: {message}")


def whole(low: int, high: int) -> Callable[[str], int]:
    """Return an argparse type: a whole number in [low, high], judged from its digits before int() sees them (int()
    of 5,000 digits raises Python's digit-limit error; torch's seed overflows past 2⁶⁴ − 1)."""

    def parse(text: str) -> int:
        digits = text.strip().removeprefix("+")
        negative = digits.startswith("-")
        body = digits[1:] if negative else digits
        if not (body.isascii() and body.isdigit()):
            raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a whole number")
        if len(body.lstrip("0")) > max(len(str(abs(low))), len(str(high))):
            raise argparse.ArgumentTypeError(f"a {len(body)}-digit number is outside {low:,} … {high:,}")
        value = -int(body) if negative else int(body)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value:,} is outside {low:,} … {high:,}")
        return value

    parse.__name__ = "whole number"  # argparse names the type in its message
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
    """Return --text, or the contents of --text-file (bounded by ATTENTION_LENS_MAX_TEXT_CHARS, UTF-8)."""
    path = getattr(args, "text_file", None)
    if path is not None and args.text is not None:
        raise UsageError("give --text or --text-file, not both")
    if path is None:
        if args.text is None:
            raise UsageError("--text or --text-file is required")
        return str(args.text)
    raw = read_user_file(Path(path), "the text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{path} is not UTF-8 text (byte {err.start}): save it as UTF-8") from None
    settings.require("max_text_chars", len(text), f"the text of {path}")
    return text


def id_list(spec: str | None, n: int, what: str) -> list[int] | None:
    """Return the indices of a comma list ("0,29", "3-5") checked against 0 … n − 1; None for all (no list)."""
    if spec is None or not spec.strip():
        return None
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()) or len(lo) > 6 or len(hi) > 6:
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
