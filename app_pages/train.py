"""Train: a small decoder trained live, its heads forming on screen — the tutorial's §9 exercise and §8.3 monitoring.

The training runs on a worker thread in one of the server's heavy slots (ui.training); this script only draws.
While it runs, a fragment redraws the curves and maps once a second; Stop sets the job's stop event.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import streamlit as st

from models import AttnVizError
from models.training import Record, TrainConfig, trainable
from models.training.recorder import DETERMINED_LOSS_TARGET, INDUCTION_THRESHOLD
from models.training.trainer import phase_change
from ui import presentation, sidebar, training
from ui.safe import md
from ui.state import t
from viz.heatmap import head_heatmap
from viz.overview import overview_figure, render_mosaic
from viz.training import curves, head_series, layer_series, phase_figure, small_multiples, spread_figure, spread_series

TASKS = ("induction", "reverse", "text")
FAMILIES = trainable()
BREAKS = ("none", "no_scale", "no_causal")
HEAD_COUNTS = (1, 2, 4, 8)
COMPARE_SEEDS = 3  # "Compare head counts": every head count on the seed set and the next two
COMPARE_STEPS = 2000  # at most, per run of a comparison: the heads form well within it (docs/training.md)
HEADS = (1, 2, 4, 8, 16)
WIDTHS = (32, 64, 128, 256)
DEFAULT = TrainConfig()
JOB_KEY = "train_job"


def _settings(where) -> None:
    """Draw the settings widgets (their values live in st.session_state under train_*)."""
    task = where.radio(
        t("train.task"), TASKS, key="train_task", horizontal=True, format_func=lambda k: t(f"train.task_{k}")
    )
    where.caption(t(f"train.task_{task}_help"))
    where.radio(
        t("train.family"),
        FAMILIES,
        key="train_family",
        horizontal=True,
        index=FAMILIES.index(DEFAULT.family),
        format_func=lambda k: t(f"train.family_{k}"),
        help=t("train.family_help"),
    )
    a, b, c = where.columns(3)
    a.number_input(t("train.layers"), 1, 4, DEFAULT.layers, key="train_layers")
    b.selectbox(t("train.heads"), HEADS, index=HEADS.index(DEFAULT.heads), key="train_heads")
    c.selectbox(t("train.d_model"), WIDTHS, index=WIDTHS.index(DEFAULT.d_model), key="train_d_model")
    a, b, c = where.columns(3)
    a.number_input(t("train.steps"), 10, 50_000, DEFAULT.steps, step=100, key="train_steps")
    b.number_input(t("train.seed"), 0, 2**31 - 1, 0, key="train_seed")
    c.toggle(t("train.mlp"), False, key="train_mlp", help=t("train.mlp_help"))
    where.radio(
        t("train.break"),
        BREAKS,
        key="train_break",
        horizontal=True,
        format_func=lambda k: t(f"train.break_{k}"),
        help=t("train.break_help"),
    )
    if task == "text":
        where.text_area(t("train.text"), key="train_text", height=120, help=t("train.text_help"))


def _config() -> TrainConfig:
    """Return the TrainConfig the settings describe now (read at the click, not from the run that drew them)."""
    ss = st.session_state
    broken = ss.get("train_break", "none")
    return TrainConfig(
        task=ss.get("train_task", DEFAULT.task),
        family=ss.get("train_family", DEFAULT.family),
        layers=int(ss.get("train_layers", DEFAULT.layers)),
        heads=int(ss.get("train_heads", DEFAULT.heads)),
        d_model=int(ss.get("train_d_model", DEFAULT.d_model)),
        mlp=bool(ss.get("train_mlp", False)),
        steps=int(ss.get("train_steps", DEFAULT.steps)),
        seed=int(ss.get("train_seed", 0)),
        scale=broken != "no_scale",
        causal=broken != "no_causal",
        text=ss.get("train_text", "") if ss.get("train_task") == "text" else "",
    )


def _start(kind: str) -> None:
    base = _config()
    if kind == "heads":
        steps = min(base.steps, COMPARE_STEPS)
        configs = [
            replace(base, heads=h, seed=base.seed + k, steps=steps)
            for h in HEAD_COUNTS
            if base.d_model % h == 0
            for k in range(COMPARE_SEEDS)
        ]
        labels = [t("train.label_heads_seed", h=c.heads, seed=c.seed) for c in configs]
    elif kind == "bugs":
        configs = [replace(base, scale=True, causal=True), replace(base, scale=False), replace(base, causal=False)]
        labels = [t(f"train.break_{b}") for b in BREAKS]
    else:
        configs, labels = [base], [t("train.label_run")]
    try:
        job = training.start(kind, configs, labels)
    except AttnVizError as err:
        st.session_state["train_error"] = str(err)
        return
    st.session_state.pop("train_error", None)
    st.session_state[JOB_KEY] = job.id
    st.session_state["train_view"] = None  # follow the newest record


def _controls(job: training.Job | None) -> None:
    busy = job is not None and job.active
    a, b, c, d = st.columns(4)
    a.button(
        t("train.start"),
        key="train_start",
        type="primary",
        icon=":material/play_arrow:",
        disabled=busy,
        on_click=_start,
        args=("single",),
        width="stretch",
    )
    b.button(
        t("train.compare_heads"),
        key="train_compare_heads",
        icon=":material/stacked_line_chart:",
        disabled=busy,
        on_click=_start,
        args=("heads",),
        help=t("train.compare_heads_help", steps=f"{COMPARE_STEPS:,}"),
        width="stretch",
    )
    c.button(
        t("train.compare_bugs"),
        key="train_compare_bugs",
        icon=":material/bug_report:",
        disabled=busy,
        on_click=_start,
        args=("bugs",),
        help=t("train.compare_bugs_help"),
        width="stretch",
    )
    d.button(
        t("train.stop"),
        key="train_stop",
        icon=":material/stop:",
        disabled=not busy,
        on_click=training.stop,
        args=(job.id if job else None,),
        width="stretch",
    )


def _column(records: list[Record], name: str) -> np.ndarray:
    return np.array([getattr(r, name) for r in records], dtype=np.float64)


def _status(job: training.Job) -> None:
    rec = job.latest()
    config = job.configs[job.current]
    run = (
        t("train.run_of", k=job.current + 1, n=len(job.configs), label=job.labels[job.current])
        if len(job.configs) > 1
        else ""
    )
    if job.state == "waiting":
        st.info(t("train.waiting", running=training.running()), icon=":material/hourglass_top:")
        return
    step, seconds = (job.step, job.seconds) if job.active else ((rec.step, rec.seconds) if rec else (0, 0.0))
    rate = step / seconds if seconds > 0 else 0.0
    text = t("train.progress", step=step, steps=config.steps, seconds=f"{seconds:.1f}", rate=f"{rate:.0f}", run=run)
    if job.state == "running":
        st.progress(min(1.0, step / config.steps), text=text)
    elif job.state == "failed":
        st.error(t("train.failed", reason=md(job.error)))
    else:
        results = job.results
        why = results[-1].stop_reason if results else "stopped"
        st.success(t(f"train.ended_{why}", text=text))


def _loss_chart(records: list[Record], task_chance: float, font: int, formed: int | None) -> None:
    steps = [r.step for r in records]
    series = {
        t("train.curve_train"): (steps, _column(records, "train_loss")),
        t("train.curve_val"): (steps, _column(records, "val_loss")),
    }
    determined = _column(records, "val_determined")
    if np.isfinite(determined).any():
        series[t("train.curve_copy")] = (steps, determined)
    chance = _column(records, "val_chance")
    if np.isfinite(chance).any():
        series[t("train.curve_chance")] = (steps, chance)
    hlines = [(task_chance, t("train.line_chance"))] if math.isfinite(task_chance) else []
    if np.isfinite(determined).any():
        hlines.append((DETERMINED_LOSS_TARGET, t("train.line_target")))
    vlines = [(formed, t("train.line_formed", step=formed))] if formed else []
    fig = curves(
        series,
        t("train.loss_title"),
        t("train.x_step"),
        t("train.y_nats"),
        hlines,
        vlines,
        dashed=[t("train.curve_chance")],
        font_size=font,
    )
    st.plotly_chart(fig, width="stretch", key="train_loss_chart")


def _score_chart(records: list[Record], font: int) -> None:
    steps = [r.step for r in records]
    induction = np.stack([r.induction for r in records])  # (records, L, H)
    if not np.isfinite(induction).any():
        prev = np.stack([r.prev for r in records])
        fig = curves(
            head_series(steps, prev),
            t("train.prev_title"),
            t("train.x_step"),
            t("train.y_share"),
            y_range=(0, 1),
            font_size=font,
        )
    else:
        fig = curves(
            head_series(steps, induction),
            t("train.induction_title"),
            t("train.x_step"),
            t("train.y_score"),
            [(INDUCTION_THRESHOLD, t("train.line_threshold"))],
            y_range=(0, 1),
            font_size=font,
        )
    st.plotly_chart(fig, width="stretch", key="train_score_chart")


def _maps(records: list[Record], tokens: list[str], font: int) -> None:
    """The probe's maps at one record: every head as a mosaic, and the best head with its tokens."""
    n = len(records)
    view = st.session_state.get("train_view")
    index = n - 1 if view is None else min(int(view), n - 1)
    if n > 1:
        steps = [r.step for r in records]
        chosen = st.select_slider(
            t("train.snapshot"),
            options=list(range(n)),
            value=index,
            key="train_view_slider",
            format_func=lambda i: t("train.snapshot_step", step=steps[i]),
            help=t("train.snapshot_help"),
            on_change=_pin,
            args=(n,),
        )
        index = int(chosen)
    rec = records[index]
    L, H = rec.maps.shape[:2]
    maps = rec.maps.astype(np.float32)
    left, right = st.columns([3, 2])
    mosaic = render_mosaic(maps, max_tile=64, min_tile=60)
    fig = overview_figure(
        mosaic, title=t("train.maps_title", step=rec.step), hover=t("train.maps_hover"), width_hint=620
    )
    left.plotly_chart(fig, width="stretch", key="train_mosaic")
    layer, head, score = rec.best_induction
    if not math.isfinite(score):
        layer, head = int(np.argmax(rec.prev.max(axis=1))), int(np.argmax(rec.prev.max(axis=0)))
    heat = head_heatmap(
        maps[layer, head],
        tokens,
        title=t("train.head_title", layer=layer, head=head, step=rec.step),
        height=420,
        width_hint=400,  # the right-hand column: token labels thinned to what fits there
    )
    right.plotly_chart(heat, width="stretch", key="train_head_map")


