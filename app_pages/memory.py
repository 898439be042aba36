"""Memory: the tutorial's estimator of the score tensor and MHA parameters, its remedies, and our encoder measured."""

import streamlit as st

from models import settings
from models.lecture import memory
from ui import cache, presentation, slots, state
from ui.safe import md
from ui.sidebar import current_encoder
from ui.state import t
from viz.lecture import memory_chart

# The tutorial's example (section 6): batch 2, 12 heads, seq 512, BERT-base width, fp16.
DEFAULTS = {
    "mem_batch": 2,
    "mem_heads": 12,
    "mem_seq": 512,
    "mem_d_model": 768,
    "mem_dtype": "fp16",
    "mem_layers": 12,
    "mem_heads_kv": 12,
    "mem_measure_batch": 1,
}
TUTORIAL = ((512, "6,291,456", "12.6 MB"), (4096, "402,653,184", "805 MB"))  # (seq, elements, fp16 bytes) as printed
CURVE = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
MEASURE_SEQS = (32, 64, 128, 256, 512)


def _inputs() -> dict:
    for k, v in DEFAULTS.items():
        st.session_state[k] = st.session_state.get(k, v)  # keeps the values across page switches
    cols = st.columns(4)
    batch = cols[0].number_input(t("memory.batch"), min_value=1, step=1, key="mem_batch")
    heads = cols[1].number_input(t("memory.heads"), min_value=1, step=1, key="mem_heads")
    seq = cols[2].number_input(t("memory.seq"), min_value=1, step=1, key="mem_seq")
    d_model = cols[3].number_input("d_model", min_value=1, step=1, key="mem_d_model", help=t("memory.d_model_help"))
    cols = st.columns(4)
    dtype = cols[0].selectbox(
        t("memory.dtype"), list(memory.BYTES_PER_ELEMENT), key="mem_dtype", help=t("memory.dtype_help")
    )
    layers = cols[1].number_input(
        t("memory.layers"), min_value=1, step=1, key="mem_layers", help=t("memory.layers_help")
    )
    heads_kv = cols[2].number_input(
        t("memory.heads_kv"), min_value=1, step=1, key="mem_heads_kv", help=t("memory.heads_kv_help")
    )
    return dict(
        batch=int(batch),
        heads=int(heads),
        seq=int(seq),
        d_model=int(d_model),
        dtype=dtype,
        layers=int(layers),
        heads_kv=int(heads_kv),
    )


def _tutorial_check() -> None:
    rows = []
    for seq, want_elements, want_bytes in TUTORIAL:
        e = memory.estimate(2, 12, seq, 768, "fp16")
        got_e, got_b = f"{e.score_elements:,}", memory.fmt_bytes(e.score_bytes)
        ok = "✓" if (got_e, got_b) == (want_elements, want_bytes) else "✗"
        rows.append(
            f"| 2 · 12 · {seq}² | {got_e} | {got_b} | {memory.fmt_bytes(e.score_bytes_training)} | {want_bytes} {ok} |"
        )
    st.markdown(t("memory.tutorial_table") + "\n" + "\n".join(rows))


def _remedies(e: memory.Estimate) -> None:
    d_k = e.d_model // e.heads
    mqa_cache = memory.kv_cache_bytes(e.layers, e.batch, e.seq, 1, d_k, e.dtype)
    st.markdown(
        t(
            "memory.remedies_table",
            score=memory.fmt_bytes(e.score_bytes),
            flash=memory.fmt_bytes(e.flash_bytes),
            kv=memory.fmt_bytes(e.kv_cache_bytes),
            kv_gqa=memory.fmt_bytes(e.kv_cache_bytes_gqa),
            kv_mqa=memory.fmt_bytes(mqa_cache),
            params=f"{e.params:,}",
            params_gqa=f"{e.params_gqa:,}",
            params_mqa=f"{memory.mha_params(e.d_model, e.heads, 1):,}",
            heads_kv=e.heads_kv,
            heads=e.heads,
        )
    )


