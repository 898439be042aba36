"""Troubleshooting: the tutorial's table, each row with a live demonstration on the current input where one exists."""

import math

import numpy as np
import streamlit as st

from models import AttnVizError
from models.analysis.heads import THRESHOLDS
from models.lecture import memory, troubleshoot
from ui import controls, lecture, mask_report, presentation, state, tutorial
from ui.safe import md
from ui.sidebar import current_encoder, current_output
from ui.state import t
from viz.lecture import attention_map, compare_bars, heads_grid

ROWS = ("loss", "nan", "mask", "concat", "oom", "single", "slow", "uniform")  # the tutorial's order (section 7)
BROAD = THRESHOLDS["broad"]  # docs/METRICS.md: a head is broad when its normalised entropy exceeds this


def _table() -> None:
    lines = [t("trouble.table_head")]
    for r in ROWS:
        cells = [t(f"trouble.row.{r}.{c}") for c in ("symptom", "cause", "check", "fix")]
        lines.append("| " + " | ".join(cells) + " |")
    st.markdown("\n".join(lines))


def _heatmap(weights: np.ndarray, tokens: list[str], title: str, keep: np.ndarray, font: int):
    axes = (t("inside.fig.key"), t("inside.fig.query"), t("inside.fig.weight"))
    return attention_map(weights, tokens, title, axes, t("inside.fig.map_hover"), keep=keep, font_size=font)


def _demo_loss(out, layer: int, head: int, query: int, font: int) -> None:
    d = troubleshoot.scaling_effect(out, layer, head, query)
    st.markdown(
        t(
            "trouble.demo.loss",
            layer=layer,
            d_k=d.d_k,
            sqrt_dk=f"{math.sqrt(d.d_k):.2f}",
            max_with=f"{d.max_weight[0].mean():.3f}",
            max_without=f"{d.max_weight[1].mean():.3f}",
            ent_with=f"{d.entropy[0].mean():.2f}",
            ent_without=f"{d.entropy[1].mean():.2f}",
            std_with=f"{d.logit_std[0].mean():.2f}",
            std_without=f"{d.logit_std[1].mean():.2f}",
        )
    )
    heads = [t("inside.fig.head_n", head=h) for h in range(d.max_weight.shape[1])]
    series = {t("inside.fig.with_scale"): d.max_weight[0], t("inside.fig.without_scale"): d.max_weight[1]}
    st.plotly_chart(
        compare_bars(
            series,
            heads,
            t("trouble.fig.max_weight", layer=layer),
            y_title=t("trouble.fig.max_weight_axis"),
            font_size=font,
            y_range=(0, 1.05),
        ),
        width="stretch",
        key="trouble_loss_heads",
    )
    labels = [f"{i}: {tok}" for i, tok in enumerate(out.display_tokens or out.tokens)]
    row = {t("inside.fig.with_scale"): d.row_scaled, t("inside.fig.without_scale"): d.row_unscaled}
    st.plotly_chart(
        compare_bars(
            row,
            labels,
            t("inside.fig.scale", token=(out.display_tokens or out.tokens)[query]),
            y_title=t("inside.fig.weight"),
            font_size=font,
            y_range=(0, 1.05),
        ),
        width="stretch",
        key="trouble_loss_row",
    )


def _demo_nan(out, layer: int, head: int, query: int) -> None:
    d = troubleshoot.masked_row_nan(out, layer, head, query)
    st.code(t("trouble.demo.nan_code"), language="python", wrap_lines=True)
    n = len(d.scores)
    show = min(n, 6)
    lines = [t("trouble.demo.nan_table")]
    for j in range(show):
        lines.append(
            f"| {j}: {(out.display_tokens or out.tokens)[j]} | {d.scores[j]:.3f} | {d.with_inf[j]} | {d.with_min[j]:.4f} |"
        )
    st.markdown("\n".join(lines))
    st.markdown(
        t(
            "trouble.demo.nan",
            n=n,
            sum_inf=f"{np.sum(d.with_inf)}",
            sum_min=f"{np.sum(d.with_min):.4f}",
            uniform=f"{1 / n:.4f}",
            token=(out.display_tokens or out.tokens)[query],
            layer=layer,
            head=head,
        )
    )


