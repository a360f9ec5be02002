r"""Curves of a metric against the test-time iteration count ``N'``, and their gaps.

For models ``k = 1 … K_m`` (one, or several seeds) evaluated on the same examples ``i = 1 … n``
with per-example values ``m_{k,i}(N')`` and a transform ``T`` (the identity, ×100 for 0/1 errors
in %, or ``exp`` of a mean log-likelihood for a perplexity):

- each model's curve ``M_k(N') = T(mean_i m_{k,i}(N'))`` and the curve ``M(N') = mean_k M_k(N')``;
- the gap ``D(N, ΔN) = M(N + ΔN) − M(N)`` (in the metric's units; 0 at ``ΔN = 0``);
- the *improvement* of ``N'`` over ``N''``: ``I(N', N'') = s · (M(N') − M(N''))`` with ``s = +1``
  when higher is better and ``−1`` otherwise, so ``I > 0`` always means better.

The confidence interval of an improvement (:meth:`Curves.improvement`) is over **seeds** when
several models are given — the per-model differences ``s · (M_k(N') − M_k(N''))``, Student's t
with ``K_m − 1`` degrees of freedom: the spread between trained models is what a claim about
training must average over — and over **examples** when one model is — the paired per-example
differences (their delta-method linearisation for ``exp``), Student's t on their mean
(:mod:`i2o.verdicts.gates`).

The readers build curves from every stored sweep form, so no job recomputes: :func:`stack`
(what :func:`i2o.diagnose.measure` returns), :func:`from_sweeps` (:func:`i2o.deq.
sweep_iterations`' dictionaries) and :func:`from_evaluations` (:func:`i2o.train.evaluate.
evaluate_iterations`' dictionaries with per-image errors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from i2o.verdicts import intervals
from i2o.verdicts.decision import Over

#: How a model's mean of per-example values becomes its metric (module docstring).
TRANSFORMS = ("mean", "percent", "exp_mean")


@dataclass(frozen=True)
class Curves:
    """Per-example values of one evaluation set, for every model and every ``N'``.

    Attributes:
        grid: ``(K,)`` the counts ``N'``, increasing.
        values: ``(n_models, n_examples, K)`` per-example values.
        residual: ``(n_models, n_examples, K)`` relative residual of the returned iterate.
        sign: ``+1`` (higher is better) or ``−1``.
        transform: one of :data:`TRANSFORMS`.
        last: ``(n_models, n_batches, K)`` relative residual of the solver's *last* iterate at each
            count, batch by batch (``None`` when not stored: :meth:`falling` then reads
            ``residual``).
    """

    grid: np.ndarray
    values: np.ndarray
    residual: np.ndarray
    sign: float
    transform: str = "mean"
    last: np.ndarray | None = None

    def __post_init__(self) -> None:
        grid = np.asarray(self.grid)
        if grid.ndim != 1 or grid.size == 0 or np.any(np.diff(grid) <= 0):
            raise ValueError(f"grid must be increasing; got {grid.tolist()}")
        if np.shape(self.values) != np.shape(self.residual) or np.ndim(self.values) != 3 \
                or np.shape(self.values)[2] != grid.size:
            raise ValueError("values and residual must both have shape (models, examples, K); "
                             f"got {np.shape(self.values)} and {np.shape(self.residual)}")
        if self.sign not in (1.0, -1.0):
            raise ValueError(f"sign must be +1 or -1; got {self.sign}")
        if self.transform not in TRANSFORMS:
            raise ValueError(f"transform must be one of {TRANSFORMS}; got {self.transform!r}")
        if self.last is not None and (np.ndim(self.last) != 3 or np.shape(self.last)[0]
                                      != self.n_models or np.shape(self.last)[2] != grid.size):
            raise ValueError(f"last must have shape (models, batches, K); got "
                             f"{np.shape(self.last)}")

    @property
    def n_models(self) -> int:
        return int(np.shape(self.values)[0])

    @property
    def n_examples(self) -> int:
        return int(np.shape(self.values)[1])

    def at(self, n: int) -> int:
        """The column of ``N' = n`` (a ``KeyError`` when ``n`` is not on the grid)."""
        found = np.flatnonzero(np.asarray(self.grid) == n)
        if found.size == 0:
            raise KeyError(f"N' = {n} is not on the grid {np.asarray(self.grid).tolist()}")
        return int(found[0])

    def select(self, models: Sequence[int]) -> Curves:
        """The curves of some of the models (e.g. those that fit their training set)."""
        keep = list(models)
        if not keep:
            raise ValueError("select needs at least one model")
        return Curves(self.grid, np.asarray(self.values)[keep], np.asarray(self.residual)[keep],
                      self.sign, self.transform,
                      None if self.last is None else np.asarray(self.last)[keep])

    def _apply(self, means: np.ndarray) -> np.ndarray:
        if self.transform == "percent":
            return 100.0 * means
        if self.transform == "exp_mean":
            return np.exp(means)
        return means

    def per_model(self) -> np.ndarray:
        """``(n_models, K)`` each model's curve ``M_k(N')``."""
        return self._apply(np.asarray(self.values, dtype=float).mean(axis=1))

    def mean(self) -> np.ndarray:
        """``M(N')`` for every ``N'`` of the grid."""
        return self.per_model().mean(axis=0)

    def residual_mean(self) -> np.ndarray:
        return np.asarray(self.residual, dtype=float).mean(axis=(0, 1))

    def gap(self, train_iters: int) -> np.ndarray:
        """``D(N, ΔN) = M(N + ΔN) − M(N)`` for every ``N + ΔN`` of the grid."""
        mean = self.mean()
        return mean - mean[self.at(train_iters)]

    def _linear(self, model: int) -> np.ndarray:
        """``(n_examples, K)`` one model's per-example values on the scale of its metric (the
        delta-method linearisation of ``exp``: ``d exp(μ) = exp(μ) dμ``)."""
        values = np.asarray(self.values[model], dtype=float)
        if self.transform == "percent":
            return 100.0 * values
        if self.transform == "exp_mean":
            return np.exp(values.mean(axis=0))[None, :] * values
        return values

    def paired_se(self, n: int, reference: int) -> np.ndarray:
        """``(n_models,)`` each model's standard error, over the examples, of its change
        ``M_k(n) − M_k(reference)`` (NaN with fewer than 2 examples)."""
        i, j = self.at(n), self.at(reference)
        if self.n_examples < 2:
            return np.full(self.n_models, np.nan)
        out = []
        for k in range(self.n_models):
            linear = self._linear(k)
            d = linear[:, i] - linear[:, j]
            out.append(float(d.std(ddof=1) / np.sqrt(d.size)))
        return np.asarray(out)

    def resolution(self, train_iters: int) -> float:
        """The resolution of a measured change between two counts: one model's standard error
        over the examples (:meth:`paired_se`), averaged over the models and the counts other than
        ``N``: below it, a difference cannot be told from evaluation noise."""
        others = [int(n) for n in np.asarray(self.grid) if n != train_iters]
        values = np.concatenate([self.paired_se(n, train_iters) for n in others]) if others \
            else np.array([])
        values = values[np.isfinite(values)]
        return float(values.mean()) if values.size else float("nan")

    def improvement(self, n: int, reference: int, level: float = intervals.LEVEL
                    ) -> intervals.Interval:
        """Interval of ``I(n, reference) = s · (M(n) − M(reference))`` (module docstring)."""
        i, j = self.at(n), self.at(reference)
        if self.n_models >= 2:
            curves = self.per_model()
            per_model = self.sign * (curves[:, i] - curves[:, j])
            if np.all(per_model == per_model[0]):
                mean = float(per_model[0])
                return intervals.Interval(mean, mean, mean, self.n_models, Over.SEEDS, level)
            return intervals.interval(per_model, Over.SEEDS, level)
        if self.n_examples < 2:
            raise ValueError("an interval over examples needs at least 2 examples")
        curve = self.per_model()[0]
        se = float(self.paired_se(n, reference)[0])
        return intervals.from_se(self.sign * float(curve[i] - curve[j]), se, self.n_examples,
                             Over.EXAMPLES, level)

    def value(self, n: int, level: float = intervals.LEVEL,
              offsets: Sequence[float] | None = None) -> intervals.Interval:
        """Interval of ``M(n)`` itself: over seeds when several models are given (of
        ``M_k(n) − o_k`` plus the mean of ``offsets`` ``o_k``, one per model, e.g. each seed's own
        baseline: a paired interval), over the examples when one is (the linearised per-example
        values, :meth:`paired_se`'s scale)."""
        i = self.at(n)
        if self.n_models >= 2:
            shift = np.zeros(self.n_models) if offsets is None else np.asarray(offsets, float)
            if shift.shape != (self.n_models,):
                raise ValueError(f"offsets must give one value per model ({self.n_models}); got "
                                 f"{shift.shape}")
            found = intervals.interval(self.per_model()[:, i] - shift, Over.SEEDS, level)
            return intervals.Interval(found.mean + shift.mean(), found.lo + shift.mean(),
                                      found.hi + shift.mean(), found.n, found.over, level)
        if self.n_examples < 2:
            raise ValueError("an interval over examples needs at least 2 examples")
        linear = self._linear(0)[:, i]
        se = float(linear.std(ddof=1) / np.sqrt(linear.size))
        return intervals.from_se(float(self.per_model()[0, i]), se, self.n_examples,
                                 Over.EXAMPLES, level)

    def improvements(self, reference: int, counts: Sequence[int],
                     level: float = intervals.LEVEL) -> list[intervals.Interval]:
        return [self.improvement(int(n), reference, level) for n in counts]

    def residual_at(self, n: int) -> float:
        """The mean relative residual at count ``n`` over models and examples (or batches) of
        the trace the solver guard reads: the last iterate when stored, else the returned one."""
        trace = np.asarray(self.last if self.last is not None else self.residual, dtype=float)
        values = trace[:, :, self.at(n)]
        values = values[np.isfinite(values)]
        return float(values.mean()) if values.size else float("nan")

    def falling(self, train_iters: int) -> tuple[np.ndarray, Over]:
        """The residual sanity check's values: ``log10`` of the relative residual at the largest
        count over its value at ``N`` — per model (of the batch means) when there are several
        models, else per batch (per example without ``last``) — and what they are over. The
        last iterate when stored (the solver's own progress), else the returned one."""
        trace = np.asarray(self.last if self.last is not None else self.residual, dtype=float)
        at, top = self.at(train_iters), int(np.asarray(self.grid).size) - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.n_models >= 2:
                means = trace.mean(axis=1)
                return np.log10(means[:, top] / means[:, at]), Over.MODELS
            over = Over.EVALUATION_BATCHES if self.last is not None else Over.EXAMPLES
            return np.log10(trace[0, :, top] / trace[0, :, at]), over


