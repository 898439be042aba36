"""What an attention mask is meant to be, as one small grammar: terms joined with `+`, all of which must hold.

One parser serves `--expect` and `--mask` on the command line, `encode(mask=...)`, the sidebar's mask picker, the
mask checker and the attention harness (`check_attention`):

  bidirectional   nothing hidden (BERT)
  causal          j ≤ i: each position sees itself and the positions to its left
  padding         padded keys are hidden (from the tokenizer's attention_mask; left or right padding alike)
  window:W        |i − j| ≤ W. transformers' `sliding_window=w` keeps kv_idx > q_idx − w, i.e. i − j ≤ w − 1,
                  so it is causal+window:(w−1)
  prefix:P        prefix-LM: the first P positions see each other, causal after (combine with nothing else needed)
  chunk:C         i and j in the same block of C positions (⌊i/C⌋ = ⌊j/C⌋); causal+chunk:C is Llama 4's chunked
                  attention
  docs:L1,L2,…    packed documents of these lengths, summing to the sequence: attention only inside a document

e.g. `causal+window:3` (sliding-window causal), `causal+docs:5,3,8` (packed sequences), `causal+padding`.
Term order does not matter; the canonical name keeps the order given. Torch only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from ..errors import MaskError
from . import predicates
from .predicates import Predicate

KINDS = ("bidirectional", "causal", "padding", "window", "prefix", "chunk", "docs")
EXPECT_HELP = (
    "causal, bidirectional, padding, window:W (|i−j| ≤ W), prefix:P, chunk:C, docs:L1,L2,… (lengths summing to "
    "seq), joined with +, e.g. causal+window:3 or causal+padding"
)
MAX_MASK_PARAM = 1 << 20  # window:W, prefix:P, chunk:C, docs lengths: beyond any model's positions
_ALIASES = {"none": "bidirectional", "full": "bidirectional"}
_TERM = re.compile(r"^(window|prefix|chunk):(\d+)$")
_DOCS = re.compile(r"^docs:(\d+(?:,\d+)*)$")


@dataclass(frozen=True)
class Term:
    """One part of an expectation: kind and its parameter (an int, a tuple of document lengths, or None)."""

    kind: str
    value: int | tuple[int, ...] | None = None

    @property
    def name(self) -> str:
        if self.value is None:
            return self.kind
        if isinstance(self.value, tuple):
            return f"{self.kind}:{','.join(str(n) for n in self.value)}"
        return f"{self.kind}:{self.value}"

    @property
    def predicate(self) -> Predicate | None:
        """Return this term as a mask predicate (models.masks.predicates); None when it hides nothing by position."""
        if self.kind in ("bidirectional", "padding"):
            return None
        if self.kind == "causal":
            return predicates.causal()
        if self.kind == "window":
            return predicates.band(int(self.value))  # type: ignore[arg-type]
        if self.kind == "prefix":
            return predicates.prefix(int(self.value))  # type: ignore[arg-type]
        if self.kind == "chunk":
            return predicates.chunk(int(self.value))  # type: ignore[arg-type]
        return predicates.documents(tuple(self.value))  # type: ignore[arg-type]

    def keep(self, seq: int, device: torch.device | str | None = None) -> torch.Tensor | None:
        """Return this term's (seq, seq) bool keep mask; None when it hides nothing by position."""
        pred = self.predicate
        if pred is None:
            return None
        self.check(seq)
        return predicates.dense(pred, seq, device)

    def check(self, seq: int) -> None:
        """Raise MaskError when this term cannot describe `seq` positions (docs lengths that do not sum to it)."""
        if self.kind == "docs" and sum(self.value) != seq:  # type: ignore[arg-type]
            raise MaskError(
                f"{self.name}: the document lengths sum to {sum(self.value)}, but the sequence has {seq} positions"  # type: ignore[arg-type]
            )


