"""Every layer × head at a glance: one PNG mosaic of small maps, shown by plotly, where a click opens a head.

The mosaic is one palette PNG (one byte per pixel before compression), not 144 float heatmaps: what reaches
the browser is about one byte per attention value or less, and thumbnails are max-pooled when the input is
longer than a tile, so 512 tokens × 144 heads stays a few hundred kilobytes.
"""

from __future__ import annotations

import base64
import functools
import math
import struct
import zlib
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale, sample_colorscale

try:  # Intel ISA-L's deflate (requirements.txt): ~3.3× faster than zlib level 1 on a mosaic, ~10 % more bytes
    from isal import isal_zlib
except ImportError:  # an install without it draws the same pixels with the standard library's zlib
    isal_zlib = None  # type: ignore[assignment]

from .heatmap import COLORSCALE

# Colour levels for weights (two more palette entries: hidden cells, gaps between tiles). 64 steps of √weight
# look continuous on a thumbnail and compress to ~0.45 bytes per value at 128 tokens, against ~0.8 with 254.
LEVELS = 64
MASKED_INDEX = LEVELS
GAP_INDEX = LEVELS + 1
MASKED_RGB = (150, 150, 150)
GAP_RGB = (200, 200, 200)  # light grey grid lines between tiles
SELECTED = "#e4572e"
# Colour ∝ √weight shared by all tiles; each tile linear to its own maximum; or log10(weight) from 10⁻⁴ to 1;
# "linear": the values are colour levels already, 0–1 for every tile (viz.compare maps Δ onto them).
SCALES = ("sqrt", "map", "log", "linear")
LOG_FLOOR = 1e-4  # the log scale's lowest colour: weights at or below it look the same


def colour_table(colorscale: str = COLORSCALE, levels: int = LEVELS) -> np.ndarray:
    """Return (levels, 3) uint8 RGB: the plotly colour scale sampled at `levels` evenly spaced points."""
    return _colour_table(colorscale, levels).copy()


@functools.lru_cache(maxsize=16)
def _colour_table(colorscale: str, levels: int) -> np.ndarray:
    # Sampling a plotly colour scale is slow pure Python (~1 ms): once per scale, not once per mosaic.
    samples = sample_colorscale(get_colorscale(colorscale), np.linspace(0.0, 1.0, levels).tolist(), colortype="tuple")
    table = np.clip(np.round(np.asarray(samples) * 255.0), 0, 255).astype(np.uint8)
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=16)
def _palette(colorscale: str) -> bytes:
    """Return the PNG palette, RGB entries one after another: the colour levels, then hidden cells and gaps."""
    palette = np.zeros((GAP_INDEX + 1, 3), dtype=np.uint8)
    palette[:LEVELS] = _colour_table(colorscale, LEVELS)
    palette[MASKED_INDEX] = MASKED_RGB
    palette[GAP_INDEX] = GAP_RGB
    return palette.tobytes()


# ISA-L's level for the per-text mosaic (0–3). Measured on real mosaics (bench/NOTES.md, fifth session): level 1
# is as fast as 0 and 8–15 % smaller; 2 saves under 1 % more; 3 is 2× slower for nothing.
ISAL_LEVEL = 1


def palette_png(
    index: np.ndarray, palette: bytes, level: int = 1, strategy: int = zlib.Z_RLE, fast: bool = False
) -> bytes:
    """Return the PNG of a (height, width) uint8 array of palette indices (8 bits a pixel, no row filters).

    fast: deflate with ISA-L at ISAL_LEVEL when it is installed (level and strategy then do not apply), the
    standard library's zlib at level and strategy otherwise. Either way the PNG decodes to the same pixels.

    Written here with zlib, not through PIL: the same pixels and palette colours as PIL's PNG writer at the same
    level and strategy (within a few hundred bytes of its size), without its ~0.7 ms a mosaic of copying the
    image through its buffers and encoder in 64 kB pieces (13.3 ms against 12.6 ms, a 120-token mosaic of the
    bundled model). Only the palette's used entries are written (66, not 256)."""
    h, w = index.shape
    rows = np.empty((h, w + 1), dtype=np.uint8)
    rows[:, 0] = 0  # each row's filter type: None (a palette image's indices do not predict each other)
    rows[:, 1:] = index
    if fast and isal_zlib is not None:
        isal = isal_zlib.compressobj(ISAL_LEVEL, isal_zlib.DEFLATED, 15, 8)
        idat = isal.compress(rows.data) + isal.flush()
    else:
        deflate = zlib.compressobj(level, zlib.DEFLATED, 15, 8, strategy)
        idat = deflate.compress(rows.data) + deflate.flush()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))

    header = struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0)  # 8-bit palette indices, deflate, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"PLTE", palette)
        + chunk(b"IDAT", idat)
        + chunk(b"IEND", b"")
    )


