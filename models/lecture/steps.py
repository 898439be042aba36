"""One head, step by step: the tensors a layer's real forward makes for one query token, with their shapes and
the lines of code that made them.

`head_steps` runs the chosen layer of the loaded model — its own module, on the layer input the model saw —
with the one recorder as the hook (models.attention.Recorder, sites=True): every named point of the attention keeps its
tensor and the file and line that made it. One builder for every family: a step exists when the layer's code
has it (rotation for rotary families, repeat_kv where key/value heads are shared). The code the page shows is
read from the running source (`inspect` / `linecache`), never copied. The self-check compares each step with
the textbook formula recomputed here in float64 from the previous step's tensors, and the layer's map and
output with the model's own result.

`one_vs_many` sets a layer's h heads next to a single head of width h·d_k built from the same queries, keys,
values and W_o, and counts the parameters of both.
"""

from __future__ import annotations

import ast
import copy
import inspect
import linecache
import math
import textwrap
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..analysis.heads import row_entropy
from ..attention import HOOK_POINTS, Options, Recorder, Site, attend_rows, repeat_kv
from ..encoder import Encoder, EncoderOutput
from ..errors import InputError
from ..network import attention_module
from ..rotary import apply_rotary, rotary_tables

# The steps, in order, each with the hook point whose tensor it shows. Optional steps appear only when the
# layer's code makes that tensor (a rotary family's q_rot; a grouped family's shared keys).
STEPS: tuple[tuple[str, str], ...] = (
    ("input", "attn_in"),
    ("project", "q_proj"),
    ("split", "q_split"),
    ("transpose", "q_heads"),
    ("rotate", "q_rot"),
    ("repeat_kv", "keys_rep"),
    ("dot", "scores"),
    ("scale", "scores"),
    ("mask", "masked"),
    ("softmax", "probs"),
    ("weighted_sum", "context"),
    ("concat", "merged"),
    ("w_o", "attn_out"),
)
STEP_KEYS = tuple(key for key, _ in STEPS)
OPTIONAL = {"rotate", "repeat_kv"}
AXES = {key: HOOK_POINTS[point] for key, point in STEPS}
AXES["dot"] = ("batch", "heads", "q_pos", "k_pos")


@dataclass(frozen=True)
class Step:
    """One step: its key, the shape of the whole tensor it makes for this input, and the code that made it."""

    key: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]  # the names of shape's axes
    code: str  # the line of model code that made the tensor (read from the running source)
    where: str  # "models/bert.py:71, SelfAttention.forward"
    function: str  # the whole function that line belongs to (for "show the function")
    ran: bool = True  # False: the line exists but did not run for this input (no mask to apply)


@dataclass
class HeadSteps:
    """The tensors of one head for one query token (numpy float32 on the CPU), and the steps that made them."""

    layer: int
    head: int
    query: int  # q_pos of the chosen query token
    tokens: list[str]
    n_heads: int
    d_model: int
    d_k: int
    steps: list[Step]
    x: np.ndarray  # [seq, d_model] the attention's input
    q_row: np.ndarray  # [heads·d_k] W_q·x of the chosen query, all heads side by side (before view)
    q: np.ndarray  # [seq, d_k] this head's queries (after rotation for rotary families)
    k: np.ndarray  # [seq, d_k] the keys this head reads (its key/value head's)
    v: np.ndarray  # [seq, d_k]
    dots: np.ndarray  # [k_pos] q·k_j for the chosen query, unscaled
    scores: np.ndarray  # [k_pos] q·k_j / √d_k (computed as (q / √d_k)·k, as the model does)
    probs_unscaled: np.ndarray  # [k_pos] softmax(dots) with the mask, i.e. without the /√d_k
    keep: np.ndarray  # [k_pos] bool, True = the query may attend to the key
    masked: np.ndarray  # [k_pos] scores after masked_fill (finfo.min where hidden)
    probs: np.ndarray  # [k_pos] the attention row
    weighted: np.ndarray  # [k_pos, d_k] probs_j · v_j, the rows that the weighted sum adds up
    context: np.ndarray  # [d_k] this head's output for the query
    merged: np.ndarray  # [heads·d_k] all heads' context for the query, concatenated
    output: np.ndarray  # [d_model] after W_o (with its bias), before the residual
    head_share: np.ndarray  # [d_model] this head's part of output: context @ W_o[:, head's columns]ᵀ
    head_map: np.ndarray  # [q_pos, k_pos] this head's whole map
    keep_map: np.ndarray  # [q_pos, k_pos] bool, the mask this layer applied (True = may attend)
    entropy: float  # of the query's attention row (probs), nats
    entropy_unscaled: float  # of the same row without the /√d_k (probs_unscaled), nats
    errors: dict[str, float] = field(default_factory=dict)  # max |difference| per check (see head_steps)
    kv_heads: int = 0  # key/value heads of the layer (== n_heads without grouping)
    kv_head: int = 0  # the key/value head this query head reads: head // (n_heads / kv_heads)
    rotary: bool = False
    q_before: np.ndarray | None = None  # [d_k] rotary: the query's q before rotation
    k_before: np.ndarray | None = None  # [seq, d_k] rotary: this head's keys before rotation
    distance_dots: np.ndarray | None = None  # [distances] rotary: q·k with k moved Δ positions back (see below)
    window: int | None = None  # the layer's sliding window, if it has one

    def step(self, key: str) -> Step:
        return next(s for s in self.steps if s.key == key)

    def has(self, key: str) -> bool:
        return any(s.key == key for s in self.steps)

    @property
    def head_slice(self) -> slice:
        """Return the columns of the concatenated context that belong to this head."""
        return slice(self.head * self.d_k, (self.head + 1) * self.d_k)

    @property
    def group_size(self) -> int:
        return self.n_heads // self.kv_heads if self.kv_heads else 1


