"""Head statistics over a corpus: many sentences, batched with padding on the device, in length-sorted buckets.

Same definitions as for one input (models.analysis.heads): statistics are averaged over each sentence's real query
rows, then over sentences (as Clark et al. average over documents); JS divergence and the cosine Gram are
summed over rows and sentences; CKA pools the context vectors of every real token. Padded query rows and
padded keys never enter a statistic.

A corpus is text with one sentence per line; a line with a tab is a sentence pair (`A<TAB>B`), the form
Clark et al.'s [CLS] A [SEP] B [SEP] inputs had.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from .. import masks, settings
from ..encoder import Encoder
from ..errors import InputError
from ..tokens import display_tokens
from .heads import Accumulator, HeadReport, Roles
from .importance import (
    Batch,
    Importance,
    curve_from_sums,
    measure_of,
    normalise,
    raw_importance,
    removal_ks,
    removal_sums,
)

ProgressFn = Callable[[float, str], None]  # (fraction done in [0, 1], what is happening)
# Elements of attention maps one bucket may hold (maps and scores, kept while the statistics run).
BUCKET_ELEMENTS_CPU = 1 << 25
BUCKET_ELEMENTS_GPU = 1 << 28
IMPORTANCE_SENTENCES = 50  # importance runs many passes per sentence: a corpus uses its first 50 lines


@dataclass(frozen=True)
class Line:
    text: str
    text_b: str | None = None


def read_corpus(text: str) -> list[Line]:
    """Return the sentences of a corpus text: one per non-empty line; `A<TAB>B` is a sentence pair."""
    if not isinstance(text, str):
        raise InputError("the corpus must be text, one sentence per line")
    lines = []
    for raw in text.splitlines():
        a, _, b = raw.partition("\t")
        a, b = a.strip(), b.strip()
        if a:
            lines.append(Line(a, b or None))
        elif b:
            lines.append(Line(b))
    if not lines:
        raise InputError("the corpus is empty: give one sentence per line")
    cap = settings.limit("max_text_chars")
    for n, ln in enumerate(lines, 1):
        if len(ln.text) + len(ln.text_b or "") > cap:
            settings.require("max_text_chars", len(ln.text) + len(ln.text_b or ""), f"line {n} of the corpus")
    # Every line is at least 3 tokens ([CLS], a word, [SEP]): a cheap bound before anything is tokenized.
    settings.require("max_corpus_tokens", 3 * len(lines), f"a corpus of {len(lines):,} lines")
    return lines


def read_corpus_file(data: bytes, name: str = "corpus") -> list[Line]:
    """Return the sentences of an uploaded or given file's bytes (UTF-8 text, one sentence per line)."""
    if b"\x00" in data[:4096]:
        raise InputError(f"{name} is not a text file: give UTF-8 text, one sentence per line")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"{name} is not UTF-8 text (byte {err.start} cannot be read): save it as UTF-8") from None
    return read_corpus(text)


def buckets(encoder: Encoder, lines: Sequence[Line], budget: int | None = None) -> list[list[int]]:
    """Return groups of line indices, sorted by length, each small enough to run as one padded batch.

    Sentences of similar length share a batch, so padding stays small; pairs and single sentences never
    share one (the tokenizer takes a batch of either).
    """
    if budget is None:
        budget = BUCKET_ELEMENTS_GPU if encoder.device.type == "cuda" else BUCKET_ELEMENTS_CPU
    c = encoder.config
    limit = encoder.max_tokens
    singles = [i for i, ln in enumerate(lines) if ln.text_b is None]
    pairs = [i for i, ln in enumerate(lines) if ln.text_b is not None]
    groups: list[list[int]] = []
    total = 0  # tokens the model will run, over singles and pairs
    for idx in (singles, pairs):
        if not idx:
            continue
        args = ([lines[i].text for i in idx],) + (([lines[i].text_b for i in idx],) if idx is pairs else ())
        lengths = [min(len(ids), limit) for ids in encoder.tokenizer(*args, verbose=False)["input_ids"]]
        total += sum(lengths)
        settings.require("max_corpus_tokens", total, "this corpus")
        order = sorted(range(len(idx)), key=lambda k: lengths[k])
        group: list[int] = []
        for k in order:
            T = lengths[k]  # the longest so far: sorted ascending
            # Two (layers, heads, T, T) tensors per sentence: the maps and the scores the recorder keeps.
            if group and (len(group) + 1) * 2 * c.n_layers * c.n_heads * T * T > budget:
                groups.append(group)
                group = []
            group.append(idx[k])
        if group:
            groups.append(group)
    return groups


