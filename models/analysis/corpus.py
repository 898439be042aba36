"""Head statistics over a corpus: many sentences, batched with padding on the device, in length-sorted buckets.

Same definitions as for one input (models.analysis.heads): statistics are averaged over each sentence's real query
rows, then over sentences (as Clark et al. average over documents); JS divergence and the cosine Gram are
summed over rows and sentences; CKA pools the context vectors of every real token. Padded query rows and
padded keys never enter a statistic.

A corpus is text with one sentence per line; a line with a tab is a sentence pair (`A<TAB>B`), the form
Clark et al.'s [CLS] A [SEP] B [SEP] inputs had.

Two budgets apply, each to what it guards: ATTENTION_LENS_MAX_BATCH bounds every padded batch (one forward), so a
corpus of any length streams through the model batch by batch; ATTENTION_LENS_MAX_CORPUS_TOKENS bounds the corpus
as a whole. Every refusal is a CorpusError with a code and values, so that the app can say it in the reader's
language (MESSAGES holds the English; ui/locales/zh/heads.toml `corpus.msg.*` the Chinese).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import masks, settings
from ..encoder import Encoder
from ..errors import BudgetError, InputError
from ..files import regular_file_size
from ..tokens import display_tokens
from .heads import (
    DECODER_LABELS,
    LABELS,
    STATS,
    HeadReport,
    JsParts,
    Roles,
    _cka_from_hsic,
    cluster_order,
    cosine_from_gram,
    cosine_gram,
    flat_maps,
    js_parts,
    kind_of,
    label_heads,
    mds,
    pairwise_refusal,
    sentence_stats,
)
from .importance import (
    CURVE_UNITS,
    MEASURES,
    Batch,
    Importance,
    RemovalCurve,
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

# Every refusal of a corpus, by code: the English the command line prints (the app translates by code).
MESSAGES = {
    "not_text": "the corpus must be text, one sentence per line",
    "empty": "the corpus is empty: give one sentence per line",
    "binary": "{name} is not a text file: give UTF-8 text, one sentence per line",
    "not_utf8": "{name} is not UTF-8 text (byte {byte} cannot be read): save it as UTF-8",
    "line_chars": "line {line} of the corpus needs {amount} characters; the budget {env} allows {cap} characters",
    "lines_tokens": ("a corpus of {lines} lines needs at least {amount} tokens; the budget {env} allows {cap} tokens"),
    "tokens": "this corpus needs {amount} tokens; the budget {env} allows {cap} tokens",
    "no_files": "{name} holds no .txt, .jsonl or .parquet file",
    "parquet": "{name} cannot be read as a Parquet file with a string column text: {reason}",
}


class CorpusError(InputError):
    """A corpus that cannot be analysed as given: `code` names the MESSAGES entry, `values` fill it."""

    def __init__(self, code: str, **values: object):
        self.code, self.values = code, values
        super().__init__(MESSAGES[code].format(**values))


class CorpusBudgetError(CorpusError, BudgetError):
    """A corpus over one of the operator's budgets (max_text_chars per line, max_corpus_tokens in all)."""


def _require(key: str, amount: int, code: str, **values: object) -> None:
    """Raise CorpusBudgetError(code) when amount is over budget `key` (models.settings); call before allocating."""
    cap = settings.limit(key)
    if amount > cap:
        env = settings.PREFIX + key.upper()
        raise CorpusBudgetError(code, amount=f"{amount:,}", cap=f"{int(cap):,}", env=env, **values)


@dataclass(frozen=True)
class Line:
    text: str
    text_b: str | None = None


def read_corpus(text: str) -> list[Line]:
    """Return the sentences of a corpus text: one per non-empty line; `A<TAB>B` is a sentence pair."""
    if not isinstance(text, str):
        raise CorpusError("not_text")
    lines = []
    for raw in text.splitlines():
        a, _, b = raw.partition("\t")
        a, b = a.strip(), b.strip()
        if a:
            lines.append(Line(a, b or None))
        elif b:
            lines.append(Line(b))
    if not lines:
        raise CorpusError("empty")
    for n, ln in enumerate(lines, 1):
        _require("max_text_chars", len(ln.text) + len(ln.text_b or ""), "line_chars", line=f"{n:,}")
    # Every line is at least 3 tokens ([CLS], a word, [SEP]): a cheap bound before anything is tokenized.
    _require("max_corpus_tokens", 3 * len(lines), "lines_tokens", lines=f"{len(lines):,}")
    return lines


