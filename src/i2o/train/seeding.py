"""Deterministic seeding: the same seed gives the same numbers, run after run, on one device."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) and ask torch for deterministic algorithms.

    On CPU with a fixed thread count this makes training bit-for-bit reproducible; on CUDA some
    kernels have no deterministic variant, in which case torch warns (``warn_only``) rather than
    fails. Deterministic mode also fills every new tensor with NaN, to expose a kernel that reads
    memory it never wrote; that fill computes nothing (about 9 % of an MDEQ training step), so it
    is off (:func:`fill_uninitialized`) unless ``I2O_FILL_UNINITIALIZED=1``, which a test sets to
    check that the book's training and sweeps give the same bits with it.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0; got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = fill_uninitialized()
    if torch.backends.cudnn.is_available():
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def fill_uninitialized() -> bool:
    """Whether new tensors are filled with NaN in deterministic mode (``I2O_FILL_UNINITIALIZED``,
    default off)."""
    return os.environ.get("I2O_FILL_UNINITIALIZED", "0").strip() == "1"


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The order of the ``n`` examples in epoch ``epoch``: a permutation fixed by the arguments.

    A function of its arguments only, so a run resumed mid-epoch sees the same batches.
    """
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(n, generator=generator)
