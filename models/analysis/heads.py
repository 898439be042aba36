"""Per-head statistics, pattern labels and redundancy between heads, exactly as `docs/METRICS.md` defines them.

One head's map A is (q_pos, k_pos) with rows that sum to 1. Padded query rows (and padded keys) are dropped
before any statistic; averages are over query rows; logs are natural. Everything here works on batches
(a leading `batch` axis, padded to the longest sentence) so that a single input and a corpus go through the
same code: a single input is a batch of one. Heads are numbered layer-major: index = layer · heads + head.

Sources: Clark et al. 2019 ("What Does BERT Look At?", and its code clarkkev/attention-analysis) for the
statistics, thresholds and the Jensen–Shannon divergence; Kovaleva et al. 2019 for the pattern families and
cosine similarity; Kornblith et al. 2019 for linear CKA.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from .. import settings
from ..encoder import EncoderOutput
from ..maps import ROW_BLOCK, OnDemandMaps, pool_block, pool_factor
from ..tokens import byte_level_to_text, display_tokens

# Label thresholds (Clark et al.): a share above these makes the head that kind of head.
THRESHOLDS: dict[str, float] = {
    "prev": 0.5,  # mean attention to the token on the left
    "next": 0.5,  # … on the right
    "cls": 0.6,  # mean attention to [CLS]
    "sep": 0.6,  # … to all [SEP] together
    "punct": 0.6,  # … to punctuation
    "block": 0.8,  # sentence pairs: share each sentence keeps inside itself (the smaller of the two)
    "broad": 0.9,  # normalised entropy (entropy / ln n); 1 = uniform
    "sink": 0.6,  # causal models: mean attention to the first token from the rows after it (an attention sink)
    "induction": 0.4,  # decoders: induction score on a repeated random sequence (models.analysis.induction)
}
# Checked in this order; the first that holds names the head. Diagonal patterns before vertical ones before
# block and broad, as Kovaleva et al.'s families go from the most specific to "heterogeneous".
LABELS = ("prev", "next", "cls", "sep", "punct", "block", "broad", "heterogeneous")
# A decoder's: no [CLS]/[SEP], no pairs, no next token (the causal mask hides it); the first token and
# induction instead (Olsson et al. 2022). Induction before previous-token: an induction head is the more specific.
DECODER_LABELS = ("induction", "prev", "sink", "punct", "broad", "heterogeneous")
# The statistics a table shows, per family.
ENCODER_COLUMNS = ("cls", "sep", "punct", "self", "prev", "next", "confidence")
DECODER_COLUMNS = ("first", "punct", "self", "prev", "confidence")
# Per-head statistics, in the order tables show them. Shares are fractions in [0, 1]; entropy in nats;
# distance in tokens.
STATS = (
    "entropy",
    "entropy_norm",
    "cls",
    "sep",
    "punct",
    "self",
    "prev",
    "next",
    "confidence",
    "distance",
    "block",
    "first",
    "entropy_norm_causal",
)
SMOOTH = 0.001  # Clark et al.'s smoothing for JS: P = (1 − 0.001)·A + 0.001/n
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"})
# Elements of one piece of the JS kernel's work (pairs × cells): 4 MB of float32 on a CPU.
JS_CHUNK_CPU = 1 << 20
JS_CHUNK_GPU = 1 << 26


def head_names(n_layers: int, n_heads: int) -> list[str]:
    """Return 'L{layer}H{head}' (0-based) for every head, layer-major."""
    return [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]


def is_punct(token: str, specials: frozenset[str] | set[str] = SPECIAL_TOKENS) -> bool:
    """Return whether a token is made only of non-alphanumeric characters (`.`, `,`, `，`, `—`); specials are not."""
    if token in specials:
        return False
    body = token[2:] if token.startswith("##") and len(token) > 2 else token  # a WordPiece continuation
    return bool(body) and not any(ch.isalnum() for ch in body)


@dataclass
class Roles:
    """What each position is, for a batch: all (batch, seq) tensors on the device of the maps."""

    real: torch.Tensor  # bool, True = a real token (not [PAD])
    sep: torch.Tensor  # bool, [SEP]
    punct: torch.Tensor  # bool, punctuation (special tokens excluded)
    segment: torch.Tensor  # long, token type: 0 = sentence A, 1 = sentence B
    pair: torch.Tensor  # (batch,) bool, True when the item is a sentence pair

    @classmethod
    def of(
        cls,
        tokens: Sequence[Sequence[str]],
        real: torch.Tensor,
        token_type_ids: torch.Tensor,
        device: torch.device | str | None = None,
        sep_token: str = "[SEP]",
        specials: frozenset[str] | set[str] = SPECIAL_TOKENS,
    ) -> Roles:
        """Build from token lists (batch × seq, padded) and the (batch, seq) padding and token type tensors."""
        sep = torch.tensor([[t == sep_token for t in row] for row in tokens], dtype=torch.bool)
        punct = torch.tensor([[is_punct(t, specials) for t in row] for row in tokens], dtype=torch.bool)
        real = real.bool().cpu()
        segment = token_type_ids.long().cpu() * real
        return cls(
            real=real.to(device),
            sep=(sep & real).to(device),
            punct=(punct & real).to(device),
            segment=segment.to(device),
            pair=(segment == 1).any(-1).to(device),
        )

    @classmethod
    def of_output(cls, out: EncoderOutput, device: torch.device | str | None = None, sep_token: str = "[SEP]") -> Roles:
        """Build from an EncoderOutput, single (a batch of one) or batched."""
        tokens = out.tokens
        shown = out.capabilities.token_display
        if shown in ("byte_level", "sentencepiece"):
            # Judge punctuation on the readable text, without the leading space (` .` is a full stop).
            def readable(row: list[str]) -> list[str]:
                return [d.strip() or t for d, t in zip(display_tokens(row, shown), row, strict=True)]

            tokens = [readable(row) for row in out.tokens] if out.is_batch else readable(out.tokens)
        if out.is_batch:
            return cls.of(tokens, out.padding, out.token_type_ids, device, sep_token)
        return cls.of([tokens], out.padding[None], out.token_type_ids[None], device, sep_token)


# ---- per-head statistics --------------------------------------------------------------------------


def row_entropy(p: torch.Tensor) -> torch.Tensor:
    """Return the entropy −Σ p ln p of each row over the last axis, in nats (0·ln 0 = 0; docs/METRICS.md).

    The one entropy of the project: the Heads page, the lecture's steps and troubleshooting all use it.
    """
    return torch.special.entr(p).sum(-1)


Terms = dict[str, tuple[torch.Tensor, torch.Tensor]]  # name → (Σ_rows value·weight, Σ_rows weight), (B, L, H)


def row_terms(attn: torch.Tensor, roles: Roles, r0: int = 0, distance: bool = True) -> Terms:
    """Return, per statistic, the sums over some query rows of (value × weight) and of the weights, (B, L, H).

    attn: (batch, layers, heads, rows, k_pos), the query rows r0 … r0 + rows − 1 of the maps (all rows, r0 = 0,
    for a short input; a block of them for a long one, models.maps). Every statistic of STATS is a weighted mean
    over query rows, so sums over blocks of rows added up give exactly the statistic of the whole map.
    distance: False leaves out 'distance' (a product as large as the maps, for a statistic the caller does not
    show: compare); every other statistic is the same.
    """
    B, L, H, R, K = attn.shape  # batch, layers, heads, rows, k_pos
    attn = attn.float()
    dev = attn.device
    i = torch.arange(r0, r0 + R, device=dev)  # the rows' own positions
    real = roles.real.to(attn.dtype)  # (B, K)
    rows_real = real[:, r0 : r0 + R]  # (B, R)
    after_first = rows_real * (i >= 1)  # rows i ≥ 1 (row 0 of a causal map can only see itself)
    seg_a = roles.real & (roles.segment == 0)
    seg_b = roles.real & (roles.segment == 1)

    def at(cols: torch.Tensor) -> torch.Tensor:  # A[i, cols[i]] for each row, (B, L, H, R)
        idx = cols.clamp(0, K - 1).view(1, 1, 1, R, 1).expand(B, L, H, R, 1)
        return attn.gather(-1, idx)[..., 0]

    rows_entropy = row_entropy(attn)  # (B, L, H, R)
    # Shares of attention that land on classes of keys, in one matmul: (B, L, H, R, K) @ (B, 1, 1, K, m).
    key_classes = torch.stack([roles.sep, roles.punct, seg_a, seg_b], dim=-1).to(attn.dtype)  # (B, K, 4)
    shares = attn @ key_classes[:, None, None]  # (B, L, H, R, 4)
    next_real = torch.zeros_like(rows_real)
    has_next = (i + 1) < K
    next_real[:, has_next] = real[:, (i + 1)[has_next]]  # the next position is a real token
    seen = (i + 1).clamp_min(2).to(attn.dtype)  # a causal row i sees i + 1 keys
    parts: dict[str, tuple[torch.Tensor, torch.Tensor]] = {
        "entropy": (rows_entropy, rows_real),
        "cls": (attn[..., 0], rows_real),
        "sep": (shares[..., 0], rows_real),
        "punct": (shares[..., 1], rows_real),
        "self": (at(i), rows_real),
        # Neighbours: A[i, i − 1] for rows i ≥ 1; A[i, i + 1] where the next position is a real token.
        "prev": (at(i - 1), after_first),
        "next": (at(i + 1), next_real),
        "confidence": (attn.amax(-1), rows_real),
    }
    if distance:
        pos = torch.arange(K, device=dev, dtype=attn.dtype)
        dist = (i[:, None].to(attn.dtype) - pos[None, :]).abs()  # (R, K) |i − j|
        parts["distance"] = ((attn * dist).sum(-1), rows_real)
    parts |= {
        # Block: each sentence's queries keep > 0.8 of their attention inside their own sentence.
        "within_a": (shares[..., 2], seg_a[:, r0 : r0 + R].to(attn.dtype)),
        "within_b": (shares[..., 3], seg_b[:, r0 : r0 + R].to(attn.dtype)),
        # First token, from the rows after it: row 0 of a causal map can only see itself, so it says nothing.
        "first": (attn[..., 0], after_first),
        # A causal row i sees i + 1 keys: normalise each row by its own ln(i + 1), rows i ≥ 1 (METRICS.md).
        "entropy_norm_causal": (rows_entropy / torch.log(seen), after_first),
        "cls_entropy": (rows_entropy, (i == 0).to(attn.dtype).expand(B, R)),  # the [CLS] row alone
    }
    return {k: ((v * w[:, None, None, :]).sum(-1), w.sum(-1)[:, None, None]) for k, (v, w) in parts.items()}


def add_terms(a: Terms | None, b: Terms) -> Terms:
    """Return the sums of two blocks' terms (a None: b)."""
    if a is None:
        return b
    return {k: (a[k][0] + b[k][0], a[k][1] + b[k][1]) for k in b}


