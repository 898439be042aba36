"""The mask checker: is an attention mask what it claims to be? Evidence from the mask itself and from the model.

`check_mask(encoder, texts, mask, convention, expect)` returns a `MaskReport`: an overall verdict and one
`Finding` per check, each with its evidence:

  shape       the mask's shape, the shape it broadcasts to, and which axis each of its axes lands on
  convention  the convention the values appear to use (keep / drop / additive) and whether it is the declared one
  leaks       cells the mask leaves visible that the expectation hides (counted, the first few listed)
  over        cells the mask hides that the expectation shows
  rows        query rows with no visible key, and what softmax makes of them: NaN with the tutorial's
              `masked_fill(..., -inf)` (and how far the NaN spreads through the real model), uniform with finfo.min
  behaviour   the real model under the mask: change the tokens the expectation hides (everything after position
              t; the padded positions) and measure how far the outputs that must not depend on them move (0)
  mass        the attention the model puts on forbidden keys after softmax (exactly 0 when the mask is right)

plus a diagnosis naming the classic bug when the mask is one (inverted, transposed, off by one, padding on the
query axis or the wrong side, padding ignored, a term missing, another named mask): the mask's cells against the
candidates of `models.masks.diagnosis`, the diagnoser check_attention shares. Messages are `Phrase`s (a code and
values, `models.masks.phrases`) so that the page can show them in any language; `Phrase.english()` is what the
CLI prints.

An analysis, not part of `models.masks`: it runs the model (the encoder, its layers one by one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .. import settings
from ..attention import Options
from ..encoder import PARITY_TOLERANCE, Encoder
from ..errors import InputError, MaskError
from ..masks import conventions as masks
from ..masks import diagnosis
from ..masks.expectations import Expectation
from ..masks.expectations import parse as parse_expectation
from ..masks.phrases import MESSAGES, Phrase, _jsonable
from ..masks.sources import resolve
from ..network import Network
from ..tokens import display_tokens

N_EXAMPLES = 5  # positions listed per finding
PERTURB_TOKENS = 2048  # token budget of the behavioural test's batch (perturbed copies × seq)
MAX_PERTURB = 16

_TRIL = "torch.tril(torch.ones(seq, seq, dtype=torch.bool))"
_TRIU1 = "torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)"
_BOTH = "(attention_mask[:, None, :, None] * attention_mask[:, None, None, :]).bool()"
_I, _J = "torch.arange(seq)[:, None]", "torch.arange(seq)[None, :]"
_BAND = f"({_I} - {_J} <= 3)"  # transformers' sliding_window=4: kv_idx > q_idx - 4
_BAND4 = f"({_I} - {_J} <= 4)"  # sliding_window=4 read as "4 tokens back": one too many
_BLOCKS = f"({_I} // 4 == {_J} // 4)"
_BLOCKS_FROM_1 = f"(({_I} + 1) // 4 == ({_J} + 1) // 4)"  # blocks counted as if position 0 were 1
_DOCS = f"(({_I} < seq // 2) == ({_J} < seq // 2))"  # two packed documents: the first seq // 2 positions, the rest
_DOCS_LE = f"(({_I} <= seq // 2) == ({_J} <= seq // 2))"  # <= moves the boundary: a token changes document
# Teaching examples, correct and buggy: key → (expression, declared convention, expectation, passes).
# The page lists them (labels and lessons in its locale files); tests/app/test_masks_page.py checks each verdict.
EXAMPLES: dict[str, tuple[str, str, str, bool]] = {
    "ok_tril": (_TRIL, "keep", "causal", True),
    "ok_float": ("torch.tril(torch.ones(seq, seq))", "keep", "causal", True),
    "ok_additive": ("torch.triu(torch.full((seq, seq), float('-inf')), diagonal=1)", "additive", "causal", True),
    "ok_finfo": (
        "torch.triu(torch.full((seq, seq), torch.finfo(torch.float32).min), diagonal=1)",
        "additive",
        "causal",
        True,
    ),
    "ok_mha": (_TRIU1, "drop", "causal", True),
    "ok_padding": ("attention_mask", "keep", "padding", True),
    "bug_inverted": (_TRIU1, "keep", "causal", False),
    "bug_additive_as_keep": ("torch.triu(torch.full((seq, seq), float('-inf')), diagonal=1)", "keep", "causal", False),
    "bug_01_additive": ("torch.tril(torch.ones(seq, seq))", "additive", "causal", False),
    "bug_diagonal": ("torch.tril(torch.ones(seq, seq, dtype=torch.bool), diagonal=-1)", "keep", "causal", False),
    "bug_next": ("torch.tril(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)", "keep", "causal", False),
    "bug_transposed": ("torch.triu(torch.ones(seq, seq, dtype=torch.bool))", "keep", "causal", False),
    "bug_padding_queries": ("attention_mask[:, None, :, None]", "keep", "padding", False),
    "bug_padding_visible": ("torch.ones(seq, seq, dtype=torch.bool)", "keep", "padding", False),
    "ok_sliding": (f"{_TRIL} & {_BAND}", "keep", "causal+window:3", True),
    "bug_window_off_by_one": (f"{_TRIL} & {_BAND4}", "keep", "causal+window:3", False),
    "ok_chunked": (f"{_TRIL} & {_BLOCKS}", "keep", "causal+chunk:4", True),
    "bug_chunk_boundary": (f"{_TRIL} & {_BLOCKS_FROM_1}", "keep", "causal+chunk:4", False),
    "ok_docs": (f"{_TRIL} & {_DOCS}", "keep", "causal+docs:{a},{b}", True),
    "bug_docs_neighbour": (f"{_TRIL} & {_DOCS_LE}", "keep", "causal+docs:{a},{b}", False),
    "bug_padding_side": ("attention_mask.flip(-1)", "keep", "padding", False),
    "bug_neg_inf_rows": (
        f"torch.zeros(batch, 1, seq, seq).masked_fill(~{_BOTH}, float('-inf'))",
        "additive",
        "padding",
        False,
    ),
    # Predicates (b, h, q_idx, kv_idx) → bool, as FlexAttention and transformers' masking_utils write masks.
    "ok_predicate": ("(kv_idx <= q_idx) & (q_idx - kv_idx < 4)", "keep", "causal+window:3", True),
    "bug_predicate_window": ("(kv_idx <= q_idx) & (q_idx - kv_idx <= 4)", "keep", "causal+window:3", False),
}


def example_expect(key: str, seq: int) -> str:
    """Return an example's expectation for an input of `seq` tokens (packed documents: seq // 2 and the rest)."""
    return EXAMPLES[key][2].format(a=seq // 2, b=seq - seq // 2)


@dataclass
class Finding(Phrase):
    """One check's outcome: status (pass, fail, warn, info, skip), the message, machine-readable evidence."""

    check: str = ""  # shape, convention, leaks, over, rows, behaviour or mass
    status: str = "info"  # pass, fail, warn, info or skip
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, **super().to_dict(), "data": _jsonable(self.data)}