# The transposed causal mask of the demonstration, as the expression a user would type on the Masks page.
PLANTED_CAUSAL = "torch.triu(torch.ones(seq, seq, dtype=torch.bool))"


def _demo_mask(out, enc, layer: int, head: int, font: int) -> None:
    with st.spinner(t("trouble.demo.mask_running")):
        d = lecture.wrong_mask(state.selection(), enc)
    st.code(t("trouble.demo.mask_code"), language="python", wrap_lines=True)
    st.markdown(t("trouble.demo.mask_rows"))
    st.code("\n".join(d.mask_rows), language="text", wrap_lines=True)
    wrong_mass = float(d.future_mass_wrong.mean())
    right_mass = float(d.future_mass_right.max())
    verdict = "trouble.demo.mask_leak" if d.leaked_cells else "trouble.demo.mask_ok"
    (st.warning if d.leaked_cells else st.success)(
        t(
            verdict,
            mass=f"{100 * wrong_mass:.1f}",
            cells=d.leaked_cells,
            right=f"{100 * right_mass:.1f}",
            worst=f"{100 * float(d.future_mass_wrong.max()):.1f}",
        )
    )
    left, right = st.columns(2)
    tokens = out.display_tokens or out.tokens
    fig = _heatmap(d.wrong[layer, head], tokens, t("trouble.fig.wrong_map", layer=layer, head=head), d.intended, font)
    left.plotly_chart(fig, width="stretch", key="trouble_mask_wrong")
    fig = _heatmap(d.right[layer, head], tokens, t("trouble.fig.right_map", layer=layer, head=head), d.intended, font)
    right.plotly_chart(fig, width="stretch", key="trouble_mask_right")
    st.caption(t("trouble.demo.mask_checker"))
    # The same planted mask through the mask checker of the Masks page: the verdict a user would get for it.
    st.markdown(t("trouble.demo.mask_verdict"))
    try:
        with st.spinner(t("trouble.demo.mask_running")):
            sel = state.selection()
            report = mask_report.checked(
                sel.model_only(),
                (sel.text,),
                (sel.text_b,) if sel.text_b else None,
                PLANTED_CAUSAL,
                "",
                "keep",
                "causal",
            )
    except AttnVizError as err:
        st.error(md(err))
        return
    mask_report.show_report(report, evidence=False)


def _demo_concat(out, layer: int) -> None:
    d = troubleshoot.contiguous_error(out, layer)
    st.markdown(
        t(
            "trouble.demo.concat_before",
            shape=lecture.shape(d.context_shape),
            moved=lecture.shape(d.transposed_shape),
            stride=lecture.shape(d.transposed_stride),
        )
    )
    st.code(d.code_wrong, language="python", wrap_lines=True)
    if d.error:
        st.markdown(t("trouble.demo.concat_error"))
        st.code(f"RuntimeError: {d.error}", language="text", wrap_lines=True)
    else:
        st.info(t("trouble.demo.concat_no_error"))
    st.markdown(t("trouble.demo.concat_fix", shape=lecture.shape(d.fixed_shape)))
    st.code(d.code_right, language="python", wrap_lines=True)


def _demo_oom(out, enc) -> None:
    c = enc.config
    here = memory.estimate(1, c.n_heads, out.seq, c.d_model, "fp32", c.n_layers)
    long = memory.estimate(1, c.n_heads, 4096, c.d_model, "fp32", c.n_layers)
    st.markdown(
        t(
            "trouble.demo.oom",
            seq=out.seq,
            heads=c.n_heads,
            layers=c.n_layers,
            elements=f"{here.score_elements:,}",
            bytes=memory.fmt_bytes(here.score_bytes),
            all_layers=memory.fmt_bytes(memory.encoder_maps_bytes(c.n_layers, 1, c.n_heads, out.seq)),
            long_bytes=memory.fmt_bytes(long.score_bytes),
            ratio=f"{(4096 / out.seq) ** 2:,.0f}",
            flash=memory.fmt_bytes(long.flash_bytes),
        )
    )
    st.page_link("app_pages/memory.py", label=t("trouble.demo.oom_link"), icon=":material/memory:")