def downsample_factor(n_q: int, n_k: int, max_tile: int) -> int:
    """Return how many tokens one thumbnail pixel covers along each axis (1 when the map fits in max_tile)."""
    return max(1, math.ceil(max(n_q, n_k) / max_tile))


def pool_max(maps: np.ndarray, factor: int) -> np.ndarray:
    """Return the largest value of every factor × factor block: (…, q, k) → (…, ⌈q/f⌉, ⌈k/f⌉).

    Max, not mean: a one-token-wide pattern (previous token, [SEP] column) stays visible after pooling.
    """
    a = np.asarray(maps)
    if factor == 1:
        return a
    # The maximum of `factor` strided views, keys then queries: elementwise and vectorised, ~3× faster than
    # reshape(…, qb, f, kb, f).max(axis=(-3, -1)), whose reduction runs over short, strided axes. A last block
    # shorter than the factor takes the maximum of the tokens it has (no padded copy of the maps).
    cols = a[..., 0::factor].copy()  # (…, q, ⌈k/f⌉)
    for i in range(1, factor):
        part = a[..., i::factor]
        n = part.shape[-1]
        np.maximum(cols[..., :n], part, out=cols[..., :n])
    rows = cols[..., 0::factor, :].copy()  # (…, ⌈q/f⌉, ⌈k/f⌉)
    for i in range(1, factor):
        part = cols[..., i::factor, :]
        n = part.shape[-2]
        np.maximum(rows[..., :n, :], part, out=rows[..., :n, :])
    return rows


PNG_URI = "data:image/png;base64,"


