"""Show a mask checker's report (models.analysis.mask_checker.MaskReport): verdict, diagnosis, evidence. Used by several pages."""

from __future__ import annotations

import streamlit as st

from models.analysis.mask_checker import MaskReport, check_mask
from models.masks import load_mask_bytes

from . import cache, debug, results
from .safe import md
from .state import Selection, t

# Material icons ship with Streamlit's own font: no emoji font needed on a lecture-hall machine.
STATUS_ICON = {
    "pass": ":green[:material/check_circle:]",
    "fail": ":red[:material/cancel:]",
    "warn": ":orange[:material/warning:]",
    "info": ":blue[:material/info:]",
    "skip": ":gray[:material/skip_next:]",
}


@debug.counted("checked", results.cached)
def checked(
    sel: Selection,
    texts: tuple[str, ...],
    texts_b: tuple[str, ...] | None,
    mask: str | bytes,
    file_name: str,
    convention: str,
    expect: str,
) -> MaskReport:
    """Return the checker's report (a resource, not data: it holds every layer's attention and is never mutated).

    sel names the model (pass `model_only()`: the texts and mask checked are the other arguments).
    """
    enc = cache.model(sel)
    source = load_mask_bytes(mask, file_name) if isinstance(mask, bytes) else mask
    return check_mask(enc, list(texts), source, convention, expect, list(texts_b) if texts_b else None)


def msg(code: str) -> str:
    """Return the translated text of one of the checker's message codes."""
    return t(f"masks.msg.{code}")


def show_report(report: MaskReport, evidence: bool = True) -> None:
    """Draw the verdict, the diagnosis of a classic bug (if any) and, optionally, every finding with its evidence."""
    verdict = report.summary.render(msg)
    (st.success if report.ok else st.error)(
        verdict, icon=":material/check_circle:" if report.ok else ":material/cancel:"
    )
    for d in report.diagnosis:
        st.markdown(f":red[:material/bug_report:] **{t('masks.diagnosis')}** {md(d.render(msg))}")
    if evidence:
        lines = [
            f"{STATUS_ICON[f.status]} **{msg('check.' + f.check)}** — {md(f.render(msg))}" for f in report.findings
        ]
        st.markdown("  \n".join(lines))
    for note in report.notes:
        st.warning(note)
