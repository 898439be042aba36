"""Attention masks: predicates, conventions (keep / drop / additive), named masks, files and expressions, the
grammar of expected masks, the classic-bug diagnoser (`diagnosis`, with its phrase table `phrases`) and
`check_attention` (`harness`, imported on use). One floor: nothing here imports the model (the encoder, the
network, attention); the mask checker runs the model, so it is an analysis, `models.analysis.mask_checker`.

Torch and numpy only; never imports streamlit, ui or viz."""

from .conventions import (
    AXES,
    CONVENTION_HELP,
    CONVENTIONS,
    HARD_NEGATIVE,
    MASK_FILE_SUFFIXES,
    MAX_ELEMENTS,
    MAX_FILE_BYTES,
    NAMED_MASKS,
    Placement,
    as_4d,
    as_tensor,
    causal_keep,
    check_convention,
    combine,
    describe_values,
    distinct_values,
    dtype_name,
    fit,
    format_value,
    is_named,
    named_keep,
    padding_keep,
    place,
    prefix_keep,
    read_as,
    to_keep,
    window_keep,
)
from .expectations import EXPECT_HELP, Expectation
from .expectations import parse as parse_expectation
from .expressions import evaluate, is_predicate_expression, predicate_expression
from .predicates import Predicate, as_predicate, materialise
from .sources import load_mask_bytes, load_mask_file, looks_like_file, resolve

__all__ = [
    "AXES",
    "CONVENTIONS",
    "CONVENTION_HELP",
    "HARD_NEGATIVE",
    "MASK_FILE_SUFFIXES",
    "MAX_ELEMENTS",
    "MAX_FILE_BYTES",
    "NAMED_MASKS",
    "Placement",
    "as_4d",
    "as_tensor",
    "causal_keep",
    "check_convention",
    "combine",
    "describe_values",
    "distinct_values",
    "dtype_name",
    "evaluate",
    "fit",
    "format_value",
    "is_named",
    "load_mask_bytes",
    "load_mask_file",
    "looks_like_file",
    "named_keep",
    "padding_keep",
    "parse_expectation",
    "Expectation",
    "EXPECT_HELP",
    "place",
    "is_predicate_expression",
    "predicate_expression",
    "Predicate",
    "as_predicate",
    "materialise",
    "prefix_keep",
    "read_as",
    "resolve",
    "to_keep",
    "window_keep",
]