def _layer_on_cpu(encoder: Encoder, layer: int) -> nn.Module:
    """Return the layer's module in float32 on the CPU (a copy when the model lives elsewhere or in half)."""
    module = encoder.model.layers[layer]
    if encoder.device.type == "cpu" and encoder.dtype == torch.float32:
        return module
    return copy.deepcopy(module).to(device="cpu", dtype=torch.float32)


def _check_indices(out: EncoderOutput, layer: int, head: int | None = None, query: int | None = None) -> None:
    if out.is_batch:
        raise InputError("one head step by step takes a single-text result (use encode, or item(i) of a batch)")
    if out.layer_inputs is None:
        raise InputError("the steps need the encoder's internals: encode(..., internals=True)")
    if not 0 <= layer < out.n_layers:
        raise InputError(f"layer {layer} does not exist: this model has layers 0–{out.n_layers - 1}")
    if head is not None and not 0 <= head < out.n_heads:
        raise InputError(f"head {head} does not exist: this model has heads 0–{out.n_heads - 1}")
    if query is not None and not 0 <= query < out.seq:
        raise InputError(f"query position {query} does not exist: this input has positions 0–{out.seq - 1}")


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy().copy()


def _where(site: Site) -> str:
    """Return "models/bert.py:71, forward" for a site (the path from the repository's models/ folder)."""
    path = site.filename.replace("\\", "/")
    short = path[path.rfind("/models/") + 1 :] if "/models/" in path else path.rsplit("/", 1)[-1]
    return f"{short}:{site.lineno}, {site.function}"


def _function_source(site: Site) -> str:
    """Return the source of the innermost function that holds the site's line, read from the file that ran."""
    text = "".join(linecache.getlines(site.filename))
    best: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            if node.lineno <= site.lineno <= node.end_lineno and (best is None or node.lineno > best.lineno):
                best = node
    if best is None:
        return _statement(site)
    start = min([best.lineno, *(d.lineno for d in getattr(best, "decorator_list", []))])
    lines = text.splitlines()[start - 1 : getattr(best, "end_lineno", start)]
    return textwrap.dedent("\n".join(lines))


def _statement(site: Site) -> str:
    """Return the statement at the site's line (continued over following lines while brackets are open)."""
    lines = linecache.getlines(site.filename)
    i = site.lineno - 1
    text = lines[i].strip()
    depth = text.count("(") - text.count(")") + text.count("[") - text.count("]")
    while depth > 0 and i + 1 < len(lines):
        i += 1
        more = lines[i].strip()
        text += " " + more
        depth += more.count("(") - more.count(")") + more.count("[") - more.count("]")
    return text


def _static_site(fn: object, point: str) -> Site:
    """Return the line of `fn`'s source that hooks `point` (for a line that did not run on this input)."""
    lines, first = inspect.getsourcelines(fn)  # type: ignore[arg-type]  # a function
    for i, line in enumerate(lines):
        if f'hook("{point}"' in line:
            return Site(inspect.getsourcefile(fn) or "", first + i, getattr(fn, "__name__", ""))  # type: ignore[arg-type]
    raise LookupError(point)


