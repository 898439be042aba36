"""What pages hand viz's figures besides numbers: their words in the page's language, and the pixels they get."""

from __future__ import annotations

from .state import t

# Widths in pixels a figure gets at 1280 × 720 with the sidebar open (a projector's usual mode), to size its token
# labels: the whole main column, half of it, the head view's left column. Wider screens only give more room.
FULL_PX, HALF_PX, HEAD_PX = 880, 430, 520


def heatmap_words() -> dict[str, str]:
    """Return the words of viz.heatmap / viz.layer figures (axis titles, hover, colour bars) in the page's language."""
    return {
        "query": t("explore.query"),
        "key": t("explore.key"),
        "weight": t("explore.weight"),
        "log": t("explore.log_scale"),
        "colorbar": t("explore.colorbar"),
        "colorbar_log": t("explore.colorbar_log"),
        "colorbar_map": t("explore.colorbar_map"),
    }
