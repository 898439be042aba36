"""Long-context lab: a needle in a haystack and the heads that retrieve it, what a bounded KV cache costs in loss,
and where each head parks its attention (the sink)."""

import numpy as np
import streamlit as st

from models import AttnVizError
from models.analysis.cache import CacheSpec, head_map, perplexity, sink_shares, text_ids
from models.analysis.needle import FILLER, NEEDLE, NeedleGrid, check_grid, needle_grid
from models.lecture.memory import fmt_bytes
from ui import cache, presentation, slots, state
from ui.sidebar import current_encoder
from ui.state import Selection, t
from viz.lecture import token_bars
from viz.long_lab import head_of, loss_curves, retrieval_heads, sink_pair
from viz.long_lab import needle_grid as grid_figure
from viz.long_lab import sink_shares as shares_figure

RETRIEVAL = 0.1  # Wu et al.: a head with a retrieval score above 0.1 is a retrieval head
SINK_MAP_TOKENS = 48  # the sink-masked map: the text's first tokens


def _numbers(text: str, kind: type) -> list:
    return [kind(p.strip()) for p in text.split(",") if p.strip()]


@st.cache_data(show_spinner=False, max_entries=8)
def run_needle(sel: Selection, contexts: tuple[int, ...], depths: tuple[float, ...]) -> NeedleGrid:
    return needle_grid(cache.model(sel), list(contexts), list(depths))


@st.cache_data(show_spinner=False, max_entries=8)
def run_losses(sel: Selection, ids: tuple[int, ...], specs: tuple[str, ...]) -> dict[str, tuple[np.ndarray, int]]:
    enc = cache.model(sel)
    out = {}
    for spec in specs:
        p = perplexity(enc, list(ids), spec)
        out[p.spec] = (p.nll, p.cache_bytes_max)
    return out


@st.cache_data(show_spinner=False, max_entries=8)
def run_sinks(sel: Selection, ids: tuple[int, ...], sinks: int) -> np.ndarray:
    return sink_shares(cache.model(sel), list(ids), sinks)