def read_corpus_file(data: bytes, name: str = "corpus") -> list[Line]:
    """Return the sentences of an uploaded or given file's bytes (UTF-8 text, one sentence per line)."""
    if b"\x00" in data[:4096]:
        raise CorpusError("binary", name=name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CorpusError("not_utf8", name=name, byte=f"{err.start:,}") from None
    return read_corpus(text)


def buckets(
    encoder: Encoder, lines: Sequence[Line], budget: int | None = None, max_batch: int | None = None
) -> list[list[int]]:
    """Return groups of line indices, sorted by length, each small enough to run as one padded batch.

    Sentences of similar length share a batch, so padding stays small; pairs and single sentences never
    share one (the tokenizer takes a batch of either). A group holds at most `max_batch` lines (default: the
    operator's ATTENTION_LENS_MAX_BATCH, the budget of one forward) and at most `budget` map elements.
    """
    if budget is None:
        budget = BUCKET_ELEMENTS_GPU if encoder.device.type == "cuda" else BUCKET_ELEMENTS_CPU
    most = int(settings.limit("max_batch")) if max_batch is None else max_batch
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
        _require("max_corpus_tokens", total, "tokens")
        order = sorted(range(len(idx)), key=lambda k: lengths[k])
        group: list[int] = []
        for k in order:
            T = lengths[k]  # the longest so far: sorted ascending
            # Two (layers, heads, T, T) tensors per sentence: the maps and the scores the recorder keeps.
            full = len(group) >= most or (len(group) + 1) * 2 * c.n_layers * c.n_heads * T * T > budget
            if group and full:
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


# ---- reading a corpus at any scale: .txt, .jsonl, .parquet or a folder of these, row by row -----------------

FORMATS = {".txt": "txt", ".jsonl": "jsonl", ".parquet": "parquet"}
# Why a row was not analysed; counted, reported in the document, never fatal.
SKIPPED = ("empty", "undecodable", "malformed", "too_long")
CKA_ROWS_FRACTION = 0.5  # a batch sends its CKA rows while they number at most this fraction of F (CorpusSums)
SAMPLE_LINES = 100  # a streamed corpus's document lists the tokens of this many lines, not of every line
# Redundancy between heads (JS, cosine, CKA) is summed over about this many lines of a larger corpus: its cost is
# per head pair and cell (2,628 pairs for the bundled model: two thirds of the forward's arithmetic on two cores),
# the per-head statistics' per head. 0 = every line. `redundancy_cut` says which lines.
REDUNDANCY_LINES = 256
BATCH_ROWS = 256  # input rows per batch of the streaming engines (`stats --batch-size`)
BOM = b"\xef\xbb\xbf"


def raw_cap() -> int:
    """Return the most bytes one input line may have (the character budget, 6 bytes a character for JSON escapes)."""
    return 6 * int(settings.limit("max_text_chars")) + 1024


def corpus_files(path: str | Path) -> list[tuple[Path, str]]:
    """Return the files a `--file` path names, each with its format: the file itself (a name other than .jsonl or
    .parquet is text, one sentence a line), or a folder's .txt, .jsonl and .parquet files in name order."""
    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in FORMATS and f.is_file())
        if not files:
            raise CorpusError("no_files", name=str(p))
        return [(f, FORMATS[f.suffix.lower()]) for f in files]
    regular_file_size(p, "the corpus file")  # a device, a FIFO or a missing path: refused before reading
    return [(p, FORMATS.get(p.suffix.lower(), "txt"))]


def check_text_file(path: Path) -> None:
    """Refuse a .txt or .jsonl file that is binary (a NUL in its first 4 KB): a whole file, not a row, is wrong."""
    with open(path, "rb") as f:
        if b"\x00" in f.read(4096):
            raise CorpusError("binary", name=str(path))


def split_raw(data: bytes) -> list[bytes]:
    """Return a text file's lines as bytes (split on \\n, a leading BOM dropped): what `raw_lines` yields."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    rows = data.split(b"\n")
    if rows and rows[-1] == b"":
        rows.pop()
    return rows


def raw_lines(path: Path, cap: int) -> Iterator[bytes | None]:
    """Yield a text file's lines as bytes, streamed: None for a line over `cap` bytes (skipped to its end)."""
    with open(path, "rb") as f:
        first = True
        while raw := f.readline(cap + 1):
            if len(raw) > cap and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):
                    raw = f.readline(1 << 20)
                first = False
                yield None
                continue
            if first and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            first = False
            yield raw[:-1] if raw.endswith(b"\n") else raw


def record(a: object, b: object = None) -> Line | str:
    """Return the Line of one row's text and optional second text, or why it was skipped (one of SKIPPED)."""
    a = "" if a is None else a
    b = "" if b is None else b
    if not isinstance(a, str) or not isinstance(b, str):
        return "malformed"
    a, b = a.strip(), b.strip()
    if not a:  # a lone second half is a sentence, as in read_corpus
        a, b = b, ""
    if not a:
        return "empty"
    try:
        (a + b).encode("utf-8")  # a JSON "\\ud800" escape: a lone surrogate no tokenizer reads
    except UnicodeEncodeError:
        return "undecodable"
    if len(a) + len(b) > settings.limit("max_text_chars"):
        return "too_long"
    return Line(a, b or None)


def parse_raw(raw: bytes | None, fmt: str) -> list[Line | str]:
    """Return the rows of one input line (`txt`: A or A<TAB>B; `jsonl`: {"text", "text_b"}): Lines or skip reasons.

    A text line holding \\r or another line break of str.splitlines is several rows, as read_corpus reads it.
    """
    if raw is None or fmt == "long":
        return ["too_long"]
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return ["undecodable"]
    if fmt == "jsonl":
        if not text.strip():
            return ["empty"]
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return ["malformed"]
        return [record(obj.get("text"), obj.get("text_b")) if isinstance(obj, dict) else "malformed"]
    out: list[Line | str] = []
    for piece in text.splitlines() or [""]:
        a, _, b = piece.partition("\t")
        out.append(record(a, b))
    return out


@dataclass
class Chunk:
    """A batch of input rows, parsed: the Lines to analyse, how many rows were read, and why others were skipped."""

    lines: list[Line] = field(default_factory=list)
    read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, row: Line | str) -> None:
        self.read += 1
        if isinstance(row, Line):
            self.lines.append(row)
        else:
            self.skipped[row] = self.skipped.get(row, 0) + 1


def parse_rows(rows: Iterable[tuple[bytes | None, str]]) -> Chunk:
    """Return the Chunk of some (raw line, format) rows: what a Ray actor receives and the local engine reads."""
    chunk = Chunk()
    for raw, fmt in rows:
        for row in parse_raw(raw, fmt):
            chunk.add(row)
    return chunk


