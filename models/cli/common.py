"""What every command shares: exit codes, the one-line error parser, model and text arguments, safe writes."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings
from ..errors import AttnVizError, BudgetError
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
            help="read the text from a UTF-8 file instead (a long text: up to the model's positions and "
            "ATTENTION_LENS_TEXT_WORK)",
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


# What each command does with every attention cell after the forward, in operations (settings.text_work's cell_ops).
# Measured on one busy core (SmolLM2, 1,024 → 2,048 tokens): stats' statistics cost ~36 ns a cell, the time of ~750 of
# the forward's multiply-adds (21 billion a second there); the other commands only write or read the maps asked for.
CELL_OPS = {"stats": 750.0}
MIN_CUT_TOKENS = 16  # below this a cut is no text worth reading: refuse instead


def token_count(enc: Any, text: str, text_b: str | None = None) -> int:
    """Return the tokens the model will read for `text` (and `text_b`), specials included, after its own cut."""
    return int(enc.tokenize([text], None if text_b is None else [text_b]).input_ids.shape[1])


def require_text_work(enc: Any, tokens: int | list[int], command: str, runs: int = 1) -> None:
    """Refuse, before any forward, `runs` runs of `command` on a text of `tokens` tokens (or on each of several
    texts, their work summed) over ATTENTION_LENS_TEXT_WORK, in one line that says what fits."""
    cfg, ops = enc.config, CELL_OPS.get(command, 0.0)
    counts = tokens if isinstance(tokens, list) else [tokens]
    work = runs * sum(settings.text_work(cfg, n, ops) for n in counts)
    if work > settings.limit("text_work"):
        longest = max(counts)
        what = (
            f"{command} on {longest:,} tokens of {enc.name}"
            if len(counts) == 1
            else (f"{command} on {len(counts):,} texts of up to {longest:,} tokens of {enc.name}")
        )
        fits = settings.tokens_within_work(cfg, longest, ops, runs * len(counts))
        raise BudgetError(
            settings.over_budget("text_work", math.ceil(work), what + (f", {runs} runs each" if runs > 1 else ""))
            + (
                f": give a shorter text (about {fits:,} tokens fit)"
                if len(counts) == 1
                else f": give shorter or fewer texts ({len(counts):,} of about {fits:,} tokens fit)"
            )
            + " or raise the budget"
        )


def fit_text(enc: Any, text: str, text_b: str | None = None, *, command: str) -> str:
    """Return `text` cut to what `command` may read: the model's positions (`fit_to_positions`), then what the work
    budget ATTENTION_LENS_TEXT_WORK allows (`settings.text_work`, a function of sizes), with one warning line on
    stderr when it cuts there. Asked before any forward; a pair (text_b), a tokenizer without offsets or a cut
    shorter than MIN_CUT_TOKENS is refused in one line (BudgetError) instead."""
    text = fit_to_positions(enc, text, text_b)
    n = token_count(enc, text, text_b)
    cfg, ops = enc.config, CELL_OPS.get(command, 0.0)
    work = settings.text_work(cfg, n, ops)
    if work <= settings.limit("text_work"):
        return text
    keep = settings.tokens_within_work(cfg, n, ops)
    tokenizer = enc.tokenizer
    if text_b is not None or keep < MIN_CUT_TOKENS or not getattr(tokenizer, "is_fast", False):
        require_text_work(enc, n, command)  # raises: over the budget, and no cut is made here
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
    target = keep - int(tokenizer.num_special_tokens_to_add(pair=False))  # the text's own tokens that fit
    cut = ""
    for _ in range(8):  # a cut at a token's start reads the tokens before it (a merge at the edge may add one)
        cut = text[: int(offsets[target][0])] if 0 < target < len(offsets) else ""
        over = token_count(enc, cut) - keep if cut.strip() else 0
        if over <= 0:
            break
        target -= over
    if not cut.strip() or token_count(enc, cut) > keep:
        require_text_work(enc, n, command)  # raises: no cut within the budget was found
    shown = token_count(enc, cut)
    print(
        f"warning: {command} reads the first {shown:,} of {n:,} tokens: all of them would need about "
        f"{work:,.0f} billion operations; the budget {settings.PREFIX}TEXT_WORK allows "
        f"{settings.limit('text_work'):,} (raise it to read more)",
        file=sys.stderr,
    )
    return cut


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
