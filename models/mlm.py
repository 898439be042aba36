"""BERT's masked-LM head, ported from checkpoints that carry one (`cls.predictions.*`, e.g. bert-base-uncased).

Only head importance uses it (Michel et al.'s loss is the masked-LM loss where there is one). Module names
mirror Hugging Face's `BertLMPredictionHead`, so porting is a strict state-dict copy (`models.weights.port_mlm_head`):

    last hidden (batch, seq, d_model) → transform.dense → act → transform.LayerNorm → decoder (tied to the
    word embeddings) + bias → logits (batch, seq, vocab)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .network import ACTIVATIONS
from .porting import on_meta, strict_copy

PREFIX = "cls.predictions."


class Transform(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)
        self.act = ACTIVATIONS[cfg.hidden_act]
        self.LayerNorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(x)))


class MlmHead(nn.Module):
    """Masked-LM head: logits over the vocabulary for each position's last hidden state.

    tied: the decoder is the encoder's word-embedding matrix (BERT's default), shared through `tie`, not
    copied and not part of this module's state dict; otherwise the head has its own `decoder`.
    """

    def __init__(self, cfg: BertConfig, tied: bool = True):
        super().__init__()
        self.transform = Transform(cfg)
        self.decoder = None if tied else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self._tied_to: list[nn.Embedding] = []  # a plain list: not a submodule, so no second copy anywhere

    def tie(self, word_embeddings: nn.Embedding) -> MlmHead:
        """Use the encoder's word embeddings as the decoder (call after both are on their device)."""
        self._tied_to = [word_embeddings]
        return self

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Return logits (..., vocab) for hidden states (..., d_model)."""
        if self.decoder is not None:
            weight = self.decoder.weight
        elif self._tied_to:
            weight = self._tied_to[0].weight
        else:
            raise RuntimeError("the masked-LM head's decoder is tied but was never tied: call tie(embeddings)")
        return F.linear(self.transform(hidden), weight, self.bias)


def has_mlm_head(unexpected_keys: list[str]) -> bool:
    """Return whether a BertModel load left masked-LM head weights unused (the checkpoint carries a head)."""
    return any(str(k).startswith(PREFIX) for k in unexpected_keys)


def port_mlm_head(hf_mlm: Any, cfg: BertConfig) -> MlmHead:
    """Return our MlmHead holding the tensors of a transformers BertForMaskedLM, after a strict key check.

    A tied decoder is not copied: call `tie(encoder.embeddings.word_embeddings)` on the result.
    """
    state = hf_mlm.state_dict()
    embeddings = hf_mlm.get_input_embeddings().weight
    decoder = state.get(PREFIX + "decoder.weight")
    tied = decoder is None or decoder.data_ptr() == embeddings.data_ptr()
    # decoder.bias is the same tensor as bias in transformers' head; tied decoder weights live in the encoder.
    skip = {PREFIX + "decoder.bias"} | ({PREFIX + "decoder.weight"} if tied else set())
    theirs = {k[len(PREFIX) :]: v for k, v in state.items() if k.startswith(PREFIX) and k not in skip}
    with on_meta():
        head = MlmHead(cfg, tied=tied)
    strict_copy(head, theirs, "BERT's masked-LM head")
    return head


def load_mlm_head(source: str, cfg: BertConfig, info: dict[str, Any]) -> MlmHead | None:
    """Return the masked-LM head of a checkpoint that carries one (the BertModel load left `cls.predictions.*`
    unused, `info`); None when it has none or it is incomplete.

    A second, memory-mapped read of the same files (tens of ms): the BertModel load stays exactly what it was
    for every checkpoint, head or not.
    """
    if not has_mlm_head(info.get("unexpected_keys", [])):
        return None
    from transformers import BertForMaskedLM

    try:
        loaded: Any = BertForMaskedLM.from_pretrained(
            source, attn_implementation="eager", dtype=torch.float32, weights_only=True, output_loading_info=True
        )
        hf_mlm, more = loaded
    except Exception:  # noqa: BLE001 - the encoder loaded; without a readable head importance uses its proxy
        return None
    gaps = [*more.get("missing_keys", []), *more.get("mismatched_keys", [])]
    if any(str(k if isinstance(k, str) else k[0]).startswith(PREFIX) for k in gaps):
        return None  # transformers would have filled the gaps with random values
    return port_mlm_head(hf_mlm, cfg)
