"""The test-time count to ship under the book's one rule (:mod:`i2o.verdicts.rule`): the smallest
count as good as the best within δ, and whether the data decide it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from i2o.verdicts import intervals, margins
from i2o.verdicts.curves import Curves


@dataclass(frozen=True)
class Recommendation:
    """The test-time count to ship.

    Attributes:
        n: the recommended ``N'``.
        best: ``N_b``, the count of the best mean metric.
        as_good: every count as good as the best within δ (increasing).
        improvement: interval of ``I(n, N)``, the recommended count against the training ``N``.
        decided: ``True`` when every smaller count is decidedly worse than the best.
        open_counts: smaller counts the data cannot rank (empty when decided).
    """

    n: int
    best: int
    as_good: tuple[int, ...]
    improvement: intervals.Interval
    decided: bool
    open_counts: tuple[int, ...]

    def describe(self, train_iters: int, unit: str = "") -> str:
        ci = self.improvement
        text = (f"N' = {self.n} (trained with N = {train_iters}; best mean at N' = {self.best}; "
                f"as good as the best within δ: {', '.join(map(str, self.as_good))}; improvement "
                f"over N: {ci.mean:+.4g}{unit}, {100 * ci.level:.0f} % CI [{ci.lo:+.4g}, "
                f"{ci.hi:+.4g}]{unit} over {ci.n} {ci.over})")
        if not self.decided and self.n not in self.as_good:
            text += (f". The data cannot decide whether N' = {self.n} is as good as the best "
                     f"(N' = {self.best}): N is kept")
        if self.open_counts:
            text += (f". The data cannot decide whether fewer iterations "
                     f"({', '.join(map(str, self.open_counts))}) would do as well")
        return text


def recommend(curves: Curves, train_iters: int, margin: float,
              level: float = intervals.LEVEL) -> Recommendation:
    """The smallest count as good as the best within δ (:mod:`i2o.verdicts.rule`)."""
    grid = [int(n) for n in np.asarray(curves.grid)]
    best = grid[int(np.argmax(curves.sign * curves.mean()))]
    decisions = {n: margins.not_below(curves.improvement(n, best, level), margin).holds
                 for n in grid}
    as_good = tuple(n for n in grid if decisions[n] is True)
    chosen = as_good[0] if as_good else best
    open_counts = tuple(n for n in grid if n < chosen and decisions[n] is None)
    if decisions[train_iters] is None:
        chosen = train_iters  # N cannot be ranked against the best: test like you train
        open_counts = tuple(n for n in grid if n < chosen and decisions[n] is None)
    return Recommendation(n=chosen, best=best, as_good=as_good,
                          improvement=curves.improvement(chosen, train_iters, level),
                          decided=not open_counts and decisions[chosen] is True,
                          open_counts=open_counts)