def _batch(encoder: Encoder, lines: Sequence[Line], mask: str | None) -> tuple[Batch, list[list[str]], int]:
    """Return a padded batch on the device for some lines, its tokens, and how many lines were truncated."""
    if not encoder.capabilities.pairs:  # a model that reads one text: a pair's halves are joined
        texts = [ln.text if ln.text_b is None else f"{ln.text} {ln.text_b}" for ln in lines]
        texts_b = None
    else:
        texts = [ln.text for ln in lines]
        texts_b = [ln.text_b for ln in lines] if lines[0].text_b is not None else None
    enc = encoder.tokenize(texts, texts_b)
    dev = encoder.device
    input_ids = enc.input_ids.to(dev)  # (B, T)
    T = input_ids.shape[1]
    real = enc.attention_mask.bool().to(dev)
    user_keep, _ = encoder.keep_for(mask, T)
    keep = masks.combine(masks.padding_keep(real) if not bool(real.all()) else None, user_keep)
    keep = None if keep is None else torch.broadcast_to(masks.as_4d(keep), (len(texts), 1, T, T))
    batch = Batch(input_ids, enc.token_type_ids.to(dev), real, keep)
    return batch, enc.tokens, sum(1 for c in enc.cut if c)


def analyse_corpus(
    encoder: Encoder,
    lines: Sequence[Line],
    mask: str | None = None,
    progress: ProgressFn | None = None,
) -> tuple[HeadReport, int]:
    """Return the HeadReport of a corpus and how many of its lines were truncated to the model's limit.

    Every bucket runs on the encoder's device; only the summed statistics come back to the CPU.
    """
    if not lines:
        raise InputError("the corpus is empty: give one sentence per line")
    c = encoder.config
    acc = Accumulator(c.n_layers, c.n_heads, with_cka=True)
    groups = buckets(encoder, lines)
    done, truncated = 0, 0
    tokens_by_line: list[list[str]] = [[] for _ in lines]
    sep = encoder.tokenizer.sep_token or "[SEP]"
    specials = frozenset(encoder.tokenizer.all_special_tokens)
    with torch.inference_mode():
        for group in groups:
            batch, tokens, cut = _batch(encoder, [lines[i] for i in group], mask)
            truncated += cut
            for i, row, real in zip(group, tokens, batch.real.sum(-1).tolist(), strict=True):
                tokens_by_line[i] = display_tokens(row[:real], encoder.capabilities.token_display)
            res = encoder.model(batch.input_ids, batch.token_type_ids, keep=batch.keep, record=True)
            assert res.record is not None  # record=True
            context = res.record.stacked("context")  # (B, layers, heads, seq, d_k)
            roles = Roles.of(tokens, batch.real, batch.token_type_ids, encoder.device, sep, specials)
            acc.add(res.attentions, roles, context.float())
            done += len(group)
            if progress is not None:
                progress(done / len(lines), f"{done:,} / {len(lines):,} lines, {len(lines) - done:,} to go")
    caps = encoder.capabilities
    report = acc.report(encoder.name, tokens=tokens_by_line, causal=caps.causal)
    return (replace(report, group=caps.group_size) if caps.grouped else report), truncated