def _pin(n: int) -> None:
    """The slider was moved: stay on that record; back at the newest, follow the newest again."""
    chosen = st.session_state.get("train_view_slider")
    st.session_state["train_view"] = None if chosen is None or int(chosen) >= n - 1 else int(chosen)


def _diagnostics(records: list[Record], font: int) -> None:
    steps = [r.step for r in records]
    norms = list(records[-1].norms)
    panels = [
        (t("train.diag_entropy"), head_series(steps, np.stack([r.entropy for r in records]))),
        (t("train.diag_max_weight"), head_series(steps, np.stack([r.max_weight for r in records]))),
        (
            t("train.diag_grads"),
            {
                **layer_series(steps, np.stack([r.grad_q for r in records]), "‖∇W_q‖ L{layer}"),
                **layer_series(steps, np.stack([r.grad_k for r in records]), "‖∇W_k‖ L{layer}"),
            },
        ),
        (
            t("train.diag_scores"),
            {
                **layer_series(steps, np.stack([r.score_std for r in records]), "std L{layer}"),
                **layer_series(steps, np.stack([r.score_max for r in records]) / 10, "max/10 L{layer}"),
            },
        ),
        (
            t("train.diag_norm_std"),
            {
                **{f"{k} in": (steps, [r.norms[k][1] for r in records]) for k in norms},
                **{f"{k} out": (steps, [r.norms[k][3] for r in records]) for k in norms},
            },
        ),
        (
            t("train.diag_norm_mean"),
            {
                **{f"{k} in": (steps, [r.norms[k][0] for r in records]) for k in norms},
                **{f"{k} out": (steps, [r.norms[k][2] for r in records]) for k in norms},
            },
        ),
    ]
    fig = small_multiples(panels, t("train.x_step"), cols=3, log_panels=(2, 4), font_size=font)
    st.plotly_chart(fig, width="stretch", key="train_diagnostics")
    st.caption(t("train.diag_caption", scale=", ".join(f"{s:.2f}" for s in records[-1].score_scale)))


