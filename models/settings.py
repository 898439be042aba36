"""The operator's settings and every budget, in one place: each value overridable by an `ATTENTION_LENS_*`
environment variable, read by the app, the command line and the Python API alike.

    ATTENTION_LENS_MODELS=minilm,bert-base-uncased ATTENTION_LENS_MAX_TEXT_CHARS=20000 streamlit run app.py ...

Values are read from the environment when asked (`current()`), so an operator's variables (and a test's
monkeypatch) apply without a re-import. A costly path calls `require(name, amount, what)` *before* it allocates;
the BudgetError it raises names the budget that stopped it and how to raise it. Model configs are held to
`check_model_shape` before any weight is allocated. Torch-free and streamlit-free: the lowest floor.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import BudgetError, ModelLoadError, ModelNotAllowedError, SettingsError

PREFIX = "ATTENTION_LENS_"


@dataclass(frozen=True)
class Budget:
    """One numeric setting: its environment variable (PREFIX + key upper-cased), unit, default and bounds."""

    key: str  # attribute of Settings, e.g. "max_text_chars"
    default: float
    unit: str
    what: str  # README table's description
    low: float = 1
    high: float = 1e12
    integer: bool = True

    @property
    def env(self) -> str:
        return PREFIX + self.key.upper()


BUDGETS: tuple[Budget, ...] = (
    Budget("max_text_chars", 100_000, "characters", "one text (each sentence of a pair; each line of a batch)"),
    Budget("max_corpus_tokens", 200_000, "tokens", "all lines of a corpus together (Corpus page, `stats --file`)"),
    Budget(
        "max_batch",
        16,
        "sequences",
        "one padded batch (Masks page, memory measurement, `check-mask --text`; a corpus runs batch by batch within it)",
    ),
    Budget("max_upload_mb", 256, "MB", "one uploaded or read file after decompression (masks, attention files)"),
    Budget("expr_mb", 512, "MB", "tensors alive at once inside one mask expression"),
    Budget("expr_seconds", 2, "s", "CPU time of one mask expression", low=0.01, integer=False),
    Budget("max_generate", 256, "tokens", "new tokens one generation may add"),
    Budget("cache_mb", 2048, "MB", "all result caches of the app together, evicted by bytes"),
    Budget(
        "max_derived_values",
        80_000_000,
        "values",
        "attention values (layers · heads · q_pos · k_pos) that Compare, value-weighted or word maps derive from one run",
    ),
    Budget("heavy_slots", 2, "computations", "heavy computations at once per server; others wait for a free slot"),
    Budget(
        "max_token_heads",
        2_500_000,
        "token-heads",
        "one long text: tokens × layers × heads (SmolLM2's 270 heads at 8,192 tokens are 2.2 million)",
    ),
    Budget("dense_maps_mb", 256, "MB", "every map of one text kept whole below this; above it maps are made on demand"),
    Budget("max_map_mb", 1024, "MB", "maps made at once from a long text (one head, a block of rows, a window)"),
    # Attention files (models.attention_file): counted from headers and keys before any array is read. The layers and
    # heads per layer match CONFIG_BOUNDS' models, twice over; maps bound layers × heads together (GPT-2 XL: 1,200).
    Budget("file_layers", 256, "layers", "layers in one attention file (per-layer keys attentions.N counted first)"),
    Budget("file_heads", 256, "heads", "heads per layer in one attention file"),
    Budget("file_maps", 8192, "maps", "layers × heads in one attention file"),
    Budget("file_positions", 16_384, "positions", "query or key positions in one attention file"),
    # Analyses whose work grows with heads² or tokens³, asked before they start (models.analysis.heads / rollout):
    # above a budget the section says so and the rest of the page or report still comes. Measured on 2 cores: 1,024
    # heads cluster and map in ~10 s; 3,000 million head-pair cells (BERT-base at 512 tokens: 2,700) ~30 s.
    Budget(
        "pair_heads", 1024, "heads", "heads compared pairwise (redundancy, clustering, map of heads), layers × heads"
    ),
    Budget("pair_cells", 3000, "million cells", "head pairs × attention cells compared for redundancy (JS, cosine)"),
    Budget("rollout_work", 20, "billion multiply-adds", "attention rollout: layers × positions³ (GPT-2 at 1,024: 13)"),
    Budget("max_train_seconds", 300, "s", "one training run (Train page, `python -m models train`); it stops there"),
    # The long-context lab (models.analysis.needle): each needle case reads its whole context once.
    Budget(
        "needle_cases", 64, "cases", "one needle grid: contexts × depths (`python -m models needle`, Long-context lab)"
    ),
    Budget("needle_tokens", 131_072, "tokens", "one needle grid: the contexts of all its cases together"),
    Budget(
        "explain_components",
        2000,
        "components",
        "parts of the residual stream a side of one score's component table (`explain`, why here): 1 + layers × "
        "(heads + 2) + 1 at the last layer (SmolLM2: 302)",
    ),
    # Issue 41: what a model folder or a GGUF file may cost this machine, judged from its config.json or header before
    # anything is allocated (CONFIG_BOUNDS and MAX_PARAMS bound the shape; these bound the machine's share).
    Budget(
        "model_mb",
        8192,
        "MB",
        "one model's float32 weights (parameters × 4 bytes), from its config.json or GGUF header (GPT-2 XL: 6,200)",
    ),
    # Issue 41: one text's work, estimated from the model's sizes and the text's tokens before the forward (a command
    # cuts a longer text there and says so, or refuses a pair or a batch in one line): `text_work` below.
    Budget(
        "text_work",
        800,
        "billion operations",
        "one text through one command, estimated before the forward: tokens × weights + layers × heads × tokens² × "
        "(2 × head size + the command's operations per attention cell: stats 750); over it a long text is cut, a pair "
        "or a batch refused (SmolLM2: stats reads 1,626 tokens, export 3,514; ~40 s on one busy core)",
    ),
    Budget("gguf_header_mb", 64, "MB", "a GGUF file's header (metadata and tensor list; SmolLM2's: 1.8)"),
    Budget(
        "gguf_items",
        2_000_000,
        "values",
        "metadata values in a GGUF header, array items included (SmolLM2: 147,000; a 152k vocabulary: ~460,000)",
    ),
)
_BY_KEY = {b.key: b for b in BUDGETS}
MODELS_ENV = PREFIX + "MODELS"

# Sanity bounds on a model's config, checked before anything is allocated. Generous for every real BERT/GPT-2
# checkpoint (bert-large: 24 layers, 16 heads, width 1024; GPT-2 XL: 48, 25, 1600; multilingual vocabularies
# ~250k), far below what would take the server down.
CONFIG_BOUNDS: dict[str, tuple[int, int]] = {
    "n_layers": (1, 128),
    "n_heads": (1, 256),
    "d_model": (1, 16_384),
    "d_ff": (1, 65_536),
    "vocab_size": (1, 1_000_000),
    "max_positions": (1, 131_072),
    "type_vocab_size": (0, 1_024),
    "kv_heads": (1, 256),
    "head_dim": (1, 1_024),
}
MAX_PARAMS = 4_000_000_000  # about 16 GB in fp32: the estimate of a config's parameters must stay below


@dataclass(frozen=True)
class Settings:
    models: tuple[str, ...] | None  # the operator's list; None = not set
    max_text_chars: int
    max_corpus_tokens: int
    max_batch: int
    max_upload_mb: int
    expr_mb: int
    expr_seconds: float
    max_generate: int
    cache_mb: int
    max_derived_values: int
    heavy_slots: int
    max_token_heads: int
    dense_maps_mb: int
    max_map_mb: int
    file_layers: int
    file_heads: int
    file_maps: int
    file_positions: int
    pair_heads: int
    pair_cells: int
    rollout_work: int
    max_train_seconds: int
    needle_cases: int
    needle_tokens: int
    explain_components: int
    model_mb: int
    text_work: int
    gguf_header_mb: int
    gguf_items: int

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb << 20

    @property
    def expr_bytes(self) -> int:
        return self.expr_mb << 20

    @property
    def cache_bytes(self) -> int:
        return self.cache_mb << 20


def _read_budget(b: Budget, environ: Mapping[str, str]) -> float:
    raw = environ.get(b.env, "").strip()
    if not raw:
        return int(b.default) if b.integer else float(b.default)
    try:
        value: float = int(raw) if b.integer else float(raw)
    except ValueError:
        kind = "a whole number" if b.integer else "a number"
        raise SettingsError(f"{b.env} must be {kind} of {b.unit}, got {raw[:40]!r}") from None
    if not b.low <= value <= b.high:
        raise SettingsError(f"{b.env} must be between {b.low:g} and {b.high:g} {b.unit}, got {raw[:40]!r}")
    return value


def parse_models(raw: str | None) -> tuple[str, ...] | None:
    """Return the operator's model list from ATTENTION_LENS_MODELS' text (comma-separated); None when unset."""
    if raw is None or not raw.strip():
        return None
    specs = tuple(dict.fromkeys(s.strip() for s in raw.split(",") if s.strip()))
    if not specs:
        raise SettingsError(
            f"{MODELS_ENV} lists no model: write specs separated by commas, e.g. minilm,bert-base-uncased"
        )
    return specs


def current(environ: Mapping[str, str] | None = None) -> Settings:
    """Return the settings in force now (the environment's, else the defaults). Raises SettingsError."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    values = {b.key: _read_budget(b, env) for b in BUDGETS}
    return Settings(models=parse_models(env.get(MODELS_ENV)), **values)  # type: ignore[arg-type]


def limit(key: str) -> float:
    """Return one budget's value now, e.g. limit("max_batch")."""
    return getattr(current(), key)


def require(key: str, amount: float, what: str) -> None:
    """Raise BudgetError when `amount` (in the budget's unit) is over budget `key`; call it before allocating."""
    if amount > getattr(current(), key):
        raise BudgetError(over_budget(key, amount, what))


def over_budget(key: str, amount: float, what: str) -> str:
    """Return the message for `what` needing `amount` where budget `key` allows less."""
    b = _BY_KEY[key]
    cap = getattr(current(), key)
    return f"{what} needs {_fmt(amount)} {b.unit}; the budget {b.env} allows {_fmt(cap)} {b.unit}"


def _fmt(x: float) -> str:
    if isinstance(x, int) or float(x).is_integer():
        n = int(x)
        return f"{n:,}" if len(str(abs(n))) <= 30 else f"a {len(str(abs(n)))}-digit number of"
    return f"{x:,.3g}"


# ---- models ---------------------------------------------------------------------------------------------

REFUSED_MODEL = "this server offers only the models its operator listed in ATTENTION_LENS_MODELS: {choices}"
CUSTOM_OFF = (
    "custom models are off on a shared server: this one listens beyond this computer and its operator has not set "
    "ATTENTION_LENS_MODELS; choose a model from the list"
)


def is_loopback(address: str | None) -> bool:
    """Return whether a server bound to `address` is reachable only from this computer.

    None or "" is Streamlit's default: every interface, so not loopback.
    """
    if not address:
        return False
    a = address.strip().strip("[]").lower()
    if a == "localhost":
        return True
    try:
        return ipaddress.ip_address(a).is_loopback
    except ValueError:
        return False  # a host name: it may resolve beyond loopback


def check_model(spec: str, *, presets: tuple[str, ...] = (), shared: bool = False) -> None:
    """Refuse a model spec the operator did not allow, before anything is read from disk or the network.

    With ATTENTION_LENS_MODELS set only its specs pass, and the refusal is one message, the same whether or not
    a file or folder of that name exists. Without it everything passes, except on a shared server (`shared`:
    it listens beyond loopback), where only `presets` (the app's own choices) do.
    """
    allowed = current().models
    s = spec.strip() if isinstance(spec, str) else ""
    if allowed is not None:
        if s not in allowed:
            raise ModelNotAllowedError(REFUSED_MODEL.format(choices=", ".join(allowed)))
    elif shared and s not in presets:
        raise ModelNotAllowedError(CUSTOM_OFF)


def check_model_shape(
    *,
    n_layers: int,
    n_heads: int,
    d_model: int,
    d_ff: int,
    vocab_size: int,
    max_positions: int,
    type_vocab_size: int = 0,
    kv_heads: int | None = None,
    head_dim: int | None = None,
) -> None:
    """Refuse a config whose sizes are out of bounds or inconsistent, before any weight is allocated.

    kv_heads: key/value heads of a grouped-query model (they must divide n_heads); head_dim: an explicit width of
    one head (Qwen3's 128 at d_model 1024), else d_model // n_heads, which must then divide evenly.
    """
    values = dict(
        n_layers=n_layers,
        n_heads=n_heads,
        d_model=d_model,
        d_ff=d_ff,
        vocab_size=vocab_size,
        max_positions=max_positions,
        type_vocab_size=type_vocab_size,
    )
    if kv_heads is not None:
        values["kv_heads"] = kv_heads
    if head_dim is not None:
        values["head_dim"] = head_dim
    for name, v in values.items():
        lo, hi = CONFIG_BOUNDS[name]
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            shown = v if len(str(v)) <= 30 else f"a {len(str(v))}-digit number"
            raise ModelLoadError(f"config.json: {name} is {shown}; a model here has {lo:,} to {hi:,}")
    if head_dim is None and d_model % n_heads:
        raise ModelLoadError(
            f"config.json: d_model {d_model} is not a multiple of n_heads {n_heads}: heads cannot split it"
        )
    if kv_heads is not None and n_heads % kv_heads:
        raise ModelLoadError(
            f"config.json: {n_heads} query heads cannot share {kv_heads} key/value heads evenly (a multiple is needed)"
        )
    d_k = head_dim if head_dim is not None else d_model // n_heads
    kv = kv_heads if kv_heads is not None else n_heads
    attn = d_model * d_k * (2 * n_heads + 2 * kv)  # W_q, W_o and the key/value projections
    params = vocab_size * d_model + max_positions * d_model + n_layers * (attn + 3 * d_model * d_ff)
    if params > MAX_PARAMS:
        raise ModelLoadError(
            f"config.json describes about {params / 1e9:.1f} billion parameters; a model here has at most "
            f"{MAX_PARAMS / 1e9:.0f} billion"
        )
    check_model_memory(params, "config.json")


def check_model_memory(params: int, where: str) -> None:
    """Refuse a model whose float32 weights (params × 4 bytes) are over ATTENTION_LENS_MODEL_MB, before allocating."""
    mb = -(-4 * params // (1 << 20))
    if mb > limit("model_mb"):
        raise BudgetError(
            f"{where} describes about {params / 1e9:.2f} billion parameters: "
            + over_budget("model_mb", mb, "loading them in float32")
        )


# ---- one text's work ---------------------------------------------------------------------------------------


def text_work(cfg: Any, tokens: int, cell_ops: float = 0.0) -> float:
    """Return the work of one text of `tokens` tokens, in billions of operations (ATTENTION_LENS_TEXT_WORK's unit).

    cfg: a model config (n_layers, n_heads, d_model, d_ff, d_k, n_kv_heads). The forward's multiply-adds: every
    layer's weights once per token (the query, key, value and output projections and a three-matrix MLP) and each
    head's scores and weighted sum (2 × tokens² × head size); then `cell_ops` operations per attention cell
    (layers × heads × tokens²) for what the command does with the maps (stats: ~500, the statistics read each map
    several times). A pure function of sizes: it is asked before anything is tokenized into tensors or run.
    """
    d_k, kv = int(cfg.d_k), int(cfg.n_kv_heads)
    per_token = cfg.n_layers * (cfg.d_model * d_k * (2 * cfg.n_heads + 2 * kv) + 3 * cfg.d_model * cfg.d_ff)
    cells = cfg.n_layers * cfg.n_heads * tokens * tokens
    return (tokens * per_token + cells * (2 * d_k + cell_ops)) / 1e9


def tokens_within_work(cfg: Any, tokens: int, cell_ops: float = 0.0, runs: int = 1) -> int:
    """Return the most tokens (≤ `tokens`) whose `text_work`, `runs` times, ATTENTION_LENS_TEXT_WORK allows (0: none)."""
    cap = limit("text_work")
    lo, hi = 0, tokens  # text_work grows with tokens: the last count within the budget, by bisection
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if runs * text_work(cfg, mid, cell_ops) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return lo


def table() -> list[tuple[str, str, str, str]]:
    """Return (variable, unit, default, what) rows for the README and `python -m models info --settings`."""
    rows = [(MODELS_ENV, "specs, comma-separated", "unset", "the models the app may load")]
    rows += [(b.env, b.unit, _fmt(b.default), b.what) for b in BUDGETS]
    return rows