def finish_terms(terms: Terms, roles: Roles) -> dict[str, torch.Tensor]:
    """Return each statistic of STATS per sentence and head, (batch, layers, heads), plus 'cls_entropy'."""
    mean = {k: num / den.clamp_min(1) for k, (num, den) in terms.items()}
    n = roles.real.to(mean["entropy"].dtype).sum(-1)  # (B,) real tokens per sentence
    log_n = torch.log(n.clamp_min(2))[:, None, None]
    block = torch.where(roles.pair[:, None, None], torch.minimum(mean["within_a"], mean["within_b"]), torch.nan)
    out = {k: v for k, v in mean.items() if k not in ("within_a", "within_b")}
    out.update(entropy_norm=mean["entropy"] / log_n, block=block)
    return out


def sentence_stats(attn: torch.Tensor, roles: Roles, distance: bool = True) -> dict[str, torch.Tensor]:
    """Return each statistic of STATS per sentence and head, (batch, layers, heads), plus 'cls_entropy'.

    attn: (batch, layers, heads, q_pos, k_pos), rows sum to 1 (padded keys have weight 0). Padded query rows
    are dropped. 'block' is NaN for items that are not sentence pairs. 'cls_entropy' is the entropy of the
    [CLS] row alone (Clark et al.'s "entropy of attention from [CLS]"), in nats. distance: False leaves
    'distance' out (row_terms).
    """
    return finish_terms(row_terms(attn, roles, distance=distance), roles)


