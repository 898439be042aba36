"""Why here: one attention score split into exact parts (docs/METRICS.md, "Why here").

The score of query i on key j in head h of layer L is the model's pre-softmax logit s = (q_i · scale) · k_j, after
rotation, before the mask. It is a sum three ways, each exact:

- by dimension: s = Σ_d scale · q_i[d] · k_j[d], one term per dimension of the head (d_k terms);
- by rotary frequency (rotary models): the two dimensions one frequency turns together (models.rotary.rotary_pairs)
  summed, one term per pair;
- by component pair: with each token's normalisation scale frozen (RMSNorm: its RMS; LayerNorm: its mean and std)
  every norm is affine, so the residual stream at the layer's input is a sum of parts — the embeddings, each
  earlier head's context through its slice of the output projection, each output projection's bias, each MLP, and
  the constant terms (norm and projection biases) — and q_i and k_j are sums of those parts' images. The score is
  then Σ_a Σ_b scale · q_i^a · k_j^b: a (components × components) table.

The parts are recorded by running the model's own modules through `Network.run_with_cache` (attention hook points,
the modules a family names in `block_parts` watched), on the text as the model reads it, up to layer L and no
further, keeping the two tokens' rows only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .. import settings
from ..encoder import Encoder
from ..errors import InputError
from ..masks import predicates
from ..masks.predicates import Predicate
from ..network import ForwardOptions, FrozenNorm, freeze_norm
from ..rotary import apply_rotary, rope_frequencies, rotary_pairs

TOP = 10  # component pairs listed in `top`


@dataclass
class Explanation:
    """One attention score and its exact parts. Arrays are float64 numpy."""

    layer: int
    head: int
    query: int
    key: int
    tokens: list[str]  # display tokens of the text
    score: float  # the model's pre-softmax logit: (q_i · scale) · k_j, after rotation, before the mask
    weight: float | None  # the attention weight the cell got (None when the maps were not kept whole)
    visible: bool  # the layer's mask lets query i see key j
    scale: float  # the layer's own scale (1/√d_k; GPT-2 checkpoints may add 1/(layer + 1))
    kv_head: int  # the key/value head the query head reads
    by_dimension: np.ndarray  # (d_k,)
    by_frequency: np.ndarray | None  # (d_k / 2,) rotary models, in the family's pairing; None otherwise
    pairs: np.ndarray | None  # (d_k / 2, 2) the dimensions of each rotary pair
    frequencies: np.ndarray | None  # (d_k / 2,) each pair's angle per token (radians), θ_i
    components: list[str] = field(default_factory=list)  # the residual stream's parts at the layer's input
    table: np.ndarray | None = None  # (n, n): row = the query's part, column = the key's part; sums to score
    query_totals: np.ndarray | None = None  # (n,): each query-side part against the whole key (row sums)
    key_totals: np.ndarray | None = None  # (n,): the whole query against each key-side part (column sums)
    top: list[tuple[str, str, float]] = field(default_factory=list)  # the TOP largest |cells|
    refused: str | None = None  # why the component table was not made (over budget), else None
    stream_error: float = 0.0  # max |Σ parts − the stream the layer read| at the two tokens (a self-check)

    def share(self, value: float) -> float:
        """Return value as a fraction of the score (signed; 0 when the score is 0)."""
        return value / self.score if self.score else 0.0

    def to_json(self) -> dict[str, Any]:
        """Return the CLI's JSON document (`python -m models explain --json`)."""
        doc: dict[str, Any] = {
            "layer": self.layer,
            "head": self.head,
            "query": self.query,
            "key": self.key,
            "query_token": self.tokens[self.query],
            "key_token": self.tokens[self.key],
            "score": self.score,
            "weight": self.weight,
            "visible": self.visible,
            "scale": self.scale,
            "kv_head": self.kv_head,
            "by_dimension": self.by_dimension.tolist(),
            "by_frequency": None if self.by_frequency is None else self.by_frequency.tolist(),
            "frequencies": None if self.frequencies is None else self.frequencies.tolist(),
        }
        if self.table is None:
            doc["by_component"] = None
            doc["refused"] = self.refused
        else:
            assert self.query_totals is not None and self.key_totals is not None
            doc["by_component"] = {
                "query_side": list(self.components),
                "key_side": list(self.components),
                "table": self.table.tolist(),
                "query_totals": self.query_totals.tolist(),
                "key_totals": self.key_totals.tolist(),
            }
            doc["top"] = [[a, b, v] for a, b, v in self.top]
        return doc


