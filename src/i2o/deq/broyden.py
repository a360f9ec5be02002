r"""Broyden's method (Broyden, 1965) as used to solve DEQs: no line search, step size 1, low-rank
inverse-Jacobian updates, one quasi-Newton approximation per sample.

Root finding on :math:`G(z) = g(z) - z` (one sample; the batch runs the same update per sample).
:math:`H_t \approx (\partial G / \partial z)^{-1}` starts at :math:`H_0 = -I` (the inverse Jacobian
of ``G`` when ``g`` is constant), so the first step is a plain fixed-point step:

.. math::
    z_{t+1} = z_t - H_t\, G(z_t), \qquad z_1 = z_0 + G(z_0) = g(z_0).

After each step, with :math:`\Delta z = z_{t+1} - z_t` and :math:`\Delta G = G(z_{t+1}) - G(z_t)`,
:math:`H` receives a rank-one correction satisfying the secant equation :math:`H_{t+1} \Delta G =
\Delta z`:

* ``"good"`` (Broyden's first method, the update of the DEQ code the paper uses — Bai et al. 2019,
  2020 — and of torchdeq): the Jacobian update :math:`B_{t+1} = B_t + (\Delta G - B_t\Delta z)
  \Delta z^\top / \Delta z^\top\Delta z` carried to the inverse by Sherman–Morrison,

  .. math:: H_{t+1} = H_t + \frac{(\Delta z - H_t \Delta G)\, \Delta z^\top H_t}
                                  {\Delta z^\top H_t \Delta G};

* ``"bad"`` (Broyden's second method): the least-change update of the inverse itself,

  .. math:: H_{t+1} = H_t + \frac{(\Delta z - H_t \Delta G)\, \Delta G^\top}
                                  {\Delta G^\top \Delta G}.

:math:`H_t = -I + \sum_i u_i v_i^\top` is stored as its factors (``memory`` pairs at most, the
oldest dropped when full). Because the step size is 1, :math:`\Delta z = -H_t G(z_t)`, hence
:math:`\Delta z - H_t\Delta G = -H_t G(z_{t+1}) =: p`. So one product with :math:`H_t` gives both
the numerator of the update and, after it, the next step

.. math:: -H_{t+1} G(z_{t+1}) = p - u\, (v^\top G(z_{t+1})),

with :math:`(u, v) = (p / (w^\top\Delta G),\ w)`, :math:`w = -H_t^\top \Delta z` for
``"good"`` and :math:`(p / \lVert\Delta G\rVert^2,\ \Delta G)` for ``"bad"``. A step costs one
evaluation of ``g`` plus two (``"bad"``) or four (``"good"``) batched products with the stored
factors; a sample whose denominator is zero or non-finite gets no update (``u = 0``).

Naming: DEQ texts sometimes call their solver "bad Broyden" (it has no line search and starts from
:math:`-I`), but the update of the DEQ code (``v^T = Δz^T H``, then Sherman–Morrison) is Broyden's
first, "good", method; the default here is that update, so that a model trained with this package
solves the same equations as one trained with that code. ``broyden_update="bad"`` is the second
method.

The same code runs without autograd (factors in a preallocated buffer, :class:`~i2o.deq.history.
BufferStack`) or with autograd through every iterate and every low-rank factor (the unrolled arm of
the paper's Figure 5; :class:`~i2o.deq.history.ListStack`). Which iterate is returned (lowest
residual or last) is decided by :meth:`~i2o.deq.spec.SolverSpec.returns_best`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .history import make_stack
from .spec import SolverSpec
from .tracker import ResidualTracker


def broyden(
    g: Callable[[torch.Tensor], torch.Tensor],
    z0: torch.Tensor,
    spec: SolverSpec,
    tracker: ResidualTracker,
    differentiable: bool,
) -> None:
    """Broyden's method on flat ``(B, D)`` tensors, recording every iterate in ``tracker``."""
    memory = spec.memory or spec.max_iter
    updates = spec.max_iter - 1  # no update after the last step
    us = make_stack(z0, memory, updates, differentiable)
    vs = make_stack(z0, memory, updates, differentiable)
    z = z0
    fz = g(z)
    residual = fz - z  # G(z_t)
    if tracker.record(0, z, fz, residual):
        return
    step = residual  # -H_0 G(z_0) with H_0 = -I
    for t in range(1, spec.max_iter + 1):
        z_next = z + step
        fz = g(z_next)
        residual_next = fz - z_next
        if tracker.record(t, z_next, fz, residual_next) or t == spec.max_iter:
            return
        p = _minus_h_times(us, vs, residual_next)
        if spec.broyden_update == "good":
            v = _minus_h_transpose_times(us, vs, step)  # w = -H^T dz, with dz = step
            denominator = torch.linalg.vecdot(v, residual_next) - torch.linalg.vecdot(v, residual)
        else:
            v = residual_next - residual
            denominator = torch.linalg.vecdot(v, v)
        u = p * _safe_inverse(denominator).unsqueeze(1)
        us.push(u)
        vs.push(v)
        step = torch.addcmul(p, u, torch.linalg.vecdot(v, residual_next).unsqueeze(1), value=-1)
        z, residual = z_next, residual_next


def _minus_h_times(us, vs, x: torch.Tensor) -> torch.Tensor:
    r""":math:`-H x = x - \sum_i u_i (v_i^\top x)`."""
    if us.size == 0:
        return x
    return us.combine(vs.dots(x), base=x, alpha=-1.0)


def _minus_h_transpose_times(us, vs, x: torch.Tensor) -> torch.Tensor:
    r""":math:`-H^\top x = x - \sum_i v_i (u_i^\top x)`."""
    if us.size == 0:
        return x
    return vs.combine(us.dots(x), base=x, alpha=-1.0)


def _safe_inverse(denominator: torch.Tensor) -> torch.Tensor:
    """``1 / d`` per sample, and ``0`` where ``d`` is zero or non-finite (gradient-safe)."""
    usable = (denominator != 0) & torch.isfinite(denominator)
    safe = torch.where(usable, denominator, torch.ones_like(denominator))
    return torch.where(usable, 1.0 / safe, torch.zeros_like(denominator))