def label_heads(
    stats: dict[str, np.ndarray], pairs: bool, causal: bool = False, induction: np.ndarray | None = None
) -> np.ndarray:
    """Return the pattern label of every head, (layers, heads) of str, first rule that holds.

    stats: arrays (layers, heads) as from `HeadReport.stats`; pairs: whether the input had sentence pairs
    (only then can a head be 'block'). A bidirectional model's labels come from LABELS; a causal model's from
    DECODER_LABELS (no next token to see; the first token's sink instead), with induction: (layers, heads)
    induction scores, or None to skip that label.
    """
    shape = np.shape(stats["entropy"])
    labels = np.full(shape, "heterogeneous", dtype=object)
    done = np.zeros(shape, dtype=bool)

    def assign(name: str, hit: np.ndarray) -> None:
        hit = hit & ~done
        labels[hit] = name
        done[hit] = True

    if causal:
        if induction is not None:
            assign("induction", np.asarray(induction) > THRESHOLDS["induction"])
        assign("prev", np.asarray(stats["prev"]) > THRESHOLDS["prev"])
        first, punct = np.asarray(stats["first"]), np.asarray(stats["punct"])
        assign("sink", (first > THRESHOLDS["sink"]) & (first >= punct))
        assign("punct", punct > THRESHOLDS["punct"])
        assign("broad", np.asarray(stats["entropy_norm"]) > THRESHOLDS["broad"])
        return labels.astype(str)

    prev, nxt = np.asarray(stats["prev"]), np.asarray(stats["next"])
    assign("prev", (prev > THRESHOLDS["prev"]) & (prev >= nxt))
    assign("next", nxt > THRESHOLDS["next"])
    shares = np.stack([np.asarray(stats[k]) for k in ("cls", "sep", "punct")])  # (3, L, H)
    top = shares.argmax(0)
    for i, k in enumerate(("cls", "sep", "punct")):
        assign(k, (top == i) & (shares[i] > THRESHOLDS[k]))
    if pairs:
        block = np.nan_to_num(np.asarray(stats["block"], dtype=float), nan=0.0)
        assign("block", block > THRESHOLDS["block"])
    assign("broad", np.asarray(stats["entropy_norm"]) > THRESHOLDS["broad"])
    return labels.astype(str)


# ---- redundancy -----------------------------------------------------------------------------------