def _estimate_chart(e: memory.Estimate, font: int) -> None:
    seqs = sorted({*CURVE, e.seq})
    d_k = e.d_model // e.heads
    lines = {
        t("memory.line.forward", dtype=e.dtype): [memory.score_bytes(e.batch, e.heads, s, e.dtype) for s in seqs],
        t("memory.line.training"): [memory.score_bytes(e.batch, e.heads, s, e.dtype, training=True) for s in seqs],
        t("memory.line.flash"): [memory.flash_bytes(e.batch, e.heads, s) for s in seqs],
        t("memory.line.kv", heads_kv=e.heads): [
            memory.kv_cache_bytes(e.layers, e.batch, s, e.heads, d_k, e.dtype) for s in seqs
        ],
    }
    if e.heads_kv != e.heads:
        lines[t("memory.line.kv", heads_kv=e.heads_kv)] = [
            memory.kv_cache_bytes(e.layers, e.batch, s, e.heads_kv, d_k, e.dtype) for s in seqs
        ]
    marks = [(e.seq, e.score_bytes, f"{e.seq}: {memory.fmt_bytes(e.score_bytes)}")]
    fig = memory_chart(
        seqs,
        lines,
        marks=marks,
        title=t("memory.chart_title", batch=e.batch, heads=e.heads, dtype=e.dtype),
        x_title=t("memory.axis_seq"),
        y_title=t("memory.axis_bytes"),
        font_size=font,
    )
    st.plotly_chart(fig, width="stretch", key="memory_estimate_chart")


def _measured(font: int) -> None:
    st.subheader(t("memory.measured.title"))
    enc = current_encoder()
    if enc is None:
        return
    c = enc.config
    dev = enc.device
    st.markdown(t("memory.measured.explain", name=enc.name, device=str(dev), layers=c.n_layers, heads=c.n_heads))
    seqs = [s for s in MEASURE_SEQS if s <= enc.max_tokens]
    left, right = st.columns([1, 3], vertical_alignment="bottom")
    top = int(settings.limit("max_batch"))  # ATTENTION_LENS_MAX_BATCH: measuring batch 64 of BERT-base takes ~11 GB
    if st.session_state.get("mem_measure_batch", 1) > top:
        st.session_state["mem_measure_batch"] = top
    batch = int(left.number_input(t("memory.batch"), min_value=1, max_value=top, step=1, key="mem_measure_batch"))
    sel = state.selection().model_only()
    key = (*sel, batch)
    # A callback, not the button's return value: the request survives a rerun between the click and this line.
    right.button(
        t("memory.measured.button", seqs=", ".join(map(str, seqs))),
        key="mem_measure",
        icon=":material/speed:",
        on_click=lambda: st.session_state.update(mem_measure_requested=True),
    )
    if st.session_state.pop("mem_measure_requested", False):
        with slots.heavy(), st.spinner(t("memory.measured.running", device=str(dev))):
            try:
                if dev.type == "cuda":  # the CUDA allocator's own peak counter is exact in this process
                    found = memory.measure_curve(enc, seqs, batch)
                else:  # this server reuses freed memory: measure in a fresh process
                    found = memory.measure_curve_fresh(sel.model, sel.device, sel.dtype, seqs, batch)
            except (memory.MemoryInputError, RuntimeError) as err:  # RuntimeError: out of memory
                st.error(t("memory.measured.failed", reason=md(str(err).splitlines()[0])))
                return
        st.session_state["mem_measured"] = {"key": key, "rows": [m.as_dict() for m in found]}
    result = st.session_state.get("mem_measured")
    if not result or result["key"] != key:
        st.info(t("memory.measured.hint"))
        return
    rows = result["rows"]
    xs = [r["seq"] for r in rows]
    maps = [memory.encoder_maps_bytes(c.n_layers, batch, c.n_heads, s) for s in xs]
    one = [memory.score_bytes(batch, c.n_heads, s, "fp32") for s in xs]
    lines = {t("memory.line.maps", layers=c.n_layers): maps, t("memory.line.one_layer"): one}
    measured = {t("memory.line.measured", device=rows[0]["device"]): (xs, [r["peak_bytes"] for r in rows])}
    fig = memory_chart(
        xs,
        lines,
        measured,
        title=t("memory.measured.chart", name=enc.name, batch=batch),
        x_title=t("memory.axis_seq"),
        y_title=t("memory.axis_bytes"),
        font_size=font,
    )
    st.plotly_chart(fig, width="stretch", key="memory_measured_chart")
    table = [t("memory.measured.table")]
    for r, m in zip(rows, maps, strict=True):
        ratio = r["peak_bytes"] / m if m else float("nan")
        table.append(f"| {r['seq']} | {memory.fmt_bytes(r['peak_bytes'])} | {memory.fmt_bytes(m)} | {ratio:.2f} |")
    st.markdown("\n".join(table))
    st.caption(t(f"memory.method.{rows[0]['method']}") + " " + t("memory.measured.note"))


