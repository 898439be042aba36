"""Corpus mode: batched with padding on the device, yet equal to analysing every sentence alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from models import InputError
from models.analysis.corpus import (
    PUBLISHED,
    Line,
    analyse_corpus,
    buckets,
    corpus_importance,
    is_bert_base,
    our_published_figures,
    read_corpus,
    read_corpus_file,
)
from models.analysis.heads import STATS, analyse, cka_matrix, cosine_from_gram

CORPUS = """The cat sat on the mat.
A much longer sentence, with commas, semicolons; and a question at the end of it all?

Short.
The keys to the cabinet that the old man built are on the table.
First half of a pair.\tSecond half of the pair, here.
"""


def test_read_corpus():
    lines = read_corpus(CORPUS)
    assert len(lines) == 5  # the blank line is skipped
    assert lines[2] == Line("Short.")
    assert lines[4] == Line("First half of a pair.", "Second half of the pair, here.")
    with pytest.raises(InputError, match="empty"):
        read_corpus(" \n\t\n")


def test_read_corpus_file_refuses_what_is_not_utf8_text():
    assert len(read_corpus_file(b"Un.\nDeux, trois.\n")) == 2
    assert read_corpus_file("\ufeffWith a BOM.".encode())[0].text == "With a BOM."
    with pytest.raises(InputError, match="not UTF-8"):
        read_corpus_file("caf\xe9".encode("latin-1"), "c.txt")
    with pytest.raises(InputError, match="not a text file"):
        read_corpus_file(b"\x89PNG\r\n\x00\x00", "picture.png")


def test_buckets_sort_by_length_and_keep_pairs_apart(minilm):
    lines = read_corpus(CORPUS)
    groups = buckets(minilm, lines, budget=2 * 72 * 20 * 20)  # small: several buckets
    assert sorted(i for g in groups for i in g) == list(range(5))
    assert all(len({lines[i].text_b is None for i in g}) == 1 for g in groups)
    assert len(groups) > 2


@pytest.fixture(scope="module")
def corpus_and_singles(minilm):
    lines = read_corpus(CORPUS)
    report, truncated = analyse_corpus(minilm, lines)
    assert truncated == 0
    singles = [minilm.encode(ln.text, ln.text_b, internals=True) for ln in lines]
    return lines, report, singles


def test_corpus_statistics_equal_the_mean_of_each_sentence_alone(corpus_and_singles):
    """Padded rows never count: a padded batch gives what each sentence alone gives."""
    _, report, singles = corpus_and_singles
    alone = [analyse(out) for out in singles]
    for k in STATS:
        if k == "block":
            ref = np.nanmean([a.stats[k] for a in alone if a.pairs], 0)
        else:
            ref = np.mean([a.stats[k] for a in alone], 0)
        np.testing.assert_allclose(report.stats[k], ref, rtol=1e-5, atol=1e-6, err_msg=k)
    assert report.rows == sum(out.seq for out in singles)
    assert report.sentences == 5 and report.pairs
    np.testing.assert_allclose(report.js, sum(a.js for a in alone), rtol=1e-5, atol=1e-4)  # summed over sentences
    np.testing.assert_allclose(report.cls_entropy, np.mean([a.cls_entropy for a in alone], 0), rtol=1e-5)
    assert [len(t) for t in report.tokens] == [out.seq for out in singles]


def test_corpus_cosine_and_cka_pool_every_sentence(corpus_and_singles):
    _, report, singles = corpus_and_singles
    gram = sum((flat := out.attentions.reshape(72, -1).double()) @ flat.T for out in singles)
    np.testing.assert_allclose(report.cosine, cosine_from_gram(gram).numpy(), rtol=1e-4, atol=1e-6)
    pooled = torch.cat([out.context for out in singles], dim=2)  # (layers, heads, all tokens, d_k)
    np.testing.assert_allclose(report.cka, cka_matrix(pooled.double()).numpy(), rtol=1e-3, atol=1e-4)


def test_bucket_size_does_not_change_the_result(minilm):
    lines = read_corpus(CORPUS)
    import models.analysis.corpus as corpus

    one, _ = analyse_corpus(minilm, lines)
    old = corpus.BUCKET_ELEMENTS_CPU
    corpus.BUCKET_ELEMENTS_CPU = 1  # one sentence per bucket: no padding at all
    try:
        many, _ = analyse_corpus(minilm, lines)
    finally:
        corpus.BUCKET_ELEMENTS_CPU = old
    for k in STATS:
        np.testing.assert_allclose(one.stats[k], many.stats[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(one.js, many.js, rtol=1e-5, atol=1e-4)


def test_progress_reaches_the_end(minilm):
    seen = []
    analyse_corpus(minilm, read_corpus(CORPUS), progress=lambda f, what: seen.append(f))
    assert seen and seen[-1] == pytest.approx(1.0) and seen == sorted(seen)


def test_truncated_lines_are_reported():
    from models import load_encoder

    tiny = load_encoder("random:tiny", device="cpu")  # 8 heads: the 512-token line stays quick
    report, truncated = analyse_corpus(tiny, [Line("word " * 600), Line("short")])
    assert truncated == 1
    assert report.rows == 512 + 3


def test_corpus_importance_uses_the_first_lines(minilm):
    lines = read_corpus(CORPUS)
    imp = corpus_importance(minilm, lines, limit=3)
    assert imp.sentences == 3 and imp.measure == "proxy"
    assert imp.notes and "first 3 of 5" in imp.notes[0]
    assert imp.scores.shape == (6, 12) and imp.scores.max() == 1.0


def test_published_figures(corpus_and_singles):
    _, report, _ = corpus_and_singles
    assert is_bert_base(12, 12, 768) and not is_bert_base(6, 12, 384)
    ours = our_published_figures(report)
    assert ours["tokens_per_sentence"] == pytest.approx(report.rows / 5)
    assert ours["last_cls_entropy"] == pytest.approx(float(report.cls_entropy[-1].mean()))
    assert ours["prev_layers"] == sorted(np.nonzero(report.stats["prev"] > 0.5)[0].tolist())
    # Clark et al. count from 1; we keep their layers 6–10 as 5–9 here
    assert PUBLISHED["sep_layers"] == (5, 9) and PUBLISHED["prev_layers"] == (1, 3, 6, 7)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_gives_what_the_cpu_gives(minilm):
    """Buckets, statistics, JS, cosine and pooled CKA on the GPU equal the CPU's; importance runs there too."""
    from models import load_encoder

    gpu = load_encoder("minilm", device="cuda")
    lines = read_corpus(CORPUS)
    on_gpu, _ = analyse_corpus(gpu, lines)
    on_cpu, _ = analyse_corpus(minilm, lines)
    for k in STATS:
        np.testing.assert_allclose(on_gpu.stats[k], on_cpu.stats[k], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(on_gpu.js, on_cpu.js, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(on_gpu.cosine, on_cpu.cosine, atol=1e-4)
    np.testing.assert_allclose(on_gpu.cka, on_cpu.cka, atol=1e-3)
    single = gpu.encode(lines[0].text, internals=True)
    np.testing.assert_allclose(
        analyse(single, gpu.device).js, analyse(minilm.encode(lines[0].text, internals=True)).js, rtol=1e-4, atol=1e-3
    )
    imp = corpus_importance(gpu, lines, limit=2)
    assert imp.scores.shape == (6, 12) and np.isfinite(imp.raw).all()


# ---- a corpus streams through the batch budget (issue 25) ------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "corpus_en.txt"


def _report_with_batch(monkeypatch, encoder, lines, max_batch: int):
    monkeypatch.setenv("ATTENTION_LENS_MAX_BATCH", str(max_batch))
    groups = buckets(encoder, lines)
    return analyse_corpus(encoder, lines)[0], groups


def test_the_example_corpus_streams_in_batches_and_equals_one_batch(minilm, monkeypatch):
    """60 lines under the default budget of 16 per forward: batches of at most 16, the numbers of one batch."""
    lines = read_corpus(EXAMPLE.read_text(encoding="utf-8"))
    assert len(lines) == 60
    monkeypatch.delenv("ATTENTION_LENS_MAX_BATCH", raising=False)
    default, groups = analyse_corpus(minilm, lines)[0], buckets(minilm, lines)
    assert max(len(g) for g in groups) <= 16 and sorted(i for g in groups for i in g) == list(range(60))
    one, one_groups = _report_with_batch(monkeypatch, minilm, lines, 1000)
    assert len(one_groups) == 2  # all singles in one padded batch, all pairs in another
    small, small_groups = _report_with_batch(monkeypatch, minilm, lines, 3)
    assert max(len(g) for g in small_groups) <= 3 and len(small_groups) >= 20
    for other in (default, small):
        assert other.sentences == one.sentences == 60 and other.rows == one.rows
        for k in STATS:
            np.testing.assert_allclose(other.stats[k], one.stats[k], rtol=1e-5, atol=1e-6, err_msg=k)
        np.testing.assert_allclose(other.js, one.js, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(other.cosine, one.cosine, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(other.cka, one.cka, rtol=1e-4, atol=1e-5)
        # atol as for the statistics: a [CLS] row of entropy 3e-4 nats differs by 1e-8 between padded batchings
        np.testing.assert_allclose(other.cls_entropy, one.cls_entropy, rtol=1e-5, atol=1e-6)
        assert other.tokens == one.tokens


@pytest.mark.long
def test_corpus_importance_streams_in_batches_too(minilm, monkeypatch):
    lines = read_corpus(EXAMPLE.read_text(encoding="utf-8"))[:9]
    monkeypatch.setenv("ATTENTION_LENS_MAX_BATCH", "4")  # three batches, the last one short
    small = corpus_importance(minilm, lines)
    monkeypatch.setenv("ATTENTION_LENS_MAX_BATCH", "1000")
    one = corpus_importance(minilm, lines)
    np.testing.assert_allclose(small.raw, one.raw, rtol=1e-4, atol=1e-6)
    assert small.sentences == one.sentences == 9


def test_every_refusal_has_a_code_and_the_budget_in_its_words(monkeypatch, tmp_path):
    from models.analysis.corpus import MESSAGES, CorpusBudgetError, CorpusError
    from models.errors import BudgetError

    seen: dict[str, CorpusError] = {}
    for call in (
        lambda: read_corpus(b"bytes"),  # type: ignore[arg-type]  # not text, on purpose
        lambda: read_corpus("\n \n"),
        lambda: read_corpus_file(b"\x00\x01", "x.bin"),
        lambda: read_corpus_file("caf\xe9".encode("latin-1"), "c.txt"),
    ):
        with pytest.raises(CorpusError) as err:
            call()
        seen[err.value.code] = err.value
    monkeypatch.setenv("ATTENTION_LENS_MAX_TEXT_CHARS", "10")
    with pytest.raises(CorpusBudgetError) as err:
        read_corpus("short\nthis line is longer than ten\n")
    assert str(err.value) == (
        "line 2 of the corpus needs 28 characters; the budget ATTENTION_LENS_MAX_TEXT_CHARS allows 10 characters"
    )
    seen[err.value.code] = err.value
    monkeypatch.delenv("ATTENTION_LENS_MAX_TEXT_CHARS")
    monkeypatch.setenv("ATTENTION_LENS_MAX_CORPUS_TOKENS", "5")
    with pytest.raises(CorpusBudgetError) as err:
        read_corpus("one\ntwo\n")
    assert isinstance(err.value, BudgetError) and "ATTENTION_LENS_MAX_CORPUS_TOKENS allows 5 tokens" in str(err.value)
    seen[err.value.code] = err.value
    from models.analysis.corpus import corpus_files, parquet_columns

    with pytest.raises(CorpusError) as err:
        corpus_files(tmp_path)  # a folder without a .txt, .jsonl or .parquet file
    seen[err.value.code] = err.value
    (tmp_path / "x.parquet").write_text("not parquet")
    with pytest.raises(CorpusError) as err:
        parquet_columns(tmp_path / "x.parquet")
    seen[err.value.code] = err.value
    assert set(seen) == set(MESSAGES) - {"tokens"}  # "tokens" needs the tokenizer: the next test
    for code, e in seen.items():
        assert str(e) == MESSAGES[code].format(**e.values)


def test_the_corpus_token_budget_still_bounds_the_whole_corpus(minilm, monkeypatch):
    from models.analysis.corpus import CorpusBudgetError

    lines = read_corpus(EXAMPLE.read_text(encoding="utf-8"))
    monkeypatch.setenv("ATTENTION_LENS_MAX_CORPUS_TOKENS", "500")  # 60 lines × ≥ 3 passes; their tokens do not
    with pytest.raises(CorpusBudgetError) as err:
        analyse_corpus(minilm, lines)
    assert err.value.code == "tokens" and err.value.values["cap"] == "500"


# ---- a corpus at any scale (issue 36): readers, exactly reducible sums --------------------------------------

ROWS = [("The cat sat on the mat.", None), ("Dogs bark at night, loudly.", None), ("A pair starts here.", "And ends.")]


def _write_all_formats(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    (folder / "a.txt").write_text("".join(f"{a}\t{b}\n" if b else f"{a}\n" for a, b in ROWS[:2]))
    (folder / "b.jsonl").write_text(json.dumps({"text": ROWS[2][0], "text_b": ROWS[2][1]}) + "\n")
    pq.write_table(pa.table({"text": [ROWS[0][0]], "text_b": [None]}), folder / "c.parquet")
    (folder / "notes.md").write_text("not a corpus file: ignored")


def test_every_format_and_a_folder_read_the_same_lines(tmp_path):
    from models.analysis.corpus import count_rows, read_chunks

    _write_all_formats(tmp_path / "corpus")
    chunks = list(read_chunks(tmp_path / "corpus", batch_rows=2))
    assert [c.read for c in chunks] == [2, 2]  # batches of input rows, across files
    lines = [ln for c in chunks for ln in c.lines]
    assert lines == [Line(*ROWS[0]), Line(*ROWS[1]), Line(*ROWS[2]), Line(ROWS[0][0])]
    assert count_rows(tmp_path / "corpus") == 4


def test_bad_rows_are_counted_never_fatal(tmp_path, monkeypatch):
    from models.analysis.corpus import read_chunks

    monkeypatch.setenv("ATTENTION_LENS_MAX_TEXT_CHARS", "400")  # lines of 3,424 bytes are read, longer ones skipped
    (tmp_path / "c.txt").write_bytes(
        b"\xef\xbb\xbfFirst line.\n\n   \t  \ncaf\xe9 in Latin-1\n"
        + b"x" * 500
        + b"\n"
        + b"y" * 5000
        + b"\nLast.\tPair."
    )
    (tmp_path / "d.jsonl").write_bytes(
        b'{"text": "Good."}\n{"text": 3}\n[1, 2]\nnot json\n{"text": "\\ud800"}\n{"text": ""}\n'
        + b"[" * 1500
        + b"]" * 1500
        + b"\n"
    )
    chunk = next(iter(read_chunks(tmp_path, batch_rows=1000)))
    assert chunk.lines == [Line("First line."), Line("Last.", "Pair."), Line("Good.")]
    assert chunk.skipped == {"empty": 3, "undecodable": 2, "too_long": 2, "malformed": 4}
    assert chunk.read == 3 + sum(chunk.skipped.values())


def test_a_binary_file_in_a_corpus_is_refused(tmp_path):
    from models.analysis.corpus import CorpusError, read_chunks

    (tmp_path / "x.txt").write_bytes(b"\x89PNG\x00\x00")
    with pytest.raises(CorpusError, match="not a text file"):
        list(read_chunks(tmp_path / "x.txt"))


def assert_same_statistics(a, b, tol: float = 1e-6) -> None:
    """Every per-head statistic, label and redundancy matrix of two reports equal to `tol` (JS per query row)."""
    assert (a.sentences, a.rows, a.pairs) == (b.sentences, b.rows, b.pairs)
    assert (a.redundancy_sentences, a.redundancy_rows) == (b.redundancy_sentences, b.redundancy_rows)
    for k in STATS:
        np.testing.assert_allclose(a.stats[k], b.stats[k], rtol=0, atol=tol, err_msg=k)
    np.testing.assert_allclose(a.cls_entropy, b.cls_entropy, rtol=0, atol=tol)
    assert (a.labels == b.labels).all()
    for name in ("js_per_row", "cosine", "cka"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=tol, err_msg=name)


@pytest.fixture(scope="module")
def batch_sums(minilm):
    from models.analysis.corpus import chunk_sums

    lines = read_corpus(EXAMPLE.read_text(encoding="utf-8"))[:24]
    return (
        lines,
        [chunk_sums(minilm, lines[i : i + 5]) for i in range(0, len(lines), 5)],
        analyse_corpus(minilm, lines)[0],
    )


def test_batch_sums_reduce_exactly_in_any_order(minilm, batch_sums):
    """Sums of 5 batches added in shuffled orders: the same to 1e-12, and the statistics of one batch to 1e-6."""
    import random

    from models.analysis.corpus import CorpusSums

    lines, parts, one = batch_sums
    reports = []
    for seed in range(3):
        order = list(parts)
        random.Random(seed).shuffle(order)
        total = CorpusSums(6, 12)
        for p in order:
            total.merge(p)
        assert total.batches == 5 and total.read == total.sentences == 24
        reports.append(total.report(minilm))
    for r in reports[1:]:
        assert_same_statistics(r, reports[0], tol=1e-12)
    assert_same_statistics(reports[0], one)
    assert total.input_json() == {
        "rows": 24,
        "sentences": 24,
        "skipped": {"empty": 0, "undecodable": 0, "malformed": 0, "too_long": 0},
        "truncated": 0,
    }
    assert len(total.sample) == 24 and [k for k, _ in total.sample] == sorted(k for k, _ in total.sample)


@pytest.mark.parametrize("bug", ["dropped", "twice", "mean_of_means"])
def test_a_wrong_reduction_is_caught(minilm, batch_sums, bug):
    """The comparison the engines' tests make fails for a dropped batch, a batch counted twice or a wrong reduction."""
    from models.analysis.corpus import CorpusSums

    lines, parts, one = batch_sums
    total = CorpusSums(6, 12)
    for i, p in enumerate(parts):
        if bug == "dropped" and i == 2:
            continue
        total.merge(p)
        if bug == "twice" and i == 2:
            total.merge(p)
    if bug == "mean_of_means":  # each batch's statistics averaged, batches weighted alike: not the corpus mean
        for k in total.stats:
            total.stats[k] = sum(p.stats[k] / (p.pair_items if k == "block" else p.sentences) for p in parts) / 5
            total.stats[k] *= total.pair_items if k == "block" else total.sentences
    with pytest.raises(AssertionError):
        assert_same_statistics(total.report(minilm), one)


def test_sums_travel_as_npz_bytes_without_pickles(batch_sums):
    from models.analysis.corpus import CorpusSums

    _, parts, _ = batch_sums
    back = CorpusSums.from_bytes(parts[0].to_bytes())
    for k in ("sentences", "rows", "pair_items", "read", "cka_count"):
        assert getattr(back, k) == getattr(parts[0], k)
    for k in CorpusSums.ARRAYS:
        np.testing.assert_array_equal(getattr(back, k), getattr(parts[0], k))
    assert back.stats.keys() == parts[0].stats.keys() and back.sample == parts[0].sample


def test_the_cka_moment_travels_as_its_upper_triangle(minilm, batch_sums, monkeypatch):
    """A batch's (F, F) moment is exactly symmetric (every engine makes it so), so half of it travels: the bytes
    shrink and the matrix comes back bit for bit; a flat array that is no triangle is refused."""
    from models.analysis import corpus
    from models.analysis.corpus import CorpusSums, _triu_unpack, chunk_sums

    lines, _, _ = batch_sums
    monkeypatch.setattr(corpus, "CKA_ROWS_FRACTION", 0.0)  # a batch of any size sends its moment
    part = chunk_sums(minilm, lines[:5])
    m = part.cka_moment
    assert m is not None and part.cka_rows is None and np.array_equal(m, m.T)
    full = m.size * 8
    assert len(part.to_bytes()) < 0.6 * full
    np.testing.assert_array_equal(CorpusSums.from_bytes(part.to_bytes()).cka_moment, m)
    with pytest.raises(ValueError, match="triangle"):
        _triu_unpack(np.zeros(7))


def test_a_batch_of_few_tokens_sends_its_rows_and_they_fold_into_the_same_cka(minilm, batch_sums, monkeypatch):
    """Fewer tokens than half of F (a batch of the redundancy sample): the rows travel instead of the moment (far
    fewer bytes) and, folded in by `merge`, give the moment's CKA to 1e-6 (the moment's own float32 rounding)."""
    from models.analysis import corpus
    from models.analysis.corpus import CorpusSums, chunk_sums

    lines, parts, _ = batch_sums
    assert all(p.cka_rows is not None and p.cka_moment is None for p in parts)
    F = parts[0].cka_rows.shape[1]
    assert len(parts[0].to_bytes()) < 0.25 * F * F * 8 / 2
    back = CorpusSums.from_bytes(parts[0].to_bytes())
    np.testing.assert_array_equal(back.cka_rows, parts[0].cka_rows)
    monkeypatch.setattr(corpus, "CKA_ROWS_FRACTION", 0.0)
    moments = [chunk_sums(minilm, lines[i : i + 5]) for i in range(0, len(lines), 5)]
    a, b = CorpusSums(6, 12), CorpusSums(6, 12)
    for p, q in zip(parts, moments, strict=True):
        a.merge(p)
        b.merge(q)
    assert a.cka_rows is None and a.cka_count == b.cka_count
    np.testing.assert_allclose(a.cka(), b.cka(), rtol=0, atol=1e-6)  # the moment's float32 runs: ~1e-7
    alone = parts[0] + parts[1]  # `a + b` folds both operands' rows and leaves the operands as they were
    assert parts[0].cka_rows is not None and alone.cka_rows is None
    assert alone.cka_count == parts[0].cka_count + parts[1].cka_count


def test_adding_sums_leaves_both_operands_alone(minilm, batch_sums, monkeypatch):
    """merge adds in place into the arrays its sums own; `a + b` copies first, so neither operand changes."""
    from models.analysis import corpus
    from models.analysis.corpus import CorpusSums

    lines, _, _ = batch_sums
    monkeypatch.setattr(corpus, "CKA_ROWS_FRACTION", 0.0)  # moments (rows: the test below)
    a, b = corpus.chunk_sums(minilm, lines[:5]), corpus.chunk_sums(minilm, lines[5:10])
    before = {k: getattr(a, k).copy() for k in CorpusSums.ARRAYS} | {f"stat.{k}": v.copy() for k, v in a.stats.items()}
    total = a + b
    np.testing.assert_array_equal(total.cka_moment, a.cka_moment + b.cka_moment)
    for k in CorpusSums.ARRAYS:
        np.testing.assert_array_equal(getattr(a, k), before[k])
    for k, v in a.stats.items():
        np.testing.assert_array_equal(v, before[f"stat.{k}"])


def test_the_local_engine_streams_a_file_to_the_statistics_of_one_batch(minilm, tmp_path):
    from models.analysis.corpus import stream_corpus

    lines = read_corpus(EXAMPLE.read_text(encoding="utf-8"))[:24]
    (tmp_path / "c.txt").write_text("\n".join(f"{ln.text}\t{ln.text_b}" if ln.text_b else ln.text for ln in lines))
    seen = []
    sums = stream_corpus(minilm, tmp_path / "c.txt", batch_rows=7, on_batch=lambda part, total: seen.append(total.read))
    assert seen == [7, 14, 21, 24] and sums.batches == 4
    assert_same_statistics(sums.report(minilm), analyse_corpus(minilm, lines)[0])


def test_the_ray_store_is_sized_from_what_a_batch_sends(minilm, batch_sums, monkeypatch):
    """`batch_bytes` (which sizes a local Ray's object store) is what `to_bytes` really sends for minilm's moment,
    within 2 %, and more than a batch of few tokens sends (its rows); the store holds STORE_BATCHES × workers ×
    IN_FLIGHT of them, never less than STORE_MIN."""
    from models.analysis import corpus
    from models.analysis.corpus_ray import IN_FLIGHT, STORE_BATCHES, STORE_MIN, batch_bytes, store_bytes

    lines, parts, _ = batch_sums
    said = batch_bytes(6, 12, 384)
    assert len(parts[0].to_bytes()) < said  # rows
    monkeypatch.setattr(corpus, "CKA_ROWS_FRACTION", 0.0)
    sent = len(corpus.chunk_sums(minilm, lines[:5]).to_bytes())
    assert abs(sent - said) <= 0.02 * said
    assert store_bytes(2, said) == STORE_BATCHES * 2 * IN_FLIGHT * said > STORE_MIN
    assert store_bytes(1, 1000) == STORE_MIN


def test_the_cka_moment_adds_float32_runs_exactly_enough():
    """MomentSum adds blocks' centred products in float32 runs (one GEMM each) and joins them to the float64 moment
    every FLUSH_TOKENS tokens. Over 40 blocks whose means drift and with columns of variance 1e-6 beside means of
    40, the covariance it gives is the float64 one to 1e-6 of √(var_i var_j); a run centred on zero (no centre) or
    the outer products of a run left out both miss by far more."""
    from models.analysis.corpus import MomentSum

    torch.manual_seed(0)
    F = 64
    blocks = [
        torch.randn(300, F) * torch.linspace(0.001, 3, F) + torch.linspace(-40, 40, F) + 0.1 * i for i in range(40)
    ]
    Z = torch.cat(blocks).double()
    ref = (Z - Z.mean(0)).T @ (Z - Z.mean(0))
    scale = ref.diag().sqrt()

    def error(m: MomentSum) -> float:
        for b in blocks:
            m.add(b)
        total, moment = m.result()
        assert m.count == Z.shape[0] and torch.equal(moment, moment.T)
        cov = moment - torch.outer(total, total) / Z.shape[0]
        return float(((cov - ref).abs() / scale[:, None] / scale[None, :]).max())

    class Uncentred(MomentSum):
        def _centre_of(self, Z, s64):
            return torch.zeros_like(Z[0])

    class NoOuterProducts(MomentSum):
        def _flush(self):
            if self._acc is not None:
                self._centre.zero_()
            super()._flush()

    assert error(MomentSum()) < 1e-6
    assert error(Uncentred()) > 1e-5  # 7.6e-5: 400 times the centred error
    assert error(NoOuterProducts()) > 1e-2


def test_a_batch_of_many_cka_runs_gives_the_sums_of_one(minilm, batch_sums, monkeypatch):
    """A batch whose tokens fill two float32 runs (FLUSH_TOKENS at two thirds of them: one run joins the moment
    inside the forward's inference mode, the rest in `result()`, outside it; joining in place there failed on every
    batch of more than 4,096 tokens) gives the sums of one run."""
    from models.analysis import corpus
    from models.analysis.corpus import MomentSum, chunk_sums

    lines, _, _ = batch_sums
    monkeypatch.setattr(corpus, "CKA_ROWS_FRACTION", 0.0)  # the moment, not the rows, of these few tokens
    one = chunk_sums(minilm, lines)
    monkeypatch.setattr(MomentSum, "FLUSH_TOKENS", 2 * one.cka_count // 3)
    flushes = []
    real = MomentSum._flush
    monkeypatch.setattr(MomentSum, "_flush", lambda self: (flushes.append(self._acc is not None), real(self))[1])
    many = chunk_sums(minilm, lines)
    assert sum(flushes) == 2 and many.cka_count == one.cka_count
    np.testing.assert_allclose(many.cka_total, one.cka_total, rtol=1e-12)
    np.testing.assert_allclose(many.cka(), one.cka(), atol=1e-6)


# ---- redundancy over a sample of a large corpus ---------------------------------------------------------------


def test_the_redundancy_cut_picks_about_the_limit_by_hash_alone():
    """redundancy_cut: every line up to the limit (or with 0), then about `limit` lines of any corpus, chosen by
    their text's hash only: the same lines in any order, duplicates together."""
    from models.analysis.corpus import in_redundancy_sample, redundancy_cut

    assert redundancy_cut(512, 512) is None and redundancy_cut(10**6, 0) is None
    lines = [Line(f"sentence number {i}.") for i in range(40_000)]
    cut = redundancy_cut(len(lines), 1000)
    chosen = [ln for ln in lines if in_redundancy_sample(ln, cut)]
    assert 1000 - 160 < len(chosen) < 1000 + 160  # binomial: σ ≈ 31
    assert chosen == [ln for ln in reversed(lines) if in_redundancy_sample(ln, cut)][::-1]
    assert in_redundancy_sample(Line(chosen[0].text), cut)  # the text decides, not the object or its place


@pytest.fixture(scope="module")
def sampled(minilm):
    """The example corpus (60 lines) with its redundancy over ~20 of them, and the same lines analysed alone."""
    from models.analysis.corpus import in_redundancy_sample, redundancy_cut

    lines = read_corpus(EXAMPLE.read_text(encoding="utf-8"))
    cut = redundancy_cut(len(lines), 20)
    chosen = [ln for ln in lines if in_redundancy_sample(ln, cut)]
    report, _ = analyse_corpus(minilm, lines, redundancy_lines=20)
    full, _ = analyse_corpus(minilm, lines, redundancy_lines=0)
    alone, _ = analyse_corpus(minilm, chosen, redundancy_lines=0)
    return lines, chosen, report, full, alone


def test_redundancy_over_a_sample_is_the_redundancy_of_those_lines_alone(sampled):
    """JS, cosine and CKA over the sample equal those of the sampled lines analysed by themselves; the statistics,
    labels and tokens still cover every line (those of the run without a sample)."""
    lines, chosen, report, full, alone = sampled
    assert 0 < len(chosen) < len(lines)
    assert (report.redundancy_sentences, report.redundancy_rows) == (alone.sentences, alone.rows)
    assert (full.redundancy_sentences, full.redundancy_rows) == (full.sentences, full.rows) == (60, report.rows)
    for name in ("js_per_row", "cosine", "cka"):
        np.testing.assert_allclose(getattr(report, name), getattr(alone, name), rtol=0, atol=1e-6, err_msg=name)
    assert not np.allclose(report.js_per_row, full.js_per_row, rtol=0, atol=1e-6)  # a sample, not every line
    for k in STATS:
        np.testing.assert_allclose(report.stats[k], full.stats[k], rtol=0, atol=1e-12, err_msg=k)
    assert report.tokens == full.tokens and (report.labels == full.labels).all()


def test_the_sample_does_not_depend_on_the_order_or_the_batches(minilm, sampled):
    """The same lines reversed, or streamed in batches of 7 rows with the cut of the whole file: the same sample."""
    from models.analysis.corpus import chunk_sums, redundancy_cut

    lines, _, report, _, _ = sampled
    backwards, _ = analyse_corpus(minilm, lines[::-1], redundancy_lines=20)
    assert_same_statistics(backwards, report)
    cut = redundancy_cut(len(lines), 20)
    total = chunk_sums(minilm, lines[:7], pair_cut=cut)
    for i in range(7, len(lines), 7):
        total.merge(chunk_sums(minilm, lines[i : i + 7], pair_cut=cut))
    assert_same_statistics(total.report(minilm), report)
    doc = total.redundancy_sample_json(20)
    assert (doc["lines"], doc["of"], doc["rows"]) == (report.redundancy_sentences, 60, report.redundancy_rows)
    assert "BLAKE2b-64" in str(doc["rule"])


def test_a_document_keeps_the_samples_rows_and_is_read_back_with_them(sampled):
    """`stats --out` writes the rows the redundancy sums over; the Corpus page reads them back (JS per row the
    same), and refuses a document whose sample is larger than the corpus."""
    from models.analysis.corpus import StatsFileError, report_from_document

    _, _, report, _, _ = sampled
    doc = report.to_json()
    assert doc["redundancy"]["rows"] == report.redundancy_rows < doc["rows"]
    back = report_from_document(json.dumps(doc).encode())
    assert (back.redundancy_sentences, back.redundancy_rows) == (report.redundancy_sentences, report.redundancy_rows)
    np.testing.assert_allclose(back.js_per_row, report.js_per_row, rtol=0, atol=2e-6)
    doc["redundancy"]["rows"] = doc["rows"] + 1
    with pytest.raises(StatsFileError, match="redundancy rows"):
        report_from_document(json.dumps(doc).encode())
    del doc["redundancy"]["rows"], doc["redundancy"]["sentences"]  # a document from before the sample: every row
    assert report_from_document(json.dumps(doc).encode()).redundancy_rows == doc["rows"]