def flat_maps(attn: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return every head's map over real (query, key) cells only, (layers·heads, cells), and each cell's n.

    attn: (batch, layers, heads, q_pos, k_pos); real: (batch, seq) bool. Cells of all sentences are laid end
    to end, so that sums over cells are sums over query rows and sentences. n (cells,) is the length of the
    cell's sentence, for the smoothing.
    """
    B, L, H, T, _ = attn.shape
    valid = real[:, :, None] & real[:, None, :]  # (B, T, T)
    maps = attn.permute(1, 2, 0, 3, 4)[:, :, valid].reshape(L * H, -1)  # (LH, cells)
    n = real.sum(-1).to(attn.dtype)[:, None, None].expand(B, T, T)[valid]  # (cells,)
    return maps, n


def _pair_slogs(P: torch.Tensor, chunk: int) -> torch.Tensor:
    """Return Σ_cells S·ln S with S = P_a + P_b for every pair of rows of P (N, cells), as (N, N) float64.

    The one quantity of JS that needs a log per pair and cell. Work goes in pieces of about `chunk`
    elements: a block of rows against all later rows at once when maps are small, else one row against a
    block of later rows. Few, large pieces keep both CPU threads busy (many small parallel ops stall when
    the machine is shared). Only the upper triangle is kept, then mirrored.

    Each piece is three passes over two buffers made once: S = P_a + P_b, ln S, then S·ln S in place and its
    sum over cells. `torch.linalg.vecdot(S, ln S)` gave the same sums but cost more than the log itself: it
    made the product as a fresh tensor every piece (stats --file's profile: vecdot 13 % of the whole run,
    half of js_parts), and the small-maps branch made S and ln S afresh too.
    """
    N, E = P.shape
    out = torch.zeros(N, N, dtype=torch.float64, device=P.device)
    rows = max(1, chunk // max(N * E, 1))
    block = rows * N if rows > 1 else max(1, min(N, chunk // max(E, 1)))
    s_buf = torch.empty(block * E, dtype=P.dtype, device=P.device)
    l_buf = torch.empty_like(s_buf)

    def slogs(a: torch.Tensor, b: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        size = math.prod(shape)
        s = torch.add(a, b, out=s_buf[:size].view(shape))  # P_a + P_b
        return torch.log(s, out=l_buf[:size].view(shape)).mul_(s).sum(-1)  # Σ S ln S over cells

    if rows > 1:
        for a0 in range(0, N, rows):
            a1 = min(N, a0 + rows)
            out[a0:a1, a0:] = slogs(P[a0:a1, None, :], P[None, a0:, :], (a1 - a0, N - a0, E))
    else:
        for a in range(N):
            for b0 in range(a, N, block):
                b1 = min(N, b0 + block)
                out[a, b0:b1] = slogs(P[b0:b1], P[a], (b1 - b0, E))
    upper = out.triu()
    return upper + upper.triu(1).T


@dataclass
class JsParts:
    """Sums from which the JS matrix follows; they add up over batches of sentences."""

    plogp: torch.Tensor  # (N,) float64: Σ P ln P per head
    mass: torch.Tensor  # (N,) float64: Σ P per head
    slogs: torch.Tensor  # (N, N) float64: Σ (P_a + P_b) ln (P_a + P_b)

    def __add__(self, other: JsParts) -> JsParts:
        return JsParts(self.plogp + other.plogp, self.mass + other.mass, self.slogs + other.slogs)

    def matrix(self) -> torch.Tensor:
        """Return JS(a, b) = ½(Σ P ln P + Σ Q ln Q) − Σ M ln M, with Σ M ln M = ½ Σ S ln S − ½ ln 2 · Σ S."""
        half = 0.5 * (self.plogp[:, None] + self.plogp[None, :])
        mlogm = 0.5 * self.slogs - 0.5 * math.log(2.0) * (self.mass[:, None] + self.mass[None, :])
        js = (half - mlogm).clamp_min(0.0)  # rounding can leave −1e-7 where the maps are equal
        js.fill_diagonal_(0.0)
        return js


def js_parts(maps: torch.Tensor, n: torch.Tensor, chunk: int | None = None) -> JsParts:
    """Return the JS sums of flat maps (N, cells) with each cell's sentence length n (cells,).

    Smoothing as Clark et al.: P = (1 − 0.001)·A + 0.001/n, with n the number of tokens of the sentence.
    """
    P = (maps.float() * (1.0 - SMOOTH) + (SMOOTH / n.float())).contiguous()
    chunk = chunk or (JS_CHUNK_GPU if P.device.type == "cuda" else JS_CHUNK_CPU)
    return JsParts(
        plogp=torch.special.xlogy(P, P).sum(-1, dtype=torch.float64),
        mass=P.sum(-1, dtype=torch.float64),
        slogs=_pair_slogs(P, chunk),
    )


def paired_js(
    a: torch.Tensor,
    b: torch.Tensor,
    n: int,
    work: Sequence[torch.Tensor] | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Return the JS divergence between each row of a and the same row of b: (..., q_pos) float64, in nats.

    a, b: (..., q_pos, k_pos) maps of two runs with the same tokens (models.analysis.compare); n: tokens in the
    sentence, for Clark et al.'s smoothing (SMOOTH), as `js_parts`. Each row's value is in [0, ln 2].
    work: four contiguous float64 tensors of at least a.numel() values each, used for P, Q, M and the scratch
    instead of fresh arrays (compare's pieces reuse them); out: (..., q_pos) float64 to write the values into.
    The numbers are the same either way: the same operations on the same values, in the same order.
    """
    # In place on four float64 arrays (P, Q, M, one scratch) instead of nine temporaries. Smoothing makes every
    # P, Q > 0, so P·log(P/M) is xlogy's value.
    if work is None:
        P = a.to(torch.float64, copy=True)
        Q = b.to(torch.float64, copy=True)
        M, scratch = torch.empty_like(P), torch.empty_like(P)
    else:
        P, Q, M, scratch = (w[: a.numel()].view(a.shape) for w in work)
        P.copy_(a)
        Q.copy_(b)
    P.mul_(1.0 - SMOOTH).add_(SMOOTH / n)
    Q.mul_(1.0 - SMOOTH).add_(SMOOTH / n)
    torch.add(P, Q, out=M).mul_(0.5)
    js = torch.sum(torch.div(P, M, out=scratch).log_().mul_(P), -1, out=out)
    js += torch.div(Q, M, out=scratch).log_().mul_(Q).sum(-1)
    return js.mul_(0.5).clamp_min_(0.0)


def js_matrix(attn: torch.Tensor, real: torch.Tensor | None = None) -> torch.Tensor:
    """Return Jensen–Shannon divergences between all heads, (layers·heads, layers·heads) float64, in nats.

    attn: (layers, heads, q_pos, k_pos) or (batch, layers, heads, q_pos, k_pos); real: (seq,) or (batch, seq)
    bool (None = every position is real). Summed over query rows (and sentences), not averaged: divide by the
    number of rows for a per-row figure in [0, ln 2].
    """
    attn, real = _batched(attn, real)
    maps, n = flat_maps(attn, real)
    return js_parts(maps, n).matrix()


def cosine_gram(maps: torch.Tensor) -> torch.Tensor:
    """Return the Gram matrix of flat maps (N, cells), (N, N) float64; it adds up over batches."""
    return (maps.float() @ maps.float().T).double()


def cosine_from_gram(gram: torch.Tensor) -> torch.Tensor:
    """Return cosine similarities (N, N) from a Gram matrix of flattened maps."""
    norms = gram.diagonal().clamp_min(0).sqrt()
    return (gram / (norms[:, None] * norms[None, :]).clamp_min(1e-300)).clamp(-1.0, 1.0)


def cosine_matrix(attn: torch.Tensor, real: torch.Tensor | None = None) -> torch.Tensor:
    """Return the cosine similarity of every pair of heads' flattened maps, (layers·heads,)*2 float64."""
    attn, real = _batched(attn, real)
    maps, _ = flat_maps(attn, real)
    return cosine_from_gram(cosine_gram(maps))


def _cka_from_hsic(hsic: torch.Tensor) -> torch.Tensor:
    """Return CKA = HSIC(a, b) / √(HSIC(a, a)·HSIC(b, b)); NaN for a head whose output does not vary."""
    self_ = hsic.diagonal().clone()
    dead = self_ <= 1e-12 * self_.max().clamp_min(1e-300)  # a constant output: CKA is 0/0
    denom = (self_[:, None] * self_[None, :]).sqrt()
    cka = hsic / denom.clamp_min(1e-300)
    cka[dead, :] = torch.nan
    cka[:, dead] = torch.nan
    return cka.clamp(max=1.0)


def cka_matrix(context: torch.Tensor, real: torch.Tensor | None = None) -> torch.Tensor:
    """Return linear CKA between every pair of heads' outputs, (layers·heads, layers·heads) float64.

    context: (layers, heads, seq, d_k), one input's per-head context vectors (probs·V, before W_o); real:
    (seq,) bool to drop [PAD] rows. CKA(X, Y) = ‖YᵀX‖²_F / (‖XᵀX‖_F · ‖YᵀY‖_F) on column-centred X, Y
    (tokens × d_k). Computed through the tokens × tokens Grams, ‖YᵀX‖²_F = ⟨XXᵀ, YYᵀ⟩: with seq ≤ 512 that
    is far cheaper than the (heads·d_k)² cross-covariance.
    """
    L, H, T, D = context.shape  # layers, heads, seq, d_k
    X = context.reshape(L * H, T, D).float()
    if real is not None:
        X = X[:, real.bool().to(X.device)]
    X = X - X.mean(1, keepdim=True)  # centre each column over tokens
    K = (X @ X.transpose(1, 2)).reshape(L * H, -1)  # (LH, n·n): each head's token Gram
    return _cka_from_hsic((K @ K.T).double())


class CkaAccumulator:
    """Linear CKA over a corpus: tokens of every sentence pooled, columns centred over all of them.

    Keeps the (heads·d_k, heads·d_k) cross-product of the context vectors, shifted by the first batch's
    mean so that float32 sums do not lose the small variance of near-constant heads to a large mean.
    """

    def __init__(self) -> None:
        self.cross: torch.Tensor | None = None  # (N·d_k, N·d_k) Σ (z − s)(z − s)ᵀ
        self.total: torch.Tensor | None = None  # (N·d_k,) Σ (z − s)
        self.shift: torch.Tensor | None = None
        self.count = 0
        self.heads = 0

    def add(self, context: torch.Tensor, real: torch.Tensor) -> None:
        """Add a batch: context (batch, layers, heads, seq, d_k), real (batch, seq) bool."""
        B, L, H, T, D = context.shape
        Z = context.permute(0, 3, 1, 2, 4)[real.bool()].reshape(-1, L * H * D).float()  # (tokens, LH·d_k)
        if self.shift is None or self.cross is None or self.total is None:
            self.shift = Z.mean(0)
            self.cross = torch.zeros(Z.shape[1], Z.shape[1], device=Z.device)
            self.total = torch.zeros(Z.shape[1], dtype=torch.float64, device=Z.device)
            self.heads = L * H
        Z = Z - self.shift
        self.cross.addmm_(Z.T, Z)
        self.total += Z.sum(0, dtype=torch.float64)
        self.count += Z.shape[0]

    def matrix(self) -> torch.Tensor:
        """Return the (heads, heads) CKA matrix of everything added so far."""
        if self.cross is None or self.total is None or self.count < 2:
            raise ValueError("CKA needs at least two tokens")
        mean = (self.total / self.count).float()  # small: the data were shifted
        F_, N = self.cross.shape[0], self.heads
        D = F_ // N
        hsic = torch.empty(N, N, dtype=torch.float64, device=self.cross.device)
        rows = max(1, (1 << 22) // (D * F_))  # heads per block: bounded memory even for BERT-base's 9216²
        for a0 in range(0, N, rows):
            a1 = min(N, a0 + rows)
            part = slice(a0 * D, a1 * D)
            C = self.cross[part] - self.count * torch.outer(mean[part], mean)  # rows of Σ (z − z̄)(z − z̄)ᵀ
            hsic[a0:a1] = C.view(a1 - a0, D, N, D).square().sum((1, 3)).double()  # ‖Y_bᵀ X_a‖²_F
        return _cka_from_hsic(hsic)


def _batched(attn: torch.Tensor, real: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    if attn.dim() == 4:
        attn = attn[None]
        real = None if real is None else real[None]
    if real is None:
        real = torch.ones(attn.shape[0], attn.shape[-1], dtype=torch.bool, device=attn.device)
    return attn, real.bool().to(attn.device)


# ---- clustering, map of heads, near-duplicates ----------------------------------------------------


def cluster_order(dist: np.ndarray) -> list[int]:
    """Return the leaf order of average-linkage hierarchical clustering on a symmetric distance matrix."""
    # scipy here, not at the top: only the map of heads needs it, and importing it costs ~0.3 s at startup.
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    d = np.asarray(dist, dtype=float)
    if d.shape[0] < 3:
        return list(range(d.shape[0]))
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    Z = linkage(squareform(d, checks=False), method="average", optimal_ordering=True)
    return [int(i) for i in leaves_list(Z)]


def mds(dist: np.ndarray, dims: int = 2, iters: int = 300, tol: float = 1e-7) -> tuple[np.ndarray, float]:
    """Return metric-MDS coordinates (N, dims) of a distance matrix and their normalised stress.

    SMACOF (Guttman transforms) started from classical MDS, so the result is deterministic. Coordinates are
    defined only up to rotation and reflection; each axis is flipped so that its largest coordinate is
    positive. Stress-1 = √(Σ (d_ij − δ_ij)² / Σ d_ij²) over pairs.
    """
    d = np.asarray(dist, dtype=float)
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    N = d.shape[0]
    if N <= dims:
        return np.zeros((N, dims)), 0.0
    J = np.eye(N) - 1.0 / N
    Bc = -0.5 * J @ (d**2) @ J
    w, V = np.linalg.eigh(Bc)
    top = np.argsort(w)[::-1][:dims]
    X = V[:, top] * np.sqrt(np.clip(w[top], 0, None))
    if not np.any(X):
        X = np.random.default_rng(0).normal(size=(N, dims))

    def stress(X: np.ndarray) -> float:
        delta = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
        return float(((delta - d) ** 2)[np.triu_indices(N, 1)].sum())

    s_old = stress(X)
    for _ in range(iters):
        delta = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(delta > 0, d / delta, 0.0)
        Bx = -ratio
        np.fill_diagonal(Bx, 0.0)
        np.fill_diagonal(Bx, -Bx.sum(1))
        X = Bx @ X / N
        s_new = stress(X)
        if s_old - s_new <= tol * max(s_old, 1e-300):
            s_old = s_new
            break
        s_old = s_new
    X = X - X.mean(0)
    X = X * np.where(np.abs(X.max(0)) >= np.abs(X.min(0)), 1.0, -1.0)
    denom = float((d[np.triu_indices(N, 1)] ** 2).sum())
    return X, math.sqrt(s_old / denom) if denom > 0 else 0.0


def nearest(dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return, per head, the smallest distance to another head and which head that is: (N,), (N,) int."""
    d = np.array(dist, dtype=float)
    np.fill_diagonal(d, np.inf)
    idx = d.argmin(1)
    return d[np.arange(len(d)), idx], idx


def near_duplicates_per_layer(dist: np.ndarray, n_layers: int, threshold: float) -> np.ndarray:
    """Return, per layer, how many of its heads have another head (anywhere) closer than threshold, (layers,)."""
    close, _ = nearest(dist)
    return (close < threshold).reshape(n_layers, -1).sum(1)


def closest_pairs(dist: np.ndarray, k: int) -> list[tuple[int, int, float]]:
    """Return the k pairs of different heads (a < b) with the smallest distance, closest first."""
    d = np.asarray(dist, dtype=float)
    a, b = np.triu_indices(len(d), 1)
    top = np.argsort(d[a, b], kind="stable")[:k]
    return [(int(a[i]), int(b[i]), float(d[a[i], b[i]])) for i in top]


# ---- the budget of everything pairwise -------------------------------------------------------------


def pairwise_refusal(n_heads: int, cells: int | None = None) -> str:
    """Return why `n_heads` heads are not compared pairwise ("" when they are), asked before any of it starts.

    Redundancy (JS, cosine, CKA), the cluster order and the map of heads grow with heads² (the cluster order's
    optimal leaf ordering and MDS faster still): ATTENTION_LENS_PAIR_HEADS bounds the heads. For one input,
    `cells` (its query × key cells) bounds the pairs × cells JS and cosine compare: ATTENTION_LENS_PAIR_CELLS.
    """
    s = settings.current()
    if n_heads > s.pair_heads:
        return settings.over_budget("pair_heads", n_heads, f"comparing {n_heads:,} heads pairwise")
    if cells is not None:
        work = n_heads * (n_heads - 1) / 2 * cells / 1e6  # million (pair, cell) terms
        if work > s.pair_cells:
            what = f"comparing {n_heads:,} heads pairwise over {cells:,} cells"
            return settings.over_budget("pair_cells", round(work), what)
    return ""


# ---- the report every page and the CLI use --------------------------------------------------------


def kind_of(causal: bool) -> str:
    """Return the `kind` the CLI's JSON gives a report: "decoder" for a causal model's, else "encoder"."""
    return "decoder" if causal else "encoder"


@dataclass
class HeadReport:
    """Statistics, labels and redundancy for one input or a corpus. numpy and lists only (pickles, caches)."""

    model: str
    n_layers: int
    n_heads: int
    sentences: int  # how many inputs went in (1 for typed text)
    rows: int  # query rows summed over (real tokens of every input)
    pairs: bool  # any sentence pair in the input(s)
    stats: dict[str, np.ndarray]  # name → (layers, heads); averaged over rows, then over sentences
    cls_entropy: np.ndarray  # (layers, heads) entropy of the [CLS] row, nats
    labels: np.ndarray  # (layers, heads) str, one of LABELS
    js: np.ndarray  # (N, N) summed over rows and sentences, nats; N = layers·heads, layer-major
    cosine: np.ndarray  # (N, N)
    cka: np.ndarray  # (N, N); NaN where a head's output does not vary
    tokens: list = field(default_factory=list)  # the input's tokens; for a corpus, a list per line
    order: list[int] = field(default_factory=list)  # cluster order (average linkage on js)
    coords: np.ndarray | None = None  # (N, 2) metric MDS on js
    stress: float = 0.0  # MDS stress-1
    causal: bool = False  # a causal model's maps: DECODER_LABELS and DECODER_COLUMNS
    group: int = 1  # query heads per key/value head (grouped-query attention); 1 for multi-head attention
    induction: np.ndarray | None = None  # (layers, heads) induction scores (causal models, when computed)
    # Redundancy of a long text is computed on mean-pooled maps: `pooled` tokens per cell along each axis (1 =
    # every token; js, cosine and rows are then per pooled row). The statistics above are always exact.
    pooled: int = 1
    # Why heads were not compared pairwise (pairwise_refusal: over a budget), "" when they were. When set, js,
    # cosine and cka are (0, 0), order is 0…N−1 and coords is None: pages and the CLI say so instead.
    pairwise_skipped: str = ""
    # A corpus's redundancy (js, cosine, cka) is summed over a sample of its lines (models.analysis.corpus
    # .redundancy_cut): how many, and their query rows. 0: over every sentence and row (`sentences`, `rows`).
    pair_sentences: int = 0
    pair_rows: int = 0

    @property
    def redundancy_rows(self) -> int:
        """Return the query rows js and cosine are summed over: every row, or the redundancy sample's."""
        return self.pair_rows or self.rows

    @property
    def redundancy_sentences(self) -> int:
        """Return the sentences js, cosine and cka are summed over: every one, or the redundancy sample's."""
        return self.pair_sentences or self.sentences

    @property
    def kind(self) -> str:
        """Return "decoder" for a causal model's report, else "encoder" (the `kind` of the CLI's JSON)."""
        return kind_of(self.causal)

    @property
    def pairwise(self) -> bool:
        """Whether js, cosine, cka, order and coords hold the pairwise comparison."""
        return not self.pairwise_skipped

    @property
    def label_set(self) -> tuple[str, ...]:
        return DECODER_LABELS if self.causal else LABELS

    @property
    def columns(self) -> tuple[str, ...]:
        return DECODER_COLUMNS if self.causal else ENCODER_COLUMNS

    def with_induction(self, scores: np.ndarray) -> HeadReport:
        """Return this (causal) report with induction scores and labels that take them into account."""
        labels = label_heads(self.stats, self.pairs, self.causal, scores)
        return replace(self, induction=np.asarray(scores, dtype=np.float64), labels=labels)

    def same_kv_head(self, a: int, b: int) -> bool:
        """Return whether heads a and b (layer-major indices) are in one layer and read the same key/value head."""
        H = self.n_heads
        return self.group > 1 and a // H == b // H and (a % H) // self.group == (b % H) // self.group

    def kv_groups(self) -> tuple[float, float] | None:
        """Return (mean JS per row between heads that share a key/value head, between the other heads of the same
        layer), or None without grouping: do heads that read the same keys attend alike? (docs/METRICS.md)"""
        if self.group <= 1:
            return None
        H, js = self.n_heads, self.js_per_row
        layer = np.arange(self.n_layers * H) // H
        kv = (np.arange(self.n_layers * H) % H) // self.group
        same_layer = layer[:, None] == layer[None, :]
        off = ~np.eye(len(layer), dtype=bool)
        within = same_layer & (kv[:, None] == kv[None, :]) & off
        across = same_layer & (kv[:, None] != kv[None, :])
        return float(js[within].mean()), float(js[across].mean())

    @property
    def js_per_row(self) -> np.ndarray:
        """JS divided by the number of query rows it sums over: nats per row, in [0, ln 2], comparable across lengths."""
        return self.js / max(self.redundancy_rows, 1)

    @property
    def names(self) -> list[str]:
        return head_names(self.n_layers, self.n_heads)

    def layer_means(self, name: str) -> np.ndarray:
        """Return the mean over heads of one statistic, per layer, (layers,)."""
        return np.nanmean(self.stats[name], axis=1)

    def to_json(self, importance: list[float] | None = None) -> dict[str, Any]:
        """Return the document `python -m models stats --json` prints (see docs/pages/heads.md, "From the command line")."""
        heads = []
        for layer in range(self.n_layers):
            for head in range(self.n_heads):
                row: dict[str, Any] = {"layer": layer, "head": head}
                for k in ("entropy", "entropy_norm", *self.columns, "distance"):
                    row[k] = _num(self.stats[k][layer, head])
                if self.induction is not None:
                    row["induction"] = _num(self.induction[layer, head])
                if self.pairs:
                    row["block"] = _num(self.stats["block"][layer, head])
                row["label"] = str(self.labels[layer, head])
                heads.append(row)
        doc: dict[str, Any] = {
            "model": self.model,
            "kind": self.kind,
            "tokens": self.tokens,
            "sentences": self.sentences,
            "rows": self.rows,
            "heads": heads,
            "redundancy": {
                "sentences": self.redundancy_sentences,
                "rows": self.redundancy_rows,
                "js": _matrix(self.js),
                "js_per_row": _matrix(self.js_per_row),
                "cosine": _matrix(self.cosine),
                "cka": _matrix(self.cka),
            }
            if self.pairwise
            else None,
            "thresholds": dict(THRESHOLDS),
        }
        if not self.pairwise:
            doc["redundancy_skipped"] = self.pairwise_skipped
        if importance is not None:
            doc["importance"] = [_num(v) for v in importance]
        return doc


def _num(x: Any) -> float | None:
    x = float(x)
    return None if math.isnan(x) else round(x, 6)


def _matrix(m: np.ndarray) -> list[list[float | None]]:
    return [[_num(v) for v in row] for row in np.asarray(m)]


class Accumulator:
    """Sums per-head statistics and redundancy over batches of sentences; `report()` turns them into a HeadReport.

    Statistics are averaged per sentence over its rows, then over sentences (as Clark et al. do over
    documents); JS and the cosine Gram are summed over rows and sentences; CKA pools every token.
    """

    def __init__(self, n_layers: int, n_heads: int, with_cka: bool = True, pairwise_skipped: str = "") -> None:
        self.n_layers, self.n_heads = n_layers, n_heads
        # Over a budget (pairwise_refusal), nothing pairwise is summed: statistics and labels still are.
        self.pairwise_skipped = pairwise_skipped or pairwise_refusal(n_layers * n_heads)
        with_cka = with_cka and not self.pairwise_skipped
        self.sums: dict[str, torch.Tensor] = {}
        self.pair_items = 0
        self.sentences = 0
        self.rows = 0
        self.js: JsParts | None = None
        self.gram: torch.Tensor | None = None
        self.cka = CkaAccumulator() if with_cka else None

    def add(self, attn: torch.Tensor, roles: Roles, context: torch.Tensor | None = None) -> None:
        """Add a padded batch: attn (batch, layers, heads, q_pos, k_pos), context (batch, layers, heads, seq, d_k)."""
        per = sentence_stats(attn, roles)
        for k, v in per.items():
            total = torch.nansum(v, 0).double() if k == "block" else v.sum(0).double()
            self.sums[k] = self.sums[k] + total if k in self.sums else total
        self.pair_items += int(roles.pair.sum())
        self.sentences += attn.shape[0]
        self.rows += int(roles.real.sum())
        if self.pairwise_skipped:
            return
        maps, n = flat_maps(attn.float(), roles.real)
        parts = js_parts(maps, n)
        self.js = parts if self.js is None else self.js + parts
        gram = cosine_gram(maps)
        self.gram = gram if self.gram is None else self.gram + gram
        if self.cka is not None:
            if context is None:
                raise ValueError("CKA needs the heads' context vectors (encode with internals)")
            self.cka.add(context, roles.real)

    def report(
        self, model: str, tokens: list | None = None, cka: torch.Tensor | None = None, causal: bool = False
    ) -> HeadReport:
        """Return the HeadReport of everything added (cka: a matrix computed elsewhere, for a single input)."""
        if not self.sentences:
            raise ValueError("nothing was added")
        L, H = self.n_layers, self.n_heads
        stats = {}
        for k in STATS:
            denom = self.pair_items if k == "block" else self.sentences
            stats[k] = (self.sums[k] / denom).cpu().numpy() if denom else np.full((L, H), np.nan)
        if causal:  # row i of a causal model sees i + 1 keys: its normaliser is ln(i + 1), not ln n
            stats["entropy_norm"] = stats["entropy_norm_causal"]
        labels = label_heads(stats, pairs=self.pair_items > 0, causal=causal)
        if self.pairwise_skipped or self.js is None or self.gram is None:
            empty = np.zeros((0, 0))
            js, cosine, cka_np, order, coords, stress = empty, empty, empty, list(range(L * H)), None, 0.0
        else:
            js = self.js.matrix().cpu().numpy()
            if cka is None:
                cka = self.cka.matrix() if self.cka is not None else torch.full((L * H, L * H), torch.nan)
            cosine, cka_np = cosine_from_gram(self.gram).cpu().numpy(), cka.cpu().numpy()
            order = cluster_order(js)
            coords, stress = mds(js / max(self.rows, 1))
        return HeadReport(
            model=model,
            n_layers=L,
            n_heads=H,
            sentences=self.sentences,
            rows=self.rows,
            pairs=self.pair_items > 0,
            stats=stats,
            cls_entropy=(self.sums["cls_entropy"] / self.sentences).cpu().numpy(),
            labels=labels,
            js=js,
            cosine=cosine,
            cka=cka_np,
            tokens=list(tokens or []),
            order=order,
            coords=coords,
            stress=stress,
            causal=causal,
            pairwise_skipped=self.pairwise_skipped,
        )


def analyse(out: EncoderOutput, device: torch.device | str | None = None) -> HeadReport:
    """Return the HeadReport of one encoded input (CKA needs `encode(..., internals=True)`).

    device: where to compute (the encoder's device; the GPU when there is one). The output's tensors are
    on the CPU; they are moved there once.
    """
    if out.is_batch:
        raise ValueError("analyse() takes one input; use models.analysis.corpus for many")
    dev = torch.device(device) if device is not None else torch.device("cpu")
    roles = Roles.of_output(out, dev)
    if isinstance(out.attentions, OnDemandMaps):
        return _analyse_on_demand(out, out.attentions, roles)
    n = int(out.padding.sum())
    skipped = pairwise_refusal(out.n_layers * out.n_heads, n * n)
    acc = Accumulator(out.n_layers, out.n_heads, with_cka=False, pairwise_skipped=skipped)
    acc.add(out.attentions[None].to(dev), roles)
    cka = None
    if out.context is not None and not skipped:
        cka = cka_matrix(out.context.to(dev), out.padding.to(dev))
    report = acc.report(out.model, tokens=list(out.tokens[:n]), cka=cka, causal=out.capabilities.causal)
    caps = out.capabilities
    return replace(report, group=caps.group_size) if caps.grouped and caps.heads == out.n_heads else report


POOL = 256  # a long text's redundancy: each head's map mean-pooled to at most POOL × POOL cells


def _analyse_on_demand(out: EncoderOutput, maps: OnDemandMaps, roles: Roles) -> HeadReport:
    """Return the HeadReport of a long text whose maps are made on demand: one pass over blocks of query rows,
    layer by layer, never a whole layer's maps at once.

    The statistics stream (row_terms over each block, added up: exactly the dense figures). Redundancy (JS,
    cosine) is computed on each head's map mean-pooled to at most POOL × POOL cells (keys summed, queries
    averaged per cell, so pooled rows are still distributions), and the report says so (`pooled`); CKA, which
    needs every head's output, is NaN.
    """
    L, H, T, K = maps.shape
    f = pool_factor(T, K, POOL)
    qb, kb = -(-T // f), -(-K // f)
    step = max(f, (ROW_BLOCK // f) * f)
    terms: Terms | None = None
    pooled = torch.zeros(L, H, qb, kb, dtype=torch.float32)
    for layer in range(L):
        layer_terms: Terms | None = None
        for r0 in range(0, T, step):
            r1 = min(T, r0 + step)
            block = maps.rows(layer, r0, r1)  # (H, R, K)
            layer_terms = add_terms(layer_terms, row_terms(block[None, None].to(roles.real.device), roles, r0))
            pooled[layer, :, r0 // f : r0 // f + -(-(r1 - r0) // f)] = pool_block(block.cpu(), f, "mean")
        assert layer_terms is not None
        # One layer's terms are (1, 1, H): lay the layers side by side.
        terms = (
            layer_terms
            if terms is None
            else {
                k: (torch.cat([terms[k][0], v[0]], 1), torch.cat([terms[k][1], v[1]], 1))
                for k, v in layer_terms.items()
            }
        )
    assert terms is not None
    stats = {k: v[0, :].cpu().numpy().astype(np.float64) for k, v in finish_terms(terms, roles).items()}
    cls_entropy = stats.pop("cls_entropy")
    causal = out.capabilities.causal
    if causal:
        stats["entropy_norm"] = stats["entropy_norm_causal"]
    skipped = pairwise_refusal(L * H, qb * kb)
    empty = np.zeros((0, 0))
    js, cosine, coords, stress = empty, empty, None, 0.0
    if not skipped:
        flat = pooled.reshape(L * H, qb * kb)
        js = js_parts(flat, torch.full((qb * kb,), float(kb))).matrix().cpu().numpy()
        cosine = cosine_from_gram(cosine_gram(flat)).cpu().numpy()
        coords, stress = mds(js / max(qb, 1))
    caps = out.capabilities
    return HeadReport(
        model=out.model,
        n_layers=L,
        n_heads=H,
        sentences=1,
        rows=qb,
        pairs=bool(roles.pair.any()),
        stats={k: v for k, v in stats.items()},
        cls_entropy=cls_entropy,
        labels=label_heads(stats, pairs=bool(roles.pair.any()), causal=causal),
        js=js,
        cosine=cosine,
        cka=empty if skipped else np.full((L * H, L * H), np.nan),
        tokens=list(out.tokens),
        order=list(range(L * H)) if skipped else cluster_order(js),
        coords=coords,
        stress=stress,
        causal=causal,
        group=caps.group_size if caps.grouped and caps.heads == H else 1,
        pooled=f,
        pairwise_skipped=skipped,
    )


def analyse_maps(
    attn: np.ndarray | torch.Tensor,
    q_tokens: Sequence[str],
    k_tokens: Sequence[str] | None = None,
    token_type_ids: np.ndarray | None = None,
    model: str = "",
    device: torch.device | str | None = None,
    causal: bool = False,
) -> HeadReport:
    """Return the HeadReport of maps that came without a model (an attention file): CKA is NaN (it needs the
    heads' outputs).

    attn: (layers, heads, q_pos, k_pos), every token real. Self-attention (k_tokens None or equal) goes through
    exactly the statistics of `analyse`. Cross-attention (queries and keys from different sequences): shares,
    entropy (normalised by ln k_pos), confidence, JS and cosine read the key tokens; self, prev, next, distance and
    block have no meaning across two sequences and are NaN.
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")
    a = torch.as_tensor(np.asarray(attn), dtype=torch.float32).to(dev)
    L, H, Q, K = a.shape  # layers, heads, q_pos, k_pos
    keys = list(k_tokens) if k_tokens is not None else list(q_tokens)
    skipped = pairwise_refusal(L * H, Q * K)
    if Q == K and keys == list(q_tokens):
        types = torch.as_tensor(np.zeros(Q) if token_type_ids is None else np.asarray(token_type_ids)).long()
        # Byte-level tokens are judged as their text, as `analyse` does (Roles.of_output).
        judged = [byte_level_to_text(t).strip() or t for t in q_tokens]
        roles = Roles.of([judged], torch.ones(1, Q, dtype=torch.bool), types[None], dev)
        acc = Accumulator(L, H, with_cka=False, pairwise_skipped=skipped)
        acc.add(a[None], roles)
        return acc.report(model, tokens=list(q_tokens), causal=causal)

    row_entropy = -torch.special.xlogy(a, a).sum(-1)  # (L, H, Q)
    sep = torch.tensor([t == "[SEP]" for t in keys], dtype=torch.float32, device=dev)
    punct = torch.tensor([is_punct(t) for t in keys], dtype=torch.float32, device=dev)
    nan = torch.full((L, H), torch.nan, device=dev)
    per_head = {
        "entropy": row_entropy.mean(-1),
        "entropy_norm": row_entropy.mean(-1) / math.log(max(K, 2)),
        "cls": a[..., 0].mean(-1),  # the first key: [CLS], or a decoder's first token
        "sep": (a @ sep).mean(-1),
        "punct": (a @ punct).mean(-1),
        "self": nan,
        "prev": nan,
        "next": nan,
        "confidence": a.amax(-1).mean(-1),
        "distance": nan,
        "block": nan,
    }
    stats = {k: v.double().cpu().numpy() for k, v in per_head.items()}
    maps = a.reshape(L * H, Q * K)
    empty = np.zeros((0, 0))
    js, cosine, coords, stress = empty, empty, None, 0.0
    if not skipped:
        js = js_parts(maps, torch.full((Q * K,), float(K), device=dev)).matrix().cpu().numpy()
        cosine = cosine_from_gram(cosine_gram(maps)).cpu().numpy()
        coords, stress = mds(js / Q)
    return HeadReport(
        model=model,
        n_layers=L,
        n_heads=H,
        sentences=1,
        rows=Q,
        pairs=False,
        stats=stats,
        cls_entropy=row_entropy[..., 0].double().cpu().numpy(),
        labels=label_heads(stats, pairs=False),
        js=js,
        cosine=cosine,
        cka=empty if skipped else np.full((L * H, L * H), np.nan),
        tokens=list(q_tokens),
        order=list(range(L * H)) if skipped else cluster_order(js),
        coords=coords,
        stress=stress,
        pairwise_skipped=skipped,
    )