def parquet_columns(path: Path) -> list[str]:
    """Return the columns to read from a Parquet file (text, and text_b when present); CorpusError otherwise."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except (OSError, ValueError) as err:  # ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise CorpusError("parquet", name=str(path), reason=str(err).splitlines()[0][:200]) from None
    if "text" not in names:
        raise CorpusError("parquet", name=str(path), reason="no column named text")
    return ["text", "text_b"] if "text_b" in names else ["text"]


def parquet_raw(text: object, text_b: object = None) -> bytes:
    """Return one Parquet row as the JSON line it stands for (a value that is not a string stays malformed)."""

    def plain(v: object) -> object:
        return v if v is None or isinstance(v, str) else 0

    return json.dumps({"text": plain(text), "text_b": plain(text_b)}, ensure_ascii=False).encode("utf-8")


def raw_rows(path: str | Path) -> Iterator[tuple[bytes | None, str]]:
    """Yield every input row of a `--file` path, streamed, as (raw line, format) for `parse_rows`."""
    cap = raw_cap()
    for f, fmt in corpus_files(path):
        if fmt == "parquet":
            import pyarrow.parquet as pq

            cols = parquet_columns(f)
            try:
                for batch in pq.ParquetFile(f).iter_batches(batch_size=1024, columns=cols):
                    a = batch.column("text").to_pylist()
                    b = batch.column("text_b").to_pylist() if "text_b" in cols else [None] * len(a)
                    for x, y in zip(a, b, strict=True):
                        yield parquet_raw(x, y), "jsonl"
            except (OSError, ValueError) as err:
                raise CorpusError("parquet", name=str(f), reason=str(err).splitlines()[0][:200]) from None
        else:
            check_text_file(f)
            for raw in raw_lines(f, cap):
                yield raw, fmt


def read_chunks(path: str | Path, batch_rows: int = BATCH_ROWS) -> Iterator[Chunk]:
    """Yield a `--file` path's rows in Chunks of `batch_rows` input rows, streamed (the local engine's batches)."""
    rows: list[tuple[bytes | None, str]] = []
    for row in raw_rows(path):
        rows.append(row)
        if len(rows) >= batch_rows:
            yield parse_rows(rows)
            rows = []
    if rows:
        yield parse_rows(rows)


def first_lines(path: str | Path, n: int) -> list[Line]:
    """Return the first n analysable lines of a `--file` path (importance runs on them)."""
    out: list[Line] = []
    for chunk in read_chunks(path, max(n, 1)):
        out += chunk.lines
        if len(out) >= n:
            break
    return out[:n]


def count_rows(path: str | Path) -> int:
    """Return how many input rows a `--file` path holds (lines counted in 1 MB reads; Parquet's metadata)."""
    total = 0
    for f, fmt in corpus_files(path):
        if fmt == "parquet":
            import pyarrow.parquet as pq

            parquet_columns(f)
            total += pq.ParquetFile(f).metadata.num_rows
            continue
        last = b"\n"
        with open(f, "rb") as fh:
            while block := fh.read(1 << 20):
                total += block.count(b"\n")
                last = block[-1:]
        total += last != b"\n"
    return total


# ---- exactly reducible sums: one batch's statistics, added up in any order --------------------------------


def line_key(line: Line) -> str:
    """Return the key that picks a line for the tokens sample (BLAKE2b of its text): the same on every machine."""
    return hashlib.blake2b(f"{line.text}\t{line.text_b or ''}".encode(), digest_size=8).hexdigest()


def redundancy_cut(lines: int, limit: int = REDUNDANCY_LINES) -> int | None:
    """Return the key below which a line of a corpus of `lines` lines joins the redundancy sample, or None (all).

    A line's key is its BLAKE2b-64 hash (`line_key`) as an integer: a line is in the sample when its key is below
    2⁶⁴ · limit / lines, so about `limit` lines are, the same ones whatever the engine, the batches or the order.
    limit 0, or a corpus of at most `limit` lines: every line.
    """
    if limit <= 0 or lines <= limit:
        return None
    return (limit << 64) // lines


def in_redundancy_sample(line: Line, cut: int | None) -> bool:
    """Return whether a line's redundancy (JS, cosine, CKA) is summed, under `redundancy_cut`'s cut."""
    return cut is None or int(line_key(line), 16) < cut


def _sample(rows: Iterable[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """Return the SAMPLE_LINES rows of smallest key (ties by tokens): a bottom-k sample, mergeable in any order."""
    return sorted(rows, key=lambda r: (r[0], r[1]))[:SAMPLE_LINES]


def _triu_pack(m: np.ndarray) -> np.ndarray:
    """Return a symmetric (F, F) matrix's upper triangle, row by row, as one flat array of F·(F+1)/2 values."""
    F = m.shape[0]
    out = np.empty(F * (F + 1) // 2, dtype=m.dtype)
    at = 0
    for i in range(F):
        out[at : at + F - i] = m[i, i:]
        at += F - i
    return out


def _triu_unpack(v: np.ndarray) -> np.ndarray:
    """Return the symmetric (F, F) matrix whose upper triangle `_triu_pack` wrote; a length that is no triangle
    number is refused."""
    F = int((np.sqrt(8 * v.size + 1) - 1) / 2)
    if v.ndim != 1 or F * (F + 1) // 2 != v.size:
        raise ValueError("cka_moment: not a packed triangle")
    m = np.empty((F, F), dtype=v.dtype)
    at = 0
    for i in range(F):
        m[i, i:] = v[at : at + F - i]
        m[i:, i] = v[at : at + F - i]
        at += F - i
    return m


@dataclass
class CorpusSums:
    """Per-head sums over some sentences, all float64, that add up exactly: batch sums merged in any order give
    the sums of the whole corpus, and `report()` turns them into the HeadReport.

    stats: per statistic (sentence_stats), the sum over sentences of each sentence's value, (layers, heads);
    'block' over sentence pairs only. Redundancy, over the sentences of the redundancy sample only (`pair_sentences`
    of them, `pair_rows` query rows; `redundancy_cut`): JS: Σ P ln P, Σ P and Σ S ln S of JsParts; gram: the cosine
    Gram of the flat maps; CKA: over every real token z (all heads' context vectors, heads·d_k), Σ z and Σ z zᵀ, the latter built
    from each batch's own centred product (float32 on the device) plus its mean's outer products in float64.
    """

    n_layers: int
    n_heads: int
    read: int = 0  # input rows seen, analysed or skipped
    sentences: int = 0
    rows: int = 0  # query rows: real tokens of every sentence
    pair_items: int = 0
    pair_sentences: int = 0  # sentences whose redundancy is summed (the redundancy sample: redundancy_cut)
    pair_rows: int = 0  # their query rows
    truncated: int = 0
    batches: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    stats: dict[str, np.ndarray] = field(default_factory=dict)
    js_plogp: np.ndarray | None = None
    js_mass: np.ndarray | None = None
    js_slogs: np.ndarray | None = None
    gram: np.ndarray | None = None
    cka_count: int = 0
    cka_total: np.ndarray | None = None
    cka_moment: np.ndarray | None = None
    # A batch with few sampled tokens sends their rows z (n, F) float32 instead of (Σ z, Σ z zᵀ): fewer bytes than
    # the (F, F) moment's triangle while n ≤ CKA_ROWS_FRACTION · F, and no (F, F) float64 work on the actor.
    # `merge` folds them into the float64 sums (Σ z, Zᵀ Z), so a total never holds rows.
    cka_rows: np.ndarray | None = None
    sample: list[tuple[str, list[str]]] = field(default_factory=list)

    ARRAYS = ("js_plogp", "js_mass", "js_slogs", "gram", "cka_total", "cka_moment")
    COUNTS = (
        "read",
        "sentences",
        "rows",
        "pair_items",
        "pair_sentences",
        "pair_rows",
        "truncated",
        "batches",
        "cka_count",
    )

    def _fold_rows(self) -> None:
        """Turn these sums' own CKA rows, if any, into Σ z and Σ z zᵀ (float64)."""
        if self.cka_rows is None:
            return
        Z = self.cka_rows.astype(np.float64)
        self.cka_rows = None
        s, m = Z.sum(0), Z.T @ Z
        if self.cka_total is None or self.cka_moment is None:
            self.cka_total, self.cka_moment = s, m
        else:
            self.cka_total += s
            self.cka_moment += m

    def merge(self, other: CorpusSums) -> CorpusSums:
        """Add another batch's sums into these, in place (into arrays these sums own: no new (F, F) array per batch,
        which kept the Ray driver's peak growing with the corpus); return self."""
        if (other.n_layers, other.n_heads) != (self.n_layers, self.n_heads):
            raise ValueError("sums of different models")
        self._fold_rows()
        for k in self.COUNTS:
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for reason, n in other.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
        for name, v in other.stats.items():
            if name in self.stats:
                self.stats[name] += v
            else:
                self.stats[name] = v.copy()
        for k in self.ARRAYS:
            a, b = getattr(self, k), getattr(other, k)
            if b is None:
                continue
            if a is None:
                setattr(self, k, b.copy())
            else:
                a += b
        if other.cka_rows is not None:
            self.cka_rows = other.cka_rows
            self._fold_rows()
        self.sample = _sample(self.sample + other.sample)
        return self

    def __add__(self, other: CorpusSums) -> CorpusSums:
        arrays: dict[str, Any] = {k: None if getattr(self, k) is None else getattr(self, k).copy() for k in self.ARRAYS}
        stats = {k: v.copy() for k, v in self.stats.items()}
        return replace(self, skipped=dict(self.skipped), stats=stats, sample=list(self.sample), **arrays).merge(other)

    def to_bytes(self) -> bytes:
        """Return these sums as .npz bytes (no pickles): what a Ray actor sends the driver for one batch."""
        meta = {k: getattr(self, k) for k in ("n_layers", "n_heads", *self.COUNTS)}
        meta.update(skipped=self.skipped, sample=self.sample)
        arrays = {f"stat.{k}": v for k, v in self.stats.items()}
        arrays.update({k: getattr(self, k) for k in self.ARRAYS if getattr(self, k) is not None})
        if self.cka_moment is not None:  # (heads·d_k)² float64, the bulk of a batch: its upper triangle only
            arrays["cka_moment"] = _triu_pack(self.cka_moment)
        if self.cka_rows is not None:
            arrays["cka_rows"] = self.cka_rows
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]  # the stub reads **arrays as allow_pickle
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> CorpusSums:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes())
            sums = cls(n_layers=meta["n_layers"], n_heads=meta["n_heads"])
            for k in cls.COUNTS:
                setattr(sums, k, int(meta[k]))
            sums.skipped = {str(k): int(v) for k, v in meta["skipped"].items()}
            sums.sample = [(str(k), [str(t) for t in toks]) for k, toks in meta["sample"]]
            for name in z.files:
                if name.startswith("stat."):
                    sums.stats[name[5:]] = z[name].astype(np.float64)
                elif name == "cka_moment":
                    sums.cka_moment = _triu_unpack(z[name].astype(np.float64, copy=False))
                elif name == "cka_rows":
                    sums.cka_rows = z[name].astype(np.float32, copy=False)
                elif name in cls.ARRAYS:
                    setattr(sums, name, z[name].astype(np.float64))
        return sums

    def cka(self) -> np.ndarray:
        """Return linear CKA between heads over every token pooled, (heads, heads); NaN for a constant head."""
        N = self.n_layers * self.n_heads
        self._fold_rows()
        if self.cka_moment is None or self.cka_total is None or self.cka_count < 2:
            return np.full((N, N), np.nan)
        F_ = self.cka_total.shape[0]
        D = F_ // N
        mean = self.cka_total / self.cka_count
        hsic = np.empty((N, N))
        rows = max(1, (1 << 22) // (D * F_))  # heads per block: bounded memory even for BERT-base's 9216²
        for a0 in range(0, N, rows):
            a1 = min(N, a0 + rows)
            part = slice(a0 * D, a1 * D)
            C = self.cka_moment[part] - np.outer(self.cka_total[part], mean)  # rows of Σ (z − z̄)(z − z̄)ᵀ
            hsic[a0:a1] = np.square(C.reshape(a1 - a0, D, N, D)).sum((1, 3))  # ‖Y_bᵀ X_a‖²_F
        return _cka_from_hsic(torch.from_numpy(hsic)).numpy()

    def report(self, encoder: Encoder, tokens: list | None = None) -> HeadReport:
        """Return the HeadReport of these sums; tokens: every line's (a corpus in memory), else the sample's."""
        if not self.sentences:
            raise CorpusError("empty")
        L, H = self.n_layers, self.n_heads
        caps = encoder.capabilities
        stats = {}
        for k in STATS:
            denom = self.pair_items if k == "block" else self.sentences
            stats[k] = self.stats[k] / denom if denom else np.full((L, H), np.nan)
        if caps.causal:  # row i of a causal model sees i + 1 keys: its normaliser is ln(i + 1), not ln n
            stats["entropy_norm"] = stats["entropy_norm_causal"]
        skipped = pairwise_refusal(L * H)
        if not skipped and not self.pair_sentences:
            skipped = "no line of the corpus fell in the redundancy sample"
        if skipped or self.js_slogs is None or self.gram is None:
            empty = np.zeros((0, 0))
            js, cosine, cka, order, coords, stress = empty, empty, empty, list(range(L * H)), None, 0.0
        else:
            assert self.js_plogp is not None and self.js_mass is not None
            parts = JsParts(*(torch.from_numpy(a) for a in (self.js_plogp, self.js_mass, self.js_slogs)))
            js = parts.matrix().numpy()
            cosine = cosine_from_gram(torch.from_numpy(self.gram)).numpy()
            cka = self.cka()
            order = cluster_order(js)
            coords, stress = mds(js / max(self.pair_rows, 1))
        report = HeadReport(
            model=encoder.name,
            n_layers=L,
            n_heads=H,
            sentences=self.sentences,
            rows=self.rows,
            pairs=self.pair_items > 0,
            stats=stats,
            cls_entropy=self.stats["cls_entropy"] / self.sentences,
            labels=label_heads(stats, pairs=self.pair_items > 0, causal=caps.causal),
            js=js,
            cosine=cosine,
            cka=cka,
            tokens=list(tokens) if tokens is not None else [t for _, t in self.sample],
            order=order,
            coords=coords,
            stress=stress,
            causal=caps.causal,
            pairwise_skipped=skipped,
            pair_sentences=self.pair_sentences,
            pair_rows=self.pair_rows,
        )
        return replace(report, group=caps.group_size) if caps.grouped else report

    def input_json(self) -> dict[str, object]:
        """Return the document's "input": rows read, sentences analysed, rows skipped by reason, rows truncated."""
        return {
            "rows": self.read,
            "sentences": self.sentences,
            "skipped": {k: self.skipped.get(k, 0) for k in SKIPPED},
            "truncated": self.truncated,
        }

    def redundancy_sample_json(self, limit: int = REDUNDANCY_LINES) -> dict[str, object]:
        """Return the document's "redundancy_sample": over which lines JS, cosine and CKA are summed."""
        rule = (
            "every line"
            if self.pair_sentences == self.sentences
            else f"the lines whose BLAKE2b-64 key is below 2^64 · {limit} / the rows of the input (about {limit})"
        )
        return {"lines": self.pair_sentences, "of": self.sentences, "rows": self.pair_rows, "rule": rule}

    def sample_json(self) -> dict[str, object]:
        """Return the document's "tokens_sample": which lines `tokens` lists (a sample, not every line)."""
        return {
            "lines": len(self.sample),
            "of": self.sentences,
            "rule": f"the {SAMPLE_LINES} lines of smallest BLAKE2b-64 hash of their text, in that order",
        }


def chunk_sums(
    encoder: Encoder,
    lines: Sequence[Line],
    mask: str | None = None,
    progress: ProgressFn | None = None,
    tokens_out: list[list[str]] | None = None,
    read: int | None = None,
    skipped: dict[str, int] | None = None,
    pair_cut: int | None = None,
    moments: MomentSum | None = None,
) -> CorpusSums:
    """Return the CorpusSums of some lines: the one batch → sums function of every engine.

    The lines run in length-sorted buckets (`buckets`) on the encoder's device; only float64 sums come back.
    tokens_out: filled with every line's tokens (a corpus in memory); otherwise the sums keep a sample.
    pair_cut: the redundancy sample's cut (`redundancy_cut` of the whole corpus; None: every line's redundancy).
    moments: CKA's sums go on into this MomentSum (the local engine's, across batches) and the batch's own sums
    carry none: each batch's (F, F) float64 moment, made exactly symmetric and added into the total, cost the
    2,400 sentences' run ~1.5 s for a sample of a few hundred tokens per batch (bench/NOTES.md).
    """
    c = encoder.config
    L, H = c.n_layers, c.n_heads
    sums = CorpusSums(L, H, read=len(lines) if read is None else read, skipped=dict(skipped or {}), batches=1)
    if not lines:
        return sums
    pairwise = not pairwise_refusal(L * H)
    dev = encoder.device
    f64 = torch.float64
    stat: dict[str, torch.Tensor] = {}
    js: list[torch.Tensor] | None = None
    gram: torch.Tensor | None = None
    cka = MomentSum() if moments is None else moments
    rows: list[torch.Tensor] | None = [] if moments is None else None  # a batch's CKA rows, while few (cka_rows)
    n_rows = 0
    sample: list[tuple[str, list[str]]] = []
    sep = encoder.tokenizer.sep_token or "[SEP]"
    specials = frozenset(encoder.tokenizer.all_special_tokens)
    done = 0
    with torch.inference_mode():
        for group in buckets(encoder, lines):
            batch, tokens, cut = _batch(encoder, [lines[i] for i in group], mask)
            sums.truncated += cut
            for i, row, real in zip(group, tokens, batch.real.sum(-1).tolist(), strict=True):
                shown = display_tokens(row[:real], encoder.capabilities.token_display)
                if tokens_out is not None:
                    tokens_out[i] = shown
                else:
                    sample.append((line_key(lines[i]), shown))
            sample = _sample(sample)
            chosen = [in_redundancy_sample(lines[i], pair_cut) for i in group]
            res, rec = encoder.model.run_with_cache(  # the heads' outputs for CKA, where a line is in the sample
                batch.input_ids,
                batch.token_type_ids,
                batch.keep,
                names=("context",) if pairwise and any(chosen) else (),
            )
            attn = res.attentions
            roles = Roles.of(tokens, batch.real, batch.token_type_ids, dev, sep, specials)
            for k, v in sentence_stats(attn, roles).items():
                t = torch.nansum(v.to(f64), 0) if k == "block" else v.to(f64).sum(0)
                stat[k] = stat[k] + t if k in stat else t
            sums.pair_items += int(roles.pair.sum())
            sums.sentences += attn.shape[0]
            sums.rows += int(roles.real.sum())
            if pairwise and any(chosen):
                context = rec.stacked("context")  # (B, layers, heads, seq, d_k)
                real = roles.real
                if not all(chosen):  # the bucket's lines in the redundancy sample only
                    pick = torch.tensor(chosen, device=attn.device)
                    attn, context, real = attn[pick], context[pick], real[pick]
                sums.pair_sentences += attn.shape[0]
                sums.pair_rows += int(real.sum())
                maps, n = flat_maps(attn.float(), real)
                p = js_parts(maps, n)
                js = [p.plogp, p.mass, p.slogs] if js is None else [js[0] + p.plogp, js[1] + p.mass, js[2] + p.slogs]
                g = cosine_gram(maps)
                gram = g if gram is None else gram + g
                D = context.shape[-1]
                Z = context.float().permute(0, 3, 1, 2, 4)[real].reshape(-1, L * H * D)  # (tokens, heads·d_k)
                if rows is not None and n_rows + Z.shape[0] <= CKA_ROWS_FRACTION * Z.shape[1]:
                    rows.append(Z)
                    n_rows += Z.shape[0]
                else:
                    for block in rows or []:  # too many rows to send: the moment it is
                        cka.add(block)
                    rows = None
                    cka.add(Z)
            done += len(group)
            if progress is not None:
                progress(done / len(lines), f"{done:,} / {len(lines):,} lines, {len(lines) - done:,} to go")
    sums.stats = {k: v.cpu().numpy() for k, v in stat.items()}
    if js is not None:
        sums.js_plogp, sums.js_mass, sums.js_slogs = (a.cpu().numpy() for a in js)
    if gram is not None:
        sums.gram = gram.cpu().numpy()
    if rows:
        sums.cka_rows = torch.cat(rows).cpu().numpy()
        sums.cka_count = n_rows
    elif cka.count and moments is None:
        total, moment = cka.result()
        sums.cka_count = cka.count
        sums.cka_total, sums.cka_moment = total.cpu().numpy(), moment.cpu().numpy()
    sums.sample = sample
    return sums


class MomentSum:
    """Σ z and Σ z zᵀ over the rows z of (tokens, F) blocks, in float64, as CKA needs them (`CorpusSums.cka`).

    Each block's product is taken about a centre m in float32, which keeps a near-constant head's small variance
    (Σ z zᵀ = Σ zc zcᵀ + m Σ zcᵀ + Σ zc mᵀ + n m mᵀ with zc = z − m, exactly). Blocks add their products into one
    float32 (F, F) accumulator, one GEMM each (`addmm_`), about the first block's mean, for up to FLUSH_TOKENS
    tokens; then the accumulator joins the float64 moment with m's outer products, and a new run starts. Converting
    every block's (F, F) product to float64 and adding the outer products cost more than the product itself
    (stats --file over 2,400 sentences: `.to(float64)` 5.5 s and `addr_` 2.3 s against ~4 s of GEMM).

    The product is symmetric, so only its upper part is multiplied: COLUMNS-wide strips of rows, each against the
    columns from its own on (0.38 s against 0.60 s for the whole (2,304 × 5,100) · (5,100 × 2,304) product, minilm's
    F); the float64 moment gets its lower part by mirroring, once per run.
    """

    FLUSH_TOKENS = 4096  # float32 sums over at most this many tokens' products, as a GEMM's own inner sums are
    COLUMNS = 256  # rows per strip of the upper part (narrower strips make slower GEMMs)

    def __init__(self) -> None:
        self.count = 0
        self.total: torch.Tensor | None = None  # (F,) float64
        self.moment: torch.Tensor | None = None  # (F, F) float64
        self._acc: torch.Tensor | None = None  # (F, F) float32: Σ zc zcᵀ of the current run
        self._centre = torch.empty(0)  # (F,) float32: the run's m
        self._centred = torch.empty(0)  # (F,) float64: Σ zc over the run
        self._n = 0  # tokens in the run

    def add(self, Z: torch.Tensor) -> None:
        """Add the rows of Z (tokens, F) float32."""
        f64 = torch.float64
        s64 = Z.sum(0, dtype=f64)
        self.total = s64 if self.total is None else self.total + s64
        self.count += Z.shape[0]
        if self._acc is None:
            self._centre = self._centre_of(Z, s64)
            self._centred = torch.zeros_like(s64)
            self._acc = torch.zeros(Z.shape[1], Z.shape[1], dtype=Z.dtype, device=Z.device)
            self._n = 0
        Zc = Z - self._centre
        self._centred.add_(Zc.sum(0, dtype=f64))
        F = Z.shape[1]
        for i0 in range(0, F, self.COLUMNS):
            i1 = min(F, i0 + self.COLUMNS)
            self._acc[i0:i1, i0:].addmm_(Zc[:, i0:i1].T, Zc[:, i0:])  # the strip's rows, from its diagonal on
        self._n += Z.shape[0]
        if self._n >= self.FLUSH_TOKENS:
            self._flush()

    def _centre_of(self, Z: torch.Tensor, s64: torch.Tensor) -> torch.Tensor:
        """Return a run's centre: its first block's mean, in float32."""
        return (s64 / Z.shape[0]).to(Z.dtype)

    def _flush(self) -> None:
        if self._acc is None:
            return
        m = self._centre.to(torch.float64)
        M = self._acc.to(torch.float64)
        F = M.shape[0]
        for i0 in range(0, F, self.COLUMNS):  # the lower part, left at zero by the strips: the upper part mirrored
            i1 = min(F, i0 + self.COLUMNS)
            M[i1:, i0:i1] = M[i0:i1, i1:].T
        M.addr_(m, self._centred).addr_(self._centred, m).addr_(m, m, alpha=float(self._n))
        # not in place: the moment may be an inference tensor (made under chunk_sums' inference_mode) and the last
        # run joins it in `result()`, outside (a corpus of more than FLUSH_TOKENS tokens per batch failed there)
        self.moment = M if self.moment is None else self.moment + M
        self._acc = None

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (Σ z, Σ z zᵀ) in float64. Σ z zᵀ is made exactly symmetric (its rounding is not quite: the two
        addr_ terms add in opposite orders), for every engine, so that a batch travels as its upper triangle."""
        self._flush()
        assert self.total is not None and self.moment is not None
        return self.total, (self.moment + self.moment.mT) / 2


def check_token_budget(sums: CorpusSums) -> None:
    """Refuse a streamed corpus once its tokens pass ATTENTION_LENS_MAX_CORPUS_TOKENS (checked after each batch)."""
    _require("max_corpus_tokens", sums.rows, "tokens")


def stream_corpus(
    encoder: Encoder,
    path: str | Path,
    mask: str | None = None,
    batch_rows: int = BATCH_ROWS,
    on_batch: Callable[[CorpusSums, CorpusSums], None] | None = None,
    pair_cut: int | None = None,
) -> CorpusSums:
    """Return the CorpusSums of a `--file` path on this machine: read in batches of `batch_rows` input rows, each
    batch's sums (`chunk_sums`) added as it comes, so that memory does not grow with the corpus.

    on_batch(batch, total) is called after each batch (progress). pair_cut: the redundancy sample (`redundancy_cut`
    of the file's rows; None: every line).
    """
    c = encoder.config
    total = CorpusSums(c.n_layers, c.n_heads)
    moments = MomentSum()  # CKA's sums, across batches: one float64 moment for the run, not one per batch
    for chunk in read_chunks(path, batch_rows):
        part = chunk_sums(
            encoder, chunk.lines, mask, read=chunk.read, skipped=chunk.skipped, pair_cut=pair_cut, moments=moments
        )
        total.merge(part)
        check_token_budget(total)
        if on_batch is not None:
            on_batch(part, total)
    if moments.count:
        cka_total, cka_moment = moments.result()
        total.cka_count = moments.count
        total.cka_total, total.cka_moment = cka_total.cpu().numpy(), cka_moment.cpu().numpy()
    return total


def analyse_corpus(
    encoder: Encoder,
    lines: Sequence[Line],
    mask: str | None = None,
    progress: ProgressFn | None = None,
    redundancy_lines: int = REDUNDANCY_LINES,
) -> tuple[HeadReport, int]:
    """Return the HeadReport of a corpus and how many of its lines were truncated to the model's limit.

    The corpus is one chunk (`chunk_sums`, the same function the streaming engines run per batch), so every
    line's tokens come back, in order. Every bucket runs on the encoder's device; only sums come to the CPU.
    Redundancy between heads is summed over about `redundancy_lines` of them (`redundancy_cut`; 0: every line).
    """
    if not lines:
        raise CorpusError("empty")
    tokens: list[list[str]] = [[] for _ in lines]
    cut = redundancy_cut(len(lines), redundancy_lines)
    sums = chunk_sums(encoder, lines, mask, progress=progress, tokens_out=tokens, pair_cut=cut)
    return sums.report(encoder, tokens=tokens), sums.truncated


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
        raise CorpusError("empty")
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


# ---- a statistics document that `stats --out` wrote, opened again (the Corpus page) --------------------------

STATS_FILE_HEADS = 1024  # heads a statistics document may describe (the pairwise budget's default)


class StatsFileError(InputError):
    """A statistics document that is not one `stats --out` writes: one line says why."""


def _matrix_of(value: object, n: int, what: str, cols: int | None = None) -> np.ndarray:
    """Return a JSON list of lists of numbers (None = NaN) as an (n, cols or n) float64 array; refuse anything else."""
    shape = (n, n if cols is None else cols)
    if not isinstance(value, list) or len(value) != shape[0] or not all(isinstance(r, list) for r in value):
        raise StatsFileError(f"the statistics file's {what} is not {shape[0]} × {shape[1]}")
    arr = np.empty(shape, dtype=object)
    try:
        arr[:] = value
    except ValueError:
        raise StatsFileError(f"the statistics file's {what} is not {shape[0]} × {shape[1]}") from None
    if not all(v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in arr.ravel()):
        raise StatsFileError(f"the statistics file's {what} holds something other than numbers")
    return np.array([[np.nan if v is None else float(v) for v in row] for row in arr], dtype=np.float64)


def _numbers(value: object, n: int | None, what: str, name: str, integer: bool = False) -> list[float]:
    """Return a JSON list of finite numbers (n of them, when given); refuse anything else in one line."""
    kinds = int if integer else int | float
    if (
        not isinstance(value, list)
        or (n is not None and len(value) != n)
        or not all(isinstance(v, kinds) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    ):
        size = "" if n is None else f"{n:,} "
        raise StatsFileError(f"{name}: {what} must be a list of {size}finite {'integers' if integer else 'numbers'}")
    return [float(v) for v in value]


def importance_from_document(
    data: bytes, n_layers: int, n_heads: int, name: str = "the statistics file"
) -> Importance | None:
    """Return the head importance a `stats --out` document holds (its scaled scores, measure, sentences and removal
    curve) as an Importance, or None when it holds none (`--no-importance`, `--attentions`); refuse a malformed one.

    The file keeps the scores already scaled to [0, 1] (`Importance.given`), not the raw sums.
    """
    from ..files import load_json

    heads_max = int(settings.limit("pair_heads"))
    doc = load_json(data, name, max_values=4 * heads_max * heads_max + 4_000_000, max_keys=64)
    if not isinstance(doc, dict) or doc.get("importance") is None:
        return None
    N = n_layers * n_heads
    scores = np.array(_numbers(doc["importance"], N, "importance", name)).reshape(n_layers, n_heads)
    if (scores < 0).any() or (scores > 1).any():
        raise StatsFileError(f"{name}: importance must lie in [0, 1] (scaled as `stats` writes it)")
    measure = next((k for k, text in MEASURES.items() if text == doc.get("importance_measure")), None)
    if measure is None:
        raise StatsFileError(f"{name}: importance_measure is not one that `python -m models stats` writes")
    sentences = doc.get("importance_sentences")
    if not isinstance(sentences, int) or isinstance(sentences, bool) or sentences < 1:
        raise StatsFileError(f"{name}: importance_sentences must be a positive integer")
    curve = None
    removal = doc.get("removal")
    if removal is not None:
        if not isinstance(removal, dict) or removal.get("unit") != CURVE_UNITS[measure]:
            raise StatsFileError(f"{name}: removal must be the curve `stats` writes, in {CURVE_UNITS[measure]}")
        ks = [int(k) for k in _numbers(removal.get("k"), None, "removal.k", name, integer=True)]
        if not ks or len(ks) > N + 1 or min(ks) < 0 or max(ks) > N:
            raise StatsFileError(f"{name}: removal.k must count removed heads, 0 … {N}")
        least = _numbers(removal.get("least_first"), len(ks), "removal.least_first", name)
        most = _numbers(removal.get("most_first"), len(ks), "removal.most_first", name)
        curve = RemovalCurve(ks=ks, least_first=least, most_first=most, measure=measure)
    return Importance(raw=scores, measure=measure, sentences=sentences, curve=curve, given=scores)


def report_from_document(data: bytes, name: str = "the statistics file") -> HeadReport:
    """Return the HeadReport a `stats --out` JSON document describes, read within limits (models.files.load_json).

    Statistics, labels and redundancy are the file's; the clustering and the map of heads are computed from its
    JS matrix, as for a corpus analysed here. A document that is not one is refused with one line.
    """
    from ..files import load_json

    heads_max = int(settings.limit("pair_heads"))
    doc = load_json(data, name, max_values=4 * heads_max * heads_max + 4_000_000, max_keys=64)
    if not isinstance(doc, dict) or not isinstance(doc.get("heads"), list) or not doc["heads"]:
        raise StatsFileError(f"{name} is not a statistics document of `python -m models stats` (no heads)")
    heads = doc["heads"]
    if len(heads) > max(heads_max, STATS_FILE_HEADS):
        raise StatsFileError(f"{name} describes {len(heads):,} heads; at most {heads_max:,} are read")
    if not all(isinstance(h, dict) for h in heads):
        raise StatsFileError(f"{name}: every head must be an object")
    try:
        layers = [int(h["layer"]) for h in heads]
        cols = [int(h["head"]) for h in heads]
    except (KeyError, TypeError, ValueError):
        raise StatsFileError(f"{name}: every head needs an integer layer and head") from None
    L, H = max(layers) + 1, max(cols) + 1
    if (
        min(layers) < 0
        or min(cols) < 0
        or [(li, hi) for li, hi in zip(layers, cols, strict=True)] != [(i // H, i % H) for i in range(L * H)]
    ):
        raise StatsFileError(f"{name}: heads must be every (layer, head) in layer-major order")
    causal = doc.get("kind") == kind_of(True)
    allowed = set(DECODER_LABELS if causal else LABELS)
    stats: dict[str, np.ndarray] = {}
    for k in STATS:
        values = [h.get(k) for h in heads]
        if not all(v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values):
            raise StatsFileError(f"{name}: the statistic {k} holds something other than numbers")
        stats[k] = np.array([np.nan if v is None else float(v) for v in values]).reshape(L, H)
    labels = [h.get("label") for h in heads]
    if not all(isinstance(v, str) and v in allowed for v in labels):
        raise StatsFileError(f"{name}: a head's label is not one of {', '.join(sorted(allowed))}")
    counts = []
    for key in ("sentences", "rows"):
        v = doc.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise StatsFileError(f"{name}: {key} must be a positive integer")
        counts.append(v)
    N = L * H
    red = doc.get("redundancy")
    pair_counts: list[int] = []
    if red is None:
        js = cosine = cka = np.zeros((0, 0))
        skipped = str(doc.get("redundancy_skipped") or "no redundancy in the file")[:500]
        order, coords, stress = list(range(N)), None, 0.0
    elif isinstance(red, dict):
        js, cosine = _matrix_of(red.get("js"), N, "JS matrix"), _matrix_of(red.get("cosine"), N, "cosine matrix")
        cka = _matrix_of(red.get("cka"), N, "CKA matrix") if red.get("cka") is not None else np.full((N, N), np.nan)
        if not np.isfinite(js).all() or (js < 0).any():
            raise StatsFileError(f"{name}: the JS matrix must hold finite divergences ≥ 0")
        for key, whole in (("sentences", counts[0]), ("rows", counts[1])):  # the redundancy sample's (older: all)
            v = red.get(key, whole)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= whole:
                raise StatsFileError(f"{name}: redundancy {key} must be an integer from 1 to the document's {key}")
            pair_counts.append(v)
        skipped, order = "", cluster_order(js)
        coords, stress = mds(js / pair_counts[1])
    else:
        raise StatsFileError(f"{name}: redundancy must be an object or null")
    induction = None
    if any("induction" in h for h in heads):
        induction = np.array([float(h.get("induction") or 0.0) for h in heads]).reshape(L, H)
    cls_entropy = np.full((L, H), np.nan)
    if doc.get("cls_entropy") is not None:
        cls_entropy = _matrix_of(doc["cls_entropy"], L, "cls_entropy", cols=H)
    given = doc.get("tokens")
    tokens: list = given if isinstance(given, list) else []
    return HeadReport(
        model=str(doc.get("model") or "?")[:200],
        n_layers=L,
        n_heads=H,
        sentences=counts[0],
        rows=counts[1],
        pairs=bool(np.isfinite(stats["block"]).any()),
        stats=stats,
        cls_entropy=cls_entropy,
        labels=np.array(labels, dtype=object).reshape(L, H).astype(str),
        js=js,
        cosine=cosine,
        cka=cka,
        tokens=tokens,
        order=order,
        coords=coords,
        stress=stress,
        causal=causal,
        induction=induction,
        pairwise_skipped=skipped,
        pair_sentences=pair_counts[0] if pair_counts else 0,
        pair_rows=pair_counts[1] if pair_counts else 0,
    )