@dataclass(frozen=True)
class Expectation:
    """An intersection of terms: a position may attend to another only when every term allows it."""

    terms: tuple[Term, ...]

    @property
    def name(self) -> str:
        return "+".join(t.name for t in self.terms) if self.terms else "bidirectional"

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.terms)

    @property
    def padding(self) -> bool:
        return any(t.kind == "padding" for t in self.terms)

    @property
    def positional(self) -> tuple[Term, ...]:
        """The terms that hide by position (everything but padding and bidirectional)."""
        return tuple(t for t in self.terms if t.kind not in ("padding", "bidirectional"))

    @property
    def named(self) -> tuple[str, ...]:
        """The names of the terms other than padding (bidirectional included)."""
        return tuple(t.name for t in self.terms if t.kind != "padding")

    @property
    def hides_by_position(self) -> bool:
        return bool(self.positional)

    def term(self, kind: str) -> Term | None:
        return next((t for t in self.terms if t.kind == kind), None)

    @property
    def predicate(self) -> Predicate | None:
        """Return the positional terms as one predicate (their AND); None when nothing is hidden by position."""
        preds = [p for p in (t.predicate for t in self.positional) if p is not None]
        return predicates.and_masks(*preds) if preds else None

    def position_keep(self, seq: int, device: torch.device | str | None = None) -> torch.Tensor | None:
        """Return the (seq, seq) bool keep mask of the positional terms; None when nothing is hidden by position."""
        for t in self.positional:
            t.check(seq)
        pred = self.predicate
        return None if pred is None else predicates.dense(pred, seq, device)

    def keep(self, seq: int, real: torch.Tensor | None = None) -> torch.Tensor:
        """Return the expected keep: (batch, q_pos, k_pos) bool for (batch, seq) real-token flags, else (seq, seq).

        Padding hides keys only: a padded query row still sees the real keys (Hugging Face's convention; such
        rows are thrown away and never judged).
        """
        pos = self.position_keep(seq)
        if pos is None:
            pos = torch.ones(seq, seq, dtype=torch.bool)
        if real is None:
            return pos
        out = pos.expand(real.shape[0], seq, seq).clone()
        if self.padding:
            out &= real.bool()[:, None, :]
        return out

    def reach(self, seq: int, depth: int, real: torch.Tensor | None = None) -> torch.Tensor:
        """Return what each output may depend on after `depth` layers: keep, with the residual path, composed.

        Causal, prefix, chunk, docs and padding are closed under composition; a window widens by W per layer.
        Shape as keep(). Exact (boolean matrix powers).
        """
        step = self.keep(seq, real) | torch.eye(seq, dtype=torch.bool)
        out = step
        for _ in range(max(depth, 1) - 1):
            out = (out.float() @ step.float()) > 0
        return out

    def closure_name(self, depth: int) -> str:
        """Return the closure's name: windows widened to W·depth, everything else as is."""
        if depth <= 1:
            return self.name
        terms = tuple(Term("window", int(t.value) * depth) if t.kind == "window" else t for t in self.terms)  # type: ignore[arg-type]
        return Expectation(terms).name

    def replace(self, old: Term, new: Term) -> Expectation:
        return Expectation(tuple(new if t == old else t for t in self.terms))

    def neighbours(self, seq: int) -> list[tuple[str, dict[str, object], torch.Tensor]]:
        """Return the classic near misses of this expectation as (code, values, (seq, seq) keep), to match bugs by.

        code is 'off_by_one' (values: name — window:W±1, prefix:P±1, chunk:C±1, every docs boundary moved by
        one), 'next_visible' (a causal mask that also shows the next token, tril(…, diagonal=1)) or
        'chunk_shifted' (values: size, offset — blocks of C that start at `offset` instead of 0, as when the
        block index is counted from 1 or left padding is not subtracted).
        """
        out: list[tuple[str, dict[str, object], torch.Tensor]] = []
        for t in self.terms:
            rest = Expectation(tuple(x for x in self.terms if x != t)).position_keep(seq)
            variants: list[tuple[str, dict[str, object], torch.Tensor]] = []
            if t.kind in ("window", "prefix", "chunk"):
                for v in (int(t.value) - 1, int(t.value) + 1):  # type: ignore[arg-type]
                    if v >= (1 if t.kind == "chunk" else 0):
                        new = Term(t.kind, v)
                        variants.append(("off_by_one", {"name": self.replace(t, new).name}, new.keep(seq)))  # type: ignore[arg-type]
            if t.kind == "chunk":
                c = int(t.value)  # type: ignore[arg-type]
                for offset in range(1, c):
                    shifted = predicates.dense(predicates.chunk(c, offset), seq)
                    variants.append(("chunk_shifted", {"size": c, "offset": offset}, shifted))
            elif t.kind == "docs":
                lengths = list(t.value)  # type: ignore[arg-type]
                for k in range(len(lengths) - 1):
                    for d in (-1, 1):
                        moved = lengths.copy()
                        moved[k] += d
                        moved[k + 1] -= d
                        if min(moved) >= 1:
                            new = Term("docs", tuple(moved))
                            variants.append(("off_by_one", {"name": self.replace(t, new).name}, new.keep(seq)))  # type: ignore[arg-type]
            elif t.kind == "causal":
                variants.append(("next_visible", {}, predicates.dense(predicates.causal(diagonal=1), seq)))
            out += [(code, values, keep if rest is None else keep & rest) for code, values, keep in variants]
        return out


