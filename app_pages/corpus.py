"""Corpus: the head statistics, redundancy and importance over many sentences, pasted or uploaded."""

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from models import AttnVizError, settings
from models.analysis.corpus import (
    IMPORTANCE_SENTENCES,
    CorpusError,
    Line,
    analyse_corpus,
    corpus_importance,
    importance_from_document,
    is_bert_base,
    read_corpus,
    read_corpus_file,
    report_from_document,
)
from models.analysis.heads import HeadReport
from models.analysis.importance import Importance
from models.errors import BudgetError
from ui import cache, results, state
from ui.heads_view import (
    duplicates_section,
    importance_section,
    labels_section,
    pairs_section,
    published_section,
    redundancy_section,
    shares_section,
    table_section,
)
from ui.safe import md
from ui.sidebar import current_encoder
from ui.state import Selection, t

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "corpus_en.txt"
MAX_LINES = 2000  # the app's limit; the CLI takes any length


@results.cached
def corpus_report(
    sel: Selection, lines: tuple[tuple[str, str | None], ...], _label: str = ""
) -> tuple[HeadReport, int, float]:
    """Return the corpus's HeadReport, how many lines were truncated, and the seconds it took (cached).

    The progress bar lives inside: a cached function may only touch elements it creates (on a cache hit
    Streamlit replays them, and the bar is gone again at the end). sel: model and mask (`without_text()`).
    """
    start = time.perf_counter()
    enc = cache.model(sel)
    with _progress_bar(_label) as progress:
        report, truncated = analyse_corpus(enc, [Line(*ln) for ln in lines], mask=sel.mask, progress=progress)
    return report, truncated, time.perf_counter() - start


@results.cached
def corpus_head_importance(sel: Selection, lines: tuple[tuple[str, str | None], ...], _label: str = "") -> Importance:
    """Return head importance over the corpus's first lines (cached per corpus and model), with a progress bar."""
    enc = cache.model(sel)
    with _progress_bar(_label) as progress:
        return corpus_importance(enc, [Line(*ln) for ln in lines], mask=sel.mask, progress=progress)


def _forget_run() -> None:
    st.session_state.pop("corpus_key", None)
    st.session_state["corpus_stopped"] = True


def _load_example() -> None:
    st.session_state["corpus_text"] = EXAMPLE.read_text(encoding="utf-8")


def _refusal(err: AttnVizError) -> str:
    """Return why the corpus was refused, in the page's language (a CorpusError by its code)."""
    if isinstance(err, CorpusError):
        reason = t(f"corpus.msg.{err.code}", **{k: md(v) for k, v in err.values.items()})
    else:
        reason = md(err)
    return t("corpus.input_error", reason=reason)


def _lines() -> list[Line] | None:
    """Return the corpus from the uploaded file, else the text box; None (after a message) when there is none."""
    uploaded = st.session_state.get("corpus_file")
    try:
        if uploaded is not None:
            lines = read_corpus_file(uploaded.getvalue(), uploaded.name)
            st.caption(t("corpus.source_upload", name=md(uploaded.name), n=len(lines)))
        elif (st.session_state.get("corpus_text") or "").strip():
            lines = read_corpus(st.session_state["corpus_text"])
        else:
            st.info(t("corpus.empty"))
            return None
    except AttnVizError as err:
        st.error(_refusal(err))
        return None
    if len(lines) > MAX_LINES:
        st.warning(t("corpus.too_many", limit=MAX_LINES, n=len(lines)))
        lines = lines[:MAX_LINES]
    return lines


@contextmanager
def _progress_bar(label: str) -> Iterator[Callable[[float, str], None]]:
    """Show a progress bar while the block runs; yield the callback that moves it."""
    bar = st.progress(0.0, text=label)
    start = time.perf_counter()

    def move(fraction: float, what: str) -> None:
        # "what" starts with the lines done ("1,234 / 2,000 lines, …"): their rate, for a long run
        done = what.split(" ", 1)[0].replace(",", "")
        rate = int(done) / max(time.perf_counter() - start, 1e-9) if done.isdigit() else None
        shown = f"{label} {100 * fraction:.0f} % · {what}"
        bar.progress(min(1.0, fraction), text=shown + (f" · {t('corpus.rate', rate=f'{rate:,.0f}')}" if rate else ""))

    try:
        yield move
    finally:
        bar.empty()


def _stats_uploaded() -> None:
    """The statistics uploader's callback: keep the file's name and bytes (AppTest puts them here directly)."""
    f = st.session_state.get("corpus_stats_upload")
    if f is None:
        st.session_state.pop("corpus_stats", None)
    else:
        st.session_state["corpus_stats"] = {"name": f.name, "data": f.getvalue()}


def _opened(entry: dict) -> None:
    """Show a statistics file that `stats --out` wrote, as a corpus analysed here; refuse any other in one line."""
    name, data = str(entry.get("name", "file")), entry.get("data", b"")
    try:
        if not isinstance(data, bytes):
            raise CorpusError("not_text")
        if len(data) > settings.current().max_upload_bytes:
            raise BudgetError(settings.over_budget("max_upload_mb", round(len(data) / 2**20, 1), name))
        report = report_from_document(data, name)
        imp = importance_from_document(data, report.n_layers, report.n_heads, name)
    except AttnVizError as err:
        st.error(t("corpus.opened_refused", name=md(name), reason=md(err)))
        return
    doc_engine = _engine_of(data)
    st.success(
        t(
            "corpus.opened",
            n=report.sentences,
            rows=report.rows,
            model=md(report.model),
            name=md(name),
            engine=doc_engine,
        )
    )
    bert_base = not report.causal and is_bert_base(report.n_layers, report.n_heads, _d_model_of(data))
    _sections(report, bert_base, report.model)
    labels_section(report)
    table_section(report, imp)
    redundancy_section(report, "corpus")
    duplicates_section(report, "corpus")
    st.info(t("corpus.opened_no_maps"))
    st.subheader(t("heads.importance.title"))
    if imp is None:
        st.info(t("corpus.opened_no_importance"))
    else:
        importance_section(report, imp, "corpus")