KV_SEQ = 256  # tokens the loaded model's cache is filled with on this page (a forward of that many)


@st.cache_data(show_spinner=False, max_entries=8)
def _kv_facts(sel: state.Selection, seq: int) -> memory.KVCacheFacts:
    """Return the loaded model's KV cache at seq tokens: formulas and the cache its forward fills (cached)."""
    with slots.heavy():
        return memory.kv_cache_facts(cache.model(sel), seq)


def _kv_section() -> None:
    """The loaded model's own KV cache: multi-head, its grouping, multi-query, and what the forward really kept."""
    enc = current_encoder()
    if enc is None or not enc.capabilities.generation:
        return
    st.subheader(t("memory.kv.title"))
    seq = min(KV_SEQ, enc.max_tokens)
    with st.spinner(t("memory.kv.measuring", seq=seq)):
        f = _kv_facts(state.selection().without_text(), seq)
    per_token = f.model_bytes // f.seq
    rows = [
        t("memory.kv.table"),
        f"| MHA | {f.heads} | {memory.fmt_bytes(f.mha_bytes)} | {memory.fmt_bytes(f.mha_bytes // f.seq)} |",
        f"| **{t('memory.kv.this_model')}** | **{f.kv_heads}** | **{memory.fmt_bytes(f.model_bytes)}** "
        f"| **{memory.fmt_bytes(per_token)}** |",
        f"| MQA | 1 | {memory.fmt_bytes(f.mqa_bytes)} | {memory.fmt_bytes(f.mqa_bytes // f.seq)} |",
    ]
    st.markdown(
        t(
            "memory.kv.intro",
            name=md(enc.name),
            layers=f.layers,
            heads=f.heads,
            kv_heads=f.kv_heads,
            d_k=f.d_k,
            dtype=f.dtype,
            seq=f.seq,
            saving=f"{f.mha_bytes / f.model_bytes:.0f}",
        )
    )
    st.markdown("\n".join(rows))
    ok = f.measured_bytes == f.model_bytes
    (st.success if ok else st.error)(
        t(
            "memory.kv.measured",
            bytes=memory.fmt_bytes(f.measured_bytes),
            shape=f"({', '.join(map(str, f.measured_shape))})",
            formula=memory.fmt_bytes(f.model_bytes),
            full=memory.fmt_bytes(per_token * enc.max_tokens),
            positions=f"{enc.max_tokens:,}",
        )
    )


def main() -> None:
    st.title(t("memory.title"))
    st.markdown(t("memory.intro"))
    font = presentation.figure_font()
    cfg = _inputs()
    try:
        e = memory.estimate(**cfg)
    except memory.MemoryInputError as err:
        st.error(t("memory.bad_input", reason=md(err)))
        return
    cols = st.columns(4)
    cols[0].metric(t("memory.metric.elements"), f"{e.score_elements:,}", help=t("memory.metric.elements_help"))
    cols[1].metric(t("memory.metric.forward", dtype=e.dtype), memory.fmt_bytes(e.score_bytes))
    cols[2].metric(t("memory.metric.training"), memory.fmt_bytes(e.score_bytes_training))
    cols[3].metric(t("memory.metric.params"), f"{e.params:,}", help=t("memory.metric.params_help"))
    st.markdown(
        t(
            "memory.formulas",
            batch=e.batch,
            heads=e.heads,
            seq=e.seq,
            elements=f"{e.score_elements:,}",
            bytes_per=memory.bytes_per_element(e.dtype),
            dtype=e.dtype,
            score=f"{e.score_bytes:,}",
            d_model=e.d_model,
            params=f"{e.params:,}",
        )
    )
    st.subheader(t("memory.tutorial_title"))
    _tutorial_check()
    st.subheader(t("memory.remedies_title"))
    _remedies(e)
    _estimate_chart(e, font)
    _kv_section()
    _measured(font)


main()
