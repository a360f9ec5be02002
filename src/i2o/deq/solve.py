"""One entry point for every solver: :func:`solve`."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .anderson import anderson
from .broyden import broyden
from .fixed_point import fixed_point
from .spec import SolverResult, SolverSpec
from .tracker import ResidualTracker

_SOLVERS = {"fixed_point": fixed_point, "anderson": anderson, "broyden": broyden}


def solve(
    g: Callable[[torch.Tensor], torch.Tensor],
    z0: torch.Tensor,
    spec: SolverSpec,
    *,
    differentiable: bool | None = None,
) -> SolverResult:
    """Look for a fixed point :math:`z = g(z)` starting from ``z0``.

    Args:
        g: batched map ``Tensor(B, ...) -> Tensor(B, ...)`` (same shape as its input). Samples are
            independent for the quasi-Newton solvers: each has its own Anderson mixing weights or
            Broyden inverse Jacobian; residuals and stopping are batch-level (:mod:`i2o.deq.spec`).
        z0: initial guess, shape ``(B, ...)`` with ``B >= 1``.
        spec: the solver and its budget.
        differentiable: record autograd through every iterate (the unrolled backward mode).
            ``None`` follows ``torch.is_grad_enabled()``; ``True`` runs under ``enable_grad``,
            ``False`` under ``no_grad``.

    Returns:
        :class:`SolverResult`: ``z``, ``g(z)``, residual traces and flags.
    """
    if not isinstance(spec, SolverSpec):
        raise TypeError(f"spec must be a SolverSpec, got {type(spec).__name__}")
    if not isinstance(z0, torch.Tensor) or z0.dim() < 1 or z0.shape[0] < 1:
        raise ValueError("z0 must be a tensor of shape (B, ...) with B >= 1")
    if differentiable is None:
        differentiable = torch.is_grad_enabled()
    shape = z0.shape
    batch = shape[0]

    def flat_g(z_flat: torch.Tensor) -> torch.Tensor:
        out = g(z_flat.reshape(shape))
        if out.shape != shape:
            raise ValueError(
                f"g must return the shape of its input {tuple(shape)}, got {tuple(out.shape)}"
            )
        return out.reshape(batch, -1)

    tracker = ResidualTracker(spec, differentiable)
    context = torch.enable_grad() if differentiable else torch.no_grad()
    with context:
        _SOLVERS[spec.method](flat_g, z0.reshape(batch, -1), spec, tracker, differentiable)
    return tracker.result(shape)