def _engine_of(data: bytes) -> str:
    """Return the engine a statistics file names ("ray, 2 workers"), read again only for this caption."""
    import json

    try:
        engine = json.loads(data).get("engine") or {}
        return md(f"{engine.get('name', '?')}, {int(engine.get('workers', 1))} worker(s)")
    except (ValueError, TypeError, AttributeError):
        return "?"


def _d_model_of(data: bytes) -> int:
    import json

    try:
        return int(json.loads(data).get("d_model") or 0)
    except (ValueError, TypeError, AttributeError):
        return 0


def _sections(report: HeadReport, bert_base: bool, model: str) -> None:
    """The statistics, labels and published values of a corpus's report (analysed here or opened from a file)."""
    shares_section(report, bert_base, "corpus")
    if bert_base:
        published_section(report, model)


def main() -> None:
    st.title(t("corpus.title"))
    enc = current_encoder()
    st.caption(t("corpus.intro_decoder" if enc is not None and not enc.capabilities.pairs else "corpus.intro"))
    if enc is None:
        return
    if "corpus_text" not in st.session_state:
        st.session_state["corpus_text"] = ""
    left, right = st.columns([3, 2])
    with left:
        st.text_area(t("corpus.text"), key="corpus_text", height=190, placeholder=t("corpus.placeholder"))
    with right:
        st.file_uploader(t("corpus.upload"), type=["txt"], key="corpus_file")
        st.button(t("corpus.example"), key="corpus_example_button", on_click=_load_example)
        st.file_uploader(t("corpus.open_stats"), type=["json"], key="corpus_stats_upload", on_change=_stats_uploaded)
    if (stats_file := st.session_state.get("corpus_stats")) is not None:
        _opened(stats_file)
        return
    lines = _lines()
    if lines is None:
        return
    sel = state.selection().without_text()
    digest = hashlib.sha1("\n".join(f"{ln.text}\t{ln.text_b or ''}" for ln in lines).encode()).hexdigest()
    key = (*sel, digest)
    plain = tuple((ln.text, ln.text_b) for ln in lines)
    if st.button(t("corpus.run", n=len(lines)), type="primary", key="corpus_run"):
        st.session_state["corpus_key"] = key
    if st.session_state.pop("corpus_stopped", False):
        st.warning(t("corpus.stopped"))
    if st.session_state.get("corpus_key") != key:
        st.info(t("corpus.press_run") if "corpus_key" not in st.session_state else t("corpus.changed"))
        return

    # A click stops the run: Streamlit interrupts this script at the progress bar's next update, and the callback
    # forgets the request so that the rerun does not start it again.
    stop = st.empty()
    stop.button(t("corpus.stop"), key="corpus_stop", icon=":material/stop:", on_click=_forget_run)
    try:
        report, truncated, seconds = corpus_report(sel, plain, _label=t("corpus.running", n=len(lines)))
    except AttnVizError as err:
        stop.empty()
        st.error(_refusal(err))
        return
    stop.empty()
    if truncated:
        st.warning(t("corpus.truncated", n=truncated, limit=enc.max_tokens))
    c = enc.config
    st.success(
        t(
            "corpus.done",
            n=report.sentences,
            rows=report.rows,
            per=f"{report.rows / report.sentences:.1f}",
            secs=f"{seconds:.1f}",
            rate=f"{report.sentences / max(seconds, 1e-9):.0f}",
            device=str(enc.device),
        )
    )

    # Published BERT-base figures (Clark et al.) compare with a model of that family and shape only.
    bert_base = enc.capabilities.special_roles == "cls_sep" and is_bert_base(c.n_layers, c.n_heads, c.d_model)
    _sections(report, bert_base, enc.name)
    if not bert_base and enc.capabilities.special_roles == "cls_sep":
        st.info(t("corpus.not_bert_base", model=enc.name, layers=c.n_layers, heads=c.n_heads))
    labels_section(report)

    imp = None
    if st.session_state.get("corpus_importance_key") == key:
        imp = corpus_head_importance(sel, plain, _label=t("heads.computing_importance"))
    table_section(report, imp)
    redundancy_section(report, "corpus")

    duplicates_section(report, "corpus")
    n = st.number_input(t("corpus.example_line"), 1, len(lines), 1, key="corpus_example_line")
    line = lines[int(n) - 1]
    if not enc.capabilities.pairs:  # one text: a pair's halves joined, as the statistics saw them
        example = cache.encode(sel._replace(text=f"{line.text} {line.text_b or ''}".strip(), text_b=""))
    else:
        example = cache.encode(sel._replace(text=line.text, text_b=line.text_b or ""))
    attn = example.attentions.numpy()
    pairs_section(
        report,
        lambda i: (attn[i // c.n_heads, i % c.n_heads], list(example.display_tokens)),
        "corpus",
        maps_note=t("corpus.pairs_on", n=int(n), text=line.text + (f" ⇥ {line.text_b}" if line.text_b else "")),
    )

    st.subheader(t("heads.importance.title"))
    if imp is None:
        st.info(t("corpus.importance_note", n=min(len(lines), IMPORTANCE_SENTENCES)))
        if st.button(t("heads.importance.compute"), key="corpus_importance_button"):
            st.session_state["corpus_importance_key"] = key
            st.rerun()
    else:
        importance_section(report, imp, "corpus")


main()
