"""Judge any attention code by its behaviour: which inputs does each output really depend on?

`check_attention(target, expect="causal+window:3")` runs an engineer's own module, function or transformers model
on random inputs (batch, seq, d_model) and measures the exact dependency pattern through autograd: for every
output position (b, i) one vector-Jacobian product with a random cotangent gives ∂(u·y_bi)/∂x, whose norm at each
input position (b', j) is non-zero exactly when y_bi depends on x_b'j (almost surely). All B·T products run as
one batched backward pass (`is_grads_batched`, i.e. vmap over the backward), or one by one when the target's
operations do not support that. A dependence below NOISE (1e-6) of the largest one of that output is numerical
noise: a mask applied after softmax and then renormalised is exact in theory and passes. Every leak is then
confirmed by perturbing the forbidden inputs and watching the output move.

The pattern is judged against the expectation (models.masks.expectations) closed over `depth` layers: real query
positions may depend only on what the expectation allows; padded keys are never read by real queries; items of a
batch never see each other. A likely cause is named when the pattern is a known bug: the mask checker's classic
bugs, built once by models.masks.diagnosis and named in the same words (transposed, inverted, off by one, a term
missing, another named mask, padding ignored, on the query axis or on the wrong side), and what only outputs
show: batch and sequence axes swapped, a target judged too shallow, a mask applied after softmax without
renormalising, normalisation over the sequence axis, NaN from fully masked rows.

Importing a target runs its code: this is for your own code, from the command line or Python. The web app never
imports user code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import InputError, one_line
from . import diagnosis
from .expectations import Expectation
from .expectations import parse as parse_expectation
from .phrases import Phrase

NOISE = 1e-6  # a dependence below this fraction of the output's largest one is numerical noise
CONFIRM = 1e-5  # a perturbation must move the output by more than this (relative to its size) to confirm a leak
DEFAULT_SEQ, DEFAULT_D_MODEL, DEFAULT_BATCH = 16, 64, 2
MAX_SEQ, MAX_BATCH, MAX_D_MODEL = 4096, 16, 16_384
MAX_JACOBIAN_CELLS = 1 << 31  # (batch·seq)² · d_model: the whole dependency measurement, done in chunks
CHUNK_BYTES = 256 << 20  # one batched backward's cotangents and gradients
MAX_CONFIRM = 32  # perturbed forward passes to confirm leaks (queries sampled evenly beyond that)
N_SHOWN = 8  # pairs named in the text report per kind

_FILE_TARGET = re.compile(r"^(?P<file>.+\.py):(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?P<call>\(\))?$")


class TargetError(InputError):
    """The target cannot be loaded or run: a missing file or name, user code that raised, a wrong output shape."""


# ---- targets -------------------------------------------------------------------------------------------------


@dataclass
class Target:
    """Something to judge: fn(x (batch, seq, d_model), attention_mask (batch, seq) or None) → (batch, seq, d_out)."""

    fn: Callable[[torch.Tensor, torch.Tensor | None], Any]
    name: str
    takes_mask: bool
    d_model: int | None = None  # fixed by the target (a transformers model brings its width)
    layers: int | None = None  # known depth (transformers: num_hidden_layers)
    max_positions: int | None = None
    module: nn.Module | None = None


def _accepts_mask(obj: Any) -> bool:
    fn = obj.forward if isinstance(obj, nn.Module) else obj
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "attention_mask" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def from_callable(obj: Any, name: str | None = None) -> Target:
    """Return a Target for an nn.Module instance or any callable taking x (and maybe attention_mask=...)."""
    if isinstance(obj, type):
        raise TargetError(
            f"{getattr(obj, '__name__', obj)} is a class: pass an instance, or NAME() on the command line"
        )
    if not callable(obj):
        raise TargetError(f"{name or type(obj).__name__} is not callable: give an nn.Module instance or a function")
    takes = _accepts_mask(obj)

    def fn(x: torch.Tensor, attention_mask: torch.Tensor | None) -> Any:
        return obj(x, attention_mask=attention_mask) if attention_mask is not None and takes else obj(x)

    label = name or getattr(obj, "__qualname__", None) or type(obj).__name__
    return Target(fn, label, takes, module=obj if isinstance(obj, nn.Module) else None)


def load_file_object(spec: str, what: str = "target") -> tuple[Any, str]:
    """Return (the object, its label) for 'FILE.py:NAME', or 'FILE.py:NAME()' (called first).

    The file's folder goes on sys.path so that it can import its neighbours. Importing runs the file's code: the
    command line only (check-attention --target, check-mask --mask), never the web app.
    """
    m = _FILE_TARGET.match(spec.strip())
    if not m:
        raise TargetError(f"{what} {spec!r}: use FILE.py:NAME or FILE.py:NAME()")
    path = Path(m["file"]).expanduser().resolve()
    if not path.is_file():
        raise TargetError(f"{what} file {m['file']} does not exist")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    mod_name = f"_attention_target_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    spec_ = importlib.util.spec_from_file_location(mod_name, path)
    if spec_ is None or spec_.loader is None:
        raise TargetError(f"cannot import {path.name} as a Python module")
    module = importlib.util.module_from_spec(spec_)
    sys.modules[mod_name] = module
    try:
        spec_.loader.exec_module(module)
    except BaseException as err:
        sys.modules.pop(mod_name, None)
        if isinstance(err, KeyboardInterrupt):
            raise
        raise TargetError(f"importing {path.name} raised {one_line(err, 330, with_type=True)}") from None
    obj: Any = module
    for part in m["name"].split("."):
        if not hasattr(obj, part):
            raise TargetError(f"{path.name} has no {m['name']!r}")
        obj = getattr(obj, part)
    label = f"{m['file']}:{m['name']}"
    if m["call"]:
        try:
            obj = obj()
        except Exception as err:  # noqa: BLE001 — user code
            raise TargetError(f"calling {m['name']}() raised {one_line(err, 330, with_type=True)}") from None
        label += "()"
    return obj, label


def is_file_object(spec: object) -> bool:
    """Return True for 'FILE.py:NAME' or 'FILE.py:NAME()' (an object in a Python file)."""
    return isinstance(spec, str) and bool(_FILE_TARGET.match(spec.strip()))


def load_file_target(spec: str) -> Target:
    """Return the Target for 'FILE.py:NAME' (an instance or function) or 'FILE.py:NAME()' (called first).

    The file's folder goes on sys.path so that it can import its neighbours. Importing runs the file's code.
    """
    if not _FILE_TARGET.match(spec.strip()):
        raise TargetError(f"target {spec!r}: use FILE.py:NAME, FILE.py:NAME() or hf:FOLDER_OR_ID")
    obj, label = load_file_object(spec)
    if isinstance(obj, type):
        raise TargetError(
            f"{label.rsplit(':', 1)[1]} in {Path(label.rsplit(':', 1)[0]).name} is a class: write {label}() to build it first"
        )
    return from_callable(obj, label)


def load_hf_target(ref: str) -> Target:
    """Return the Target for a transformers model loaded by AutoModel (folder or Hub id), fed inputs_embeds.

    Decoder-only or encoder-only models only; remote code is never trusted.
    """
    from transformers import AutoConfig, AutoModel  # transformers loads only for hf: targets

    try:
        config = AutoConfig.from_pretrained(ref, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 — a missing folder, an unknown id, no network, remote code
        raise TargetError(f"cannot load hf:{ref}: {one_line(err, 330, with_type=True)}") from None
    if getattr(config, "is_encoder_decoder", False):
        raise TargetError(
            f"hf:{ref} is an encoder-decoder model ({config.model_type}): unsupported, give a decoder-only or "
            "encoder-only model"
        )
    try:
        model = AutoModel.from_pretrained(ref, trust_remote_code=False, dtype=torch.float32)
    except Exception as err:  # noqa: BLE001
        raise TargetError(f"cannot load hf:{ref}: {one_line(err, 330, with_type=True)}") from None
    if "inputs_embeds" not in inspect.signature(model.forward).parameters:
        raise TargetError(f"hf:{ref} ({type(model).__name__}) takes no inputs_embeds: unsupported")
    emb = model.get_input_embeddings()
    d_model = int(getattr(emb, "embedding_dim", 0) or getattr(config, "hidden_size", 0))
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    max_pos = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)

    def fn(x: torch.Tensor, attention_mask: torch.Tensor | None) -> Any:
        kw: dict[str, Any] = {"inputs_embeds": x}
        if attention_mask is not None:
            kw["attention_mask"] = attention_mask
        return (
            model(**kw, use_cache=False) if "use_cache" in inspect.signature(model.forward).parameters else model(**kw)
        )

    return Target(fn, f"hf:{ref} ({type(model).__name__})", True, d_model, layers, max_pos, module=model)


def load_target(target: Any) -> Target:
    """Return a Target for a spec ('FILE.py:NAME', 'FILE.py:NAME()', 'hf:FOLDER_OR_ID'), a module or a callable."""
    if isinstance(target, Target):
        return target
    if isinstance(target, str):
        s = target.strip()
        if s.startswith("hf:"):
            if not s[3:].strip():
                raise TargetError("hf: needs a folder or a Hugging Face id, e.g. hf:./gpt2-folder")
            return load_hf_target(s[3:].strip())
        return load_file_target(s)
    return from_callable(target)


# ---- the report ----------------------------------------------------------------------------------------------


@dataclass
class AttentionReport:
    """What each output depends on, judged. Pairs are [query, key] positions (all batch items together)."""

    verdict: str  # "pass" or "fail"
    expect: str
    judged_against: str  # the expectation's closure over depth layers
    target: str
    seq: int
    d_model: int
    batch: int
    depth: int
    pad: int
    padding_side: str
    leaks: list[list[int]]
    over_masked: list[list[int]]
    padded_reads: list[list[int]]
    batch_leaks: list[list[int]]
    cause: str | None  # the likely cause in English: diagnosis.english()
    # (seq + batch − 1, batch, seq): rows 0…seq−1 are item 0's outputs, one per position, then each other item's
    # outputs together; each row's dependence on every input position, divided by the row's largest
    dependence: np.ndarray
    real: np.ndarray  # (batch, seq) bool
    allowed: np.ndarray  # (batch, seq, seq) bool: the closure the verdict used (item 0 is judged pair by pair)
    nonfinite: int = 0  # real output positions that are NaN or inf
    seconds: float = 0.0
    method: str = ""
    notes: list[str] = field(default_factory=list)
    diagnosis: Phrase | None = None  # the cause as a phrase (models.masks.phrases): its code names the bug

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    def to_dict(self) -> dict[str, Any]:
        """The --json report: exactly the documented keys."""
        return {
            "verdict": self.verdict,
            "expect": self.expect,
            "leaks": self.leaks,
            "over_masked": self.over_masked,
            "padded_reads": self.padded_reads,
            "batch_leaks": self.batch_leaks,
            "cause": self.cause,
        }

    def text(self) -> str:
        """Return the report as lines of English for a terminal or an AssertionError."""
        over = f" (its closure over {self.depth} layers: {self.judged_against})" if self.depth > 1 else ""
        if self.ok:
            head = f"PASS: every output depends exactly on what {self.expect} allows{over}."
        else:
            head = f"FAIL: the outputs do not depend on the inputs as {self.expect} allows{over}."
        pad = f", item 0 padded at {self.pad} positions on the {self.padding_side}" if self.pad else ""
        lines = [
            head,
            f"  target: {self.target}; batch {self.batch}, seq {self.seq}, d_model {self.d_model}{pad}; "
            f"{self.method}, {self.seconds:.2f} s",
        ]

        def pairs(ps: list[list[int]], sep: str = "→") -> str:
            shown = ", ".join(f"{q}{sep}{k}" + (" [pad]" if self._padded_key(k) else "") for q, k in ps[:N_SHOWN])
            return shown + (f", … ({len(ps) - N_SHOWN} more)" if len(ps) > N_SHOWN else "")

        lines.append(
            f"  leaks: {len(self.leaks)} · over-masked: {len(self.over_masked)} · padded reads: "
            f"{len(self.padded_reads)} · batch leaks: {len(self.batch_leaks)}"
            + (f" · non-finite outputs: {self.nonfinite}" if self.nonfinite else "")
        )
        if self.leaks:
            lines.append(f"  leaks (query i reads key j it must not see): {pairs(self.leaks)}")
        if self.over_masked:
            lines.append(f"  over-masked (query i never reads key j it may see): {pairs(self.over_masked)}")
        if self.padded_reads:
            lines.append(f"  padded reads (a real query reads a padded key): {pairs(self.padded_reads)}")
        if self.batch_leaks:
            shown = ", ".join(f"item {a} reads item {b}" for a, b in self.batch_leaks[:N_SHOWN])
            lines.append(f"  batch leaks: {shown}")
        if self.cause:
            lines.append(f"  likely cause: {self.cause}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _padded_key(self, k: int) -> bool:
        return bool(self.pad) and not bool(self.real[0, k])


# ---- measuring -----------------------------------------------------------------------------------------------


def _output(out: Any, shape: tuple[int, int]) -> torch.Tensor:
    """Return the target's output tensor: itself, or the first item of a tuple / ModelOutput; check its shape."""
    y = out
    if not isinstance(y, torch.Tensor):
        if hasattr(y, "to_tuple"):
            y = y.to_tuple()
        if isinstance(y, tuple | list) and y and isinstance(y[0], torch.Tensor):
            y = y[0]
    if not isinstance(y, torch.Tensor):
        raise TargetError(
            f"the target returned {type(out).__name__}; it must return a tensor (batch, seq, d_model), or a tuple "
            "or ModelOutput whose first item is one"
        )
    if y.dim() != 3 or tuple(y.shape[:2]) != shape:
        raise TargetError(
            f"the target returned shape {tuple(y.shape)}; expected (batch, seq, d_model) = ({shape[0]}, {shape[1]}, …)"
        )
    if not y.is_floating_point():
        raise TargetError(f"the target returned {y.dtype} values; expected floats")
    return y