def parse_expect(spec: str) -> Expectation:
    """Return the Expectation for 'causal', 'padding', 'causal+window:2', 'causal+docs:4,5', …; MaskError otherwise.

    The grammar is models.masks.expectations, shared with --mask, encode(mask=...) and the sidebar.
    """
    return parse_expectation(spec)


@dataclass
class MaskReport:
    """The checker's result. Arrays are numpy on the CPU; `attentions` is the model's attention under the mask."""

    verdict: str  # "pass" or "fail"
    summary: Phrase
    expect: str
    declared: str
    apparent: str  # "keep", "drop", "additive" or "unclear"
    source: str  # "tensor", "file", "named" or "expression"
    mask_shape: tuple[int, ...]
    mask_dtype: str
    values: str  # the distinct values, counted
    placement: masks.Placement
    findings: list[Finding]
    diagnosis: list[Phrase]
    tokens: list[list[str]]  # per sentence, padded with [PAD] to seq
    real: np.ndarray  # (batch, seq) bool, True = real token
    keep: np.ndarray  # (batch, heads or 1, q_pos, k_pos) bool: the mask as the declared convention reads it
    expected: np.ndarray  # (batch, q_pos, k_pos) bool
    judged: np.ndarray  # (batch, q_pos, k_pos) bool: the cells the verdict looks at (real query rows)
    attentions: np.ndarray  # (batch, layers, heads, q_pos, k_pos) float32, our encoder under the mask
    model: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    def finding(self, check: str) -> Finding:
        return next(f for f in self.findings if f.check == check)

    def failed(self) -> list[str]:
        return [f.check for f in self.findings if f.status == "fail"]

    def to_dict(self) -> dict[str, Any]:
        """Return everything but the big arrays, JSON-ready (the CLI's --json)."""
        return {
            "verdict": self.verdict,
            "summary": self.summary.english(),
            "expect": self.expect,
            "declared": self.declared,
            "apparent": self.apparent,
            "model": self.model,
            "mask": {
                "source": self.source,
                "shape": list(self.mask_shape),
                "dtype": self.mask_dtype,
                "values": self.values,
            },
            "placement": {
                "view": list(self.placement.view),
                "target": list(self.placement.target),
                "lands_on": list(self.placement.lands_on),
                "key_padding": self.placement.key_padding,
            },
            "failed": self.failed(),
            "findings": [f.to_dict() for f in self.findings],
            "diagnosis": [d.to_dict() for d in self.diagnosis],
            "tokens": self.tokens,
            "notes": self.notes,
        }

    def text(self) -> str:
        """Return the report as lines of English for a terminal."""
        lines = [self.summary.english()]
        lines.append(f"  mask: {self.source}, shape {self.mask_shape}, {self.mask_dtype}, {self.values}")
        for f in self.findings:
            lines.append(f"  {f.status.upper():<4}  {MESSAGES['check.' + f.check]:<14} {f.english()}")
        for d in self.diagnosis:
            lines.append(f"  diagnosis: {d.english()}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _fmt(x: float) -> str:
    """Return a figure for a message: exact 0 as '0', tiny as 1.2e-07, else 4 significant digits."""
    if x == 0:
        return "0"
    return f"{x:.2e}" if abs(x) < 1e-3 else f"{x:.4g}"


# ---- the checks ------------------------------------------------------------------------------------


def _positions(
    cells: torch.Tensor, tokens: list[list[str]], batch: int, per_head: bool
) -> tuple[list[str], list[list[int]]]:
    """Return the first few cells (b, h, q, k) as text and as lists; cells come from nonzero() on (B, H, T, T)."""
    shown, raw = [], []
    for b, h, q, k in cells[:N_EXAMPLES].tolist():
        where = (f"#{b + 1} " if batch > 1 else "") + (f"h{h} " if per_head else "")
        shown.append(f"{where}{q}→{k} ({tokens[b][q]}→{tokens[b][k]})")
        raw.append([b, h, q, k] if per_head else [b, q, k])
    return shown, raw


def _convention(
    raw4: torch.Tensor,
    declared: str,
    expected: torch.Tensor,
    judged: torch.Tensor,
    real: torch.Tensor,
    expect: str,
    values: str,
) -> tuple[str, Finding]:
    """Return (apparent convention, the convention finding)."""
    is_float = raw4.is_floating_point()
    v = raw4.double()
    has_nan = bool(torch.isnan(v).any()) if is_float else False
    zero_or_hard = bool(((v == 0) | (v <= masks.HARD_NEGATIVE)).all()) if is_float else False
    any_hard = bool((v <= masks.HARD_NEGATIVE).any()) if is_float else False
    is01 = raw4.dtype == torch.bool or bool(((v == 0) | (v == 1)).all())
    valid = {"keep": is01, "drop": is01, "additive": is_float and zero_or_hard}
    B, T = expected.shape[0], expected.shape[1]
    E = expected[:, None]  # (B, 1, T, T)
    J = judged[:, None]

    def agreement(keep: torch.Tensor) -> float:
        full = torch.broadcast_to(keep, (B, keep.shape[1], T, T))
        n = int(J.expand_as(full).sum())
        return float(((full == E) & J).sum()) / max(n, 1)

    apparent, why = "unclear", None
    if (is_float and any_hard and zero_or_hard) or (declared == "additive" and valid["additive"]):
        if any_hard:
            fill = "-inf" if bool(torch.isneginf(v).any()) else masks.format_value(float(v.min()), raw4.dtype)
            apparent, why = "additive", Phrase("why.additive", {"fill": fill})
        else:
            apparent, why = "additive", Phrase("why.additive_none")
    elif is01:
        agree = agreement(masks.read_as(raw4, "keep"))
        diag = torch.diagonal(
            torch.broadcast_to(masks.read_as(raw4, "keep"), (B, raw4.shape[1], T, T)), dim1=-2, dim2=-1
        )
        diag_real = diag[real[:, None, :].expand_as(diag)]
        if agree == 1.0:
            apparent, why = "keep", Phrase("why.exact", {"expect": expect})
        elif agree == 0.0:
            apparent, why = "drop", Phrase("why.exact", {"expect": expect})
        elif abs(agree - 0.5) >= 0.2:
            a = round(100 * max(agree, 1 - agree))
            apparent = "keep" if agree > 0.5 else "drop"
            why = Phrase("why.closer", {"agree": a, "other": 100 - a, "expect": expect})
        elif diag_real.numel() and bool(diag_real.all()):
            apparent, why = "keep", Phrase("why.diagonal")
        elif diag_real.numel() and not bool(diag_real.any()):
            apparent, why = "drop", Phrase("why.diagonal")

    base = {"values": values, "declared": declared, "apparent": apparent}
    data = {"apparent": apparent, "declared": declared, "valid_for_declared": valid[declared]}
    if has_nan:
        return apparent, Finding(
            "convention.invalid", {**base, "problem": Phrase("problem.nan")}, "convention", "fail", data
        )
    if apparent == declared:
        return apparent, Finding("convention.match", {**base, "why": why}, "convention", "pass", data)
    if apparent == "unclear":
        if valid[declared]:
            return apparent, Finding("convention.unclear", base, "convention", "pass", data)
        problem = "problem.soft" if declared == "additive" else "problem.not01"
        return apparent, Finding("convention.invalid", {**base, "problem": Phrase(problem)}, "convention", "fail", data)
    same = bool(torch.equal(masks.read_as(raw4, declared), masks.read_as(raw4, apparent)))
    if same:
        return apparent, Finding("convention.same_cells", base, "convention", "warn", data)
    if declared in ("keep", "drop") and apparent in ("keep", "drop") and why is not None and why.code != "why.exact":
        # Read the other way the mask comes closer, but it is not the expected mask either (a transposed tril read
        # as drop masks the diagonal): ~mask would be a new bug, not a fix. The cells are what is wrong.
        return apparent, Finding(
            "convention.no_fix", {**base, "why": why, "expect": expect}, "convention", "warn", data
        )
    if declared == "additive":
        advice = Phrase("advice.bool_as_additive", {"apparent": apparent})
    elif apparent == "additive":
        advice = Phrase("advice.additive_as_bool", {"declared": declared})
    else:
        advice = Phrase(f"advice.{declared}_as_{apparent}")
    return apparent, Finding("convention.mismatch", {**base, "why": why, "advice": advice}, "convention", "fail", data)


def _diagnose(
    keep: torch.Tensor, exp: Expectation, expected: torch.Tensor, judged: torch.Tensor, real: torch.Tensor
) -> list[Phrase]:
    """Return the classic bug the mask (batch, heads or 1, T, T) matches exactly, if any (models.masks.diagnosis).

    The mask's cells against each candidate over the judged cells (real query rows), or over every row for a
    candidate that differs from its look-alike only on padded query rows; then the other named masks it may be.
    """
    B, T = real.shape
    cells = torch.broadcast_to(keep, (B, keep.shape[1], T, T))

    def same(cand: torch.Tensor, every_row: bool = False) -> bool:
        eq = cells == cand[:, None]
        return bool(eq.all()) if every_row else bool((eq | ~judged[:, None]).all())

    if same(expected):
        return []
    for cand in diagnosis.candidates(exp, real):
        if same(cand.keep, cand.every_row):
            return [cand.phrase]
    for cand in diagnosis.guesses(exp, real, cells[:, 0]):
        if same(cand.keep):
            return [cand.phrase]
    return []


def _run_layers(
    model: Network,
    ids: torch.Tensor,
    types: torch.Tensor,
    keep: torch.Tensor | None,
    fill: float | None = None,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Return every layer's output (list of (B, T, d_model)) and NaN query rows per layer (list of (B, H, T)).

    The model's own forward loop (Network.iter_layers). fill is the score of hidden cells: None for our
    finfo.min, float("-inf") for the tutorial's `masked_fill(mask == 0, -inf)`, to show what -inf does to a row
    with no visible key.
    """
    outs, nan_rows = [], []
    for x, probs in model.iter_layers(ids, types, keep, options=lambda i: Options(fill=fill)):
        nan_rows.append(torch.isnan(probs).any(-1))  # (B, nh, T)
        outs.append(x)
    return outs, nan_rows


def _replacement_ids(ids: torch.Tensor, positions: torch.Tensor, enc: Encoder, gen: torch.Generator) -> torch.Tensor:
    """Return ids with the given positions replaced by other, ordinary tokens (never specials, never the same)."""
    special = torch.tensor(sorted(set(getattr(enc.tokenizer, "all_special_ids", []) or [])), dtype=torch.long)
    ordinary = torch.ones(enc.config.vocab_size, dtype=torch.bool)
    ordinary[special[special < enc.config.vocab_size]] = False
    allowed = ordinary.nonzero().squeeze(1)  # (n_allowed,)
    out = ids.clone()
    idx = torch.randint(0, len(allowed), (int(positions.sum()),), generator=gen)
    new = allowed[idx]
    same = new == out[positions]
    new[same] = allowed[(idx[same] + 1) % len(allowed)]  # a different token, even when the draw hits the old one
    out[positions] = new
    return out


def _behaviour(
    enc: Encoder,
    ids: torch.Tensor,
    types: torch.Tensor,
    keep4: torch.Tensor,
    exp: Expectation,
    expected: torch.Tensor,
    real: torch.Tensor,
    tokens: list[list[str]],
) -> Finding:
    """Change the tokens the expectation hides; the outputs that cannot depend on them must not move."""
    B, T = ids.shape
    L = enc.config.n_layers
    if not exp.padding and not exp.hides_by_position:
        return Finding("behaviour.skip", {"expect": exp.name}, "behaviour", "skip")
    # Which positions may each output depend on after l layers: the expected mask, with the residual path,
    # composed l times (for causal, prefix and padding this is the mask itself; a window widens by W per layer).
    step = (expected | torch.eye(T, dtype=torch.bool)).float()
    reach = [step]
    for _ in range(L - 1):
        reach.append((reach[-1] @ step > 0).float())

    plans: list[tuple[int, torch.Tensor, int | None]] = []  # (item, positions changed, t or None for padding)
    per_item = max(1, min(MAX_PERTURB, PERTURB_TOKENS // T) // B)
    if exp.hides_by_position:
        for b in range(B):
            n = int(real[b].sum())
            ts = sorted(set(np.linspace(0, n - 2, num=min(per_item, max(n - 1, 1))).round().astype(int).tolist()))
            for t in ts:
                pos = torch.zeros(T, dtype=torch.bool)
                pos[t + 1 : n] = True
                plans.append((b, pos, t))
    if exp.padding:
        for b in range(B):
            if not bool(real[b].all()):
                plans.append((b, ~real[b], None))
    if not plans:
        return Finding("behaviour.skip", {"expect": exp.name}, "behaviour", "skip")

    gen = torch.Generator().manual_seed(0)
    rows = [ids[b] for b in range(B)] + [_replacement_ids(ids[b], pos, enc, gen) for b, pos, _ in plans]
    item = list(range(B)) + [b for b, _, _ in plans]
    batch_ids = torch.stack(rows).to(enc.device)
    batch_types = types[item].to(enc.device)
    keep_b = keep4 if keep4.shape[0] == 1 else keep4[item]
    with torch.inference_mode():
        outs, _ = _run_layers(enc.model, batch_ids, batch_types, keep_b.to(enc.device))
    # All copies and layers at once: (layers, copies, seq) changes, kept only where nothing changed is reachable.
    item_of = torch.tensor([b for b, _, _ in plans])
    changed = torch.stack([pos for _, pos, _ in plans])  # (P, T)
    deltas, frees = [], []
    for layer in range(L):
        reachable = reach[layer][item_of].bool() & changed[:, None, :]  # (P, q, k)
        free = ~reachable.any(-1) & real[item_of]  # real outputs with no path to a changed token
        moved = (outs[layer][B:].float() - outs[layer][item_of.to(enc.device)].float()).abs().amax(-1).cpu()
        deltas.append(torch.where(free, moved, torch.zeros_like(moved)))
        frees.append(free)
    delta = torch.stack(deltas)  # (L, P, T)
    if not bool(torch.stack(frees).any()):
        return Finding("behaviour.skip", {"expect": exp.name}, "behaviour", "skip")
    layer, i, where = (int(n) for n in np.unravel_index(int(delta.argmax()), tuple(delta.shape)))
    change = float(delta[layer, i, where])
    per_plan = delta.amax(dim=(0, 2)).tolist()
    per_t = [{"item": b, "t": t, "max_change": m} for (b, _, t), m in zip(plans, per_plan, strict=True)]
    t = plans[i][2]
    b = plans[i][0]
    kinds = {p[2] is None for p in plans}
    what = Phrase("what.both" if len(kinds) == 2 else "what.padding" if True in kinds else "what.after")
    tol = PARITY_TOLERANCE if enc.dtype == torch.float32 else 1e-2
    data = {
        "max_change": change,
        "tolerance": tol,
        "layer": layer,
        "position": where,
        "item": b,
        "t": t,
        "variants": per_t,
    }
    if change <= tol:
        return Finding(
            "behaviour.pass",
            {"what": what, "n": len(plans), "expect": exp.name, "change": _fmt(change)},
            "behaviour",
            "pass",
            data,
        )
    what_fail = Phrase("what.padding") if t is None else Phrase("what.after_t", {"t": t})
    return Finding(
        "behaviour.fail",
        {"what": what_fail, "pos": where, "token": tokens[b][where], "change": _fmt(change), "layer": layer},
        "behaviour",
        "fail",
        data,
    )


@dataclass
class _Case:
    """One check's inputs, prepared once: the tokens, the mask as the model applies it, the expectation's cells."""

    enc: Encoder
    exp: Expectation
    declared: str
    ids: torch.Tensor  # (B, T)
    types: torch.Tensor
    tokens: list[list[str]]
    real: torch.Tensor  # (B, T) bool
    raw: torch.Tensor  # the mask as given
    raw4: torch.Tensor  # viewed to (B or 1, H or 1, T or 1, T or 1)
    keep4: torch.Tensor  # read in the declared convention, AND the model's own causal mask
    full: torch.Tensor  # keep4 broadcast to (B, H', T, T)
    keep: torch.Tensor  # (B, H or 1, T, T)
    per_head: bool
    expected: torch.Tensor  # (B, T, T)
    judged: torch.Tensor  # (B, T, T): the cells the verdict is about
    hidden_by_model: int  # cells the model's own causal mask hid
    placement: masks.Placement
    values: str

    @property
    def B(self) -> int:
        return int(self.ids.shape[0])


def _prepare(enc, texts, mask, convention, expect, texts_b) -> tuple[_Case, str, list[str]]:
    """Return the prepared case, where the mask came from and notes (truncated texts); MaskError/InputError."""
    declared = masks.check_convention(convention)
    exp = parse_expect(expect)
    if not texts:
        raise InputError("no text to check the mask on")
    settings.require("max_batch", 1 if isinstance(texts, str) else len(texts), "a padded batch of this many sentences")
    batch = enc.tokenize(texts, texts_b)
    ids, types, attention_mask = batch.input_ids, batch.token_type_ids, batch.attention_mask
    tokens = [display_tokens(row, enc.capabilities.token_display) for row in batch.tokens]  # readable in the report
    notes = [f"text {i + 1} truncated to {enc.max_tokens} tokens ({c} cut)" for i, c in enumerate(batch.cut) if c]
    B, T = ids.shape
    real = attention_mask.bool()
    if exp.padding and bool(real.all()):
        raise MaskError(
            "checking a padding mask needs a padded batch: give two or more texts of different lengths "
            "(on the command line, --text twice)"
        )
    raw, source = resolve(mask, seq=T, batch=B, heads=enc.config.n_heads, attention_mask=attention_mask)
    if source == "predicate":  # a predicate says True = may attend: keep, whatever was declared
        if declared != "keep":
            notes.append(f"a predicate mask is keep (True = may attend): the declared {declared} is not used")
        declared = "keep"
    placement = masks.place(tuple(raw.shape), B, enc.config.n_heads, T)
    raw4 = raw.reshape(placement.view)
    keep4 = masks.read_as(raw4, declared)  # (B or 1, H or 1, T or 1, T or 1): what code in that convention does
    hidden_by_model = 0
    if enc.capabilities.causal:
        # A causal model's own mask is ANDed with the user's inside every layer: judge what the model applies.
        tril = masks.causal_keep(T)
        hidden_by_model = int((torch.broadcast_to(keep4, (B, keep4.shape[1], T, T)) & ~tril).sum())
        keep4 = keep4 & tril
    full = torch.broadcast_to(keep4, (B, keep4.shape[1], T, T))
    per_head = keep4.shape[1] > 1 and not bool((full == full[:, :1]).all())
    judged = real[:, :, None] & (torch.ones(B, 1, T, dtype=torch.bool) if exp.padding else real[:, None, :])
    case = _Case(
        enc=enc,
        exp=exp,
        declared=declared,
        ids=ids,
        types=types,
        tokens=tokens,
        real=real,
        raw=raw,
        raw4=raw4,
        keep4=keep4,
        full=full,
        keep=full if per_head else full[:, :1],
        per_head=per_head,
        expected=exp.keep(T, real),
        judged=judged,
        hidden_by_model=hidden_by_model,
        placement=placement,
        values=masks.describe_values(raw),
    )
    return case, source, notes


def _shape_findings(c: _Case) -> tuple[str, list[Finding]]:
    """Where the mask's axes land, which convention its values look like, what a causal model hid itself."""
    p, T = c.placement, int(c.ids.shape[1])
    axes = ", ".join(f"axis {i} ({n}) → {name}" for i, (n, name) in enumerate(zip(p.shape, p.lands_on, strict=True)))
    shape_vals = {"shape": p.shape, "view": p.view, "target": p.target, "axes": axes}
    shape_data = {"view": p.view, "target": p.target, "lands_on": p.lands_on, "per_head": c.per_head}
    findings: list[Finding] = []
    if p.view[2] == T and p.view[3] == 1 and T > 1:
        findings.append(Finding("shape.queries", shape_vals, "shape", "warn", shape_data))
    else:
        code = "shape.key_padding" if p.key_padding else "shape.ok"
        findings.append(Finding(code, shape_vals, "shape", "info", shape_data))
    apparent, conv = _convention(c.raw4, c.declared, c.expected, c.judged, c.real, c.exp.name, c.values)
    findings.append(conv)
    if c.enc.capabilities.causal:
        hidden = c.hidden_by_model
        findings.append(Finding("shape.decoder", {"hidden": hidden}, "shape", "info", {"hidden": hidden}))
    return apparent, findings


def _cell_findings(c: _Case) -> list[Finding]:
    """Cells the mask lets through that the expectation hides (leaks), and the reverse (over-masking)."""
    J, E = c.judged[:, None], c.expected[:, None]
    n_judged = int(J.expand_as(c.keep).sum())
    findings = []
    for check, cells in (("leaks", (c.keep & ~E & J).nonzero()), ("over", (~c.keep & E & J).nonzero())):
        shown, raw_pos = _positions(cells, c.tokens, c.B, c.per_head)
        if len(cells):
            vals = {"n": len(cells), "expect": c.exp.name, "examples": ", ".join(shown)}
            findings.append(Finding(f"{check}.found", vals, check, "fail", {"count": len(cells), "first": raw_pos}))
        else:
            vals2 = {"expect": c.exp.name, "judged": n_judged}
            findings.append(Finding(f"{check}.none", vals2, check, "pass", {"count": 0}))
    return findings


def _row_finding(c: _Case, attentions: torch.Tensor) -> Finding:
    """Rows with no visible key: what -inf makes of them, end to end through the real model."""
    enc, B = c.enc, c.B
    empty = ~c.full.any(-1)  # (B, H', T)
    empty_real = empty & c.real[:, None, :]
    rows_data: dict[str, Any] = {"empty_rows": int(empty.sum()), "empty_real_rows": int(empty_real.sum())}
    if not bool(empty.any()):
        return Finding("rows.none", {}, "rows", "pass", rows_data)
    with torch.inference_mode():
        outs, nan_rows = _run_layers(
            enc.model, c.ids.to(enc.device), c.types.to(enc.device), c.keep4.to(enc.device), fill=float("-inf")
        )
    nan_out = int((torch.isnan(outs[-1].float()).any(-1).cpu() & c.real).sum())
    n_nan_rows = int(sum(int(r.sum()) for r in nan_rows))
    rows_data.update(
        {
            "nan_rows_neg_inf": n_nan_rows,
            "nan_outputs_neg_inf": nan_out,
            "finite_ours": bool(torch.isfinite(attentions).all()),
        }
    )
    cells = empty.nonzero()  # (b, h, q)
    shown = [
        (f"#{b + 1} " if B > 1 else "") + (f"h{h} " if c.per_head else "") + f"{q} ({c.tokens[b][q]})"
        for b, h, q in cells[:N_EXAMPLES].tolist()
    ]
    vals = {
        "n": len(cells),
        "examples": ", ".join(shown),
        "nan_rows": n_nan_rows,
        "nan_out": nan_out,
        "n_out": int(c.real.sum()),
    }
    if bool(empty_real.any()):
        return Finding("rows.found", vals, "rows", "fail", rows_data)
    if c.declared == "additive" and bool(torch.isneginf(c.raw).any()):
        return Finding("rows.padded_nan", vals, "rows", "fail", rows_data)
    return Finding("rows.padded", vals, "rows", "warn", rows_data)


def _mass_finding(c: _Case, attentions: torch.Tensor) -> Finding:
    """How much of the model's real attention lands on keys the expectation hides (after the mask)."""
    L = attentions.shape[1]
    forbidden = (~c.expected & c.judged)[:, None, None]  # (B, 1, 1, T, T)
    mass = (attentions * forbidden).sum(-1)  # (B, L, H, T)
    rows = c.real[:, None, None, :].expand_as(mass)
    max_mass = float(mass[rows].max()) if bool(rows.any()) else 0.0
    if max_mass == 0.0:
        return Finding("mass.zero", {}, "mass", "pass", {"max_mass": 0.0})
    flat = torch.where(rows, mass, torch.zeros_like(mass))
    b, layer, head, q = np.unravel_index(int(flat.argmax()), tuple(flat.shape))
    mean_mass = float(mass[rows].mean())
    vals = {
        "max_mass": _fmt(max_mass),
        "expect": c.exp.name,
        "layer": int(layer),
        "head": int(head),
        "q": int(q),
        "token": c.tokens[b][q],
        "mean_mass": _fmt(mean_mass),
    }
    data = {
        "max_mass": max_mass,
        "mean_mass": mean_mass,
        "item": int(b),
        "layer": int(layer),
        "head": int(head),
        "query": int(q),
        "per_layer_max": [float(mass[:, i][rows[:, i]].max()) for i in range(L)],
    }
    return Finding("mass.found", vals, "mass", "fail", data)


def check_mask(
    enc: Encoder,
    texts: list[str] | str,
    mask: Any,
    convention: str,
    expect: str,
    texts_b: list[str | None] | None = None,
) -> MaskReport:
    """Return the verdict on `mask`, declared in `convention`, against `expect`, on the texts through enc's model.

    texts: one text, or several (a padded batch, needed for expect='padding').
    mask: a tensor/array, a .npy/.npz/.pt path, a named mask ('causal'), an expression over seq, batch, heads
    and attention_mask (see models.masks.expressions), or a predicate (b, h, q_idx, kv_idx) → bool: a function
    (FlexAttention's mask_mod, a transformers mask function, a BlockMask) or an expression over q_idx and kv_idx
    (models.masks.predicates; read as keep whatever `convention` says). Its shape must broadcast to (batch, heads, q_pos, k_pos); a 2-D
    (batch, seq) mask is a key-padding mask. Raises MaskError/InputError for input that cannot be checked.

    One function per finding: the shape and convention, the cells (leaks, over-masking), rows with no visible key,
    the behaviour (outputs that must not move), the attention mass on hidden keys; then the diagnosis.
    """
    c, source, notes = _prepare(enc, texts, mask, convention, expect, texts_b)
    apparent, findings = _shape_findings(c)
    findings += _cell_findings(c)
    with torch.inference_mode():
        res = enc.model(c.ids.to(enc.device), c.types.to(enc.device), keep=c.keep4.to(enc.device))
        attentions = res.attentions.float().cpu()  # (B, L, H, T, T)
    findings.append(_row_finding(c, attentions))
    findings.append(_behaviour(enc, c.ids, c.types, c.keep4, c.exp, c.expected, c.real, c.tokens))
    findings.append(_mass_finding(c, attentions))
    exp, keep, expected, judged, real, raw, values, placement = (
        c.exp, c.keep, c.expected, c.judged, c.real, c.raw, c.values, c.placement
    )  # fmt: skip
    declared, tokens = c.declared, c.tokens
    diagnosis = _diagnose(keep, exp, expected, judged, real)
    n_failed = sum(f.status == "fail" for f in findings)
    n_checks = sum(f.status in ("pass", "fail", "warn") for f in findings)
    verdict = "fail" if n_failed else "pass"
    summary = Phrase(
        f"verdict.{verdict}", {"expect": exp.name, "declared": declared, "n_failed": n_failed, "n_checks": n_checks}
    )
    return MaskReport(
        verdict=verdict,
        summary=summary,
        expect=exp.name,
        declared=declared,
        apparent=apparent,
        source=source,
        mask_shape=tuple(raw.shape),
        mask_dtype=masks.dtype_name(raw),
        values=values,
        placement=placement,
        findings=findings,
        diagnosis=diagnosis,
        tokens=tokens,
        real=real.numpy(),
        keep=keep.numpy(),
        expected=expected.numpy(),
        judged=judged.numpy(),
        attentions=attentions.numpy(),
        model=enc.name,
        notes=notes,
    )
