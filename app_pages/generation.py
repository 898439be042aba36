"""Generation: a decoder adds tokens one at a time with our KV cache; each step's query row, the cache growing."""

import streamlit as st

from models import AttnVizError
from models.lecture import memory
from models.lecture.generate import ROW_TOL, Generation, generate
from models.settings import limit
from ui import cache, controls, lecture, presentation, state
from ui.sidebar import current_encoder
from ui.state import Selection, t
from viz.lecture import cache_growth, token_bars

DEFAULT_TOKENS = 8
DEFAULT_PROMPT = "The cat sat on the mat. The cat"


@st.cache_data(show_spinner=False, max_entries=16)
def run(
    sel: Selection, prompt: str, n: int, top_k: int | None, seed: int, chat: bool = False, kv: str = "full"
) -> Generation:
    """Return the generation (numpy and lists; cached per model, prompt and settings)."""
    return generate(cache.model(sel), prompt, n, top_k=top_k, seed=seed, check=True, chat=chat, cache_spec=kv)


def _settings(where, has_template: bool) -> tuple[str, int, int | None, int, bool]:
    if "gen_prompt" not in st.session_state:
        st.session_state["gen_prompt"] = state.get("text") or DEFAULT_PROMPT
    prompt = where.text_area(t("gen.prompt"), key="gen_prompt", height=80)
    a, b, c = where.columns(3)
    cap = int(limit("max_generate"))
    st.session_state["gen_tokens"] = min(int(st.session_state.get("gen_tokens", DEFAULT_TOKENS)), cap)
    n = a.number_input(t("gen.tokens"), 1, cap, step=1, key="gen_tokens", help=t("gen.tokens_help", cap=cap))
    mode = b.radio(t("gen.mode"), ["greedy", "top_k"], key="gen_mode", format_func=lambda m: t(f"gen.mode_{m}"))
    k = c.number_input(t("gen.k"), 1, 1000, 5, step=1, key="gen_k", disabled=mode != "top_k")
    seed = c.number_input(t("gen.seed"), 0, 2**31 - 1, 0, step=1, key="gen_seed", disabled=mode != "top_k")
    chat = has_template and where.toggle(t("gen.chat"), key="gen_chat", help=t("gen.chat_help"))
    st.session_state.setdefault("gen_cache", "full")
    where.text_input(t("gen.cache"), key="gen_cache", help=t("gen.cache_help"))  # read in main()
    return prompt, int(n), int(k) if mode == "top_k" else None, int(seed), bool(chat)


def _step_view(g: Generation, s: int, layer: int, head: int, font: int) -> None:
    step = g.steps[s]
    keys = g.display[: step.position + 1]
    newest = keys[-1]
    chosen = g.display[len(g.prompt_ids) + s]
    st.markdown(
        t(
            "gen.step_explain" if s else "gen.step0_explain",
            pos=step.position,
            token=newest,
            n=step.position + 1,
            chosen=chosen,
            prompt_len=len(g.prompt_ids),
        )
    )
    row = step.rows[layer, head]
    fig = token_bars(
        row,
        keys,
        title=t("gen.row_title", layer=layer, head=head, token=newest, pos=step.position),
        highlight=step.position,
        y_title=t("gen.weight"),
        font_size=font,
    )
    st.plotly_chart(fig, width="stretch", key="gen_row")
    cand = " · ".join(f"`{g_disp}` {100 * p:.1f} %" for g_disp, p in _candidates(g, s))
    st.caption(t("gen.candidates", candidates=cand, chosen=chosen))
    left, right = st.columns(2)
    left.markdown(
        t(
            "gen.cache_facts",
            shape=f"({', '.join(map(str, step.cache_shape))})",
            layers=len(step.rows),
            bytes=memory.fmt_bytes(step.cache_bytes),
            formula=memory.fmt_bytes(step.formula_bytes),
            peak=lecture.peak(step.peak_bytes),
            ms=f"{1000 * step.seconds:.1f}",
        )
    )
    err = step.row_error
    if err is not None:
        (right.success if err <= ROW_TOL else right.error)(t("gen.check_step", err=f"{err:.1e}", tol=f"{ROW_TOL:g}"))