def component_names(n_layers_before: int, n_heads: int, attn_bias: bool) -> list[str]:
    """Return the parts of the stream at the input of layer `n_layers_before`, in the table's order."""
    names = ["embed"]
    for layer in range(n_layers_before):
        names += [f"L{layer}.H{h}" for h in range(n_heads)]
        if attn_bias:
            names.append(f"L{layer}.attn_bias")
        names.append(f"L{layer}.mlp")
    return names + ["bias"]


def count_components(enc: Encoder, layer: int) -> int:
    """Return how many parts a side of layer's table has (budget `explain_components`, checked before the forward)."""
    net = enc.model
    has_bias = net.block_parts(0).attention.projections()["o"].bias is not None
    return len(component_names(layer, enc.config.n_heads, has_bias))


def _check(enc: Encoder, n_tokens: int, layer: int, head: int, query: int, key: int) -> None:
    c = enc.config
    for name, value, n in (("layer", layer, c.n_layers), ("head", head, c.n_heads)):
        if not 0 <= value < n:
            raise InputError(f"{name} {value} is outside 0 … {n - 1} ({enc.name} has {n})")
    for name, value in (("query", query), ("key", key)):
        if not 0 <= value < n_tokens:
            raise InputError(f"{name} {value} is outside 0 … {n_tokens - 1} (the text has {n_tokens} tokens)")