def _flags(records: list[Record]) -> None:
    seen: list[str] = []
    for r in records:
        seen += [f for f in r.flags if f not in seen]
    latest = set(records[-1].flags)
    for flag in seen:
        if flag == "uniform" and flag not in latest:
            continue  # it learned after all
        st.warning(t(f"train.flag.{flag}"), icon=":material/report:")


def _single(job: training.Job, font: int) -> None:
    records = list(job.records[0])
    if not records:
        return
    result = job.results[0] if job.results else None
    formed = result.formed_step if result else next((r.step for r in records if r.induction_formed), None)
    _flags(records)
    left, right = st.columns(2)
    with left:
        _loss_chart(records, job.chance, font, formed)
    with right:
        _score_chart(records, font)
    _phase(records, font)
    if result is not None:
        _verdict(result, job.chance)
    _maps(records, job.probe_tokens, font)
    with st.expander(t("train.diag_expander"), expanded=not presentation.active()):
        _diagnostics(records, font)
    if result is not None and job.folder:
        _saved(job)
    elif job.note:
        st.info(t("train.not_saved", reason=md(job.note)))


def _phase(records: list[Record], font: int) -> None:
    """The phase change (Olsson et al. 2022): the losses and the best induction score on one step axis, the loss
    bump and the score's jump marked in both."""
    phase = phase_change(records)
    if phase is None:
        return
    steps = [r.step for r in records]
    losses = {
        t("train.curve_train"): (steps, _column(records, "train_loss")),
        t("train.curve_val"): (steps, _column(records, "val_loss")),
        t("train.curve_copy"): (steps, _column(records, "val_determined")),
    }
    labels = {
        "loss": t("train.phase_loss"),
        "score": t("train.phase_score"),
        "score_name": t("train.phase_score_name"),
        "bump": t("train.phase_bump"),
        "jump": t("train.phase_jump"),
        "x": t("train.x_step"),
    }
    score = [r.best_induction[2] for r in records]
    fig = phase_figure(steps, losses, score, phase, labels, INDUCTION_THRESHOLD, font_size=font)
    st.plotly_chart(fig, width="stretch", key="train_phase_chart")
    st.caption(t("train.phase_caption", bump=phase["bump"], jump=phase["jump"]))