def corpus_importance(
    encoder: Encoder,
    lines: Sequence[Line],
    mask: str | None = None,
    limit: int = IMPORTANCE_SENTENCES,
    progress: ProgressFn | None = None,
) -> Importance:
    """Return head importance summed over the first `limit` lines, with the removal curve over the same lines."""
    used = list(lines[:limit])
    if not used:
        raise InputError("the corpus is empty: give one sentence per line")
    c = encoder.config
    # Gradients and ablations hold far more per sentence than a forward pass: smaller buckets.
    groups = buckets(
        encoder, used, budget=(BUCKET_ELEMENTS_GPU if encoder.device.type == "cuda" else BUCKET_ELEMENTS_CPU) // 8
    )
    batches = [_batch(encoder, [used[i] for i in g], mask)[0] for g in groups]
    raw = torch.zeros(c.n_layers, c.n_heads, dtype=torch.float64)
    steps, step = 2 * len(batches), 0
    for batch in batches:
        raw += raw_importance(encoder, batch).double().cpu()
        step += 1
        if progress is not None:
            progress(step / steps, "importance")
    measure = measure_of(encoder)
    raw_np = raw.numpy()
    order = np.argsort(normalise(raw_np).ravel(), kind="stable")
    ks = removal_ks(raw_np.size)
    sums = np.zeros((2, len(ks), 2))
    for batch in batches:
        sums += removal_sums(encoder, batch, order, ks)
        step += 1
        if progress is not None:
            progress(step / steps, "removal")
    notes = [] if len(lines) <= limit else [f"importance over the first {limit} of {len(lines)} lines"]
    return Importance(
        raw=raw_np, measure=measure, sentences=len(used), curve=curve_from_sums(sums, ks, measure), notes=notes
    )


# ---- published BERT-base values (Clark et al. 2019), to show beside ours -----------------------------

# Clark et al. number layers from 1; this app from 0. Layers below are 0-based (the paper's minus one).
SEP_LAYERS = (5, 9)  # "over half of all attention in layers 6–10 goes to [SEP]"
CLS_EARLY_LAYERS = (0, 1, 2)  # "early layers favour [CLS]" (figure 2)
PUBLISHED: dict[str, object] = {
    "sep_layers": SEP_LAYERS,
    "sep_share": 0.5,
    "cls_early_layers": CLS_EARLY_LAYERS,
    "prev_layers": (1, 3, 6, 7),  # heads with > 50 % on the previous token, paper's layers 2, 4, 7, 8
    "next_layers": (0, 1, 1, 2, 5),  # … on the next token, paper's layers 1, 2, 2, 3, 6
    "last_cls_entropy": 3.89,  # nats, entropy of [CLS]'s attention in the last layer, ~128-token inputs
}


def is_bert_base(n_layers: int, n_heads: int, d_model: int) -> bool:
    """Return whether a model has BERT-base's shape (12 layers × 12 heads, d_model 768)."""
    return (n_layers, n_heads, d_model) == (12, 12, 768)


def our_published_figures(report: HeadReport) -> dict[str, object]:
    """Return our figures for each published BERT-base fact (keys of PUBLISHED), from the report."""
    lo, hi = SEP_LAYERS
    sep_by_layer = report.layer_means("sep")
    cls_by_layer = report.layer_means("cls")
    early = list(CLS_EARLY_LAYERS)
    rest = [i for i in range(report.n_layers) if i not in early]
    prev_heads = [int(li) for li, _ in zip(*np.nonzero(report.stats["prev"] > 0.5), strict=True)]
    next_heads = [int(li) for li, _ in zip(*np.nonzero(report.stats["next"] > 0.5), strict=True)]
    return {
        "sep_share": float(np.mean(sep_by_layer[lo : hi + 1])) if report.n_layers > hi else math.nan,
        "cls_early": float(np.mean(cls_by_layer[early])) if report.n_layers > max(early) else math.nan,
        "cls_rest": float(np.mean(cls_by_layer[rest])) if rest else math.nan,
        "prev_layers": sorted(prev_heads),
        "next_layers": sorted(next_heads),
        "last_cls_entropy": float(np.mean(report.cls_entropy[-1])),
        "tokens_per_sentence": report.rows / max(report.sentences, 1),
    }
