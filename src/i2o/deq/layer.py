"""The DEQ layer: a fixed point of ``f(·, x)`` with a chosen solver and backward mode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch

from .backward import attach_implicit_backward
from .solve import solve
from .spec import SolverResult, SolverSpec

BackwardMode = Literal["ift", "unrolled"]
Output = Literal["fz", "z"]
BACKWARD_MODES: tuple[str, ...] = ("ift", "unrolled")
OUTPUTS: tuple[str, ...] = ("fz", "z")


@dataclass
class DEQStats:
    """Statistics of one DEQ call.

    Attributes:
        forward: the forward solve.
        backward: the IFT adjoint solve, filled in when ``backward()`` runs through the output
            (``None`` before that, and always for the unrolled mode).
    """

    forward: SolverResult
    backward: SolverResult | None = None


class DEQ:
    r"""Deep equilibrium layer :math:`z^\star = f(z^\star, x)` (Bai et al., 2019).

    Args:
        forward: solver spec of the forward pass (the paper: Broyden, F_THRES = 18, relative stop).
        backward: ``"ift"`` — forward solve without autograd, gradient from the adjoint fixed-point
            equation (:mod:`i2o.deq.backward`) solved with ``backward_spec``; ``"unrolled"`` —
            autograd through every solver iterate (including Broyden's low-rank updates).
        backward_spec: solver of the adjoint equation (``"ift"`` only). Default: Broyden, 20 steps
            (the paper's B_THRES), ``tol = 0``, relative residual.
        output: what the call returns by default: ``"fz"`` — one more application ``f(z*, x)``, what
            the head sees during training in the DEQ code the paper uses; ``"z"`` — the solver's
            iterate ``z*`` itself (its evaluation-time output). Overridable per call.

    With ``backward="unrolled"`` and ``forward.return_best=None``, the iterate returned is resolved
    once as for a differentiable solve (the last iterate when ``tol = 0``), whether or not gradients
    are recorded, so that a network is evaluated with the same rule it was trained with.
    """

    def __init__(
        self,
        forward: SolverSpec | None = None,
        backward: BackwardMode = "ift",
        backward_spec: SolverSpec | None = None,
        output: Output = "fz",
    ) -> None:
        forward = SolverSpec() if forward is None else forward
        if not isinstance(forward, SolverSpec):
            raise TypeError(f"DEQ forward must be a SolverSpec, got {type(forward).__name__}")
        if backward not in BACKWARD_MODES:
            raise ValueError(f"DEQ backward must be one of {BACKWARD_MODES}, got {backward!r}")
        if backward_spec is None:
            backward_spec = SolverSpec(method="broyden", max_iter=20, tol=0.0, stop_mode="rel")
        if not isinstance(backward_spec, SolverSpec):
            raise TypeError(
                f"DEQ backward_spec must be a SolverSpec, got {type(backward_spec).__name__}"
            )
        _check_output(output)
        if backward == "unrolled" and forward.return_best is None:
            forward = replace(forward, return_best=forward.returns_best(differentiable=True))
        self.forward_spec = forward
        self.backward = backward
        self.backward_spec = backward_spec
        self.output = output

    def __call__(
        self,
        f: Callable[[torch.Tensor, Any], torch.Tensor],
        x: Any,
        z0: torch.Tensor,
        *,
        output: Output | None = None,
    ) -> tuple[torch.Tensor, DEQStats]:
        """Solve ``z = f(z, x)`` from ``z0`` and return ``(f(z*, x) or z*, stats)``.

        ``f`` is any callable (e.g. an ``nn.Module``) whose parameters, and ``x``, receive gradients
        when autograd is enabled; ``x`` is passed to ``f`` unchanged (a tensor, or e.g. a tuple of
        per-scale injections); ``z0`` has the shape of ``f``'s output, e.g. ``(B, D)``.
        """
        output = self.output if output is None else output
        _check_output(output)
        recording = torch.is_grad_enabled()
        if self.backward == "unrolled":
            result = solve(lambda z: f(z, x), z0, self.forward_spec, differentiable=recording)
            stats = DEQStats(forward=result)
            return (result.fz if output == "fz" else result.z), stats

        result = solve(lambda z: f(z, x), z0, self.forward_spec, differentiable=False)
        stats = DEQStats(forward=result)
        if not recording:
            return (result.fz if output == "fz" else result.z), stats
        z_star = result.z.detach().requires_grad_()
        fz = f(z_star, x)

        def keep(adjoint: SolverResult) -> None:
            stats.backward = adjoint

        attach_implicit_backward(fz, z_star, self.backward_spec, on_solve=keep)
        if output == "fz":
            return fz, stats
        return z_star.detach() + (fz - fz.detach()), stats

    def __repr__(self) -> str:
        return (
            f"DEQ(forward={self.forward_spec}, backward={self.backward!r}, "
            f"backward_spec={self.backward_spec}, output={self.output!r})"
        )


def _check_output(output: str) -> None:
    if output not in OUTPUTS:
        raise ValueError(f"DEQ output must be one of {OUTPUTS}, got {output!r}")