def _candidates(g: Generation, s: int) -> list[tuple[str, float]]:
    return [(tok, p) for tok, (_, p) in zip(g.top_tokens[s], g.steps[s].top, strict=True)]


def main() -> None:
    present = presentation.active()
    if not present:
        st.title(t("gen.title"))
        st.markdown(t("gen.intro"))
    enc = current_encoder()
    if enc is None:
        return
    if not enc.capabilities.generation:
        st.info(t("gen.need_decoder", model=enc.name))
        return
    font = presentation.figure_font()
    sel = state.selection()
    has_template = bool(getattr(enc.tokenizer, "chat_template", None))
    if present:
        with st.popover(t("present.settings"), icon=":material/tune:"):
            prompt, n, top_k, seed, chat = _settings(st, has_template)
    else:
        prompt, n, top_k, seed, chat = _settings(st, has_template)
    if not prompt.strip():
        st.info(t("gen.empty"))
        return
    try:
        with st.spinner(t("gen.running")):
            kv = str(st.session_state.get("gen_cache") or "full").strip() or "full"
            g = run(sel._replace(text="", text_b=""), prompt.strip(), n, top_k, seed, chat, kv)
    except AttnVizError as err:
        st.error(t("gen.failed", reason=str(err)))
        return
    if g.stop == "positions":
        st.warning(t("gen.stop_positions", done=len(g.generated_ids), asked=n, limit=enc.config.max_positions))
    elif g.stop == "end_of_text":
        st.warning(t("gen.stop_end_of_text", done=len(g.generated_ids), asked=n, token=g.tokens[-1]))
    c = enc.config
    if g.chat:
        st.caption(t("gen.chat_on", n=len(g.prompt_ids)))
    # The model's words in plain-text boxes, apart from the page's own labels: its "The answer is:" is not the UI's.
    st.markdown(t("gen.result_prompt"))
    st.code(prompt.strip(), language=None, wrap_lines=True)
    st.markdown(t("gen.result_generated"))
    st.code(g.text, language=None, wrap_lines=True)
    ok = g.max_row_error is not None and g.max_row_error <= ROW_TOL
    (st.success if ok else st.error)(
        t("gen.check_all", steps=len(g.steps), err=f"{g.max_row_error or 0:.1e}", tol=f"{ROW_TOL:g}")
    )

    titles = [
        t("gen.step_title0") if i == 0 else t("gen.step_title", token=g.display[len(g.prompt_ids) + i - 1])
        for i in range(len(g.steps))
    ]
    if present:
        s, pop = presentation.step_controls(titles, "top", t("gen.settings_layer"))
        with pop:
            layer, head = controls.layer_head(st, st, c.n_layers, c.n_heads)
    else:
        lc, hc, sc = st.columns(3)
        layer, head = controls.layer_head(lc, hc, c.n_layers, c.n_heads)
        st.session_state["gen_step"] = min(int(st.session_state.get("gen_step", 0)), len(g.steps) - 1)
        s = int(sc.slider(t("gen.step"), 0, len(g.steps) - 1, key="gen_step") if len(g.steps) > 1 else 0)
    _step_view(g, s, layer, head, font)

    seqs = [st_.position + 1 for st_ in g.steps]
    fig = cache_growth(
        seqs,
        [st_.cache_bytes for st_ in g.steps],
        [st_.formula_bytes for st_ in g.steps],
        [st_.peak_bytes for st_ in g.steps],
        {k: t(f"gen.chart_{k}") for k in ("cache", "formula", "peak", "x", "y")},
        current=s,
        title=t("gen.chart_title"),
        font_size=font,
    )
    st.plotly_chart(fig, width="stretch", key="gen_cache_chart")
    st.caption(t("gen.chart_caption", layers=c.n_layers, heads=c.n_kv_heads, d_k=c.d_k))
    if g.cache != "full":
        st.caption(t("gen.cache_bounded", spec=g.cache, held=g.steps[-1].cache_shape[2]))
    if present:
        presentation.step_controls(titles, "bottom")
    else:
        st.markdown(t("gen.code"))


main()
