"""Deterministic seeding: the same seed gives the same numbers, run after run, on one device."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) and ask torch for deterministic algorithms.

    On CPU with a fixed thread count this makes training bit-for-bit reproducible; on CUDA some
    kernels have no deterministic variant, in which case torch warns (``warn_only``) rather than
    fails.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0; got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    if torch.backends.cudnn.is_available():
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The order of the ``n`` examples in epoch ``epoch``: a permutation fixed by the arguments.

    A function of its arguments only, so a run resumed mid-epoch sees the same batches.
    """
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(n, generator=generator)
