"""Inside a head: one head of the real model, step by step, every tensor with its shape and the code that makes it."""

import math

import numpy as np
import streamlit as st

from models.capabilities import Capabilities
from models.encoder import PARITY_TOLERANCE
from models.lecture.steps import DISTANCES, HeadSteps, OneVsMany
from ui import controls, lecture, presentation, state, tutorial, why
from ui.head_figures import SLIDE_COLUMNS, SLIDE_HEIGHT, one_vs_many_figures, step_figures
from ui.sidebar import current_encoder, current_output
from ui.state import t

EXTRA_SLIDES = ("one_vs_many", "params")  # after the steps, a slide each: "One head vs many"


NORM_NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "": "a norm"}


def _embeddings(caps: Capabilities) -> str:
    """Return what layer 0's input is made of, as this family's forward adds it up (word + position + segment…)."""
    if not caps.position_table:
        return t("inside.embed.rotary") if caps.rotary else t("inside.embed.word")
    parts = ["word", "position"] + (["segment"] if caps.segments else [])
    return " + ".join(t(f"inside.embed.{p}") for p in parts)


def _explain_key(key: str, s: HeadSteps, caps: Capabilities, n_hidden: int) -> str:
    """Return the explanation of a step for this family: its norm's place, its mask, what its forward does."""
    if key in ("input", "w_o"):
        return f"inside.step.{key}.explain_pre" if caps.pre_norm else f"inside.step.{key}.explain"
    if key == "mask":
        if n_hidden:
            return "inside.step.mask.explain_some"
        return "inside.step.mask.explain_last" if caps.causal else "inside.step.mask.explain_none"
    return f"inside.step.{key}.explain"


def _values(s: HeadSteps, caps: Capabilities | None = None) -> dict:
    """Return every number an explanation may quote (str.format ignores the ones a string does not use)."""
    caps = caps or Capabilities()
    tok = s.tokens
    top = int(np.argmax(s.probs))
    top_dot = int(np.argmax(np.where(s.keep, s.dots, -np.inf)))
    return dict(
        layer=s.layer,
        head=s.head,
        i=s.query,
        token=tok[s.query],
        seq=len(tok),
        heads=s.n_heads,
        d_k=s.d_k,
        d_model=s.d_model,
        sqrt_dk=f"{math.sqrt(s.d_k):.2f}",
        top_token=tok[top],
        top_weight=f"{s.probs[top]:.3f}",
        top_dot_token=tok[top_dot],
        top_dot=f"{s.dots[top_dot]:.2f}",
        max_scaled=f"{s.probs.max():.3f}",
        max_unscaled=f"{s.probs_unscaled.max():.3f}",
        ent_scaled=f"{s.entropy:.2f}",
        ent_unscaled=f"{s.entropy_unscaled:.2f}",
        n_hidden=int((~s.keep).sum()),
        context_norm=f"{np.linalg.norm(s.context):.2f}",
        next_err=lecture.num(s.errors.get("next_layer", float("nan")), 2),
        kv_heads=s.kv_heads,
        kv_head=s.kv_head,
        group=s.group_size,
        group_heads=", ".join(str(h) for h in range(s.kv_head * s.group_size, (s.kv_head + 1) * s.group_size)),
        window=s.window or 0,
        far=DISTANCES - 1,
        near_dot=f"{s.distance_dots[0]:.2f}" if s.distance_dots is not None else "",
        far_dot=f"{s.distance_dots[-1]:.2f}" if s.distance_dots is not None else "",
        embeddings=_embeddings(caps),
        norm=NORM_NAMES[caps.norm],
    )


