"""`python -m models info`: load a model and print its shape as JSON."""

from __future__ import annotations

import argparse
import json

from ..weights import load_encoder
from .common import EXIT_OK, add_model_args

HELP = "load a model and print its shape"


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(load_encoder(args.model, device=args.device, dtype=args.dtype).describe(), indent=2))
    return EXIT_OK
