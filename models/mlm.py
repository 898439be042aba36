"""BERT's masked-LM head, ported from checkpoints that carry one (`cls.predictions.*`, e.g. bert-base-uncased).

Only head importance uses it (Michel et al.'s loss is the masked-LM loss where there is one). Module names
mirror Hugging Face's `BertLMPredictionHead`, so porting is a strict state-dict copy (`models.weights.port_mlm_head`):

    last hidden (batch, seq, d_model) → transform.dense → act → transform.LayerNorm → decoder (tied to the
    word embeddings) + bias → logits (batch, seq, vocab)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .bert import _ACTIVATIONS
from .config import BertConfig

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
