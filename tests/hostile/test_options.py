"""Issue 41: one integer parser for every integer option of every command (`cli.common.whole`): ASCII digits only,
range-checked from the digits before int() sees them, one line and exit 2 otherwise. Seeds within 0 … 2⁶⁴ − 1 (the
trainer's 0 … 2⁶³ − 1). Commands added later are held to the same rule: no option may take `type=int` or
`type=float`, whose spellings ('²', '٣', '1_0', 'nan', 10⁴⁰⁰⁰) reach int()/float()/torch as tracebacks.
"""

from __future__ import annotations

import argparse
import re

import pytest

from models.cli import build_parser, main
from models.cli.common import UsageError, ascii_digits, id_list, parse_whole, whole

# Spellings str.isdigit or int() accept that are not ASCII whole numbers, and numbers past any option's range.
NOT_WHOLE = ["²", "¹", "٣", "१२", "1_000", "0x10", "1e3", "1.0", "", " ", "+", "-", "--1", "½", "𝟙", "12\x00"]
TOO_LARGE = [str(10**40), "9" * 4000, "-" + "9" * 40]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _typed_options(kind: str) -> list[tuple[str, str]]:
    """(command, option) of every option whose type is cli.common's parser of `kind` ("whole number", "number")."""
    return [
        (name, action.option_strings[0])
        for name, p in _subparsers().items()
        for action in p._actions
        if action.option_strings and getattr(action.type, "__name__", "") == kind
    ]


def test_no_option_of_any_command_takes_int_or_float():
    for name, p in _subparsers().items():
        for action in p._actions:
            assert action.type not in (int, float), f"{name} {action.option_strings}: use cli.common.whole / number"


def test_every_command_has_its_integer_options_parsed():
    options = set(_typed_options("whole number")) | set(_typed_options("number"))
    for expected in [("train", "--seed"), ("train", "--layers"), ("train", "--lr"), ("memory", "--seq"),
                     ("generate", "--seed"), ("check-attention", "--pad"), ("stats", "--item"), ("compare", "--top")]:  # fmt: skip
        assert expected in options, expected


def _refused(argv: list[str], option: str) -> str:
    """Parse argv (nothing runs); return the refusal, which must name the option."""
    with pytest.raises(UsageError) as caught:
        build_parser().parse_args(argv)
    message = str(caught.value)
    assert "\n" not in message and f"argument {option}" in message, (argv[-1], message)
    return message


@pytest.mark.parametrize(("command", "option"), _typed_options("whole number"))
def test_every_integer_option_refuses_odd_spellings(command, option):
    for bad in [*NOT_WHOLE, *TOO_LARGE, "nan", "inf", "-inf", "3.5"]:
        _refused([command, option, bad], option)


@pytest.mark.parametrize(("command", "option"), _typed_options("number"))
def test_every_decimal_option_refuses_odd_spellings(command, option):
    for bad in ["nan", "NaN", "inf", "-inf", "1e999", "٣", "1_0", "", "0x1p3", "9" * 50, "-1"]:
        _refused([command, option, bad], option)


@pytest.mark.parametrize("text", NOT_WHOLE)
def test_the_parser_takes_ascii_digits_only(text):
    assert not ascii_digits(text)
    with pytest.raises(ValueError, match="not a whole number"):
        parse_whole(text, 0, 10**6)


def test_the_parser_reads_whole_numbers_and_checks_the_range():
    assert parse_whole("42", 0, 100) == 42 and parse_whole(" +7 ", 0, 100) == 7 and parse_whole("-3", -5, 5) == -3
    assert parse_whole("0000000000000000000000000000012", 0, 100) == 12  # leading zeros are not digits of value
    assert parse_whole(str(2**64 - 1), 0, 2**64 - 1) == 2**64 - 1
    with pytest.raises(ValueError, match=r"18,446,744,073,709,551,616 is outside 0 … 18,446,744,073,709,551,615"):
        parse_whole(str(2**64), 0, 2**64 - 1)
    with pytest.raises(ValueError, match=r"a 4000-digit number is outside"):
        parse_whole("9" * 4000, 0, 2**64 - 1)
    with pytest.raises(argparse.ArgumentTypeError, match="outside 1 … 4"):
        whole(1, 4)("0")


def test_index_lists_take_ascii_digits_only():
    assert id_list("0,2-3", 4, "layers") == [0, 2, 3]
    for bad in ["²", "¹", "0,²", "1-³", "٣", "1_0"]:
        with pytest.raises(Exception, match=r"--layers: .* is not an index or a range"):
            id_list(bad, 4, "layers")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--seed", str(2**64)], r"--seed: a 20-digit number is outside 0 … 9,223,372,036,854,775,807"),
        (
            ["train", "--seed", str(2**63)],
            r"--seed: 9,223,372,036,854,775,808 is outside 0 … 9,223,372,036,854,775,807",
        ),
        (["train", "--seed", "-1"], r"--seed: -1 is outside 0"),
        (["train", "--lr", "nan"], r"--lr: 'nan' is not a decimal number"),
        (["train", "--lr", "0"], r"--lr: 0 is outside the range: above 0 to 1"),
        (["train", "--max-seconds", "inf"], r"--max-seconds: 'inf' is not a decimal number"),
        (["generate", "--seed", str(2**64)], r"--seed: 18,446,744,073,709,551,616 is outside 0"),
        (["check-attention", "--seed", str(2**64 - 1)], r"--seed: 18,446,744,073,709,551,615 is outside 0"),
        (["memory", "--batch", "0"], r"--batch: 0 is outside 1 … 1,099,511,627,776"),
    ],
)
def test_seeds_and_numbers_are_refused_in_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert re.search(message, err), err
