"""Optimiser and learning-rate schedule of the MDEQ recipe (Bai et al. 2020; the paper's Figure 5).

Adam with *coupled* weight decay (an L2 term λ‖θ‖²/2 added to the loss, i.e. ``λθ`` added to the
gradient before Adam's moment estimates; not AdamW) and a cosine schedule stepped every batch:

.. math:: \\eta_t = \\eta_{\\min} + \\tfrac12(\\eta_0 - \\eta_{\\min})(1 + \\cos(\\pi t / T)),

``t`` the batch index, ``T`` the total number of batches. A run trained *until it fits*
(:class:`i2o.train.loop.UntilFit`) follows this schedule over its cap ``T`` until the step ``t_f``
at which it meets its fit criterion, then anneals from ``η_{t_f}`` to ``η_min`` over its ``E``
extra steps (:func:`annealed_lr`):

.. math::
    \\eta_t = \\eta_{\\min} + \\tfrac12(\\eta_{t_f} - \\eta_{\\min})(1 + \\cos(\\pi (t - t_f) / E)).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn


def cosine_lr(step: int, total_steps: int, lr: float, lr_min: float) -> float:
    """The learning rate of batch ``step`` (0-based) out of ``total_steps``."""
    if total_steps <= 0:
        raise ValueError(f"total_steps must be ≥ 1; got {total_steps}")
    progress = min(max(step, 0), total_steps) / total_steps
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + math.cos(math.pi * progress))


def annealed_lr(step: int, start: int, steps: int, lr_start: float, lr_min: float) -> float:
    """The learning rate of batch ``step`` of a cosine from ``lr_start`` (at batch ``start``) to
    ``lr_min`` (at batch ``start + steps``)."""
    if steps <= 0:
        raise ValueError(f"steps must be ≥ 1; got {steps}")
    progress = min(max(step - start, 0), steps) / steps
    return lr_min + 0.5 * (lr_start - lr_min) * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.Adam:
    """Adam with coupled L2 weight decay (``torch.optim.Adam(weight_decay=…)``), fused
    (:func:`adam`)."""
    return adam(model.parameters(), lr=lr, weight_decay=weight_decay)


def adam(parameters: Iterable[torch.Tensor], lr: float, weight_decay: float = 0.0
         ) -> torch.optim.Adam:
    """``torch.optim.Adam``, fused: one kernel whose square root is the CPU's own instruction,
    correctly rounded on every CPU. The CPU's default Adam (one tensor at a time) takes its
    square roots from MKL's vector math, whose result on a CPU outside MKL's Intel branch (any
    AMD CPU) rests on an approximate instruction that differs between vendors; portable
    numerics needs the fused one. It stays fused when a state saved by another Adam (an older
    checkpoint) is loaded into it: loading otherwise restores the saved group's settings."""
    optimizer = torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay, fused=True)
    optimizer.register_load_state_dict_pre_hook(_stay_fused)
    return optimizer


def _stay_fused(optimizer: torch.optim.Optimizer, state_dict: dict) -> dict:
    for group in state_dict["param_groups"]:
        group.update(fused=True, foreach=None)
    return state_dict


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
