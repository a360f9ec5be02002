r"""What a fixed-point solve is asked to do (:class:`SolverSpec`) and what it reports
(:class:`SolverResult`).

A solve looks for :math:`z^\star = g(z^\star)` for a batched map
``g: Tensor(B, ...) -> Tensor(B, ...)``.
Residuals are measured on the whole batch at once, as in the DEQ code the paper builds on
(Bai et al., 2020; the ``cvg_abs`` / ``cvg_rel`` columns of the paper's Figure 2 CSVs):

.. math::
    r_{\mathrm{abs}}(z) = \lVert g(z) - z \rVert_F, \qquad
    r_{\mathrm{rel}}(z) = \lVert g(z) - z \rVert_F \,/\, \lVert g(z) \rVert_F .

Iterate numbering: ``z_0`` is the initial guess, ``z_t`` the iterate after ``t`` solver steps.
Every solver evaluates ``g`` once per step plus once at ``z_0``, so ``n_steps`` steps cost
``n_steps + 1`` evaluations, and the residual of every iterate, the returned one included, is known.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch

Method = Literal["fixed_point", "anderson", "broyden"]
StopMode = Literal["rel", "abs"]
BroydenUpdate = Literal["good", "bad"]

METHODS: tuple[str, ...] = ("fixed_point", "anderson", "broyden")
STOP_MODES: tuple[str, ...] = ("rel", "abs")
BROYDEN_UPDATES: tuple[str, ...] = ("good", "bad")


@dataclass(frozen=True)
class SolverSpec:
    r"""How to solve :math:`z = g(z)`; every field is validated on construction.

    Attributes:
        method: ``"fixed_point"`` (:math:`z \leftarrow (1-\beta) z + \beta g(z)`), ``"anderson"``
            (Anderson acceleration, Anderson 1965) or ``"broyden"`` (Broyden's quasi-Newton method
            without line search, Broyden 1965; see :mod:`i2o.deq.broyden`).
        max_iter: maximum number of solver steps ``N`` (the paper's F_THRES / B_THRES); ``0``
            returns ``z_0`` after one evaluation of ``g``.
        tol: stop as soon as the residual selected by ``stop_mode`` is strictly below ``tol``;
            ``tol = 0`` therefore runs exactly ``max_iter`` steps (unless an iterate is non-finite).
        stop_mode: which residual ``tol`` applies to and which residual "lowest" refers to:
            ``"rel"`` or ``"abs"`` (module docstring).
        beta: damping of fixed-point iteration and mixing parameter of Anderson
            (``1.0``: undamped). Unused by Broyden (its step size is always 1).
        m: Anderson history size (number of past iterates combined).
        lam: Tikhonov regularization of Anderson's least-squares problem.
        memory: number of rank-one pairs Broyden keeps; ``None`` keeps one per step (``max_iter``).
            When full, the oldest pair is overwritten.
        broyden_update: ``"good"`` (Broyden's first method, the update of the DEQ code the paper
            uses and of torchdeq) or ``"bad"`` (Broyden's second method); see
            :mod:`i2o.deq.broyden`.
        return_best: return the iterate of lowest residual (``True``) or the last one (``False``).
            ``None`` (default): the last iterate when the solve is differentiable and ``tol == 0``
            (the unrolled network of the paper's Figure 5 is exactly ``N`` steps), the
            lowest-residual iterate otherwise (as the DEQ code does).
        divergence_factor: the solve is flagged ``diverged`` when the final absolute residual
            exceeds ``divergence_factor`` times the initial one (or any iterate is non-finite).
    """

    method: Method = "broyden"
    max_iter: int = 18
    tol: float = 0.0
    stop_mode: StopMode = "rel"
    beta: float = 1.0
    m: int = 5
    lam: float = 1e-4
    memory: int | None = None
    broyden_update: BroydenUpdate = "good"
    return_best: bool | None = None
    divergence_factor: float = 10.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"SolverSpec.method must be one of {METHODS}, got {self.method!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int):
            raise ValueError(f"SolverSpec.max_iter must be an int >= 0, got {self.max_iter!r}")
        if self.max_iter < 0:
            raise ValueError(f"SolverSpec.max_iter must be an int >= 0, got {self.max_iter}")
        if not (isinstance(self.tol, int | float) and math.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"SolverSpec.tol must be a finite float >= 0, got {self.tol!r}")
        if self.stop_mode not in STOP_MODES:
            raise ValueError(
                f"SolverSpec.stop_mode must be one of {STOP_MODES}, got {self.stop_mode!r}"
            )
        if not (isinstance(self.beta, int | float) and 0 < self.beta <= 1):
            raise ValueError(f"SolverSpec.beta must be in (0, 1], got {self.beta!r}")
        if isinstance(self.m, bool) or not isinstance(self.m, int) or self.m < 1:
            raise ValueError(f"SolverSpec.m (Anderson history) must be an int >= 1, got {self.m!r}")
        if not (isinstance(self.lam, int | float) and self.lam >= 0):
            raise ValueError(f"SolverSpec.lam must be a float >= 0, got {self.lam!r}")
        if self.memory is not None and (
            isinstance(self.memory, bool) or not isinstance(self.memory, int) or self.memory < 1
        ):
            raise ValueError(
                f"SolverSpec.memory (Broyden) must be None or an int >= 1, got {self.memory!r}"
            )
        if self.broyden_update not in BROYDEN_UPDATES:
            raise ValueError(
                f"SolverSpec.broyden_update must be one of {BROYDEN_UPDATES}, "
                f"got {self.broyden_update!r}"
            )
        if self.return_best not in (None, True, False):
            raise ValueError(
                f"SolverSpec.return_best must be None, True or False, got {self.return_best!r}"
            )
        if not (isinstance(self.divergence_factor, int | float) and self.divergence_factor > 1):
            raise ValueError(
                f"SolverSpec.divergence_factor must be a float > 1, got {self.divergence_factor!r}"
            )

    def returns_best(self, differentiable: bool) -> bool:
        """Whether the solve returns the lowest-residual iterate (resolves ``return_best=None``)."""
        if self.return_best is not None:
            return self.return_best
        return not (differentiable and self.tol == 0)

    def to_dict(self) -> dict:
        """Plain dict, e.g. as part of a results-cache key."""
        return asdict(self)


@dataclass
class SolverResult:
    """Outcome of one solve.

    Attributes:
        z: the returned iterate, shape of ``z_0`` (in the autograd graph in differentiable mode).
        fz: ``g(z)`` for the returned ``z`` (already computed by the solver; same graph status).
        trace_abs, trace_rel: residuals of ``z_0, z_1, ..., z_{n_steps}`` (length ``n_steps + 1``);
            a non-finite iterate appears as ``inf``/``nan`` in the trace.
        n_steps: solver steps taken (``max_iter`` unless stopped by ``tol`` or a non-finite value).
        step: index ``t`` of the returned iterate ``z_t``.
        lowest_rel, lowest_abs: lowest residuals over the finite iterates (each over its own mode).
        lowest_step: index of the iterate with the lowest residual in ``stop_mode``.
        converged: the ``stop_mode`` residual went below ``tol`` (never true for ``tol = 0``).
        diverged: a non-finite value occurred, or
            ``trace_abs[-1] > divergence_factor * trace_abs[0]``.
        nonfinite: some evaluation of ``g`` or some iterate contained NaN/inf; the solve stopped
            there and ``z`` is the best (or last) finite iterate before it.
        spec: the spec that ran.
    """

    z: torch.Tensor
    fz: torch.Tensor
    trace_abs: list[float]
    trace_rel: list[float]
    n_steps: int
    step: int
    lowest_abs: float
    lowest_rel: float
    lowest_step: int
    converged: bool
    diverged: bool
    nonfinite: bool
    spec: SolverSpec = field(repr=False)

    @property
    def residual_rel(self) -> float:
        """Relative residual of the returned iterate."""
        return self.trace_rel[self.step]

    @property
    def residual_abs(self) -> float:
        """Absolute residual of the returned iterate."""
        return self.trace_abs[self.step]

    def stats(self) -> dict:
        """Statistics only (no tensors), for logging or the results cache."""
        return {
            "method": self.spec.method,
            "trace_abs": list(self.trace_abs),
            "trace_rel": list(self.trace_rel),
            "n_steps": self.n_steps,
            "step": self.step,
            "lowest_abs": self.lowest_abs,
            "lowest_rel": self.lowest_rel,
            "lowest_step": self.lowest_step,
            "converged": self.converged,
            "diverged": self.diverged,
            "nonfinite": self.nonfinite,
        }
