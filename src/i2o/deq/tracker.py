"""Bookkeeping shared by the solvers: residual traces, stopping, lowest-residual iterate, NaN/inf.

Every solver calls :meth:`ResidualTracker.record` once per evaluated iterate ``z_t`` (``t = 0``: the
initial guess) and stops when it returns ``True``. Residuals are defined in :mod:`i2o.deq.spec`.
"""

from __future__ import annotations

import math

import torch

from .spec import SolverResult, SolverSpec


class ResidualTracker:
    """Records the residual of each iterate and decides when to stop.

    The iterate to return is kept by reference (iterates are never modified in place by the
    solvers), so tracking costs no copy and, in differentiable mode, the returned tensor keeps its
    autograd history.
    """

    def __init__(self, spec: SolverSpec, differentiable: bool) -> None:
        self.spec = spec
        self.keep_best = spec.returns_best(differentiable)
        self.trace_abs: list[float] = []
        self.trace_rel: list[float] = []
        self.lowest_abs = math.inf
        self.lowest_rel = math.inf
        self.lowest_step = 0
        self.converged = False
        self.nonfinite = False
        self._z: torch.Tensor | None = None
        self._fz: torch.Tensor | None = None
        self._step = 0

    def record(self, t: int, z: torch.Tensor, fz: torch.Tensor, residual: torch.Tensor) -> bool:
        """Record ``z_t`` with ``fz = g(z_t)`` and ``residual = fz - z``; return "stop now"."""
        with torch.no_grad():
            norms = torch.stack(
                [torch.linalg.vector_norm(residual), torch.linalg.vector_norm(fz)]
            ).double()
            r_abs, norm_fz = norms.tolist()
        if norm_fz > 0:
            r_rel = r_abs / norm_fz
        else:
            r_rel = 0.0 if r_abs == 0 else math.inf
        self.trace_abs.append(r_abs)
        self.trace_rel.append(r_rel)
        if not (math.isfinite(r_abs) and math.isfinite(norm_fz)):
            self.nonfinite = True
            if self._z is None:  # z_0 itself: nothing finite to return, the flag says so
                self._z, self._fz, self._step = z, fz, t
            return True
        current = r_rel if self.spec.stop_mode == "rel" else r_abs
        is_lowest = current < (self.lowest_rel if self.spec.stop_mode == "rel" else self.lowest_abs)
        self.lowest_abs = min(self.lowest_abs, r_abs)
        self.lowest_rel = min(self.lowest_rel, r_rel)
        if is_lowest:
            self.lowest_step = t
        if is_lowest or not self.keep_best or self._z is None:
            self._z, self._fz, self._step = z, fz, t
        if current < self.spec.tol:
            self.converged = True
            return True
        return False

    def result(self, shape: torch.Size) -> SolverResult:
        """The :class:`SolverResult`, with ``z`` and ``fz`` reshaped to ``shape``."""
        assert self._z is not None and self._fz is not None, "record() was never called"
        n_steps = len(self.trace_abs) - 1
        diverged = self.nonfinite or (
            self.trace_abs[-1] > self.spec.divergence_factor * self.trace_abs[0]
        )
        return SolverResult(
            z=self._z.reshape(shape),
            fz=self._fz.reshape(shape),
            trace_abs=self.trace_abs,
            trace_rel=self.trace_rel,
            n_steps=n_steps,
            step=self._step,
            lowest_abs=self.lowest_abs,
            lowest_rel=self.lowest_rel,
            lowest_step=self.lowest_step,
            converged=self.converged,
            diverged=diverged,
            nonfinite=self.nonfinite,
            spec=self.spec,
        )