@torch.inference_mode()
def explain(
    enc: Encoder,
    text: str,
    layer: int,
    head: int,
    query: int,
    key: int,
    text_b: str | None = None,
    components: bool = True,
    mask: str | None = None,
) -> Explanation:
    """Return the score of (layer, head, query → key) on `text` and its exact parts.

    mask: the page's mask by name (None: the model's own), as Encoder.encode takes it: the parts are those of the
    forward the maps come from. query and key count tokens from 0 (negative: from the end, −1 the last). components=False skips the component table (the budget `explain_components` is checked otherwise: above it
    `refused` says why and the rest still comes). Raises InputError for out-of-range indices.
    """
    batch = enc.tokenize([text], None if text_b is None else [text_b])
    ids = batch.input_ids.to(enc.device)
    types = batch.token_type_ids.to(enc.device)
    T = ids.shape[1]
    query, key = (query + T if query < 0 else query), (key + T if key < 0 else key)  # −1: the last token
    _check(enc, T, layer, head, query, key)
    keep, _ = enc.user_mask(mask, T)  # a predicate stays one: a long text's rows are made in blocks
    net, cfg, caps = enc.model, enc.config, enc.capabilities
    n_heads, d_k = cfg.n_heads, cfg.d_k
    g = caps.kv_head(head) if caps.grouped else head  # the key/value head query head `head` reads
    parts = [net.block_parts(i) for i in range(layer + 1)]
    has_bias = parts[0].attention.projections()["o"].bias is not None
    names = component_names(layer, n_heads, has_bias)
    refused = None
    if components:
        if len(names) > settings.limit("explain_components"):
            refused = settings.over_budget(
                "explain_components",
                len(names),
                f"the component table of layer {layer} (embeddings, {layer} layers × {n_heads} heads, MLPs, biases)",
            )
    want_table = components and refused is None

    # One forward through run_with_cache, up to layer L: its queries, keys and scores, and (for the table) what
    # each earlier layer wrote to the stream, kept at the two tokens only (rows) and from this thread only.
    emb_norm = net.embedding_norm()
    watch: dict[str, tuple[torch.nn.Module, str]] = {}
    if want_table:
        if emb_norm is not None:
            watch["emb_in"] = (emb_norm, "input")
        for i, p in enumerate(parts[:layer]):
            watch[f"mlp{i}"] = (p.mlp, "output")
            for n_i, norm in enumerate(p.post_norms):
                watch[f"post{i}.{n_i}"] = (norm, "input")
    res, rec = net.run_with_cache(
        ids,
        types,
        keep,
        names=("queries", "keys", "scores", "merged") if want_table else ("queries", "keys", "scores"),
        layers=range(layer + 1) if want_table else [layer],
        rows=[query, key],
        watch=watch,
        options=ForwardOptions(stop_at_layer=layer),
    )
    probs = res.attentions  # layer L's (1, heads, T, T); None for a long text (its rows ran in blocks)
    got = rec.tensors[layer]  # queries, keys, scores: rows [query, key] of each sequence axis
    kept = {f"x{i}": x[0].double() for i, x in enumerate(rec.hidden_states)}  # (2, d_model): each layer's input
    kept.update({name: t[0].double() for name, t in rec.modules.items()})
    if want_table:
        kept.update({f"merged{i}": rec["merged", i][0].double() for i in range(layer)})

    attn = parts[layer].attention
    scale = float(attn.scale)
    q = got["queries"][0, head, 0].double()  # (d_k,) after rotation, at the query (row 0 of the kept two)
    k = got["keys"][0, g, 1].double()  # at the key (row 1)
    by_dim = (q * scale) * k  # (d_k,)
    if "scores" in got:
        score = float(got["scores"][0, head, 0, 1])
    else:  # blocks: the same product the blocks compute
        score = float(torch.matmul(got["queries"][0, head, 0] * scale, got["keys"][0, g, 1]))
    weight = None if probs is None else float(probs[0, head, query, key])
    window = caps.window(layer)
    cell = ((query, query + 1), (key, key + 1))  # the masks are made for this one cell
    visible = not caps.causal or bool(predicates.materialise(predicates.causal_window(window), *cell))
    if isinstance(keep, Predicate):  # the page's mask as a predicate: made for this one cell, every head
        visible &= bool(predicates.materialise(keep, *cell, heads=n_heads).all())
    elif keep is not None:  # the page's mask: (…, q_pos or 1, k_pos or 1)
        visible &= bool(keep[..., query if keep.shape[-2] > 1 else 0, key if keep.shape[-1] > 1 else 0].all())

    by_freq = pairs = freqs = None
    if caps.rotary:
        pairs_t = rotary_pairs(d_k)
        by_freq = by_dim[pairs_t].sum(-1).cpu().numpy()
        pairs = pairs_t.numpy()
        freqs = rope_frequencies(cfg).double().numpy()

    out = Explanation(
        layer=layer,
        head=head,
        query=query,
        key=key,
        tokens=_display(enc, batch.tokens[0]),
        score=score,
        weight=weight,
        visible=visible,
        scale=scale,
        kv_head=g,
        by_dimension=by_dim.cpu().numpy(),
        by_frequency=by_freq,
        pairs=pairs,
        frequencies=freqs,
        refused=refused,
    )
    if not want_table:
        return out

    stream = _stream(kept, net, parts, layer, n_heads, d_k, emb_norm is not None)
    actual = kept[f"x{layer}"]  # (2, d_model): the stream layer L read, at the query and the key
    out.stream_error = float((sum(stream.values()) - actual).abs().max())
    qs, ks = _sides(stream, kept[f"x{layer}"], net, parts[layer], head, g, d_k, query, key, scale, enc.device)
    table = qs @ ks.T  # (n, n)
    order = list(stream)  # embed, L0.H0 …, bias
    assert order == names, (order, names)
    tab = table.cpu().numpy()
    out.components = names
    out.table = tab
    out.query_totals = tab.sum(1)
    out.key_totals = tab.sum(0)
    flat = np.argsort(-np.abs(tab), axis=None)[:TOP]
    out.top = [
        (names[int(a)], names[int(b)], float(tab[a, b]))
        for a, b in zip(*np.unravel_index(flat, tab.shape), strict=True)
    ]
    return out


