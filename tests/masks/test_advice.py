"""The checker's advice is a fix the checker itself then passes: apply each suggested fix and check again. A
transposed keep mask is not told to "pass ~mask, or declare drop" (that masks the diagonal: NaN rows)."""

from __future__ import annotations

import pytest

from models.analysis.mask_checker import EXAMPLES, check_mask, example_expect

SENTENCE = "The animal didn't cross the street because it was too tired."
TRIU = "torch.triu(torch.ones(seq, seq, dtype=torch.bool))"


def _fixes(report, expr: str, convention: str) -> list[tuple[str, str]]:
    """Return (expression, convention) for each fix the report suggests."""
    conv = report.finding("convention")
    out = []
    advice = conv.values.get("advice")
    if conv.code == "convention.mismatch" and advice is not None:
        if advice.code in ("advice.keep_as_drop", "advice.drop_as_keep"):  # "pass ~mask, or declare <apparent>"
            out += [(f"~({expr})", convention), (expr, conv.values["apparent"])]
    if [d.code for d in report.diagnosis] == ["diag.transposed"]:
        out.append((f"({expr}).transpose(-2, -1)", convention))
    return out


@pytest.mark.parametrize(
    ("expr", "convention"),
    [
        (TRIU, "keep"),  # transposed keep mask: the new user's case
        ("torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)", "keep"),  # a drop mask declared keep
        ("torch.tril(torch.ones(seq, seq, dtype=torch.bool))", "drop"),  # a keep mask declared drop
        ("torch.tril(torch.ones(seq, seq, dtype=torch.bool), diagonal=-1)", "drop"),  # transposed drop mask
    ],
    ids=["transposed-keep", "drop-as-keep", "keep-as-drop", "transposed-drop"],
)
def test_every_suggested_fix_passes_the_checker(minilm, expr, convention):
    report = check_mask(minilm, [SENTENCE], expr, convention, "causal")
    assert not report.ok
    fixes = _fixes(report, expr, convention)
    assert fixes, report.text()  # the report says how to fix it
    for fixed, conv in fixes:
        again = check_mask(minilm, [SENTENCE], fixed, conv, "causal")
        assert again.ok, f"the suggested fix {fixed} ({conv}) fails:\n{again.text()}"


def test_a_transposed_keep_mask_is_not_told_to_invert_it(minilm):
    report = check_mask(minilm, [SENTENCE], TRIU, "keep", "causal")
    conv = report.finding("convention")
    assert conv.code == "convention.no_fix" and conv.status == "warn"
    assert "~mask would make another wrong mask" in conv.english()
    assert [d.code for d in report.diagnosis] == ["diag.transposed"]
    assert EXAMPLES["bug_transposed"][:2] == (TRIU, "keep") and example_expect("bug_transposed", 5) == "causal"