def _demo_single(out, layer: int, font: int) -> None:
    sim = troubleshoot.head_similarity(out, layer)
    h = sim.shape[0]
    off = sim[~np.eye(h, dtype=bool)]
    pair = np.unravel_index(np.argmax(np.where(np.eye(h, dtype=bool), -1, sim)), sim.shape)
    st.markdown(
        t(
            "trouble.demo.single",
            layer=layer,
            heads=h,
            mean=f"{off.mean():.2f}",
            best=f"{off.max():.2f}",
            a=int(pair[0]),
            b=int(pair[1]),
        )
    )
    titles = [t("inside.fig.head_n", head=i) for i in range(h)]
    maps = out.attentions[layer].numpy()
    st.plotly_chart(
        heads_grid(
            maps,
            titles,
            t("inside.fig.heads", heads=h, d_k=out.queries.shape[-1]),
            font_size=font,
            tokens=list(out.display_tokens or out.tokens),
            bar_title=t("inside.fig.weight"),
            width_hint=880,
        ),
        width="stretch",
        key="trouble_single_grid",
    )
    st.page_link("app_pages/inside_head.py", label=t("trouble.demo.single_link"), icon=":material/calculate:")


def _demo_slow(out, enc) -> None:
    c = enc.config
    d = troubleshoot.kv_cache_savings(c.n_layers, c.n_heads, c.d_k, out.seq, "fp32")
    st.markdown(
        t(
            "trouble.demo.slow",
            seq=d.seq,
            without=f"{d.recomputed_without:,}",
            with_cache=f"{d.computed_with:,}",
            factor=f"{d.recomputed_without / d.computed_with:.1f}",
            cache=memory.fmt_bytes(d.cache_bytes),
            layers=c.n_layers,
        )
    )


def _demo_uniform(out, layer: int, font: int) -> None:
    spread = troubleshoot.head_spread(out, layer)
    broad = [i for i, s in enumerate(spread) if s > BROAD]
    key = "trouble.demo.uniform" if broad else "trouble.demo.uniform_none"
    st.markdown(t(key, layer=layer, n=len(broad), heads=len(spread), threshold=BROAD, which=", ".join(map(str, broad))))
    heads = [t("inside.fig.head_n", head=h) for h in range(len(spread))]
    fig = compare_bars(
        {t("trouble.fig.spread_name"): spread},
        heads,
        t("trouble.fig.spread", layer=layer),
        y_title=t("trouble.fig.spread_axis"),
        font_size=font,
        y_range=(0, 1.05),
    )
    fig.add_hline(y=BROAD, line=dict(color="#d62728", dash="dash"))
    st.plotly_chart(fig, width="stretch", key="trouble_uniform")


def main() -> None:
    st.title(t("trouble.title"))
    tutorial.banner("troubleshooting")
    st.markdown(t("trouble.intro"))
    _table()
    out = current_output(internals=True)
    enc = current_encoder() if out is not None else None
    if out is None or enc is None:
        return
    c = enc.config
    font = presentation.figure_font()
    st.subheader(t("trouble.live_title"))
    st.caption(t("trouble.live_intro", name=enc.name, tokens=out.seq))
    lc, hc, qc = st.columns([2, 2, 3])
    layer, head = controls.layer_head(lc, hc, c.n_layers, c.n_heads)
    controls.auto_query(enc.capabilities.causal, out.seq)
    query = controls.query(qc, (out.display_tokens or out.tokens))

    for n, r in enumerate(ROWS, start=1):
        with st.expander(f"{n}. {t(f'trouble.row.{r}.symptom')}", expanded=n == 1):
            st.markdown(
                t(
                    "trouble.summary",
                    cause=t(f"trouble.row.{r}.cause"),
                    check=t(f"trouble.row.{r}.check"),
                    fix=t(f"trouble.row.{r}.fix"),
                )
            )
            st.markdown(f"**{t('trouble.live')}**")
            if r == "loss":
                _demo_loss(out, layer, head, query, font)
            elif r == "nan":
                _demo_nan(out, layer, head, query)
            elif r == "mask":
                _demo_mask(out, enc, layer, head, font)
            elif r == "concat":
                _demo_concat(out, layer)
            elif r == "oom":
                _demo_oom(out, enc)
            elif r == "single":
                _demo_single(out, layer, font)
            elif r == "slow":
                _demo_slow(out, enc)
            elif r == "uniform":
                _demo_uniform(out, layer, font)


main()
