"""Command line: `python -m models COMMAND ...`, one module per command. Bad input → one line on stderr and exit 2;
1 is kept for a checker's FAIL.

Each command module has HELP, add_args(parser) and run(args) → exit code; COMMANDS lists them in help order.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

from ..errors import AttnVizError, one_line
from ..openmp import cap_spinning
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Parser, UsageError, add_model_args, add_text_args

# command → its module, in help order. The modules (and torch) load on first use of COMMANDS: `--help` reads
# each module's HELP line from its source and answers at once.
COMMAND_MODULES: dict[str, str] = {
    "export": "export",
    "info": "info",
    "check-mask": "check_mask",
    "check-attention": "check_attention",
    "memory": "memory",
    "stats": "stats",
    "compare": "compare",
    "generate": "generate",
    "train": "train",
    "perplexity": "perplexity",
    "needle": "needle",
    "explain": "explain",
    "ablate": "ablate",
}
DESCRIPTION = "Our from-scratch transformers (BERT encoders, GPT-2, the Llama family) from the command line."


def commands() -> dict[str, ModuleType]:
    """Return every command's module (importing them: torch and the models)."""
    return {name: importlib.import_module(f".{mod}", __name__) for name, mod in COMMAND_MODULES.items()}


def __getattr__(name: str) -> object:
    if name == "COMMANDS":  # `from models.cli import COMMANDS`, loaded on first use
        return commands()
    raise AttributeError(f"module 'models.cli' has no attribute {name!r}")


def _help_line(module: str) -> str:
    """Return a command's HELP string read from its source, without importing it."""
    tree = ast.parse((Path(__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HELP" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return ""


def _light_help() -> str:
    """Return `python -m models --help` as argparse writes it, from the commands' HELP lines alone."""
    parser = Parser(prog="python -m models", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, module in COMMAND_MODULES.items():
        sub.add_parser(name, help=_help_line(module))
    return parser.format_help()


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
    parser = Parser(prog="python -m models", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, command in commands().items():
        command.add_args(sub.add_parser(name, help=command.HELP, description=command.HELP))
    return parser


def _check_utf8(argv: list[str]) -> None:
    """Refuse arguments that are not UTF-8 (Python keeps their bytes as lone surrogates that no tokenizer takes)."""
    for i, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"argument {i} is not valid UTF-8 text: pass text in UTF-8") from None


def _quiet_stdout() -> None:
    # Point stdout at devnull so that Python's final flush does not raise again (the recipe in the signal
    # module's documentation).
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv in (["-h"], ["--help"]):  # answered before torch loads
        print(_light_help(), end="")
        return EXIT_OK
    cap_spinning()  # before torch loads (models/openmp.py)
    from ..encoder import TruncationWarning

    warnings.simplefilter("ignore", TruncationWarning)  # the commands print out.notes themselves
    try:
        _check_utf8(argv)
        args = build_parser().parse_args(argv)
        if not args.command:
            raise UsageError(f"python -m models: choose a command: {', '.join(COMMAND_MODULES)}")
        code = commands()[args.command].run(args)
        sys.stdout.flush()  # a full disk or closed pipe shows here, inside our handlers
        return code
    except AttnVizError as err:
        print(f"error: {one_line(err, 400)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`… --json | head`): not our error.
        _quiet_stdout()
        return EXIT_OK
    except OSError as err:  # stdout on a full disk (/dev/full) and the like
        _quiet_stdout()
        print(f"error: cannot write the output: {err.strerror or one_line(err, 400)}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:
        print("error: out of memory: try a shorter input or a smaller model", file=sys.stderr)
        return EXIT_USAGE
    except RecursionError:
        print("error: the input is nested too deeply", file=sys.stderr)
        return EXIT_USAGE