def _step(key: str, n: int, s: HeadSteps, font: int, slide: bool, caps: Capabilities) -> None:
    """Draw one step: explanation, shape, the line of the model's code that made the tensor, the figures."""
    st_ = s.step(key)
    values = _values(s, caps)
    explain_key = _explain_key(key, s, caps, values["n_hidden"])
    if not slide:
        st.subheader(f"{n}. {t(f'inside.step.{key}.title')}")
    if slide:  # a projector's screen: the text beside the code and the figures, nothing that makes it scroll
        text_col, fig_col = st.columns(list(SLIDE_COLUMNS))
        with text_col:
            st.markdown(t(explain_key, **values))
            st.markdown(t("inside.shape", shape=lecture.shape(st_.shape), axes=", ".join(st_.axes)))
        with fig_col:  # where the line is, as its comment; a line that did not run says so there
            where = st_.where if st_.ran else f"{st_.where} · {t('inside.source_idle_short')}"
            st.code(f"# {where}\n{st_.code}", language="python", wrap_lines=True)
    else:
        st.markdown(t(explain_key, **values))
        st.markdown(t("inside.shape", shape=lecture.shape(st_.shape), axes=", ".join(st_.axes)))
        st.caption(t("inside.source" if st_.ran else "inside.source_idle", where=st_.where))
        st.code(st_.code, language="python", wrap_lines=True)
        with st.expander(t("inside.function", where=st_.where.split(", ")[-1])):
            st.code(st_.function, language="python", line_numbers=True)
        fig_col = st.container()
    height = int(st.session_state.get("slide_height", SLIDE_HEIGHT))
    figs, row = step_figures(key, s, font, slide, height)
    with fig_col:
        places = st.columns(len(figs)) if row else [st.container() for _ in figs]
        for j, (place, fig) in enumerate(zip(places, figs, strict=True)):
            place.plotly_chart(fig, width="stretch", key=f"fig_{key}_{j}")


def _one_vs_many(o: OneVsMany, tokens: list[str], font: int, part: str = "both") -> None:
    """Draw one head vs many: part "maps" (a slide), "params" (a slide) or "both" (the page)."""
    values = dict(
        layer=o.layer,
        heads=o.n_heads,
        d_k=o.d_k,
        d_model=o.d_model,
        per_head=f"{o.params_per_head:,}",
        qkv=f"{o.params_heads - o.params_w_o:,}",
        w_o=f"{o.params_w_o:,}",
        total=f"{o.params_heads:,}",
        total_single=f"{o.params_single:,}",
        formula=f"{4 * o.d_model**2 + 4 * o.d_model:,}",
        ent_heads=f"{float(np.mean(o.heads_entropy)):.2f}",
        ent_single=f"{o.single_entropy:.2f}",
        change=f"{100 * o.output_change:.0f}",
    )
    slide = part != "both"
    if not slide:
        st.subheader(t("inside.step.one_vs_many.title"))
    if part in ("maps", "both"):
        height = int(st.session_state.get("slide_height", SLIDE_HEIGHT)) if slide else None
        grid, single, _ = one_vs_many_figures(o, tokens, font, height)
        st.markdown(t("inside.step.one_vs_many.explain", **values))
        left, right = st.columns([3, 2])
        left.plotly_chart(grid, width="stretch", key="fig_heads_grid")
        right.plotly_chart(single, width="stretch", key="fig_single_head")
    if part in ("params", "both"):
        st.markdown(t("inside.params_table", **values))
        st.markdown(t("inside.one_vs_many_facts", **values))


def _check(s: HeadSteps) -> tuple[str, bool]:
    """Return the self-check sentence (the steps against the formula, the layer against the model) and whether
    it passes."""
    err = s.errors
    text = t(
        "inside.check",
        formula=lecture.num(err["formula"], 2),
        weighted=lecture.num(err["weighted_sum"], 2),
        attention=lecture.num(err["attention"], 2),
        next_layer=lecture.num(err["next_layer"], 2),
    )
    worst = max(err["formula"], err["weighted_sum"], err["attention"], err["next_layer"])
    return text, worst <= PARITY_TOLERANCE


def _set_causal() -> None:
    """Presentation mode's mask switch: the sidebar (hidden there) reads the same choice."""
    kind = "causal" if st.session_state.get("present_causal") else "bidirectional"
    st.session_state["mask"] = st.session_state["mask_kind"] = kind


