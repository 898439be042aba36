"""BERT's masked-LM head, ported from checkpoints that carry one (`cls.predictions.*`, e.g. bert-base-uncased).

Only head importance uses it (Michel et al.'s loss is the masked-LM loss where there is one). Module names
mirror Hugging Face's `BertLMPredictionHead`, so porting is a strict state-dict copy:

    last hidden (batch, seq, d_model) → transform.dense → act → transform.LayerNorm → decoder (tied to the
    word embeddings) + bias → logits (batch, seq, vocab)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .bert import _ACTIVATIONS
from .config import BertConfig
from .errors import ModelLoadError

PREFIX = "cls.predictions."


class Transform(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)
        self.act = _ACTIVATIONS[cfg.hidden_act]
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
    with torch.device("meta"):
        head = MlmHead(cfg, tied=tied)
    expected = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    missing = sorted(set(expected) - set(theirs))
    unexpected = sorted(set(theirs) - set(expected))
    wrong = sorted(k for k in set(expected) & set(theirs) if tuple(theirs[k].shape) != expected[k])
    if missing or unexpected or wrong:
        raise ModelLoadError(
            "the checkpoint's masked-LM head does not match BERT's: "
            f"missing {missing[:3]}, unexpected {unexpected[:3]}, wrong shape {wrong[:3]}"
        )
    head.load_state_dict({k: v.detach() for k, v in theirs.items()}, strict=True, assign=True)
    return head