def _haystack_ids(enc, n: int) -> list[int]:
    """Return about n tokens: the sidebar's text when it is long enough, else the built-in haystack repeated."""
    own = state.get("text") or ""
    ids = text_ids(enc, own) if own.strip() else []
    if len(ids) < n:
        filler = text_ids(enc, FILLER * (1 + n // 120))
        ids = ids + filler
    return ids[:n]


HEADS_CHART, HEAD_PICK = "lab_heads_chart", "lab_head"  # the retrieval overview and the head it opens


def _open_head() -> None:
    """Selection callback of the retrieval overview: a clicked head opens its row at the answer step."""
    event = st.session_state.get(HEADS_CHART) or {}
    found = head_of((event.get("selection") or {}).get("points") or [])
    if found is not None:
        st.session_state[HEAD_PICK] = f"{found[0]}.{found[1]}"


def needle_section(enc, sel: Selection, font: int) -> None:
    st.header(t("longlab.needle.title"))
    st.markdown(t("longlab.needle.intro", needle=NEEDLE))
    with st.form("lab_needle"):
        a, b = st.columns(2)
        ctx_text = a.text_input(t("longlab.needle.contexts"), "128,256", help=t("longlab.needle.contexts_help"))
        depth_text = b.text_input(t("longlab.needle.depths"), "0,0.5,1", help=t("longlab.needle.depths_help"))
        go = st.form_submit_button(t("longlab.needle.run"))
    if go:
        st.session_state["lab_needle_asked"] = (ctx_text, depth_text)
    asked = st.session_state.get("lab_needle_asked")
    if asked is None:
        st.info(t("longlab.needle.press"))
        return
    try:
        contexts = tuple(_numbers(asked[0], int))
        depths = tuple(_numbers(asked[1], float))
    except ValueError:
        st.error(t("longlab.needle.bad_numbers"))
        return
    try:
        check_grid(enc, list(contexts), list(depths))  # the budgets now, even for a grid already cached
        with slots.heavy(), st.spinner(t("longlab.needle.running")):
            g = run_needle(sel, contexts, depths)
    except AttnVizError as err:
        st.error(t("longlab.failed", reason=str(err)))
        return
    labels = {k: t(f"longlab.needle.fig_{k}") for k in ("found", "missed", "x", "y", "title")}
    st.plotly_chart(grid_figure(g.found_grid(list(contexts), list(depths)), contexts, depths, labels, font))
    scores = g.scores()
    n_ret = int((scores > RETRIEVAL).sum())
    st.markdown(
        t(
            "longlab.heads.summary",
            n=n_ret,
            total=scores.size,
            share=f"{100 * n_ret / scores.size:.1f}",
            counted=g.counted,
        )
    )
    labels = {k: t(f"longlab.heads.fig_{k}") for k in ("score", "layer", "head", "marked", "title")}
    st.plotly_chart(
        retrieval_heads(scores, RETRIEVAL, labels, font),
        key=HEADS_CHART,
        on_select=_open_head,
        selection_mode="points",
    )
    st.caption(t("longlab.heads.click"))
    order = [f"{h['layer']}.{h['head']}" for h in g.heads()]  # every head "L.H", the highest score first
    if st.session_state.get(HEAD_PICK) not in order:
        st.session_state[HEAD_PICK] = order[0]

    def _option(name: str) -> str:
        layer, head = (int(v) for v in name.split("."))
        return t("longlab.heads.option", layer=layer, head=head, score=f"{scores[layer, head]:.2f}")

    pick = st.selectbox(t("longlab.heads.pick"), order, key=HEAD_PICK, format_func=_option)  # the keyboard path
    layer, head = (int(v) for v in pick.split("."))
    case = st.selectbox(
        t("longlab.heads.case"),
        list(range(len(g.cases))),
        format_func=lambda i: t(
            "longlab.heads.case_option",
            context=g.cases[i].context,
            depth=f"{g.cases[i].depth:g}",
            answer=g.cases[i].answer.strip()[:30],
        ),
    )
    c = g.cases[case]
    lo, hi = c.window
    ids = text_ids(enc, c.prompt)[lo:hi]
    tokens = [f"{lo + i}:{tok}" for i, tok in enumerate(enc.tokenizer.convert_ids_to_tokens(ids))]
    row = c.answer_rows[layer, head]
    fig = token_bars(
        row,
        tokens,
        title=t("longlab.heads.row_title", layer=layer, head=head, n0=c.needle_span[0], n1=c.needle_span[1] - 1),
        highlight=None,
        y_title=t("longlab.heads.weight"),
        font_size=font,
    )
    st.plotly_chart(fig)


def loss_section(enc, sel: Selection, font: int) -> None:
    st.header(t("longlab.loss.title"))
    st.markdown(t("longlab.loss.intro"))
    limit = int(enc.config.max_positions)
    with st.form("lab_loss"):
        a, b, c = st.columns(3)
        n = a.number_input(t("longlab.loss.tokens"), 16, limit, min(512, limit), step=64)
        w = b.number_input(t("longlab.loss.window"), 1, limit, 64, step=16)
        s = c.number_input(t("longlab.loss.sink"), 1, 64, 4, step=1)
        go = st.form_submit_button(t("longlab.loss.run"))
    if go:
        st.session_state["lab_loss_asked"] = (int(n), int(w), int(s))
    asked = st.session_state.get("lab_loss_asked")
    if asked is None:
        st.info(t("longlab.loss.press"))
        return
    n, w, s = asked
    specs = ("full", CacheSpec(window=w).name, CacheSpec(window=w, sink=s).name)
    try:
        ids = tuple(_haystack_ids(enc, n))
        with slots.heavy(), st.spinner(t("longlab.loss.running")):
            res = run_losses(sel, ids, specs)
            shares = run_sinks(sel, ids, 1)
    except AttnVizError as err:
        st.error(t("longlab.failed", reason=str(err)))
        return
    labels = {k: t(f"longlab.loss.fig_{k}") for k in ("loss_title", "bytes_title", "x", "y", "bytes_y")}
    losses = {name: nll for name, (nll, _) in res.items()}
    sizes = {name: b for name, (_, b) in res.items()}
    st.plotly_chart(loss_curves(losses, sizes, labels, font_size=font))
    st.table(
        {
            t("longlab.loss.col_cache"): list(res),
            t("longlab.loss.col_ppl"): [f"{float(np.exp(nll.mean())):.2f}" for nll in losses.values()],
            t("longlab.loss.col_bytes"): [fmt_bytes(b) for b in sizes.values()],
        }
    )
    st.caption(t("longlab.loss.caption", n=len(ids)))
    sink_section(enc, sel, ids, shares, font)


def sink_section(enc, sel: Selection, ids: tuple[int, ...], shares: np.ndarray, font: int) -> None:
    st.header(t("longlab.sink.title"))
    st.markdown(t("longlab.sink.intro", mean=f"{100 * float(shares.mean()):.0f}", n=len(ids)))
    labels = {k: t(f"longlab.sink.fig_{k}") for k in ("share", "layer", "head", "title")}
    st.plotly_chart(shares_figure(shares, labels, font))
    c = enc.config
    a, b = st.columns(2)
    layer = int(
        a.number_input(
            t("longlab.sink.layer"), 0, c.n_layers - 1, int(np.unravel_index(shares.argmax(), shares.shape)[0])
        )
    )
    head = int(
        b.number_input(
            t("longlab.sink.head"), 0, c.n_heads - 1, int(np.unravel_index(shares.argmax(), shares.shape)[1])
        )
    )
    short = list(ids[:SINK_MAP_TOKENS])
    try:
        attn = head_map(enc, short, layer, head)
    except AttnVizError as err:
        st.error(t("longlab.failed", reason=str(err)))
        return
    labels = {k: t(f"longlab.sink.pair_{k}") for k in ("original", "masked", "title")}
    labels["title"] = labels["title"].format(layer=layer, head=head, share=f"{100 * shares[layer, head]:.0f}")
    st.plotly_chart(sink_pair(attn, 1, enc.tokenizer.convert_ids_to_tokens(short), labels, font))


def main() -> None:
    if not presentation.active():
        st.title(t("longlab.title"))
        st.markdown(t("longlab.intro"))
    enc = current_encoder()
    if enc is None:
        return
    if not enc.capabilities.generation:
        st.info(t("longlab.need_decoder", model=enc.name))
        return
    font = presentation.figure_font()
    sel = state.selection()._replace(text="", text_b="")
    needle_section(enc, sel, font)
    loss_section(enc, sel, font)


main()