def _controls(where, c, out, slide: bool = False, causal: bool = False) -> tuple[int, int, int]:
    """Draw the layer, head and query pickers into `where` (columns on the page, a popover on a slide)."""
    with where:
        lc, hc, qc = (st.container(),) * 3 if slide else st.columns([2, 2, 3])
        layer, head = controls.layer_head(lc, hc, c.n_layers, c.n_heads)
        query = controls.query(qc, out.display_tokens or out.tokens)
        if slide:
            if not causal:  # step 7 asks for the causal mask: the hidden sidebar's choice, offered here
                st.session_state["present_causal"] = state.get("mask") == "causal"
                st.toggle(t("present.causal"), key="present_causal", on_change=_set_causal)
            st.session_state.setdefault("slide_height", SLIDE_HEIGHT)
            st.slider(
                t("present.figure_height"), 200, 1000, step=10, key="slide_height", help=t("present.figure_height_help")
            )
    return layer, head, query


def main() -> None:
    slide_mode = presentation.active()
    if not slide_mode:
        st.title(t("inside.title"))
        tutorial.banner("inside_head")
    out = current_output(internals=True)
    enc = current_encoder() if out is not None else None
    if out is None or enc is None:
        return
    c = enc.config
    controls.auto_query(enc.capabilities.causal, out.seq)  # a causal model opens on a query that sees the text
    controls.clamp(c.n_layers, c.n_heads, out.seq)  # the slide's settings label reads them before the widgets
    font = presentation.figure_font()

    if slide_mode:
        # The steps this layer's code has (rotation, shared keys) decide the slides: the current choice's first.
        pick = (st.session_state["layer"], st.session_state["head"], st.session_state["query"])
        with st.spinner(t("inside.computing")):
            s = lecture.head_steps(state.selection(), *pick, enc, out)
        slides = (*(x.key for x in s.steps), *EXTRA_SLIDES)
        titles = [t(f"inside.step.{k}.title") for k in slides]
        label = t(
            "inside.settings",
            layer=pick[0],
            head=pick[1],
            token=(out.display_tokens or out.tokens)[pick[2]],
        )
        step, popover = presentation.step_controls(titles, "top", label)
        layer, head, query = _controls(popover, c, out, slide=True, causal=enc.capabilities.causal)
        key = slides[min(step, len(slides) - 1)]
        with st.spinner(t("inside.computing")):
            s = lecture.head_steps(state.selection(), layer, head, query, enc, out)
            if key in EXTRA_SLIDES:
                o = lecture.one_vs_many(state.selection(), layer, enc, out)
                _one_vs_many(
                    o, out.display_tokens or out.tokens, font, part="maps" if key == "one_vs_many" else "params"
                )
            else:
                _step(key, step + 1, s, font, slide=True, caps=enc.capabilities)
        check, ok = _check(s)
        worst = max(s.errors[k] for k in ("formula", "weighted_sum", "attention", "next_layer"))
        note = t("present.check_short" if ok else "present.check_short_off", worst=lecture.num(worst, 2))
        presentation.step_controls(titles, "bottom", note=(note, check))
        return

    st.caption(
        t(
            "inside.intro",
            name=enc.name,
            layers=c.n_layers,
            heads=c.n_heads,
            d_model=c.d_model,
            d_k=c.d_k,
            tokens=out.seq,
        )
    )
    layer, head, query = _controls(st.container(), c, out)
    with st.spinner(t("inside.computing")):
        s = lecture.head_steps(state.selection(), layer, head, query, enc, out)
    check, ok = _check(s)
    (st.success if ok else st.warning)(check)
    for n, step in enumerate(s.steps, start=1):
        with st.container(border=True):
            _step(step.key, n, s, font, slide=False, caps=enc.capabilities)
    with st.container(border=True):
        with st.spinner(t("inside.computing")):
            o = lecture.one_vs_many(state.selection(), layer, enc, out)
        _one_vs_many(o, out.display_tokens or out.tokens, font)
    with st.container(border=True):  # why this score: the same explain() as Explore's panel and the CLI (ui/why.py)
        tokens = list(out.display_tokens or out.tokens)
        why.panel(tokens, out.attentions[layer, head].numpy(), layer, head, query=query, title=t("why.lecture_title"))


main()