@dataclass(frozen=True)
class Mosaic:
    """A rendered overview: the PNG and where each tile sits in it (pixels)."""

    png: bytes
    layers: int
    heads: int
    tile_h: int  # pixels of one tile (rows = queries)
    tile_w: int  # pixels of one tile (columns = keys)
    gap: int  # pixels between tiles
    factor: int  # tokens per pooled cell along each axis (1 = every token has its own cell)
    upscale: int  # pixels per cell: short inputs are enlarged so tiles stay legible
    n_values: int  # attention values the mosaic stands for (layers · heads · q · k)
    group: int = 1  # heads per key/value group (grouped-query attention): a wider gap after each group
    group_gap: int = 0  # extra pixels between groups

    def tile_x(self, head: int) -> int:
        """Return the left pixel column of head's tiles."""
        return head * (self.tile_w + self.gap) + (head // self.group) * self.group_gap

    @property
    def width(self) -> int:
        return self.tile_x(self.heads - 1) + self.tile_w

    @property
    def height(self) -> int:
        return self.layers * (self.tile_h + self.gap) - self.gap

    @property
    def data_uri(self) -> str:
        return PNG_URI + base64.b64encode(self.png).decode("ascii")

    @property
    def uri_bytes(self) -> int:
        """Return len(self.data_uri) without making it (base64: 4 characters per 3 bytes, the last group padded).
        Explore's note shows it on every rerun; base64 of a 128-token mosaic is ~0.6 MB made and dropped."""
        return len(PNG_URI) + 4 * math.ceil(len(self.png) / 3)

    @property
    def bytes_per_value(self) -> float:
        """Return bytes that reach the browser (the base64 data URI) per attention value."""
        return self.uri_bytes / max(1, self.n_values)

    def tile_center(self, layer: int, head: int) -> tuple[float, float]:
        """Return the (x, y) pixel centre of a tile."""
        return self.tile_x(head) + (self.tile_w - 1) / 2, layer * (self.tile_h + self.gap) + (self.tile_h - 1) / 2

    def tile_at(self, x: float, y: float) -> tuple[int, int]:
        """Return the (layer, head) whose tile is nearest to pixel (x, y)."""
        centers = np.array([self.tile_x(h) + (self.tile_w - 1) / 2 for h in range(self.heads)])
        head = int(np.abs(centers - x).argmin())
        layer = int(np.clip(round((y - (self.tile_h - 1) / 2) / (self.tile_h + self.gap)), 0, self.layers - 1))
        return layer, head


def render_mosaic(
    attentions: np.ndarray,
    keep: np.ndarray | None = None,
    max_tile: int = 128,
    min_tile: int = 48,
    gap: int = 2,
    scale: str = "sqrt",
    colorscale: str = COLORSCALE,
    exclude_first: bool = False,
    group: int = 1,
    small: bool = False,
) -> Mosaic:
    """Return the mosaic PNG of (layers, heads, q_pos, k_pos) maps, one tile per head, rows = layers.

    scale 'sqrt' (default): colour ∝ √weight on 0–1, the same for every tile, so heads compare and a near-uniform
    head looks pale rather than saturated, while weak structure stays visible. scale 'map': each tile linear from
    0 to its own maximum. Maps longer than max_tile tokens are max-pooled; maps shorter than min_tile pixels are
    enlarged by whole pixels. Cells that keep (q_pos, k_pos) hides are drawn grey. scale 'log': log10 of the
    weight from LOG_FLOOR to 1, which shows a head's pattern beside a first-token sink that takes most of it.

    exclude_first: each tile's colours run up to the largest weight on keys after the first (the first key's
    column is drawn at the top colour when it is above that): a decoder's attention sink, which takes 0.3–0.9 of
    every row, no longer washes the rest of the map out. group: heads per key/value group (grouped-query
    attention): the tiles of one group sit together, with a wider gap after each group. small: compress hard (zlib level 9, ~5× smaller for
    enlarged tiles, ~10× slower) for a PNG that is kept, as in a saved notebook.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}: use one of {', '.join(SCALES)}")
    attn = np.asarray(attentions, dtype=np.float32)
    if attn.ndim != 4:
        raise ValueError(f"expected (layers, heads, q_pos, k_pos), got shape {attn.shape}")
    L, H, q, k = attn.shape  # layers, heads, q_pos, k_pos
    if q == 0 or k == 0:
        raise ValueError("no tokens to draw")
    factor = downsample_factor(q, k, max_tile)
    pooled = pool_max(attn, factor)  # (L, H, qb, kb)
    qb, kb = pooled.shape[-2:]
    # One float buffer, worked on in place (the maps can be 10⁷ values: every temporary is a pass over memory).
    if exclude_first and k > 1:
        top = attn[..., 1:].max(axis=(-2, -1), keepdims=True)  # (L, H, 1, 1): the tile's weights past the sink
        top = np.where(top > 0, top, 1.0)
    else:
        top = np.ones((L, H, 1, 1), dtype=np.float32) if scale != "map" else pooled.max(axis=(-2, -1), keepdims=True)
        top = np.where(top > 0, top, 1.0)
    if scale == "sqrt":
        level = pooled / top  # a new array: the maps themselves are never written
        np.clip(level, 0.0, 1.0, out=level)
        np.sqrt(level, out=level)
    elif scale == "log":
        level = np.maximum(pooled / top, LOG_FLOOR)
        np.log10(level, out=level)
        level /= -math.log10(LOG_FLOOR)
        level += 1.0
        np.clip(level, 0.0, 1.0, out=level)
    else:
        level = pooled / top
        np.clip(level, 0.0, 1.0, out=level)
    level *= LEVELS - 1
    np.rint(level, out=level)
    index = level.astype(np.uint8)
    if keep is not None:
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (q, k):
            raise ValueError(f"mask is {keep.shape} but the maps are ({q}, {k})")
        if not keep.all():
            hidden = ~pool_max(keep, factor)  # a cell is grey only when every token pair in it is hidden
            index[..., hidden] = MASKED_INDEX
    upscale = max(1, math.ceil(min_tile / max(qb, kb)))
    if upscale > 1:
        index = index.repeat(upscale, axis=-2).repeat(upscale, axis=-1)
    th, tw = index.shape[-2:]
    # Lay the tiles out as a (layers, heads) grid with a gap right of and below each: one canvas filled with the
    # gap colour, every tile copied into its place once (np.pad then a transposed copy passed over it twice).
    grid = np.full((L, th + gap, H, tw + gap), GAP_INDEX, dtype=np.uint8)
    grid[:, :th, :, :tw] = index.transpose(0, 2, 1, 3)
    canvas = grid.reshape(L * (th + gap), H * (tw + gap))[: L * (th + gap) - gap, : H * (tw + gap) - gap]
    group = group if 1 < group < H and H % group == 0 else 1
    group_gap = max(4, 3 * gap) if group > 1 else 0
    if group > 1:  # widen the gap after every group of heads that share a key/value head
        cols = H * (tw + gap) - gap
        pieces = np.split(canvas, [g * group * (tw + gap) for g in range(1, H // group)], axis=1)
        spacer = np.full((canvas.shape[0], group_gap), GAP_INDEX, dtype=np.uint8)
        canvas = np.concatenate([p for piece in pieces for p in (piece, spacer)][:-1], axis=1)
        assert canvas.shape[1] == cols + (H // group - 1) * group_gap

    # zlib level 1 with the run-length strategy (Z_RLE = 3): as fast as level 1's default strategy and ~6× faster
    # than level 6, and smaller than either (bundled model: 115 tokens 381 kB against 438 kB at level 1, 512
    # tokens 468 kB against 536 kB and 475 kB at level 6): a mosaic is runs of equal colour levels and gaps.
    # The server encodes one per new text, and every byte is then base64'd, serialised and sent. With ISA-L
    # installed (fast=True; requirements.txt) the same pixels deflate ~3.3× faster for ~10 % more bytes at 64–512
    # tokens (bundled model, 120 tokens: 4.4 ms and 462 kB against 13.6 ms and 420 kB) and 2–4× fewer bytes for
    # enlarged short inputs, whose repeated rows its matcher finds (16 tokens: 23 kB against 94 kB).
    # Kept for good (small=True, a notebook's output): level 9's default strategy finds the repeats of enlarged
    # pixels that run-length coding cannot (bundled model, 16 tokens: 20 kB against 95 kB).
    png = palette_png(
        canvas, _palette(colorscale), level=9 if small else 1, strategy=0 if small else zlib.Z_RLE, fast=not small
    )
    return Mosaic(
        png=png,
        layers=L,
        heads=H,
        tile_h=th,
        tile_w=tw,
        gap=gap,
        factor=factor,
        upscale=upscale,
        n_values=L * H * q * k,
        group=group,
        group_gap=group_gap,
    )


def overview_figure(
    mosaic: Mosaic,
    selected: tuple[int, int] | None = None,
    title: str = "",
    hover: str = "layer %{customdata[0]} · head %{customdata[1]}<extra></extra>",
    layer_prefix: str = "L",
    head_prefix: str = "H",
    width_hint: int = 980,
    group_prefix: str = "KV",
    extra: list[list[object]] | None = None,
) -> go.Figure:
    """Return the overview figure: the mosaic as one image, L/H tick labels, and one invisible point per tile.

    The points carry customdata (layer, head), give the hover label and make a tile clickable (plotly selection
    events); hoverdistance −1 makes the nearest tile answer anywhere on the image. extra: more customdata per
    tile (layer-major, appended after layer and head) for the hover text, e.g. the key/value head it reads and
    its share of attention on the first token.
    """
    centers = [
        (mosaic.tile_center(layer, head), layer, head) for layer in range(mosaic.layers) for head in range(mosaic.heads)
    ]
    xs = [c[0][0] for c in centers]
    ys = [c[0][1] for c in centers]
    custom = [[c[1], c[2], *(extra[i] if extra is not None else [])] for i, c in enumerate(centers)]
    head_ticks = [mosaic.tile_center(0, h)[0] for h in range(mosaic.heads)]
    layer_ticks = [mosaic.tile_center(layer, 0)[1] for layer in range(mosaic.layers)]
    shapes: list[dict[str, object]] = []
    if selected is not None:
        layer, head = selected
        if 0 <= layer < mosaic.layers and 0 <= head < mosaic.heads:
            x0 = mosaic.tile_x(head) - 0.5
            y0 = layer * (mosaic.tile_h + mosaic.gap) - 0.5
            shapes.append(
                dict(
                    type="rect",
                    x0=x0 - 1,
                    y0=y0 - 1,
                    x1=x0 + mosaic.tile_w + 1,
                    y1=y0 + mosaic.tile_h + 1,
                    line=dict(color=SELECTED, width=3),
                    layer="above",
                )
            )
    aspect = mosaic.height / max(1, mosaic.width)
    top = 64 if title else 34
    annotations: list[dict[str, object]] = []
    if mosaic.group > 1:  # a bracket over each group of heads that share a key/value head, and its number
        for g in range(mosaic.heads // mosaic.group):
            x0 = mosaic.tile_x(g * mosaic.group) - 0.5
            x1 = mosaic.tile_x((g + 1) * mosaic.group - 1) + mosaic.tile_w - 0.5
            shapes.append(
                dict(
                    type="line", xref="x", yref="paper", x0=x0, x1=x1, y0=1.0, y1=1.0, line=dict(width=3, color="#555")
                )
            )
            annotations.append(
                dict(
                    x=(x0 + x1) / 2,
                    y=1.0,
                    xref="x",
                    yref="paper",
                    yanchor="bottom",
                    text=f"{group_prefix}{g}",
                    showarrow=False,
                    font=dict(size=11, color="#555"),
                )
            )
        top += 18
    layout: dict[str, object] = dict(
        title=dict(text=title, y=0.99, yanchor="top", x=0.0, xanchor="left") if title else None,
        xaxis=dict(
            tickmode="array",
            tickvals=head_ticks,
            ticktext=[f"{head_prefix}{h}" for h in range(mosaic.heads)],
            side="top",
            showgrid=False,
            zeroline=False,
            range=[-0.5, mosaic.width - 0.5],
            constrain="domain",
        ),
        yaxis=dict(
            tickmode="array",
            tickvals=layer_ticks,
            ticktext=[f"{layer_prefix}{v}" for v in range(mosaic.layers)],
            showgrid=False,
            zeroline=False,
            range=[mosaic.height - 0.5, -0.5],
            scaleanchor="x",
            constrain="domain",
        ),
        height=int(min(1400, max(240, top + 10 + width_hint * aspect))),
        margin=dict(l=50, r=10, t=top, b=10),
        hovermode="closest",
        hoverdistance=-1,
        dragmode=False,
        plot_bgcolor="white",
    )
    if shapes:
        layout["shapes"] = shapes
    if annotations:
        layout["annotations"] = annotations
    # One constructor call with everything: building the figure step by step (add_trace, add_shape, then
    # update_layout) sent every key through plotly's update machinery and cost ~5× as much (13 ms against 2.5 ms
    # on the 2-core machine, once per typed text), for the same figure. And plain dicts, not validated: every
    # value here is a plain number, string or list that plotly's validators would only copy back unchanged
    # (tests/viz/test_explore_viz.py checks the JSON against a validated build), which cost ~2.5 ms of the
    # ~3.5 ms. Keys go in plotly's own order (_plotly_order), so the JSON is byte for byte what the validated
    # figure's was. Validation is switched back on for whatever a caller changes afterwards (update_layout, add_shape).
    data: list[dict[str, object]] = [
        dict(type="image", source=mosaic.data_uri, x0=0, y0=0, dx=1, dy=1, hoverinfo="skip", name="overview"),
        dict(
            type="scatter",
            x=xs,
            y=ys,
            customdata=custom,
            mode="markers",
            hovertemplate=hover,
            showlegend=False,
            name="heads",
            marker=dict(size=max(6, min(mosaic.tile_w, 40)), symbol="square", opacity=0.0, color="black"),
        ),
    ]
    fig = go.Figure(
        data=[
            {**_ordered_dict({k: v for k, v in trace.items() if k != "type"}), "type": trace["type"]} for trace in data
        ],
        layout=_ordered_dict({k: v for k, v in layout.items() if v is not None}),
        _validate=False,
    )
    _validate_from_now_on(fig)
    return fig


def _ordered_dict(value: dict[str, object]) -> dict[str, object]:
    return {k: _plotly_order(value[k]) for k in sorted(value)}


def _plotly_order(value: object) -> object:
    """Return value with every dict's keys in the order plotly's validated objects keep them: alphabetical (a
    trace's "type" goes last: overview_figure). Lists of numbers or of lists (coordinates, customdata) are
    returned as they are."""
    if isinstance(value, dict):
        return {k: _plotly_order(value[k]) for k in sorted(value)}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_plotly_order(v) for v in value]
    return value


def _validate_from_now_on(fig: go.Figure) -> None:
    """Switch plotly's validation back on for later changes to a figure built from trusted plain values."""
    fig._validate = True
    fig.layout._validate = True
    for trace in fig.data:
        trace._validate = True