def parse(spec: str, allow_empty: bool = False, what: str = "expectation") -> Expectation:
    """Return the Expectation for 'causal', 'causal+window:3', 'causal+docs:5,3,8', 'causal+padding', ….

    Case and spaces do not matter. Refused with MaskError naming the grammar: unknown terms, a term twice,
    bidirectional combined with a positional term, window/prefix without a number, chunk:0, docs with a zero
    length. An empty spec is bidirectional when allow_empty, else refused. `what` names the spec in messages
    ("unknown mask 'sideways'" for --mask and encode(mask=...)).
    """
    if not isinstance(spec, str) or not spec.strip():
        if allow_empty and (spec is None or isinstance(spec, str)):
            return Expectation(())
        raise MaskError(f"say what the mask is meant to be: {EXPECT_HELP}")
    terms: list[Term] = []
    for raw in spec.lower().replace(" ", "").split("+"):
        raw = _ALIASES.get(raw, raw)
        if raw in ("bidirectional", "causal", "padding"):
            terms.append(Term(raw))
            continue
        m = _TERM.match(raw)
        if m:
            kind, n = m.group(1), _number(m.group(1), m.group(2))
            if kind == "chunk" and n < 1:
                raise MaskError("chunk:C needs C ≥ 1 positions per block")
            terms.append(Term(kind, n))
            continue
        m = _DOCS.match(raw)
        if m:
            lengths = tuple(_number("docs", n) for n in m.group(1).split(","))
            if min(lengths) < 1:
                raise MaskError(f"docs:{m.group(1)}: every document has at least one position")
            terms.append(Term("docs", lengths))
            continue
        where = "" if raw == spec.lower().replace(" ", "") else f" in {spec!r}"
        raise MaskError(f"unknown {what} {raw!r}{where}: use {EXPECT_HELP}")
    kinds = [t.kind for t in terms]
    dup = sorted({k for k in kinds if kinds.count(k) > 1})
    if dup:
        raise MaskError(f"expectation {spec!r} names {dup[0]} twice: each term at most once")
    if "bidirectional" in kinds and any(k not in ("bidirectional", "padding") for k in kinds):
        raise MaskError(f"expectation {spec!r}: bidirectional hides nothing, so it combines only with padding")
    return Expectation(tuple(terms))


def _number(kind: str, text: str) -> int:
    """Return the parameter as an int, refusing values beyond any model's positions before converting them."""
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_MASK_PARAM)) or int(digits) > MAX_MASK_PARAM:
        shown = digits if len(digits) <= 12 else f"a {len(digits)}-digit number"
        raise MaskError(f"{kind}:{shown} is too large: {kind}:N takes N from 0 to {MAX_MASK_PARAM:,}")
    return int(digits)


def is_expectation(spec: object) -> bool:
    """Return True when spec parses as an expectation ('causal', 'causal+window:2', …)."""
    if not isinstance(spec, str) or not spec.strip():
        return False
    try:
        parse(spec)
    except MaskError:
        return False
    return True
