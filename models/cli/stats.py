"""`python -m models stats`: per-head statistics, labels, redundancy and importance for a text or a corpus.

    python -m models stats --model minilm --text "The cat sat on the mat." --json
    python -m models stats --model ./bert-base-uncased --file corpus.txt --json --out stats.json
    python -m models stats --attentions attn.pt --json          # maps saved from any model, no model needed
    python -m models stats --model minilm --file corpus/ --engine ray --workers 2 --out stats.json   # at scale

The JSON: {"model", "tokens", "sentences", "rows", "heads": [{"layer", "head", "entropy", "entropy_norm",
"cls", "sep", "punct", "self", "prev", "next", "confidence", "distance", ["block",] "label"}, …],
"redundancy": {"sentences", "rows", "js", "js_per_row", "cosine", "cka"} (null, with "redundancy_skipped" saying which budget, when the
heads are too many to compare pairwise), "thresholds", "importance", "importance_measure",
"removal", "kind"}. With --attentions the fields that need the model are null (importance, importance_measure,
removal, redundancy.cka), "kind" follows the detected causality and cross-attention adds "k_tokens".
Layers and heads are 0-based, heads in layer-major order (index = layer · heads + head), and
every matrix in that same order. Definitions: docs/METRICS.md. With --file the document adds "input" (rows read,
skipped, truncated), "tokens_sample" (tokens lists a sample of lines), "redundancy_sample" (the lines redundancy
is summed over: about --redundancy-lines of them), "engine", "cls_entropy" and "d_model"
(models/cli/stats_corpus.py; docs/corpus-at-scale.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..analysis.corpus import corpus_files
from ..analysis.heads import analyse, analyse_maps, closest_pairs
from ..analysis.importance import head_importance
from ..analysis.induction import induction_scores
from ..attention_file import read as read_attention_file
from ..errors import AttnVizError
from ..weights import load_encoder
from .check_mask import user_mask
from .common import add_model_args, fit_text, integer, text_of
from .stats_corpus import add_engine_args, check_engine_args, run_corpus

HELP = "per-head statistics, pattern labels, redundancy and importance"


class StatsUsageError(AttnVizError):
    """Bad arguments or an unreadable corpus file for `stats`."""


def add_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the sentence to analyse")
    src.add_argument(
        "--text-file",
        help="one long text from a UTF-8 file (up to the model's positions and ATTENTION_LENS_TEXT_WORK; maps made on "
        "demand)",
    )
    src.add_argument(
        "--file",
        help="a corpus: .txt (one sentence a line, A<TAB>B for a pair), .jsonl ({text, text_b}), .parquet or a folder",
    )
    src.add_argument(
        "--attentions",
        metavar="FILE",
        help="attention saved from any model (.npz, .npy, .json, .safetensors, .pt): statistics without a model",
    )
    p.add_argument("--item", type=integer(), default=0, help="with --attentions: which item of a batched file (from 0)")
    p.add_argument("--text-b", default=None, help="optional second sentence, with --text")
    p.add_argument(
        "--mask",
        default=None,
        help="bidirectional (default), causal, window:W, prefix:P, a predicate over q_idx and kv_idx such as "
        "'(kv_idx <= q_idx) & (q_idx - kv_idx < 4)', or FILE.py:NAME (a mask_mod, a transformers mask function "
        "or a BlockMask; importing the file runs its code)",
    )
    p.add_argument("--json", action="store_true", help="print the JSON document (otherwise a table for people)")
    p.add_argument("--out", default=None, help="write the JSON to this file instead of stdout")
    p.add_argument("--no-importance", action="store_true", help="skip head importance (the slow part)")
    p.add_argument(
        "--importance-sentences",
        type=integer(),
        default=None,
        help="with --file: importance over the first N lines (default 50; it runs many passes per line)",
    )
    add_engine_args(p)


def run(args: argparse.Namespace) -> int:
    if args.text_b is not None and args.file:
        raise StatsUsageError("stats: --text-b goes with --text; in a --file, write a pair as A<TAB>B on one line")
    if args.importance_sentences is not None and args.importance_sentences < 1:
        raise StatsUsageError("stats: --importance-sentences must be at least 1")
    if args.attentions:
        return _run_file(args)
    if problem := check_engine_args(args):
        raise StatsUsageError(problem)
    if args.file:
        corpus_files(args.file)  # a missing path, a device or a folder without a corpus: before the model loads
        if args.engine == "ray":
            from ..analysis.corpus_ray import import_ray

            import_ray()  # without Ray: one line that says how to install it

    mask: Any = user_mask(args.mask)  # a name, or a predicate made into each text's keep by the encoder
    enc = load_encoder(args.model, device=args.device, dtype=args.dtype)
    notes: list[str] = []
    extra: dict[str, Any] = {}
    if not args.file:
        # Cut at the model's positions (a 10⁵-token text is not tokenized whole), then at ATTENTION_LENS_TEXT_WORK.
        text = fit_text(enc, text_of(args), args.text_b, command="stats")
        # CKA needs every head's output (the internals); a long text's maps come on demand, without them.
        internals = enc.fits_dense(text, args.text_b)
        out = enc.encode(text, args.text_b, mask=mask, internals=internals, hidden=internals)
        if not internals:
            notes.append(
                f"{out.seq} tokens: maps made on demand; statistics are exact, redundancy on maps pooled "
                "to 256 × 256 cells, no CKA and no importance"
            )
            args.no_importance = True
        notes += out.notes
        report = analyse(out, enc.device)
        if enc.capabilities.causal:
            report = report.with_induction(induction_scores(enc))
        importance = None if args.no_importance else head_importance(enc, out)
    else:  # a corpus, streamed by the local or the Ray engine (models/cli/stats_corpus.py)
        report, importance, extra = run_corpus(args, enc, notes, mask)
        if enc.capabilities.causal:
            report = report.with_induction(induction_scores(enc))
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)

    doc = report.to_json(importance=None if importance is None else importance.scores.ravel().tolist())
    doc["kind"] = enc.kind
    if importance is not None:
        doc["importance_measure"] = importance.description
        doc["importance_sentences"] = importance.sentences
        if importance.curve is not None:
            c = importance.curve
            doc["removal"] = {"k": c.ks, "least_first": c.least_first, "most_first": c.most_first, "unit": c.unit}
    doc.update(extra)
    _print(args, doc, report, importance)
    return 0


def _run_file(args: argparse.Namespace) -> int:
    """`stats --attentions FILE`: the same document from maps without a model; model-only fields are null."""
    if args.text_b is not None or args.mask is not None or args.importance_sentences is not None:
        raise StatsUsageError("stats: --text-b, --mask and --importance-sentences need a model; not with --attentions")
    if args.item < 0:
        raise StatsUsageError("stats: --item must be 0 or more")
    maps = read_attention_file(args.attentions, item=args.item)
    for note in maps.notes:
        print(f"warning: {note}", file=sys.stderr)
    report = analyse_maps(
        maps.attentions, maps.q_tokens, maps.k_tokens, maps.token_type_ids, model=maps.model, causal=maps.causal
    )
    doc = report.to_json()
    if doc["redundancy"] is not None:
        doc["redundancy"]["cka"] = None  # CKA compares the heads' outputs: a file holds only their maps
    doc.update(importance=None, importance_measure=None, removal=None, kind=maps.kind, causal=maps.causal)
    if maps.cross:
        doc["k_tokens"] = maps.k_tokens
    _print(args, doc, report, None)
    return 0


def _print(args: argparse.Namespace, doc: dict[str, Any], report: Any, importance: Any) -> None:
    if not report.pairwise:
        print(f"notice: no redundancy between heads: {report.pairwise_skipped}", file=sys.stderr)
    if args.json or args.out:
        text = json.dumps(doc, allow_nan=False, ensure_ascii=False)
        if args.out:
            try:
                Path(args.out).write_text(text, encoding="utf-8")
            except OSError as err:
                raise StatsUsageError(f"stats: cannot write {args.out}: {err.strerror or err}") from err
            print(f"wrote {args.out}: {len(doc['heads'])} heads, {report.sentences} sentence(s)", file=sys.stderr)
        else:
            print(text)
    else:
        print(_table(report, importance))


# The table's columns: (JSON field, heading), as docs/METRICS.md defines them for each kind of map. A causal
# model has no [CLS]/[SEP] and no visible next token: its first token (the sink) and induction instead.
ENCODER_TABLE = (("cls", "[CLS] %"), ("sep", "[SEP] %"), ("punct", "punct %"), ("prev", "prev %"), ("next", "next %"))
DECODER_TABLE = (("first", "first %"), ("punct", "punct %"), ("self", "self %"), ("prev", "prev %"))


def _table(report: Any, importance: Any) -> str:
    """Return a plain-text table of the heads, for people at a terminal (the columns the kind of map has)."""
    columns = DECODER_TABLE if report.causal else ENCODER_TABLE
    induction = report.induction if report.causal else None
    heading = "layer head label          entropy nats (norm)" + "".join(f" {name:>8}" for _, name in columns)
    heading += "  induction" if induction is not None else ""
    rows = [
        f"{report.model}: {report.n_layers} layers × {report.n_heads} heads, {report.sentences} sentence(s), "
        f"{report.rows} query rows",
        heading + "  importance",
    ]
    scores = None if importance is None else importance.scores
    for layer in range(report.n_layers):
        for head in range(report.n_heads):
            s = {k: float(v[layer, head]) for k, v in report.stats.items()}
            imp = "" if scores is None else f"{scores[layer, head]:10.2f}"
            ind = f"  {float(induction[layer, head]):9.2f}" if induction is not None else ""
            shares = "".join(f" {100 * s[k]:8.1f}" for k, _ in columns)
            rows.append(
                f"{layer:5d} {head:4d} {report.labels[layer, head]:<14} {s['entropy']:7.2f} ({s['entropy_norm']:4.2f})"
                f"      {shares}{ind}  {imp}"
            )
    names = report.names
    if report.pairwise:
        sample = ""
        if report.redundancy_sentences < report.sentences:
            sample = (
                f", over a sample of {report.redundancy_sentences:,} of the {report.sentences:,} sentences "
                "(--redundancy-lines 0: every one)"
            )
        rows.append(f"most similar pairs (JS divergence per query row, nats{sample}):")
        for a, b, d in closest_pairs(report.js_per_row, 5):
            rows.append(f"  {names[a]} ~ {names[b]}: {d:.4f}")
    if importance is not None:
        rows.append(f"importance: {importance.description}")
    return "\n".join(rows)