def _softmax64(logits: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Return the masked softmax of the last axis in float64: the textbook formula, independent of torch."""
    z = np.where(keep, logits.astype(np.float64), -np.inf)
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


@torch.no_grad()
def run_layer(encoder: Encoder, out: EncoderOutput, layer: int) -> tuple[Recorder, torch.Tensor, torch.Tensor]:
    """Run `layer`'s own forward on the layer input the model saw, keeping every named tensor and its line.

    Returns (the recorder, the layer's output (1, seq, d_model), the mask it applied (q_pos, k_pos)).
    """
    _check_indices(out, layer)
    assert out.layer_inputs is not None  # _check_indices raised otherwise
    module = _layer_on_cpu(encoder, layer)
    ids = out.input_ids[None]  # (1, seq)
    # The mask the model applied (None when it hid nothing, as the model then had none): its causal part the model
    # makes again itself, and ANDs in.
    keep = None if bool(out.keep.all()) else out.keep.to(torch.bool)[None, None]  # (1, 1, q_pos, k_pos)
    # The model's own per-forward preparation (its masks per kind of layer, rotary tables), on the CPU.
    inputs = encoder.model.prepare(ids, keep, 0, None, None)
    rec = Recorder(names=None, layers=[layer], sites=True)  # every named point of this layer, and its line
    y, _ = module(out.layer_inputs[layer].unsqueeze(0), inputs.keeps[layer], Options(hook=rec.at(layer)), inputs)
    applied = inputs.keeps[layer]
    T = out.seq
    mask = torch.ones(T, T, dtype=torch.bool) if applied is None else torch.broadcast_to(applied, (1, 1, T, T))[0, 0]
    return rec, y, mask


@torch.no_grad()
def head_steps(encoder: Encoder, out: EncoderOutput, layer: int, head: int, query: int) -> HeadSteps:
    """Return every tensor of `head` in `layer` for query position `query`, from the layer's real forward.

    out: the model's result for one text with internals=True (it supplies the layer input and the mask).
    errors: "attention" (this head's map against the model's), "formula" (the probs against softmax(q·kᵀ·scale)
    with the layer's own scale (1/√d_k for most checkpoints), recomputed in float64 from the recorded q and k), "weighted_sum" (the context against Σ_j p_j v_j in float64),
    "next_layer" (the layer's output against the model's next layer input), and queries / keys / values / context
    against the internals the model recorded.
    """
    _check_indices(out, layer, head, query)
    layer_inputs = out.layer_inputs
    assert layer_inputs is not None  # _check_indices raised otherwise
    rec, y, keep_map = run_layer(encoder, out, layer)
    caps = encoder.capabilities
    t, sites = rec.tensors[layer], rec.where[layer]
    hd, i = head, query
    n_heads = int(t["queries"].shape[1])
    kv_heads = int(t["keys"].shape[1])
    g = hd // (n_heads // kv_heads)  # the key/value head this query head reads
    d_k = int(t["queries"].shape[-1])
    # The layer's own scale, as its forward applies it: 1/√d_k for most checkpoints, but a GPT-2 saved with
    # scale_attn_weights=False has 1 and scale_attn_by_inverse_layer_idx adds 1/(layer + 1). Never re-derived here.
    scale = layer_scale(encoder, layer)

    steps: list[Step] = []
    for key, point in STEPS:
        if point not in t:
            if key in OPTIONAL:
                continue
            if key == "mask":  # no mask for this input: the line is there, it did not run
                site = _static_site(attend_rows, "masked")
                steps.append(
                    Step(
                        key,
                        tuple(t["scores"].shape),
                        AXES[key],
                        _statement(site),
                        _where(site),
                        _function_source(site),
                        False,
                    )
                )
                continue
            raise LookupError(f"the layer's forward made no {point!r}")
        if key == "repeat_kv" and kv_heads == n_heads:
            continue  # repeat_kv returned the keys as they were: nothing shared
        site = sites[point]
        steps.append(
            Step(key, tuple(t[point].shape), AXES[key], _statement(site), _where(site), _function_source(site))
        )

    q = t["queries"][0, hd]  # (seq, d_k): after rotation where the family rotates
    k = t["keys"][0, g]  # this head's keys: its key/value head's
    v = t["values"][0, g]
    scores = t["scores"][0, hd]  # (q_pos, k_pos)
    probs = t["probs"][0, hd]
    masked = t["masked"][0, hd] if "masked" in t else scores
    context = t["context"][0, hd]  # (seq, d_k)
    dots = scores / scale  # q·k before the scale (the model scales q first: the same logits, undone)
    keep_np = keep_map.numpy().astype(bool)
    unscaled = _softmax64(dots.numpy(), keep_np).astype(np.float32)

    # The self-check: each step against the formula, in float64, from the recorded tensors alone.
    formula = _softmax64((q.double() @ k.double().T).numpy() * scale, keep_np)
    errors = {
        "attention": float((probs - out.attentions[layer, hd]).abs().max()),
        "formula": float(np.abs(formula - probs.numpy()).max()),
        "weighted_sum": float(np.abs(probs.double().numpy() @ v.double().numpy() - context.numpy()).max()),
        "next_layer": float((y[0] - layer_inputs[layer + 1]).abs().max()),
    }
    for name, ours in (
        ("queries", t["queries"]),
        ("keys", t["keys"]),
        ("values", t["values"]),
        ("context", t["context"]),
    ):
        theirs = getattr(out, name)
        if theirs is not None:
            errors[name] = float((ours[0] - theirs[layer]).abs().max())

    w_o = _projection(encoder, layer, "o").weight  # (d_model, heads·d_k)
    cols = slice(hd * d_k, (hd + 1) * d_k)
    rotary = "q_rot" in t
    distance = None
    q_before = k_before = None
    if rotary:
        q_before, k_before, distance = _rotary_views(encoder, t, hd, g, i, scale)
    return HeadSteps(
        layer=layer,
        head=hd,
        query=i,
        tokens=list(out.display_tokens or out.tokens),
        n_heads=n_heads,
        d_model=int(t["attn_in"].shape[-1]),
        d_k=d_k,
        steps=steps,
        x=_np(t["attn_in"][0]),
        q_row=_np(t["q_proj"][0, i]),
        q=_np(q),
        k=_np(k),
        v=_np(v),
        dots=_np(dots[i]),
        scores=_np(scores[i]),
        probs_unscaled=unscaled[i].copy(),
        keep=keep_np[i].copy(),
        masked=_np(masked[i]),
        probs=_np(probs[i]),
        weighted=_np(probs[i, :, None] * v),
        context=_np(context[i]),
        merged=_np(t["merged"][0, i]),
        output=_np(t["attn_out"][0, i]),
        head_share=_np(context[i] @ w_o[:, cols].T),
        head_map=_np(probs),
        keep_map=keep_np,
        entropy=float(row_entropy(probs[i])),
        entropy_unscaled=float(row_entropy(torch.from_numpy(unscaled[i]))),
        errors=errors,
        kv_heads=kv_heads,
        kv_head=g,
        rotary=rotary,
        q_before=q_before,
        k_before=k_before,
        distance_dots=distance,
        window=caps.window(layer),
    )


DISTANCES = 64  # how far back the rotary demonstration moves a key


def layer_scale(encoder: Encoder, layer: int) -> float:
    """Return the scale `layer`'s attention multiplies q·k by: the module's own constant, which its forward uses."""
    return float(attention_module(encoder.model.layers[layer]).scale)


def _rotary_views(
    encoder: Encoder, t: dict[str, torch.Tensor], hd: int, g: int, i: int, scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (the query's q before rotation (d_k,), this head's keys before rotation (seq, d_k), q·k·scale with
    the query's own key content placed Δ = 0 … DISTANCES − 1 positions back, rotated by the model's own tables).

    Rotation makes q·k depend on the distance between the positions, not on where the pair sits: the curve is the
    same whatever position the query has.
    """
    q0 = t["q_heads"][0, hd, i]  # (d_k,) before rotation
    k0 = t["k_heads"][0, g]  # (seq, d_k) before rotation
    d_k = q0.shape[-1]
    p = DISTANCES  # put the query at position p, its key content at p − Δ
    pos = torch.arange(p + 1)
    cos, sin = rotary_tables(encoder.config, pos)  # (1, p + 1, d_k)
    q_rot = apply_rotary(q0.view(1, 1, 1, d_k), cos[:, p : p + 1], sin[:, p : p + 1])[0, 0, 0]
    k_rot = apply_rotary(k0[i].view(1, 1, 1, d_k).expand(1, 1, p + 1, d_k), cos, sin)[0, 0]  # (p + 1, d_k)
    dots = (k_rot.flip(0)[:DISTANCES] @ q_rot) * scale  # Δ = 0, 1, …, scaled as the layer scales
    return _np(q0), _np(k0), _np(dots)


def _projection(encoder: Encoder, layer: int, which: str) -> nn.Linear:
    """Return W_q, W_k, W_v or W_o of a layer as a Linear (the family's attention module names them)."""
    module = encoder.model.layers[layer]
    for sub in module.modules():
        projections = getattr(sub, "projections", None)
        if callable(projections):
            return projections()[which]
    raise LookupError("this layer has no attention projections")


@dataclass
class OneVsMany:
    """A layer as its h heads and as one head of width h·d_k with the same tensors; parameters of both."""

    layer: int
    n_heads: int
    d_model: int
    d_k: int
    maps: np.ndarray  # [heads, q_pos, k_pos] the model's heads
    single_map: np.ndarray  # [q_pos, k_pos] one head of width h·d_k: softmax(Q·Kᵀ/√(h·d_k)) with the same Q and K
    params_heads: int  # counted from the tensors: W_q, W_k, W_v (and biases) + W_o
    params_single: int  # the same tensors read as one head
    params_per_head: int  # W_q rows of one head + the W_k, W_v rows of the key/value head it reads (and biases)
    params_w_o: int  # W_o's weight and bias
    output_change: float  # ‖single-head output − h-head output‖ / ‖h-head output‖, after W_o, all tokens
    single_entropy: float  # mean row entropy of the single head's map, nats
    heads_entropy: np.ndarray  # [heads] mean row entropy of each head's map, nats
    kv_heads: int = 0


def _count(linear: nn.Linear, rows: slice = slice(None)) -> int:
    return linear.weight[rows].numel() + (linear.bias[rows].numel() if linear.bias is not None else 0)


@torch.no_grad()
def one_vs_many(encoder: Encoder, out: EncoderOutput, layer: int) -> OneVsMany:
    """Return `layer` as its h heads and as a single head of width h·d_k built from the same Q, K, V and W_o.

    The single head computes softmax(Q·Kᵀ/√(h·d_k))·V with the heads side by side: its logits are the sum of the
    h heads' unscaled dot products, so one softmax replaces h of them. Not what the model was trained with:
    a what-if with the same parameters, to show that splitting into heads costs no parameters. (With grouped
    key/value heads the single head reads each shared key once per query head: the same tensors.)
    """
    rec, _, keep_map = run_layer(encoder, out, layer)
    t = rec.tensors[layer]
    q = t["queries"][0]  # (nh, T, d_k)
    n_heads, T, d_k = q.shape
    kv_heads = int(t["keys"].shape[1])
    k = repeat_kv(t["keys"], n_heads // kv_heads)[0]  # (nh, T, d_k)
    v = repeat_kv(t["values"], n_heads // kv_heads)[0]
    Q, K, V = (x.transpose(0, 1).reshape(T, n_heads * d_k) for x in (q, k, v))  # one head of width h·d_k
    scores = (Q @ K.T) / math.sqrt(n_heads * d_k)  # (T, T)
    single = torch.softmax(scores.masked_fill(~keep_map, torch.finfo(scores.dtype).min), dim=-1)
    W = {name: _projection(encoder, layer, name) for name in "qkvo"}
    W_o = W["o"]
    out_single = W_o(single @ V)  # (T, d_model)
    out_heads = t["attn_out"][0]
    per_head = _count(W["q"], slice(0, d_k)) + _count(W["k"], slice(0, d_k)) + _count(W["v"], slice(0, d_k))
    params = sum(_count(W[n]) for n in "qkvo")
    maps = out.attentions[layer].float()
    return OneVsMany(
        layer=layer,
        n_heads=int(n_heads),
        d_model=int(t["attn_in"].shape[-1]),
        d_k=int(d_k),
        maps=_np(maps),
        single_map=_np(single),
        params_heads=params,
        params_single=params,
        params_per_head=per_head,
        params_w_o=_count(W_o),
        output_change=float((out_single - out_heads).norm() / out_heads.norm().clamp_min(1e-12)),
        single_entropy=float(row_entropy(single).mean(-1)),
        heads_entropy=_np(row_entropy(maps).mean(-1)),
        kv_heads=kv_heads,
    )
