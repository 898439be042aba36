"""Command line: `python -m models COMMAND ...`, one module per command. Bad input → one line on stderr and exit 2;
1 is kept for a checker's FAIL.

Each command module has HELP, add_args(parser) and run(args) → exit code; COMMANDS lists them in help order.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import ModuleType

from ..encoder import TruncationWarning
from ..errors import AttnVizError
from . import check_mask, export, generate, info, memory, stats
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Parser, UsageError, add_model_args, add_text_args

COMMANDS: dict[str, ModuleType] = {
    "export": export,
    "info": info,
    "check-mask": check_mask,
    "memory": memory,
    "stats": stats,
    "generate": generate,
}

__all__ = [
    "COMMANDS",
    "EXIT_FAIL",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "add_model_args",
    "add_text_args",
    "build_parser",
    "main",
]


def build_parser() -> Parser:
    parser = Parser(prog="python -m models", description="Our BERT encoder and GPT-2 decoder from the command line.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, command in COMMANDS.items():
        command.add_args(sub.add_parser(name, help=command.HELP, description=command.HELP))
    return parser


def main(argv: list[str] | None = None) -> int:
    warnings.simplefilter("ignore", TruncationWarning)  # the commands print out.notes themselves
    try:
        args = build_parser().parse_args(argv)
        if not args.command:
            raise UsageError(f"python -m models: choose a command: {', '.join(COMMANDS)}")
        return COMMANDS[args.command].run(args)
    except AttnVizError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`… --json | head`): not our error. Point stdout at devnull so that Python's
        # final flush does not raise again (the recipe in the signal module's documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
