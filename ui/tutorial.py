"""The tutorial the lecture pages follow, named on each of them: a Chinese article with no title and no address.

It cannot be linked, and it is not ours to republish, so each lecture page says which of its sections it follows
(quoting the Chinese heading) and an expander describes it and leads from each section to the page that shows it
on real tensors. Its text is the project's seed (see README); the headings below are copied from it verbatim.
"""

from __future__ import annotations

import streamlit as st

from .state import t

# (section, its heading as the tutorial writes it, the page that shows it here or None)
SECTIONS: tuple[tuple[str, str, str | None], ...] = (
    ("1", "多头注意力核心概念速览", None),
    ("2", "适用场景与理解边界", None),
    ("3", "多头注意力机制原理详解", "app_pages/inside_head.py"),
    ("3.5", "因果自注意力：生成模型的掩码机制", "app_pages/masks.py"),
    ("4", "PyTorch 实现多头注意力", "app_pages/inside_head.py"),
    ("5", "关键参数设计与影响", None),
    ("6", "资源占用与性能观察方法", "app_pages/memory.py"),
    ("7", "常见问题排查表", "app_pages/troubleshooting.py"),
    ("8", "多头注意力的最佳实践与使用建议", None),
    ("9", "总结与下一步", None),
)
HEADINGS = {number: heading for number, heading, _ in SECTIONS}
# The sections each lecture page follows.
FOLLOWS = {"inside_head": ("3", "4"), "memory": ("6",), "troubleshooting": ("7",)}


def section(number: str) -> str:
    """Return a section as the pages cite it: §6 “资源占用与性能观察方法” (and its English gloss in English)."""
    gloss = t(f"tutorial.gloss.s{number.replace('.', '_')}")
    return t("tutorial.section", number=number, heading=HEADINGS[number], gloss=gloss)


def banner(page: str, about: bool = True) -> None:
    """Name the tutorial and the sections this page follows; about=True adds the expander that describes it."""
    cited = t("tutorial.and").join(section(n) for n in FOLLOWS[page])
    st.caption(t("tutorial.follows", sections=cited))
    if not about:
        return
    with st.expander(t("tutorial.about_title"), icon=":material/menu_book:"):
        st.markdown(t("tutorial.about"))
        for number, _, target in SECTIONS:
            if target is None:
                st.markdown(f"- {section(number)}")
            else:
                st.page_link(target, label=f"{section(number)} → {t(f'nav.{target[10:-3]}')}")
