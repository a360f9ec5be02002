"""The one generic sweep: a trained DEQ evaluated with ``N + ΔN`` inner iterations.

The test-gap experiments of the paper (Section 4, Figures 2, G.1, G.2, G.4; Figure 5 reads the same
numbers as accuracies) change nothing at evaluation but the number of solver iterations, with a
tolerance so low (here ``0``) that exactly the asked number is always run. For every iteration
count ``n`` of a grid this module reports, per evaluated example, the metrics of the iterate the
solver returns after ``n`` steps and its fixed-point residuals
``‖f(z) − z‖ / ‖f(z)‖`` (relative) and ``‖f(z) − z‖`` (absolute).

A task plugs in through :class:`Probe` — for one batch: the map ``g(z) = f(z, x)``, the initial
state, and a ``score(z, f(z))`` returning per-example metric values (lower is better by the
book's convention, but the sweep does not care). Nothing here knows about images, text or models:
the stability chapter (:func:`i2o.train.evaluate.evaluate_iterations`) and the deq_gaps chapter's
jobs (:mod:`i2o.chapters.deq_gaps`) both evaluate their networks through :func:`sweep_iterations`.

**One solve per batch.** With ``tol = 0`` a solver's first ``n`` steps do not depend on its budget
(fixed-point iteration, Anderson, and Broyden with unbounded memory), so one solve of ``max(grid)``
steps visits every ``z_n``; the sweep scores the iterate a solve of ``n`` steps would return while
the long solve runs (``shared_solve=True``). Which iterate that is follows the solver's rule
(:meth:`i2o.deq.SolverSpec.returns_best`): the last one, or the one of lowest batch residual among
``z_0 … z_n``. ``shared_solve=False`` solves once per ``n`` instead (the tests check they agree).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from .solve import solve
from .spec import SolverSpec

Score = Callable[[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]


@dataclass
class Probe:
    """One batch made ready for a sweep.

    Attributes:
        g: ``z ↦ f(z, x)`` for this batch's injection ``x`` (shape-preserving).
        z0: the initial state, shape ``(B, ...)``.
        score: ``(z, f(z)) ↦ {metric name: tensor of shape (B,)}``, per-example values of the
            metrics at the iterate ``z``.
    """

    g: Callable[[torch.Tensor], torch.Tensor]
    z0: torch.Tensor
    score: Score


def check_grid(iterations: Sequence[int]) -> list[int]:
    """The grid as a list of distinct integers ≥ 0 (order kept); a clear error otherwise."""
    grid = [int(n) for n in iterations]
    if not grid or any(n < 0 for n in grid) or len(set(grid)) != len(grid) or any(
            isinstance(n, bool) or int(n) != n for n in iterations):
        raise ValueError(f"iterations must be a non-empty list of distinct integers ≥ 0; "
                         f"got {list(iterations)}")
    return grid


def _per_example_residuals(z: torch.Tensor, fz: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    diff = (fz - z).flatten(1).double()
    absolute = torch.linalg.vector_norm(diff, dim=1)
    scale = torch.linalg.vector_norm(fz.flatten(1).double(), dim=1)
    relative = torch.where(scale > 0, absolute / scale.clamp_min(1e-300),
                           torch.where(absolute > 0, math.inf, 0.0))
    return relative, absolute


def _batch_residuals(z: torch.Tensor, fz: torch.Tensor) -> tuple[float, float, float]:
    """``(‖f(z) − z‖ / ‖f(z)‖, ‖f(z) − z‖, ‖f(z)‖)`` over the whole batch, in float64."""
    absolute = float(torch.linalg.vector_norm((fz - z).double()))
    scale = float(torch.linalg.vector_norm(fz.double()))
    rel = absolute / scale if scale > 0 else (0.0 if absolute == 0 else math.inf)
    return rel, absolute, scale


def _all_finite(fz: torch.Tensor, scale: float) -> bool:
    """Whether every entry of ``fz`` is finite, given ``scale``, its norm computed in float64.

    For entries of 32 bits or fewer that norm overflows only through a non-finite entry (a float32
    square is below 1.2e77), so it answers without a pass over ``fz``; float64 entries are tested.
    """
    if fz.element_size() <= 4:
        return math.isfinite(scale)
    return bool(torch.isfinite(fz).all())


class _Recorder:
    """Wraps ``g``: sees every iterate in order, keeps the one a budget-``n`` solve returns, and
    scores it when ``n`` is on the grid (once per iterate: where the returned iterate has not
    changed since the last grid point, its row is that point's)."""

    def __init__(self, probe: Probe, grid: list[int], keep_best: bool, stop_mode: str):
        self.probe, self.grid = probe, set(grid)
        self.keep_best, self.stop_mode = keep_best, stop_mode
        self.calls = 0
        self.best: tuple[torch.Tensor, torch.Tensor, float] | None = None
        self.lowest = math.inf
        self.rows: dict[int, dict[str, np.ndarray]] = {}
        self.trace: list[float] = []
        self._scored: tuple[tuple[torch.Tensor, torch.Tensor, float], dict[str, np.ndarray]] | None
        self._scored = None

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        fz = self.probe.g(z)
        t = self.calls
        self.calls += 1
        rel, absolute, scale = _batch_residuals(z, fz)
        self.trace.append(rel)
        current = rel if self.stop_mode == "rel" else absolute
        finite = math.isfinite(rel) and _all_finite(fz, scale)
        if finite and (not self.keep_best or current < self.lowest or self.best is None):
            self.best = (z, fz, rel)
        if finite:
            self.lowest = min(self.lowest, current)
        if t in self.grid:
            self.rows[t] = self.evaluate()
        return fz

    def evaluate(self) -> dict[str, np.ndarray]:
        if self.best is None:
            raise FloatingPointError("the initial iterate is already non-finite")
        if self._scored is not None and self._scored[0] is self.best:
            return self._scored[1]  # the same iterate: the same scores (read, never written)
        z, fz, rel = self.best
        row = {f"metric/{k}": v.detach().double().cpu().numpy()
               for k, v in self.probe.score(z, fz).items()}
        per_rel, per_abs = _per_example_residuals(z, fz)
        row["residual_rel"] = per_rel.cpu().numpy()
        row["residual_abs"] = per_abs.cpu().numpy()
        row["batch_residual_rel"] = np.asarray([rel])
        self._scored = (self.best, row)
        return row


def _probe_rows(probe: Probe, grid: list[int], spec: SolverSpec,
                shared_solve: bool) -> tuple[list[dict[str, np.ndarray]], list[float]]:
    keep_best = spec.returns_best(differentiable=False)
    longest = max(grid)
    if shared_solve:
        recorder = _Recorder(probe, grid, keep_best, spec.stop_mode)
        result = solve(recorder, probe.z0, replace(spec, max_iter=longest, tol=0.0),
                       differentiable=False)
        if recorder.calls != len(result.trace_rel):
            raise RuntimeError(f"solver {spec.method!r} evaluated f {recorder.calls} times for "
                               f"{len(result.trace_rel)} iterates: use shared_solve=False")
        missing = [n for n in grid if n not in recorder.rows]  # solve stopped on a NaN/inf
        for n in missing:
            recorder.rows[n] = recorder.evaluate()
        return [recorder.rows[n] for n in grid], recorder.trace
    rows, trace = [], []
    for n in grid:
        recorder = _Recorder(probe, [n], keep_best, spec.stop_mode)
        solve(recorder, probe.z0, replace(spec, max_iter=n, tol=0.0), differentiable=False)
        rows.append(recorder.rows.get(n) or recorder.evaluate())
        if n == longest:
            trace = recorder.trace
    return rows, trace


@torch.no_grad()
def sweep_iterations(probes: Iterable[Probe], iterations: Sequence[int], spec: SolverSpec,
                     shared_solve: bool = True) -> dict[str, object]:
    """Metrics and residuals of every example for every inner-iteration count of ``iterations``.

    Args:
        probes: the evaluation set, batch by batch (:class:`Probe`).
        iterations: the grid of test-time iteration counts ``N + ΔN`` (distinct integers ≥ 0).
        spec: the solver (its ``max_iter`` and ``tol`` are ignored: every count is run exactly).
        shared_solve: one solve of ``max(iterations)`` steps per batch (module docstring).

    Returns a dict (the results cache stores it as is):

    - ``iterations``: ``(K,)`` the grid;
    - ``metrics``: ``{name: (n_examples, K)}`` per-example values;
    - ``residual_rel`` / ``residual_abs``: ``(n_examples, K)`` per-example residuals of the iterate;
    - ``batch_residual_rel``: ``(n_batches, K)`` the solver's batch-level relative residual;
    - ``trace_rel``: ``(n_batches, max(iterations) + 1)`` batch residual of every iterate visited
      (``nan`` after a solve stopped on a non-finite value);
    - ``batch_sizes``: ``(n_batches,)``.
    """
    grid = check_grid(iterations)
    if not isinstance(spec, SolverSpec):
        raise TypeError(f"spec must be a SolverSpec; got {type(spec).__name__}")
    columns: dict[str, list[list[np.ndarray]]] = {}
    traces, sizes = [], []
    for probe in probes:
        rows, trace = _probe_rows(probe, grid, spec, shared_solve)
        for key in rows[0]:
            columns.setdefault(key, []).append([row[key] for row in rows])
        padded = np.full(max(grid) + 1, np.nan)
        padded[:len(trace)] = trace[:max(grid) + 1]
        traces.append(padded)
        sizes.append(int(probe.z0.shape[0]))
    if not sizes:
        raise ValueError("sweep_iterations got no probe (empty evaluation set)")
    stacked = {key: np.concatenate([np.stack(batch, axis=1) for batch in batches], axis=0)
               for key, batches in columns.items()}
    return {
        "iterations": np.asarray(grid),
        "metrics": {k.removeprefix("metric/"): v for k, v in stacked.items()
                    if k.startswith("metric/")},
        "residual_rel": stacked["residual_rel"],
        "residual_abs": stacked["residual_abs"],
        "batch_residual_rel": stacked["batch_residual_rel"],
        "trace_rel": np.stack(traces),
        "batch_sizes": np.asarray(sizes),
    }


def iteration_grid(train_iters: int, factor: float = 2.0, points: int = 16,
                   extra: Sequence[int] = ()) -> list[int]:
    """A grid of ``N + ΔN`` from 1 to ``factor · N`` (at least 2N is what the chapter asks),
    denser near ``N``: ``points`` roughly log-spaced counts, plus ``N`` itself and ``extra``."""
    if train_iters < 1 or factor < 1 or points < 2:
        raise ValueError(f"need train_iters ≥ 1, factor ≥ 1, points ≥ 2; got {train_iters}, "
                         f"{factor}, {points}")
    top = max(int(round(factor * train_iters)), train_iters)
    values = np.unique(np.round(np.geomspace(1, top, points)).astype(int))
    return sorted(set(values.tolist()) | {train_iters, top} | {int(e) for e in extra})