class _Runner:
    """Calls the target, turning anything its code raises into one line."""

    def __init__(self, target: Target, attention_mask: torch.Tensor | None, shape: tuple[int, int]) -> None:
        self.target, self.mask, self.shape = target, attention_mask, shape

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        try:
            out = self.target.fn(x, self.mask)
        except TargetError:
            raise
        except Exception as err:  # noqa: BLE001 — user code
            raise TargetError(f"the target raised {one_line(err, 330, with_type=True)}") from None
        return _output(out, self.shape)


def _dependence(run: _Runner, x: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Return (dep (T + B − 1, B, T) ≥ 0, y, method): what each output depends on, ‖∂(u·y)/∂x_b'j‖.

    Rows 0…T−1 are the outputs of batch item 0, one position each (item 0 is the one with padding, judged pair
    by pair); row T + b − 1 is all outputs of item b ≥ 1 together (a random u per position, so nothing cancels),
    which is enough to see whether item b reads another item. u is random, so a non-zero block of the Jacobian
    gives a non-zero product (almost surely).
    """
    B, T, D = x.shape
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        y = run(x)
    n = T + B - 1
    if not y.requires_grad:
        return torch.zeros(n, B, T), y.detach(), "no gradient (the output does not depend on the input)"
    Dout = y.shape[-1]
    gen = torch.Generator().manual_seed(seed + 1)
    u = torch.randn(B, T, Dout, generator=gen, dtype=y.dtype)
    cot_all = torch.zeros(n, B, T, Dout, dtype=y.dtype)
    cot_all[torch.arange(T), 0, torch.arange(T)] = u[0]
    for b in range(1, B):
        cot_all[T + b - 1, b] = u[b]
    per = max(1, CHUNK_BYTES // max(1, 4 * B * T * (D + Dout)))
    dep = torch.zeros(n, B, T)
    batched = True
    for start in range(0, n, per):
        cot = cot_all[start : start + per]
        try:
            if batched:
                try:
                    (g,) = torch.autograd.grad(y, x, cot, retain_graph=True, is_grads_batched=True)
                except (RuntimeError, NotImplementedError, TypeError):
                    batched = False
            if not batched:
                g = torch.stack([torch.autograd.grad(y, x, c, retain_graph=True)[0] for c in cot])
        except TargetError:
            raise
        except Exception as err:  # noqa: BLE001 — the target's backward is user code too
            raise TargetError(f"the target's backward pass raised {one_line(err, 330, with_type=True)}") from None
        dep[start : start + per] = torch.nan_to_num(g.detach().float(), nan=float("inf")).norm(dim=-1)
    k = -(-n // per)
    method = (
        f"{k} batched backward pass{'es' if k > 1 else ''} (vmap over {n} output rows)"
        if batched
        else f"{n} backward passes (the target's ops do not batch under vmap)"
    )
    return dep, y.detach(), method


def _jacobian_row(run: _Runner, x: torch.Tensor, b: int, i: int) -> torch.Tensor:
    """Return the full Jacobian of y[b, i] with respect to x: (d_out, B, T, D)."""
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        y = run(x)
    Dout = y.shape[-1]
    cot = torch.zeros(Dout, *y.shape, dtype=y.dtype)
    cot[torch.arange(Dout), b, i, torch.arange(Dout)] = 1
    try:
        (g,) = torch.autograd.grad(y, x, cot, is_grads_batched=True)
    except (RuntimeError, NotImplementedError, TypeError):
        g = torch.stack([torch.autograd.grad(y, x, c, retain_graph=True)[0] for c in cot])
    return g.detach().double()


def _moved(y0: torch.Tensor, y1: torch.Tensor) -> torch.Tensor:
    """Return how far each output position moved, relative to its own size: (B, T)."""
    scale = y0.abs().amax(-1).clamp_min(1e-30)
    return torch.nan_to_num((y1 - y0).abs().amax(-1) / scale, nan=float("inf"))


# ---- judging -------------------------------------------------------------------------------------------------


def _rank(m: torch.Tensor) -> int:
    if m.numel() == 0:
        return 0
    s = torch.linalg.svdvals(m)
    return int((s > s.max() * 1e-6).sum()) if float(s.max()) > 0 else 0


def _pairs(cells: torch.Tensor) -> list[list[int]]:
    """(B, T, T) bool → sorted unique [q, k] over all items."""
    return sorted({(int(q), int(k)) for _, q, k in cells.nonzero().tolist()})  # type: ignore[misc]


def _pair_list(cells: torch.Tensor) -> list[list[int]]:
    return [[q, k] for q, k in _pairs(cells)]


def _cause(
    exp: Expectation,
    depth: int,
    dependent: torch.Tensor,
    allowed: torch.Tensor,
    real: torch.Tensor,
    leaks: torch.Tensor,
    padded_reads: torch.Tensor,
    batch_pairs: list[list[int]],
    nonfinite: int,
    run: _Runner,
    x: torch.Tensor,
) -> Phrase | None:
    """Name the classic bug the dependency pattern matches, if any.

    The shared candidates (models.masks.diagnosis) as a module applying them would depend on its inputs, over real
    query rows (every row for the ones told apart on padded rows); before them what only outputs show (NaN, batch
    items reading each other), after them a multi-layer target judged too shallow and the softmax-level bugs
    (their Jacobian ranks), which read every key just as "nothing is masked" does.
    """
    B, T = real.shape
    if nonfinite:
        return Phrase("diag.nonfinite")
    if batch_pairs:
        return Phrase("diag.batch_swapped")
    eye = torch.eye(T, dtype=torch.bool)
    own = dependent | eye  # (B, T, T): each item's outputs on its own inputs
    rows = real[:, :, None].expand(B, T, T)  # judged: real queries, every key

    def same(cand: torch.Tensor, every_row: bool = False) -> bool:
        eq = own == diagnosis.dependence(cand.expand(B, T, T), depth)
        return bool(eq.all()) if every_row else bool((eq | ~rows).all())

    if same(exp.keep(T, real)):
        return None  # real queries read what the expectation allows: nothing to name
    # A module that reads every key is named last: "nothing is masked" unless its Jacobian ranks show a mask
    # applied after softmax or a normalisation over positions (every degenerate candidate reads every key too).
    reads_all = same(torch.ones(1, T, T, dtype=torch.bool))
    deferred = Phrase("diag.no_mask") if reads_all else None
    for cand in () if reads_all else diagnosis.candidates(exp, real):
        if same(cand.keep, cand.every_row):
            return cand.phrase
    if bool(padded_reads.any()):
        return Phrase("diag.padding_keys_visible")  # padded keys read, in no simpler pattern
    for cand in () if reads_all else diagnosis.guesses(exp, real, own):
        if same(cand.keep):
            return cand.phrase
    if not bool(leaks.any()):
        return None
    # Leaks that match no simple pattern. A multi-layer target judged at too small a depth reads exactly the
    # expectation's closure over its real number of layers.
    if exp.position_keep(T) is not None:
        for k in range(depth + 1, 9):
            closure = exp.reach(T, k, real)
            if torch.equal(closure, exp.reach(T, k - 1, real)):
                break
            if bool(((own == closure) | ~rows).all()):
                return Phrase("diag.too_shallow", {"closure": exp.closure_name(k), "expect": exp.name, "k": k})
    if depth > 1:
        return deferred
    # How do the forbidden inputs reach the first and the last leaking query? Their full Jacobian blocks tell.
    b = int(leaks.any(-1).any(-1).nonzero()[0])
    qs = [int(q) for q in leaks[b].any(-1).nonzero().squeeze(1).tolist() if bool(real[b, q])]
    if not qs:
        return deferred
    first, last = qs[0], qs[-1]
    ranks, blocks = {}, {}
    for q in dict.fromkeys((first, last)):
        J = _jacobian_row(run, x, b, q)  # (d_out, B, T, D)
        blocks[q] = J[:, b, leaks[b, q]]  # (d_out, n forbidden, D)
        ok = J[:, b, allowed[b, q] & real[b]].reshape(J.shape[0], -1)
        ranks[q] = (_rank(blocks[q].reshape(J.shape[0], -1)), max(_rank(ok), 1))
    low = {q: r[0] <= max(1, r[1] // 4) for q, r in ranks.items()}
    if low[first] and low[last]:
        return Phrase("diag.after_softmax", {"q": last, "rank": ranks[last][0], "allowed_rank": ranks[last][1]})
    if low[first] and ranks[last][0] > 2 * ranks[first][0]:
        return Phrase("diag.softmax_over_queries")
    # Per-feature statistics over positions (a mean, a norm over dim=1): forbidden input j moves feature d of the
    # first leaking output along one fixed direction, whatever j is — the columns are collinear across j.
    cols = blocks[first].permute(2, 0, 1)  # (D, d_out, n forbidden)
    if cols.shape[-1] >= 2:
        s = torch.linalg.svdvals(cols)  # (D, min(d_out, n))
        if bool((s[:, 1] <= 1e-5 * s[:, 0].clamp_min(1e-30)).all()):
            return Phrase("diag.statistics_over_positions")
    return deferred


def check_attention(
    target: Any,
    expect: str,
    seq: int = DEFAULT_SEQ,
    d_model: int | None = None,
    batch: int = DEFAULT_BATCH,
    pad: int | None = None,
    padding_side: str = "both",
    depth: int | None = None,
    seed: int = 0,
) -> AttentionReport:
    """Return the verdict on what each output of `target` depends on, against `expect`.

    target: an nn.Module instance or a callable taking x (batch, seq, d_model) float32 (and, when it accepts it,
    attention_mask=(batch, seq) with 1 = real token) and returning (batch, seq, d_out) or a tuple/ModelOutput
    whose first item is that; or a spec 'FILE.py:NAME', 'FILE.py:NAME()', 'hf:FOLDER_OR_ID'.
    expect: the grammar of models.masks.expectations ('causal+window:3', 'causal+padding', …).
    d_model: the input width (default 64; a transformers model brings its own). pad: padded positions at the end
    (or the start, padding_side='left') of batch item 0; when the expectation has padding and pad is None,
    seq // 4 (at least 2). padding_side 'both' (the default) judges right padding, then left padding when right
    passes: the report is the first that fails, or the left one. depth: layers the expectation is closed over (default 1; a transformers model's own
    layer count). Raises TargetError / MaskError / InputError for input that cannot be judged.
    """
    exp = parse_expectation(expect)
    if padding_side not in ("left", "right", "both"):
        raise InputError(f"padding side {padding_side!r}: use left, right or both")
    padded = exp.padding or bool(pad)
    # Both sides by default: with right padding (pads after the text) a causal target never lets a real token see a
    # pad, so a module that pads the query axis instead of the keys passes; left padding is the side that can fail.
    sides = ("right", "left") if padding_side == "both" and padded else (padding_side,)
    if sides == ("both",):
        sides = ("right",)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tgt = load_target(target)
        reports = []
        for side in sides:
            torch.manual_seed(seed)
            reports.append(_check(tgt, exp, seq, d_model, batch, pad, side, depth, seed))
            if not reports[-1].ok:
                break
    report = reports[-1]
    if len(sides) > 1:
        report.notes.append(
            f"padding checked on both sides: fails with {report.padding_side} padding"
            if not report.ok
            else "padding checked on both sides: passes with right and with left padding"
        )
    return report


def _check(
    tgt: Target,
    exp: Expectation,
    seq: int,
    d_model: int | None,
    batch: int,
    pad: int | None,
    padding_side: str,
    depth: int | None,
    seed: int,
) -> AttentionReport:
    t0 = time.perf_counter()
    notes: list[str] = []
    D = tgt.d_model or (d_model if d_model is not None else DEFAULT_D_MODEL)
    if tgt.d_model and d_model is not None and d_model != tgt.d_model:
        notes.append(f"d_model {d_model} ignored: the model's width is {tgt.d_model}")
    T, B = int(seq), int(batch)
    if not 1 <= T <= MAX_SEQ:
        raise InputError(f"seq {T}: use 1 to {MAX_SEQ}")
    if not 1 <= B <= MAX_BATCH:
        raise InputError(f"batch {B}: use 1 to {MAX_BATCH}")
    if not 1 <= D <= MAX_D_MODEL:
        raise InputError(f"d_model {D}: use 1 to {MAX_D_MODEL}")
    if tgt.max_positions and T > tgt.max_positions:
        raise InputError(f"seq {T} is longer than the model's {tgt.max_positions} positions")
    if (B * T) ** 2 * D > MAX_JACOBIAN_CELLS:
        raise InputError(
            f"batch {B} × seq {T} × d_model {D} needs {(B * T) ** 2 * D:,} Jacobian cells; the limit is "
            f"{MAX_JACOBIAN_CELLS:,}: use a shorter seq or a smaller batch"
        )
    L = depth if depth is not None else (tgt.layers or 1)
    if L < 1:
        raise InputError(f"depth {L}: use 1 or more layers")
    exp.keep(T)  # docs lengths must sum to seq: MaskError before anything runs
    if pad is None:
        pad = max(2, T // 4) if exp.padding and T > 2 else 0
    if pad < 0 or pad >= T:
        raise InputError(f"pad {pad}: use 0 to {T - 1} padded positions (item 0 keeps at least one real token)")
    if pad and not exp.padding:
        exp = parse_expectation(exp.name + "+padding" if exp.terms else "padding")
        notes.append(f"pad {pad} given: judged against {exp.name} (padded keys hidden from real queries)")
    if pad and not tgt.takes_mask:
        raise TargetError(
            f"padding needs a target that takes attention_mask (batch, seq) as a keyword; {tgt.name} does not"
        )
    real = torch.ones(B, T, dtype=torch.bool)
    if pad:
        if padding_side == "right":
            real[0, T - pad :] = False
        else:
            real[0, :pad] = False
    attention_mask = real.long() if pad else None
    if tgt.module is not None:
        tgt.module.eval()
    run = _Runner(tgt, attention_mask, (B, T))
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed))
    frozen = [p for p in tgt.module.parameters() if p.requires_grad] if tgt.module is not None else []
    for p in frozen:
        p.requires_grad_(False)  # only ∂y/∂x is needed: no parameter gradients
    try:
        return _judge(run, x, exp, L, real, tgt, pad, padding_side, notes, t0)
    finally:
        for p in frozen:
            p.requires_grad_(True)


def _judge(
    run: _Runner,
    x: torch.Tensor,
    exp: Expectation,
    L: int,
    real: torch.Tensor,
    tgt: Target,
    pad: int,
    padding_side: str,
    notes: list[str],
    t0: float,
) -> AttentionReport:
    B, T, D = x.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # vmap's "no batching rule, falling back to a loop" notices
        dep, y, method = _dependence(run, x, 0)
    nonfinite = int((~torch.isfinite(y).all(-1) & real).sum())
    top = dep.reshape(dep.shape[0], -1).amax(-1).clamp_min(1e-30)[:, None, None]
    rel = dep / top
    dependent = rel > NOISE  # (T + B − 1, B, T)
    eye = torch.eye(T, dtype=torch.bool)
    allowed = exp.reach(T, L, real)  # (B, T, T), the residual path included
    # Item 0 (the padded one) is judged pair by pair; the other items only for reading each other.
    own = dependent[:T, 0][None]  # (1, T, T)
    real0, allowed0 = real[:1], allowed[:1]
    q_real = real0[:, :, None]
    forbidden_real = own & ~allowed0 & q_real & real0[:, None, :]
    padded = own & ~allowed0 & q_real & ~real0[:, None, :]
    over = ~(own | eye) & allowed0 & q_real & real0[:, None, :]

    cross = torch.zeros(B, B, dtype=torch.bool)
    for b in range(B):
        reads = (dependent[:T, :][real[0]].any(0) if b == 0 else dependent[T + b - 1]).any(-1)  # (B,)
        for b2 in range(B):
            cross[b, b2] = b != b2 and bool(reads[b2])

    # Confirm every leak by perturbing the forbidden inputs: the output must really move.
    gen = torch.Generator().manual_seed(1234)
    suspects = forbidden_real | padded
    confirmed = torch.zeros_like(suspects)
    qs = [(0, i) for i in range(T) if bool(suspects[0, i].any())]
    sampled = qs
    if len(qs) > MAX_CONFIRM:
        sampled = [qs[k] for k in sorted(set(np.linspace(0, len(qs) - 1, MAX_CONFIRM).round().astype(int).tolist()))]
    unconfirmed = 0
    batch_pairs: list[list[int]] = []
    with torch.no_grad():
        for b, i in sampled:
            cols = suspects[b, i]
            x1 = x.clone()
            x1[b, cols] = torch.randn(int(cols.sum()), D, generator=gen) * 3
            if float(_moved(y, run(x1))[b, i]) > CONFIRM:
                confirmed[b, i] = cols
            else:
                unconfirmed += int(cols.sum())
        rest = [q for q in qs if q not in set(sampled)]
        if rest and bool(confirmed.any()):  # the sample confirmed the pattern: keep the rest of it
            for b, i in rest:
                confirmed[b, i] = suspects[b, i]
        elif rest:
            unconfirmed += sum(int(suspects[b, i].sum()) for b, i in rest)
        for b in range(B):
            if bool(cross[b].any()):
                x1 = x.clone()
                others = torch.arange(B) != b
                x1[others] = torch.randn(int(others.sum()), T, D, generator=gen)
                if float((_moved(y, run(x1))[b] * real[b]).max()) > CONFIRM:
                    batch_pairs += [[b, int(b2)] for b2 in cross[b].nonzero().squeeze(1).tolist()]
                else:
                    unconfirmed += 1
    if unconfirmed:
        notes.append(
            f"{unconfirmed} gradient-level dependences above {NOISE:g} did not move the output when perturbed: "
            "counted as numerical noise"
        )
    leaks_t = forbidden_real & confirmed
    padded_t = padded & confirmed

    # A dependence autograd cannot see (detach(), integer ops, a mask computed from the values): perturb what a
    # few queries must not read; when the output moves, find the keys one by one.
    hidden = 0
    if not bool(leaks_t.any()) and not nonfinite:
        forbidden_all = ~allowed0 & q_real & real0[:, None, :]
        with torch.no_grad():
            for i in sorted(set(np.linspace(0, T - 1, min(T, 8)).round().astype(int).tolist())):
                cols = forbidden_all[0, i]
                if not bool(cols.any()):
                    continue
                x1 = x.clone()
                x1[0, cols] = torch.randn(int(cols.sum()), D, generator=gen) * 3
                if float(_moved(y, run(x1))[0, i]) <= CONFIRM:
                    continue
                for j in cols.nonzero().squeeze(1).tolist()[:64]:
                    x2 = x.clone()
                    x2[0, j] = torch.randn(D, generator=gen) * 3
                    if float(_moved(y, run(x2))[0, i]) > CONFIRM:
                        leaks_t[0, i, j] = True
                        hidden += 1
        if hidden:
            notes.append(f"{hidden} leaks found only by perturbation: autograd sees no path for them")

    cause = _cause(exp, L, own, allowed0, real0, leaks_t, padded_t, batch_pairs, nonfinite, run, x)
    if hidden and cause is None:
        cause = Phrase("diag.unseen_dependence")
    if nonfinite:
        notes.append(f"{nonfinite} real output positions are NaN or inf")
    if bool(over.any()) and not bool(leaks_t.any()) and cause is None:
        notes.append(
            "over-masked pairs: the target never reads keys the expectation allows (a narrower mask than declared, "
            "or an output that ignores part of its input)"
        )
    if nonfinite:  # NaN outputs have no meaningful gradients: no pairs to name, only the cause
        leaks_t, padded_t, over = torch.zeros_like(leaks_t), torch.zeros_like(padded_t), torch.zeros_like(over)
    failed = bool(leaks_t.any() or padded_t.any() or over.any() or batch_pairs or nonfinite)
    return AttentionReport(
        verdict="fail" if failed else "pass",
        expect=exp.name,
        judged_against=exp.closure_name(L),
        target=tgt.name,
        seq=T,
        d_model=D,
        batch=B,
        depth=L,
        pad=pad,
        padding_side=padding_side,
        leaks=_pair_list(leaks_t),
        over_masked=_pair_list(over),
        padded_reads=_pair_list(padded_t),
        batch_leaks=batch_pairs,
        cause=cause.english() if cause is not None else None,
        diagnosis=cause,
        dependence=rel.numpy(),
        real=real.numpy(),
        allowed=allowed.numpy(),
        nonfinite=nonfinite,
        seconds=time.perf_counter() - t0,
        method=method,
        notes=notes,
    )


def assert_attention(target: Any, expect: str, **kw: Any) -> AttentionReport:
    """check_attention(...), raising AssertionError with the report's text when the verdict is fail."""
    report = check_attention(target, expect, **kw)
    if not report.ok:
        raise AssertionError(report.text())
    return report


__all__ = [
    "AttentionReport",
    "Target",
    "TargetError",
    "assert_attention",
    "check_attention",
    "load_target",
]
