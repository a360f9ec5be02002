"""A monotone association across models: Kendall's τ with its exact one-sided test.

:func:`rank_association` decides a claim "the value falls (or rises) with the other" from one
value pair per model, one-sided in the claimed direction at :data:`RANK_ALPHA`; undecided when
the models are too few for any ordering to reach it (:func:`smallest_rank_p`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from i2o.verdicts.decision import Decision, Gate
from i2o.verdicts.gates import undecided

#: The one-sided level of :func:`rank_association`.
RANK_ALPHA = 0.05


@dataclass(frozen=True)
class RankAssociation:
    """Kendall's τ between two untied samples of ``n`` values, with the exact one-sided p-values
    of its permutation null (every ordering equally likely): ``p_negative`` = P(τ ≤ observed),
    ``p_positive`` = P(τ ≥ observed)."""

    tau: float
    p_negative: float
    p_positive: float
    n: int

    def p(self, direction: int) -> float:
        """The one-sided p-value of ``direction`` (−1: decreasing, +1: increasing)."""
        return self.p_negative if direction < 0 else self.p_positive


def kendall(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
            ) -> RankAssociation:
    """:class:`RankAssociation` of ``x`` and ``y`` (finite, untied; scipy's exact method)."""
    less = stats.kendalltau(x, y, method="exact", alternative="less")
    greater = stats.kendalltau(x, y, method="exact", alternative="greater")
    return RankAssociation(float(less.statistic), float(less.pvalue), float(greater.pvalue),
                           len(x))


def smallest_rank_p(n: int) -> float:
    """The smallest one-sided p-value Kendall's exact test gives with ``n`` untied values: one
    ordering in n!."""
    return 1.0 / math.factorial(n)


def rank_association(x: Sequence[float], y: Sequence[float], direction: int,
                     alpha: float = RANK_ALPHA) -> Decision:
    """A monotone association claimed across models, one value pair per model (:func:`kendall`),
    one-sided in the claimed ``direction`` (−1: decreasing, +1: increasing). Holds when the
    p-value of the claimed direction is at most ``alpha``; fails when that of the opposite
    direction is; undecided otherwise, by "count" when ``n`` models cannot reach ``alpha``
    (:func:`smallest_rank_p`), or when a value is not finite."""
    if direction not in (-1, 1):
        raise ValueError(f"direction must be −1 or +1; got {direction!r}")
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"x and y must be two vectors of one length; got {a.shape}, {b.shape}")
    n = a.size
    if n < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return undecided(f"needs ≥ 2 models with finite values; got {n}", Gate.COUNT)
    found = kendall(a, b)
    p, q = found.p(direction), found.p(-direction)
    shown = (f"Kendall's τ = {found.tau:+.2f} over {n} models, exact one-sided p = {p:.3g} "
             f"({'decreasing' if direction < 0 else 'increasing'}; needs ≤ {alpha:g})")
    if p <= alpha:
        return Decision(True, shown)
    if q <= alpha:
        return Decision(False, f"{shown}; the opposite ordering has p = {q:.3g}")
    smallest = smallest_rank_p(n)
    if smallest > alpha:
        return undecided(f"{shown}: {n} models cannot reach p ≤ {alpha:g} (the smallest "
                         f"one-sided p is 1/{n}! = {smallest:.3g}); more models would decide it",
                         Gate.COUNT)
    return undecided(f"{shown}: the ordering is not told from a random one", Gate.POWER)
