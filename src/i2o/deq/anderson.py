r"""Anderson acceleration (Anderson, 1965), batched with one mixing problem per sample.

With the last ``n <= m`` iterates :math:`x_i` of a sample, their images :math:`f_i = g(x_i)` and
residuals :math:`r_i = f_i - x_i`, each step solves the regularized constrained least squares

.. math::
    \alpha = \arg\min_{\sum_i \alpha_i = 1} \Big\lVert \sum_i \alpha_i r_i \Big\rVert^2
              + \lambda \lVert \alpha \rVert^2

through its KKT system :math:`\begin{pmatrix} 0 & 1^\top \\ 1 & R R^\top + \lambda I
\end{pmatrix} \begin{pmatrix} \nu \\ \alpha \end{pmatrix} = \begin{pmatrix} 1 \\ 0
\end{pmatrix}` and moves to

.. math:: z_{t+1} = \beta \sum_i \alpha_i f_i + (1 - \beta) \sum_i \alpha_i x_i .

The regularization is relative: the Gram matrix is divided by the largest :math:`\lVert r_i
\rVert^2` of the sample's history before :math:`\lambda I` is added (the same minimizer as a
:math:`\lambda` scaled by that norm, and a well-scaled KKT system). An absolute :math:`\lambda`,
as in the DEQ tutorial code, dominates the Gram matrix once residuals are small and stalls the
solver near :math:`\sqrt{\lambda}`.
The Gram matrix :math:`R R^\top` is updated by one row per step (``n`` inner products, computed as
:math:`\langle r, f_j\rangle - \langle r, x_j\rangle` from the stored ``x`` and ``f``), not rebuilt.
The first step (``n = 1``) is a damped fixed-point step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .history import make_stack
from .spec import SolverSpec
from .tracker import ResidualTracker


def anderson(
    g: Callable[[torch.Tensor], torch.Tensor],
    z0: torch.Tensor,
    spec: SolverSpec,
    tracker: ResidualTracker,
    differentiable: bool,
) -> None:
    """Anderson-accelerated iteration on flat ``(B, D)`` tensors, recording every iterate."""
    xs = make_stack(z0, spec.m, spec.max_iter, differentiable)
    fs = make_stack(z0, spec.m, spec.max_iter, differentiable)
    residual_inner: dict[tuple[int, int], torch.Tensor] = {}  # (i, j) -> <r_i, r_j>, i <= j
    z = z0
    fz = g(z)
    residual = fz - z
    if tracker.record(0, z, fz, residual):
        return
    for t in range(1, spec.max_iter + 1):
        xs.push(z)
        fs.push(fz)
        ids = xs.ids()
        newest = t - 1
        row = fs.dots(residual) - xs.dots(residual)  # <r_newest, r_j>, j in ids order
        for column, other in enumerate(ids):
            residual_inner[(other, newest)] = row[:, column]
        for key in [key for key in residual_inner if key[0] not in ids]:
            del residual_inner[key]
        gram = torch.stack(
            [torch.stack([residual_inner[min(i, j), max(i, j)] for j in ids], 1) for i in ids], 1
        )
        alpha = _mixing_weights(gram, spec.lam)
        z = fs.combine(alpha)
        if spec.beta != 1.0:
            z = xs.combine(alpha, base=spec.beta * z, alpha=1.0 - spec.beta)
        fz = g(z)
        residual = fz - z
        if tracker.record(t, z, fz, residual):
            return


def _mixing_weights(gram: torch.Tensor, lam: float) -> torch.Tensor:
    """Solve the KKT system of the module docstring for ``alpha`` (B, n), one system per sample."""
    batch, n, _ = gram.shape
    ones = gram.new_ones((batch, n, 1))
    top = torch.cat([gram.new_zeros((batch, 1, 1)), ones.transpose(1, 2)], dim=2)
    scale = gram.diagonal(dim1=1, dim2=2).amax(dim=1)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # all residuals exactly zero
    identity = torch.eye(n, dtype=gram.dtype, device=gram.device)
    regularized = gram / scale[:, None, None] + lam * identity
    bottom = torch.cat([ones, regularized], dim=2)
    kkt = torch.cat([top, bottom], dim=1)
    rhs = gram.new_zeros((batch, n + 1))
    rhs[:, 0] = 1.0
    return torch.linalg.solve(kkt, rhs)[:, 1:]