def _verdict(result, chance: float) -> None:
    """Say what the finished run achieved: the head and the copy's loss, or the plateau with the advice."""
    v = result.verdict()
    if v["state"] == "none":
        return
    rec = result.last
    layer, head, score = rec.best_induction
    ended = t(
        {"plateau": "train.verdict_plateau", "steps": "train.verdict_steps"}.get(v["stop"], "train.verdict_other")
    )
    common = dict(layer=layer, head=head, loss=f"{v['copy_loss']:.3f}", target=f"{v['copy_target']:g}", ended=ended)
    if v["state"] == "formed":
        first = next(r for r in result.records if r.step == v["formed_step"])
        st.success(
            t("train.formed", **common, score=f"{score:.2f}", step=v["formed_step"], seconds=f"{first.seconds:.1f}")
        )
    elif v["state"] == "weak_copy":
        st.warning(t("train.weak_copy", **common, score=f"{score:.2f}"), icon=":material/report:")
    else:
        st.warning(t("train.no_head", **common, chance=f"{chance:.2f}"), icon=":material/report:")


def _saved(job: training.Job) -> None:
    st.markdown(t("train.saved", folder=md(job.folder)))
    st.code(f"python -m models stats --model {job.folder}", language="bash")
    offered, custom_ok = sidebar.model_options()
    if custom_ok:
        st.button(
            t("train.open_explore"), key="train_open", icon=":material/search:", on_click=_open, args=(job.folder,)
        )
    else:
        st.caption(t("train.open_shared"))


def _open(folder: str) -> None:
    st.session_state["model_choice"] = sidebar.CUSTOM
    st.session_state["model_custom"] = folder
    st.session_state["model"] = folder
    st.session_state["train_go_explore"] = True


def _compare_heads(job: training.Job, done: list[int], font: int) -> None:
    """Every head count over its seeds: the median and the spread of the copy's loss and of the best induction
    score, and a table with each seed's step formed and final copy loss."""
    groups: dict[str, list[int]] = {}
    for i in done:
        groups.setdefault(t("train.label_heads", h=job.configs[i].heads), []).append(i)
    loss, score, rows = {}, {}, []
    for name, runs in groups.items():
        recs = [list(job.records[i]) for i in runs]
        loss[name] = [([r.step for r in rs], _column(rs, "val_determined")) for rs in recs]
        score[name] = [([r.step for r in rs], [r.best_induction[2] for r in rs]) for rs in recs]
        formed = [next((r.step for r in rs if r.induction_formed), None) for rs in recs]
        rows.append(
            {
                t("train.col_heads"): job.configs[runs[0]].heads,
                t("train.col_formed_seeds"): f"{sum(f is not None for f in formed)}/{len(runs)}",
                t("train.col_steps_seeds"): ", ".join(
                    f"{job.configs[i].seed}: {f if f else '—'}" for i, f in zip(runs, formed, strict=True)
                ),  # fmt: skip
                t("train.col_copy_seeds"): ", ".join(f"{rs[-1].val_determined:.3f}" for rs in recs),
            }
        )
    left, right = st.columns(2)
    left.plotly_chart(
        spread_figure(
            spread_series(loss),
            t("train.compare_loss_copy"),
            t("train.x_step"),
            t("train.y_nats"),
            [(DETERMINED_LOSS_TARGET, t("train.line_target"))],
            font_size=font,
        ),  # fmt: skip
        width="stretch",
        key="train_compare_loss",
    )
    right.plotly_chart(
        spread_figure(
            spread_series(score),
            t("train.compare_induction"),
            t("train.x_step"),
            t("train.y_score"),
            [(INDUCTION_THRESHOLD, t("train.line_threshold"))],
            (0, 1),
            font_size=font,
        ),  # fmt: skip
        width="stretch",
        key="train_compare_right",
    )
    st.dataframe(rows, hide_index=True, width="stretch")
    st.caption(t("train.compare_heads_caption"))


