r"""A converged reference solve of a trained DEQ: what the model would do at its equilibrium.

The sweep (:mod:`.sweep`) runs every count ``N'`` of its grid exactly (``tol = 0``). The
reference runs the same solver until the batch's relative residual
``‖f(z) − z‖ / ‖f(z)‖`` is below ``tol`` (``1e-4`` by default) or ``cap`` steps were taken,
and scores the iterate it returns with the same :class:`~.sweep.Probe`. Comparing its metric with
the metric at ``N`` reads "more iterations do not help" at ``N' → ∞`` as far as the solver can
take it; whether the solve got there is reported batch by batch (``converged``), never assumed.

The solver is the one the model was trained with (the same fixed point is looked for from the same
``z_0``): a different method could find another fixed point of a map that has several.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np
import torch

from .solve import solve
from .spec import SolverSpec
from .sweep import Probe, _batch_residuals, _per_example_residuals

#: The relative residual a reference solve stops at (READING.md, "Book's own: near equilibrium").
REFERENCE_TOL = 1e-4


@torch.no_grad()
def reference_solve(probes: Iterable[Probe], spec: SolverSpec, cap: int,
                    tol: float = REFERENCE_TOL) -> dict[str, object]:
    """Solve each probe's batch with ``spec``'s method until ``tol`` or ``cap`` steps.

    Returns a dict (stored as is by the results cache):

    - ``metrics``: ``{name: (n_examples,)}`` per-example values at the returned iterate;
    - ``residual_rel``: ``(n_examples,)`` per-example relative residual of that iterate;
    - ``batch_residual_rel``: ``(n_batches,)`` the batch's relative residual there;
    - ``steps``: ``(n_batches,)`` solver steps taken; ``converged``: ``(n_batches,)`` whether
      the batch residual went below ``tol`` within ``cap`` steps;
    - ``cap``, ``tol``: the budget asked.
    """
    if not isinstance(spec, SolverSpec):
        raise TypeError(f"spec must be a SolverSpec; got {type(spec).__name__}")
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"cap must be an integer ≥ 1; got {cap!r}")
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1); got {tol!r}")
    asked = replace(spec, max_iter=cap, tol=float(tol), stop_mode="rel")
    columns: dict[str, list[np.ndarray]] = {}
    residuals, batch_residuals, steps, converged = [], [], [], []
    for probe in probes:
        result = solve(probe.g, probe.z0, asked, differentiable=False)
        z, fz = result.z, result.fz
        for name, value in probe.score(z, fz).items():
            columns.setdefault(name, []).append(value.detach().double().cpu().numpy())
        residuals.append(_per_example_residuals(z, fz)[0].cpu().numpy())
        whole = _batch_residuals(z, fz)[0]
        batch_residuals.append(whole)
        steps.append(int(result.n_steps))
        converged.append(bool(whole < tol))
    if not steps:
        raise ValueError("reference_solve got no probe (empty evaluation set)")
    return {
        "metrics": {name: np.concatenate(parts) for name, parts in columns.items()},
        "residual_rel": np.concatenate(residuals),
        "batch_residual_rel": np.asarray(batch_residuals),
        "steps": np.asarray(steps),
        "converged": np.asarray(converged),
        "cap": int(cap),
        "tol": float(tol),
    }