def _display(enc: Encoder, tokens: list[str]) -> list[str]:
    from ..tokens import display_tokens

    return display_tokens(tokens, enc.capabilities.token_display)


def _stream(
    kept: dict[str, torch.Tensor],
    net: Any,
    parts: list[Any],
    layer: int,
    n_heads: int,
    d_k: int,
    emb_norm: bool,
) -> dict[str, torch.Tensor]:
    """Return the parts of the residual stream at layer's input, at the two rows: name → (2, d_model) float64.

    Every LayerNorm on the way (the embeddings', a post-LN block's two) is applied part by part with its frozen
    statistics (FrozenNorm); its β joins "bias".
    """
    stream: dict[str, torch.Tensor] = {}
    bias: torch.Tensor = torch.zeros_like(kept["x0"])

    def through(norm: Any, x: torch.Tensor) -> None:
        nonlocal bias
        fn: FrozenNorm = freeze_norm(norm, x)
        for name in stream:
            stream[name] = fn.part(stream[name])
        bias = fn.part(bias) + (fn.bias if fn.bias is not None else 0.0)

    if emb_norm:
        stream["embed"] = kept["emb_in"]  # word + position (+ token type) embeddings, before their LayerNorm
        through(net.embedding_norm(), kept["emb_in"])
    else:
        stream["embed"] = kept["x0"]  # token (+ position) embeddings: what the first layer reads
    for i in range(layer):
        p = parts[i]
        w_o = p.attention.projections()["o"]
        weight = w_o.weight.double()  # (d_model, heads·d_k)
        merged = kept[f"merged{i}"]  # (2, heads·d_k)
        for h in range(n_heads):
            cols = slice(h * d_k, (h + 1) * d_k)
            stream[f"L{i}.H{h}"] = merged[:, cols] @ weight[:, cols].T
        if w_o.bias is not None:
            stream[f"L{i}.attn_bias"] = w_o.bias.double().expand_as(bias).clone()
        if p.post_norms:
            through(p.post_norms[0], kept[f"post{i}.0"])
        stream[f"L{i}.mlp"] = kept[f"mlp{i}"]
        if len(p.post_norms) > 1:
            through(p.post_norms[1], kept[f"post{i}.1"])
    stream["bias"] = bias
    return stream


def _sides(
    stream: dict[str, torch.Tensor],
    x_in: torch.Tensor,
    net: Any,
    p: Any,
    head: int,
    g: int,
    d_k: int,
    query: int,
    key: int,
    scale: float,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (n, d_k) float64 each: every part's image in the query (× scale) and in the key, after rotation."""
    names = list(stream)
    x = torch.stack([stream[n] for n in names])  # (n, 2, d_model)
    bias_at = names.index("bias")
    extra = torch.zeros_like(x)
    if p.attn_norm is not None:
        fn = freeze_norm(p.attn_norm, x_in)
        x = fn.part(x)  # gain (2, d) broadcasts over the parts
        if fn.bias is not None:
            extra[bias_at] = fn.bias.double().expand_as(x[bias_at])
    x = x + extra
    proj = p.attention.projections()
    sides = []
    for which, idx, row, pos in (("q", head, 0, query), ("k", g, 1, key)):
        lin = proj[which]
        w = lin.weight.double()[idx * d_k : (idx + 1) * d_k]  # (d_k, d_model)
        y = x[:, row] @ w.T  # (n, d_k)
        if lin.bias is not None:
            y[bias_at] += lin.bias.double()[idx * d_k : (idx + 1) * d_k]
        if p.qk_norms is not None:
            norm = p.qk_norms[row]
            y = freeze_norm(norm, y.sum(0)).part(y)
        cs = net.rotary(torch.tensor([pos], device=device))
        if cs is not None:
            cos, sin = cs  # (1, 1, d_k)
            y = apply_rotary(y[None, :, None, :], cos.double(), sin.double())[0, :, 0, :]
        sides.append(y * scale if which == "q" else y)
    return sides[0], sides[1]