def _compare(job: training.Job, font: int) -> None:
    done = [i for i, recs in enumerate(job.records) if recs]
    if not done:
        return
    if job.kind == "heads":
        _compare_heads(job, done, font)
        return
    series, best, rows = {}, {}, []
    metric = "val_determined" if job.configs[0].task != "text" else "val_loss"
    for i in done:
        recs = list(job.records[i])
        steps = [r.step for r in recs]
        series[job.labels[i]] = (steps, _column(recs, metric))
        best[job.labels[i]] = (steps, [r.best_induction[2] for r in recs])
        formed = next((r for r in recs if r.induction_formed), None)
        last = recs[-1]
        rows.append(
            {
                t("train.col_run"): job.labels[i],
                t("train.col_formed"): formed.step if formed else "—",
                t("train.col_seconds"): f"{formed.seconds:.1f}" if formed else "—",
                t("train.col_loss"): f"{getattr(last, metric):.3f}",
                t("train.col_chance"): f"{last.val_chance:.3f}" if math.isfinite(last.val_chance) else "—",
                t("train.col_flags"): ", ".join(last.flags) or "—",
            }
        )
    left, right = st.columns(2)
    title = t("train.compare_loss_copy") if metric == "val_determined" else t("train.compare_loss_val")
    left.plotly_chart(
        curves(series, title, t("train.x_step"), t("train.y_nats"), font_size=font),
        width="stretch",
        key="train_compare_loss",
    )
    if job.kind == "bugs":
        chance = {
            job.labels[i]: ([r.step for r in job.records[i]], _column(list(job.records[i]), "val_chance")) for i in done
        }
        fig = curves(
            chance,
            t("train.compare_chance"),
            t("train.x_step"),
            t("train.y_nats"),
            [(job.chance, t("train.line_chance"))] if math.isfinite(job.chance) else [],
            font_size=font,
        )
    else:
        fig = curves(
            best,
            t("train.compare_induction"),
            t("train.x_step"),
            t("train.y_score"),
            [(INDUCTION_THRESHOLD, t("train.line_threshold"))],
            y_range=(0, 1),
            font_size=font,
        )
    right.plotly_chart(fig, width="stretch", key="train_compare_right")
    st.dataframe(rows, hide_index=True, width="stretch")
    st.caption(t(f"train.compare_{job.kind}_caption"))


def _live(job_id: str) -> None:
    job = training.get(job_id)
    if job is None:
        return
    font = presentation.figure_font()
    _status(job)
    if job.kind == "single":
        _single(job, font)
    else:
        _compare(job, font)
    was = st.session_state.get("train_was_active")
    st.session_state["train_was_active"] = job.active
    if was and not job.active:
        st.rerun()  # the whole page: buttons enabled again, the saved folder shown


def main() -> None:
    present = presentation.active()
    if st.session_state.pop("train_go_explore", False):
        st.switch_page("app_pages/explore.py")
    if not present:
        st.title(t("train.title"))
        st.markdown(t("train.intro"))
    job = training.get(st.session_state.get(JOB_KEY))
    if present:
        with st.popover(t("present.settings"), icon=":material/tune:"):
            _settings(st)
    else:
        with st.expander(t("train.settings"), expanded=job is None):
            _settings(st)
    _controls(job)
    if "train_error" in st.session_state:
        st.error(t("train.bad_settings", reason=md(st.session_state["train_error"])))
    if job is None:
        st.info(t("train.press_train"))
        return
    st.session_state.setdefault("train_was_active", job.active)
    st.fragment(_live, run_every=1.0 if job.active else None)(job.id)
    if not present:
        st.markdown(t("train.how"))


main()
