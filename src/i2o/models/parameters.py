"""The size of a model: how many scalar parameters it has."""

from __future__ import annotations

from torch import nn


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """The number of scalar parameters of ``model``: those that require a gradient, or with
    ``trainable_only=False`` every one (``model.parameters()``, each shared tensor once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
