r"""Damped fixed-point (Picard / Krasnosel'skii–Mann) iteration.

.. math:: z_{t+1} = (1 - \beta)\, z_t + \beta\, g(z_t), \qquad \beta \in (0, 1]

(``beta = 1``: plain iteration, the inner solver of the paper's Section 3 analysis with ``P_N``
a polynomial of the Jacobian). Converges linearly when ``g`` is a contraction.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .spec import SolverSpec
from .tracker import ResidualTracker


def fixed_point(
    g: Callable[[torch.Tensor], torch.Tensor],
    z0: torch.Tensor,
    spec: SolverSpec,
    tracker: ResidualTracker,
    differentiable: bool,
) -> None:
    """Iterate on flat ``(B, D)`` tensors, recording every iterate in ``tracker``."""
    z = z0
    fz = g(z)
    residual = fz - z
    if tracker.record(0, z, fz, residual):
        return
    for t in range(1, spec.max_iter + 1):
        z = fz if spec.beta == 1.0 else torch.add(z, residual, alpha=spec.beta)
        fz = g(z)
        residual = fz - z
        if tracker.record(t, z, fz, residual):
            return
