r"""Curves of a metric against the test-time iteration count ``N'``, and their gaps.

For models ``k = 1 … K_m`` (one, or several seeds) evaluated on the same examples ``i = 1 … n``
with per-example metric values ``m_{k,i}(N')``:

- the curve ``M(N') = mean_{k,i} m_{k,i}(N')``;
- the gap ``D(N, ΔN) = M(N + ΔN) − M(N)`` (in the metric's units; 0 at ``ΔN = 0``);
- the *improvement* of ``N'`` over ``N''``: ``I(N', N'') = s · (M(N') − M(N''))`` with ``s = +1``
  when higher is better and ``−1`` otherwise, so ``I > 0`` always means better.

The confidence interval of an improvement (:func:`improvement`) is over **examples** when one
model is given — paired per-example differences ``s · (m_i(N') − m_i(N''))``, Student's t on their
mean — and over **seeds** when several are — the per-model mean differences, Student's t with
``K_m − 1`` degrees of freedom (:mod:`i2o.gates`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from i2o import gates


@dataclass(frozen=True)
class Curves:
    """Per-example values of one evaluation set, for every model and every ``N'``.

    Attributes:
        grid: ``(K,)`` the counts ``N'``, increasing.
        values: ``(n_models, n_examples, K)`` metric values.
        residual: ``(n_models, n_examples, K)`` relative residual of the returned iterate.
        sign: ``+1`` (higher is better) or ``−1``.
    """

    grid: np.ndarray
    values: np.ndarray
    residual: np.ndarray
    sign: float

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

    def mean(self) -> np.ndarray:
        """``M(N')`` for every ``N'`` of the grid."""
        return np.asarray(self.values, dtype=float).mean(axis=(0, 1))

    def per_model(self) -> np.ndarray:
        """``(n_models, K)`` each model's mean over the examples."""
        return np.asarray(self.values, dtype=float).mean(axis=1)

    def residual_mean(self) -> np.ndarray:
        return np.asarray(self.residual, dtype=float).mean(axis=(0, 1))

    def gap(self, train_iters: int) -> np.ndarray:
        """``D(N, ΔN) = M(N + ΔN) − M(N)`` for every ``N + ΔN`` of the grid."""
        mean = self.mean()
        return mean - mean[self.at(train_iters)]

    def improvement(self, n: int, reference: int, level: float = gates.LEVEL) -> gates.Interval:
        """Interval of ``I(n, reference) = s · (M(n) − M(reference))`` (module docstring)."""
        i, j = self.at(n), self.at(reference)
        values = np.asarray(self.values, dtype=float)
        if self.n_models >= 2:
            per_model = self.sign * (values[:, :, i] - values[:, :, j]).mean(axis=1)
            if np.all(per_model == per_model[0]):
                mean = float(per_model[0])
                return gates.Interval(mean, mean, mean, self.n_models, "seeds", level)
            return gates.interval(per_model, "seeds", level)
        paired = self.sign * (values[0, :, i] - values[0, :, j])
        if paired.size < 2:
            raise ValueError("an interval over examples needs at least 2 examples")
        se = float(paired.std(ddof=1) / np.sqrt(paired.size))
        return gates.from_se(float(paired.mean()), se, int(paired.size), "examples", level)

    def improvements(self, reference: int, counts: Sequence[int],
                     level: float = gates.LEVEL) -> list[gates.Interval]:
        return [self.improvement(int(n), reference, level) for n in counts]


def stack(per_model: Sequence[tuple[np.ndarray, np.ndarray]], grid: Sequence[int],
          sign: float) -> Curves:
    """:class:`Curves` from each model's ``(values, residual)``, both ``(n_examples, K)``."""
    shapes = {np.shape(v) for v, _ in per_model}
    if len(shapes) != 1:
        raise ValueError(f"every model must be evaluated on the same examples; got shapes "
                         f"{sorted(shapes)}")
    return Curves(grid=np.asarray(grid), values=np.stack([v for v, _ in per_model]),
                  residual=np.stack([r for _, r in per_model]), sign=sign)