def stack(per_model: Sequence[tuple[np.ndarray, np.ndarray]], grid: Sequence[int] | np.ndarray,
          sign: float, transform: str = "mean") -> Curves:
    """:class:`Curves` from each model's ``(values, residual)``, both ``(n_examples, K)``."""
    shapes = {np.shape(v) for v, _ in per_model}
    if len(shapes) != 1:
        raise ValueError(f"every model must be evaluated on the same examples; got shapes "
                         f"{sorted(shapes)}")
    return Curves(grid=np.asarray(grid), values=np.stack([v for v, _ in per_model]),
                  residual=np.stack([r for _, r in per_model]), sign=sign, transform=transform)


def _ordered(result: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    grid = np.asarray(result["iterations"])
    order = np.argsort(grid)
    return grid[order], order


def from_sweeps(results: Sequence[Mapping[str, Any]], metric: str, sign: float,
                transform: str = "mean") -> Curves:
    """:class:`Curves` of one evaluation set from each model's :func:`i2o.deq.sweep_iterations`
    result (``metrics[metric]`` and ``residual_rel`` per example × count; ``trace_rel``, the
    batch residual of every iterate, gives :attr:`Curves.last`)."""
    if not results:
        raise ValueError("from_sweeps needs at least one model's sweep")
    grid, order = _ordered(results[0])
    values, residual, last = [], [], []
    for result in results:
        its, mine = _ordered(result)
        if not np.array_equal(its, grid):
            raise ValueError(f"every model must be swept over the same counts; got "
                             f"{its.tolist()} and {grid.tolist()}")
        if metric not in result["metrics"]:
            raise KeyError(f"metric {metric!r} not in the sweep; it has "
                           f"{sorted(result['metrics'])}")
        values.append(np.asarray(result["metrics"][metric], dtype=float)[:, mine])
        residual.append(np.asarray(result["residual_rel"], dtype=float)[:, mine])
        if "trace_rel" in result:
            last.append(np.asarray(result["trace_rel"], dtype=float)[:, its])
    curves = stack(list(zip(values, residual, strict=True)), grid, sign, transform)
    if len(last) == len(results):
        curves = Curves(curves.grid, curves.values, curves.residual, curves.sign,
                        curves.transform, np.stack(last))
    return curves


def from_evaluations(tests: Sequence[Mapping[str, Any]]) -> Curves:
    """:class:`Curves` of test accuracy in points (higher is better) from each model's
    :func:`i2o.train.evaluate.evaluate_iterations` result with per-image 0/1 ``errors`` (images ×
    counts); its batch-mean ``trace_rel`` (every iterate) gives :attr:`Curves.last`."""
    if not tests:
        raise ValueError("from_evaluations needs at least one model's evaluation")
    grid = np.asarray(tests[0]["iterations"])
    values, residual, last = [], [], []
    for test in tests:
        if not np.array_equal(np.asarray(test["iterations"]), grid):
            raise ValueError("every model must be evaluated over the same counts")
        if test.get("errors") is None:
            raise ValueError("an evaluation without per-image errors: no interval over images")
        correct = 1.0 - np.asarray(test["errors"], dtype=float)
        values.append(correct)
        residual.append(np.broadcast_to(np.asarray(test["residual_rel"], dtype=float),
                                        correct.shape))
        last.append(np.asarray(test["trace_rel"], dtype=float)[None, grid])
    curves = stack(list(zip(values, residual, strict=True)), grid, 1.0, "percent")
    return Curves(curves.grid, curves.values, curves.residual, 1.0, "percent", np.stack(last))
