"""The decoder families the trainer can build, asked of the registry: our network of that family, its
initialisation, and where its W_q, W_k, norms and MLP live, so that the trainer and the recorder never ask which
family they hold.

One `Arch` wraps a family's `TrainingRecipe` (`models.families` entry's `training`, written in the family's own
file: GPT-2: learned positions, LayerNorm; Llama: rotary positions, RMSNorm). There is no second per-family table
here. The network is the family's own module from the registry, the one every page runs, so what is trained here
is what Explore shows. Attention-only models keep the standard architecture: the MLP is one unit wide, its
weights and biases zero and frozen (gelu(0)·… and silu(0)·0 are 0, and a zero projection adds nothing), so
transformers still loads the folder as the family's ordinary model.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from .. import families
from ..capabilities import Capabilities
from ..config import Shape, TrainingRecipe
from ..errors import InputError
from ..network import ForwardOptions, ForwardResult, Network

__all__ = ["INIT_STD", "Arch", "Shape", "arch_for", "trainable"]

INIT_STD = 0.02  # GPT-2's and Llama's initialiser range: normal(0, 0.02) for every weight and embedding


class Arch:
    """One family's recipe, as the trainer uses it: its config, how its weights start, the tensors the recorder
    reads. Everything family-specific comes from the registry's TrainingRecipe."""

    def __init__(self, family: str, recipe: TrainingRecipe):
        self.family = family  # the registry's model_type
        self.recipe = recipe

    @property
    def residual(self) -> tuple[str, ...]:
        """Names of the projections back into the residual stream (init / √(2·layers))."""
        return tuple(self.recipe.residual)

    @property
    def saves_unscaled(self) -> bool:
        """Whether the family can train without 1/√d_k and still save a checkpoint transformers reads the same."""
        return bool(self.recipe.saves_unscaled)

    def config(self, shape: Shape) -> Any:
        return self.recipe.config(shape)

    def hf_config(self, shape: Shape) -> dict[str, Any]:
        """Return the keyword arguments of transformers' config that describes this model."""
        out: dict[str, Any] = self.recipe.hf_config(self.config(shape))
        return out

    def capabilities(self, shape: Shape) -> Capabilities:
        fam = families.family(self.family)
        return fam.capabilities(self.config(shape), fam.token_display)

    def build(self, shape: Shape, gen: torch.Generator) -> Network:
        """Return the family's network with the family's initialisation, drawn from gen."""
        fam = families.family(self.family)
        model = fam.network(self.config(shape))
        residual_std = INIT_STD / math.sqrt(2 * shape.layers)
        with torch.no_grad():
            for name, module in model.named_modules():
                if isinstance(module, nn.Linear):
                    std = residual_std if name.endswith(self.residual) else INIT_STD
                    module.weight.normal_(0.0, std, generator=gen)
                    if module.bias is not None:
                        module.bias.zero_()
                elif isinstance(module, nn.Embedding):
                    module.weight.normal_(0.0, INIT_STD, generator=gen)
                elif hasattr(module, "weight") and module.weight is not None and module.weight.dim() == 1:
                    module.weight.fill_(1.0)  # LayerNorm / RMSNorm gains
                    if getattr(module, "bias", None) is not None:
                        module.bias.zero_()
            if not shape.mlp:
                for layer in _layers(model):
                    for p in layer.mlp.parameters():
                        p.zero_()
                        p.requires_grad_(False)
        if not shape.scale and not self.saves_unscaled:  # the "break it" switch; a config that says so did it
            for layer in _layers(model):
                layer.attn.scale = 1.0
        return model

    def forward(self, model: nn.Module, ids: torch.Tensor, causal: bool = True, record: bool = False) -> ForwardResult:
        T = ids.shape[1]  # seq
        # No causal mask: the troubleshooting page's what-if argument, a mask that lets every query see every key.
        everything = None if causal else torch.ones(T, T, dtype=torch.bool, device=ids.device)
        how, net = ForwardOptions(causal=everything), cast(Network, model)
        return net.run_with_cache(ids, options=how)[0] if record else net(ids, options=how)

    def logits(self, model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        return model.logits(hidden)  # type: ignore[operator]  # Network.logits: the (tied) LM head

    def qk_weights(self, model: Network) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Return per layer (grad of W_q, grad of W_k) as tensors, or raise when no backward has run."""
        out: list[tuple[torch.Tensor, torch.Tensor]] = self.recipe.qk_grads(model)
        return out

    def norms(self, model: Network, mlp: bool) -> list[tuple[str, nn.Module]]:
        """Return (name, module) of every normalisation layer whose output the network uses, in order."""
        out: list[tuple[str, nn.Module]] = self.recipe.norms(model, mlp)
        return out

    def hf_state_dict(self, model: nn.Module, shape: Shape) -> dict[str, torch.Tensor]:
        """Return the model's tensors under the checkpoint's names and layouts (what transformers reads).

        The family's own port (models.families) maps the checkpoint's layout to ours; every change it makes is
        its own inverse (GPT-2's Conv1D transpose; leaving out what transformers rebuilds), so the same
        function maps ours back: the one place that knows a family's layout stays the one place.
        """
        state = {k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()}
        ported = families.family(self.family).port(state, self.config(shape))
        return {k: v.contiguous() for k, v in ported.items()}

    def write_config(self, shape: Shape, folder: Path) -> None:
        """Write the folder's config.json with transformers' own config class for this family."""
        import transformers

        hf_class = getattr(transformers, families.family(self.family).hf_config)
        hf_class(**self.hf_config(shape)).save_pretrained(folder)


def _layers(model: nn.Module) -> list[Any]:
    """Return the network's layers (each a family's block: its attributes are the family's own)."""
    net: Any = model
    return list(net.layers)


def trainable() -> tuple[str, ...]:
    """Return the families the trainer can build (the registry's entries with a training recipe)."""
    return families.trainable()


def arch_for(family: str) -> Arch:
    """Return the family's Arch; InputError names the families offered."""
    fam = families.REGISTRY.get(family) if isinstance(family, str) else None
    if fam is None or fam.training is None:
        raise InputError(f"unknown family {family!r} for training: use one of {', '.join(trainable())}")
    return Arch(fam.model_type, fam.training)
