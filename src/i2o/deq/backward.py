r"""Implicit (IFT) backward pass of a DEQ: the adjoint fixed-point equation, solved by a hook.

At a fixed point :math:`z^\star = f(z^\star, x; \theta)` the implicit function theorem gives, for a
loss :math:`\ell(z^\star)` with :math:`J = \partial f / \partial z\,(z^\star)`,

.. math::
    \frac{d\ell}{d\theta} = u^\top \frac{\partial f}{\partial \theta}, \qquad
    u = J^\top u + \nabla_{z^\star} \ell
    \quad\big(\text{i.e. } u = (I - J^\top)^{-1} \nabla_{z^\star}\ell\big)

(the hypergradient of the paper's Eq. 4 with the exact Jacobian; the paper's Section 3 analyses
the version where :math:`z^\star` is only an approximate fixed point, which is what is computed
here: :math:`J` is taken at the solver's output). As in the DEQ literature (Bai et al., 2019), ``f``
is applied once more, differentiably, at the detached solution, ``out = f(z*, x)``; a hook on
``out`` replaces the gradient arriving there by ``u``, found by a fixed-point solver on the map
:math:`u \mapsto J^\top u + \nabla\ell` (vector-Jacobian products through that one application)
with its own budget (the paper's B_THRES). Autograd then carries ``u`` through the same application
to ``θ`` and ``x``. The unrolled backward mode needs no code here: the solver itself runs under
autograd (:func:`i2o.deq.solve` with ``differentiable=True``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .solve import solve
from .spec import SolverResult, SolverSpec


def attach_implicit_backward(
    out: torch.Tensor,
    z_star: torch.Tensor,
    spec: SolverSpec,
    on_solve: Callable[[SolverResult], None] | None = None,
) -> None:
    """Make the gradient flowing into ``out = f(z_star, x)`` the IFT adjoint.

    Args:
        out: ``f(z_star, x)``, computed with autograd from ``z_star``.
        z_star: the detached solution, a leaf with ``requires_grad=True``.
        spec: solver for the adjoint equation, started from ``u_0 = 0``.
        on_solve: called with the adjoint :class:`SolverResult` each time the hook runs.
    """
    if not (out.requires_grad and z_star.requires_grad):
        raise ValueError("attach_implicit_backward needs out = f(z_star, x) built with autograd")

    solving = False  # the vector-Jacobian products below flow through ``out`` and re-enter the hook
    # ``out`` holds the hook and the hook needs ``out``: a reference cycle through autograd's C++
    # side that Python's GC cannot free. The hook runs once, then drops ``out`` and removes itself.
    held = {"out": out}

    def replace_gradient(grad: torch.Tensor) -> torch.Tensor | None:
        nonlocal solving
        if solving:
            return None

        def adjoint_map(u: torch.Tensor) -> torch.Tensor:
            (vjp,) = torch.autograd.grad(held["out"], z_star, u, retain_graph=True)
            return vjp + grad

        solving = True
        try:
            result = solve(adjoint_map, torch.zeros_like(grad), spec, differentiable=False)
        finally:
            solving = False
            handle.remove()
            held.clear()
        if on_solve is not None:
            on_solve(result)
        return result.z

    handle = out.register_hook(replace_gradient)
