"""The classic mask bugs, built once: the one diagnoser the mask checker and the attention harness share.

`candidates(exp, real)` yields, in one priority order, every classic bug an expectation can be mistaken for: a
`Candidate` is the bug's phrase code (models.masks.phrases, `diag.<code>`), its values and its keep pattern
(batch or 1, T, T). `guesses(exp, real, view)` yields the other named masks a pattern might be (read from how
many keys its rows see). Each side matches them in its own view and takes the first that fits exactly:

- the checker (models.analysis.mask_checker) compares a mask's cells over the cells it judges (real query rows);
- the harness (models.masks.harness) compares a module's dependency pattern (own | eye over real query rows, a
  candidate as `dependence(keep, depth)` makes it: a row with no visible key reads every key, as softmax over
  finfo.min does, and each layer adds the residual path).

One meaning per bug: "transposed" is the position pattern's transpose with padding kept on the key axis; "off by
one" is a near miss of one term (`Expectation.neighbours`); "padding ignored", "padding on the query axis" and
"padding on the wrong side" differ from each other only in the padded rows or keys. A candidate with `every_row`
is told apart from its look-alike only on padded query rows, so a side matches it on every row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .expectations import Expectation, Term
from .phrases import Phrase


@dataclass(frozen=True)
class Candidate:
    """One classic bug: its code (a `diag.<code>` phrase), the phrase's values and its keep pattern (B or 1, T, T)."""

    code: str
    keep: torch.Tensor
    values: dict[str, Any] = field(default_factory=dict)
    every_row: bool = False  # differs from a look-alike only on padded query rows: match it on every row

    @property
    def phrase(self) -> Phrase:
        return Phrase(f"diag.{self.code}", self.values)


def padding_side(real: torch.Tensor) -> str | None:
    """Return 'right' or 'left' for a (batch, seq) real-token mask whose padded rows pad that end; None if unpadded."""
    padded = ~real.bool().all(-1)
    if not bool(padded.any()):
        return None
    return "right" if bool((~real[padded, -1]).all()) else "left"


def candidates(exp: Expectation, real: torch.Tensor) -> Iterator[Candidate]:
    """Yield the classic bugs `exp` can be mistaken for on a batch with these (batch, seq) real tokens, in order.

    Each keep is (batch or 1, T, T) bool. Made lazily: a side stops at the first that fits.
    """
    real = real.bool()
    B, T = real.shape
    pos = exp.position_keep(T)
    base = torch.ones(T, T, dtype=torch.bool) if pos is None else pos
    keys = real[:, None, :] if exp.padding else torch.ones(1, 1, T, dtype=torch.bool)  # padding on the key axis
    expected = base[None] & keys
    side = padding_side(real)
    if exp.padding and side is not None:
        yield Candidate("padding_keys_visible", base[None], every_row=True)
        yield Candidate("padding_on_queries", base[None] & real[:, :, None], every_row=True)
        flipped = base[None] & real.flip(-1)[:, None, :]
        if not torch.equal(flipped, expected.expand_as(flipped)):
            other = "left" if side == "right" else "right"
            sides = {"side": Phrase(f"side.{side}"), "other": Phrase(f"side.{other}")}
            yield Candidate("padding_wrong_side", flipped, sides)
    if pos is not None and not torch.equal(pos, pos.T):
        yield Candidate("transposed", pos.T[None] & keys)
    yield Candidate("inverted", ~expected, {"expect": exp.name})
    ones = torch.ones(1, T, T, dtype=torch.bool)
    yield Candidate("no_mask", ones)
    yield Candidate("everything_masked", ~ones)
    if pos is None:
        return
    if exp.term("causal") is not None:
        yield Candidate("diagonal_masked", expected & ~torch.eye(T, dtype=torch.bool))
    for code, values, near in exp.neighbours(T):
        yield Candidate(code, near[None] & keys, {**values, "expect": exp.name})
    if len(exp.positional) > 1:  # a term not applied at all: the pattern is the rest of the expectation
        for t in exp.positional:
            rest = Expectation(tuple(x for x in exp.terms if x != t))
            rest_pos = rest.position_keep(T)
            if rest_pos is None:
                continue
            code, values = ("causal_missing", {}) if t.kind == "causal" else ("term_missing", {"term": t.name})
            yield Candidate(code, rest_pos[None] & keys, {**values, "name": rest.name})


def guesses(exp: Expectation, real: torch.Tensor, view: torch.Tensor) -> Iterator[Candidate]:
    """Yield other named masks the pattern `view` (batch, T, T) might be: causal, window:W, prefix:P, and the
    expectation narrowed by a window, with W and P read from the keys its first row and its last real row see
    (row 0 of window:W sees W + 1 keys, of prefix:P P keys; the last row of causal+window:W sees W + 1). A guess
    that hides nothing is left out (that is no_mask, among the candidates)."""
    T = int(real.shape[-1])
    n_real = int(real[0].sum())
    first = int(view[0, 0].sum())
    last = int(view[0, n_real - 1].sum()) if n_real else 0
    keys = real.bool()[:, None, :] if exp.padding else torch.ones(1, 1, T, dtype=torch.bool)
    named = [Expectation((Term("causal"),)), Expectation((Term("window", max(first - 1, 0)),))]
    named.append(Expectation((Term("prefix", first),)))
    if exp.term("window") is None and exp.positional:
        named.append(Expectation((*exp.terms, Term("window", max(last - 1, 0)))))
    seen = {exp.name}
    for other in named:
        if other.name in seen:
            continue
        seen.add(other.name)
        keep = other.position_keep(T)
        if keep is not None and not bool(keep.all()):  # every key visible is no_mask, a candidate already
            yield Candidate("is_named", keep[None] & keys, {"name": other.name})


def dependence(keep: torch.Tensor, depth: int = 1) -> torch.Tensor:
    """Return the dependency pattern attention under `keep` (…, T, T) gives after `depth` layers, residuals included.

    A row with no visible key reads every key (softmax over finfo.min scores is uniform); each layer adds the
    residual path (the identity) and composes. What the harness measures of a module that applies `keep`.
    """
    T = keep.shape[-1]
    step = torch.where(keep.any(-1, keepdim=True), keep, torch.ones_like(keep)) | torch.eye(T, dtype=torch.bool)
    out = step
    for _ in range(max(depth, 1) - 1):
        out = (out.float() @ step.float()) > 0
    return out
