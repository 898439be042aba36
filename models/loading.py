"""Reading weights and tokenizers with transformers, and the one strict copy into our modules.

transformers is imported here (and in models/mlm.py's head loader, models/gguf.py's reader) only, inside the
functions that need it, so that `import models` does not pay its import time for nothing. Weights are read as
safetensors or with `torch.load(weights_only=True)`; remote code is never trusted; its forward never runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .errors import ModelLoadError, one_line
from .families import Family, State
from .network import Network
from .porting import on_meta, strict_copy

# transformers configs take this keyword (PretrainedConfig **kwargs), which their typed signatures do not list.
EAGER: dict[str, Any] = {"attn_implementation": "eager"}
HF_LOAD_ARGS: dict[str, Any] = dict(
    attn_implementation="eager",
    dtype=torch.float32,
    weights_only=True,
    trust_remote_code=False,
    output_loading_info=True,
)
RANDOM_SEED = 0


def quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def build(fam: Family, cfg: Any, state: State) -> Network:
    """Return the family's network holding `state` (transformers' key names), after the family's port."""
    with on_meta():
        ours = fam.network(cfg)
    strict_copy(ours, fam.port(state, cfg), f"a {fam.model_type} model")
    return ours


def _transformers_class(name: str) -> Any:
    import transformers

    return getattr(transformers, name)


SAFETENSORS = "model.safetensors"
# Buffers older checkpoints saved beside the weights, which every model makes for itself: not weights.
BUFFERS = ("embeddings.position_ids", ".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")


def read_direct(source: str, fam: Family, cfg: Any) -> tuple[State, dict[str, Any]] | None:
    """Return a folder's one `model.safetensors` read directly when its keys (whole, or under one prefix such as
    `bert.`) are, after the family's port, exactly our network's, every shape equal; else None.

    The same tensors transformers' class would hand over (float32), without importing and building that class —
    about 3 s of CPU per process, most of a CLI command's start. Anything else (shards, `.bin`, legacy names,
    a missing or extra weight) is None: read_checkpoint then lets transformers read it, and refuse it.
    """
    file = Path(source) / SAFETENSORS
    if not file.is_file():
        return None
    from safetensors import SafetensorError, safe_open

    with on_meta():
        expected = {k: tuple(v.shape) for k, v in fam.network(cfg).state_dict().items()}
    try:
        with safe_open(str(file), framework="pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys() if not k.endswith(BUFFERS)}  # header
            for prefix in ["", *sorted({k.split(".", 1)[0] + "." for k in shapes if "." in k})]:
                names = {k[len(prefix) :]: k for k in shapes if k.startswith(prefix)}
                meta = {n: torch.empty(shapes[k], device="meta") for n, k in names.items()}
                ported = fam.port(meta, cfg)
                if {k: tuple(v.shape) for k, v in ported.items()} != expected:
                    continue
                state = {}
                for n, k in names.items():
                    t = f.get_tensor(k)
                    state[n] = t.to(torch.float32) if t.is_floating_point() else t
                unexpected = sorted(k for k in shapes if not k.startswith(prefix))
                return state, {"missing_keys": [], "unexpected_keys": unexpected, "mismatched_keys": []}
    except (SafetensorError, OSError, ValueError, RuntimeError):
        return None  # transformers reads it again and says what is wrong
    return None


def read_checkpoint(source: str, fam: Family, cfg: Any = None) -> tuple[State, dict[str, Any]]:
    """Return a checkpoint's state dict (transformers' key names) and loading info, read by the family's class
    (or directly, read_direct, when given our config and the file is plainly ours).

    transformers fills weights a checkpoint lacks with random values; we refuse instead.
    """
    if cfg is not None:
        direct = read_direct(source, fam, cfg)
        if direct is not None:
            return direct
    cls = _transformers_class(fam.hf_model)
    try:
        loaded: Any = cls.from_pretrained(source, **HF_LOAD_ARGS)  # (model, loading info) with these args
        hf_model, info = loaded
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        raise ModelLoadError(f"cannot read the weights of {source}: {one_line(err)}") from err
    except Exception as err:  # safetensors raises its own error types on corrupted files
        raise ModelLoadError(f"cannot read the weights of {source}: {type(err).__name__}: {one_line(err)}") from err
    ignorable = ("pooler.", "attn.bias", "masked_bias", "rotary_emb.inv_freq")
    missing = [str(k) for k in info.get("missing_keys", []) if not any(p in str(k) for p in ignorable)]
    # A head tied to the embeddings is not stored twice: its key is missing by design.
    tied = bool(getattr(hf_model.config, "tie_word_embeddings", False))
    missing = [k for k in missing if not (tied and k == "lm_head.weight")]
    mismatched = info.get("mismatched_keys", [])
    if missing or mismatched:
        names = [str(k) for k in (missing or mismatched)]
        raise ModelLoadError(
            f"checkpoint {source} lacks {len(missing)} and mismatches {len(mismatched)} weights "
            f"(e.g. {', '.join(names[:3])}): refusing to fill them with random values"
        )
    return hf_model.state_dict(), info


def random_state(fam: Family, fields: dict[str, Any]) -> tuple[State, dict[str, Any]]:
    """Return the state dict and config dict of a transformers model of the family, initialised its own way
    (normal(0, 0.02) and so on) from seed 0, without touching the global random state."""
    hf_cfg = _transformers_class(fam.hf_config)(**fields, **EAGER)
    cls = _transformers_class(fam.hf_model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        hf_model = cls(hf_cfg)
    return hf_model.state_dict(), hf_cfg.to_dict()


def load_tokenizer(source: str | Path, pad_with_eos: bool = False, **kwargs: Any) -> Any:
    """Return a checkpoint's tokenizer; pad_with_eos gives one without a pad token <|endoftext|> (masked out)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(source), trust_remote_code=False, **kwargs)
    except Exception as err:
        raise ModelLoadError(f"cannot load the tokenizer of {source}: {one_line(err)}") from err
    if pad_with_eos and tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok


SHIPPED_TOKENIZER = Path(__file__).resolve().parent / "data" / "tokenizer.json"
EOS = "<|endoftext|>"


def shipped_tokenizer() -> Any:
    """Return the project's small byte-level BPE (English and Chinese) as a GPT2Tokenizer (tokenizers-backed)."""
    from tokenizers import Tokenizer
    from transformers import GPT2Tokenizer  # transformers 5: GPT2TokenizerFast is this same class

    if not SHIPPED_TOKENIZER.is_file():
        raise ModelLoadError(
            f"the shipped tokenizer is missing: {SHIPPED_TOKENIZER} (run models/data/train_tokenizer.py)"
        )
    tok = GPT2Tokenizer(
        tokenizer_object=Tokenizer.from_file(str(SHIPPED_TOKENIZER)), bos_token=EOS, eos_token=EOS, unk_token=EOS
    )
    tok.model_max_length = 1024
    tok.pad_token = tok.eos_token
    return tok
