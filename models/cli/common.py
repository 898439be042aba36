"""What every command shares: exit codes, the one-line error parser, model and text arguments, safe writes."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..errors import AttnVizError

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
        help="minilm (bundled), an HF id (bert-base-uncased, gpt2, …), a folder, or random:tiny|minilm|bert-base|gpt2|gpt2-tiny",
    )
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:N")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"], help="half precision on GPU only")


def add_text_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text", required=True, help="the sentence to encode")
    p.add_argument("--text-b", default=None, help="optional second sentence (token type 1)")


def write_file(path: Path, write: Callable) -> None:
    try:
        with open(path, "wb") as f:
            write(f)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from err
