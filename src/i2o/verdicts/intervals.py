"""Confidence intervals of a measured quantity, and what would decide one that straddles.

The interval of a mean over ``n`` independent values (seeds, or evaluation examples when there is
only one seed: :attr:`Interval.over` says which) is ``m ± t_{1−α/2, n−1} · s / √n`` at level
``1 − α`` (:data:`LEVEL`, 90 % by default: two one-sided tests at 5 %); the interval of a
difference of two means is Welch's, with Welch–Satterthwaite degrees of freedom. :func:`needs`
names the number of values at which an interval of the same spread would clear a boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from i2o.verdicts.decision import Needs, Over

#: Default confidence level of every interval (two one-sided tests at 5 %).
LEVEL = 0.90


@dataclass(frozen=True)
class Interval:
    """A confidence interval of a mean (or a difference of means)."""

    mean: float
    lo: float
    hi: float
    n: int                   # number of independent values (smallest group for a difference)
    over: Over               # what the ``n`` values are (seeds, examples, …)
    level: float = LEVEL

    def __post_init__(self) -> None:
        object.__setattr__(self, "over", Over.named(self.over))

    def describe(self, scale: float = 1.0, unit: str = "", digits: int = 2) -> str:
        f = f"{{:+.{digits}f}}"
        return (f"{f.format(scale * self.mean)}{unit}, {100 * self.level:.3g} % CI "
                f"[{f.format(scale * self.lo)}, {f.format(scale * self.hi)}]{unit} over "
                f"{self.n} {self.over}")


def _values(samples: Iterable[float], name: str) -> np.ndarray:
    values = np.asarray(list(samples), dtype=float).ravel()
    if values.size < 2:
        raise ValueError(f"{name}: a confidence interval needs at least 2 values; got "
                         f"{values.size}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name}: non-finite values {values.tolist()}")
    return values


def interval(samples: Iterable[float], over: Over = Over.SEEDS, level: float = LEVEL
             ) -> Interval:
    """``mean ± t · sd / √n`` of the values in ``samples`` (Student's t, n − 1 dof)."""
    values = _values(samples, "interval")
    n = values.size
    mean = float(values.mean())
    se = float(values.std(ddof=1) / np.sqrt(n))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    return Interval(mean, mean - half, mean + half, n, over, level)


def difference(a: Iterable[float], b: Iterable[float], over: Over = Over.SEEDS,
               level: float = LEVEL) -> Interval:
    """Welch interval of ``mean(a) − mean(b)`` (independent groups, unequal variances)."""
    x, y = _values(a, "difference (first group)"), _values(b, "difference (second group)")
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se2 = va + vb
    mean = float(x.mean() - y.mean())
    if se2 == 0.0:
        return Interval(mean, mean, mean, min(x.size, y.size), over, level)
    dof = se2 ** 2 / (va ** 2 / (x.size - 1) + vb ** 2 / (y.size - 1))
    half = float(stats.t.ppf(0.5 + level / 2, dof) * np.sqrt(se2))
    return Interval(mean, mean - half, mean + half, min(x.size, y.size), over, level)


def from_se(mean: float, se: float, n: int, over: Over = Over.EXAMPLES,
            level: float = LEVEL) -> Interval:
    """``mean ± t_{n−1} · se`` from an already computed standard error over ``n`` values (e.g.
    the paired per-example differences of :func:`i2o.chapters.deq_gaps.curves.curve_from_sweep`)."""
    if n < 2 or not np.isfinite(se) or not np.isfinite(mean):
        raise ValueError(f"from_se needs n ≥ 2 and finite mean and se; got n={n}, mean={mean}, "
                         f"se={se}")
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(se)
    return Interval(float(mean), float(mean) - half, float(mean) + half, int(n), over, level)


def needs(ci: Interval, boundaries: Sequence[float]) -> Needs | None:
    """What would decide an interval that contains a boundary: the number of ``ci.over`` at which
    an interval of the same spread (half-width ∝ 1/√n) would clear the boundary nearest its mean,
    ``n × (half-width / |mean − boundary|)²``; ``None`` when no number would (a mean on the
    boundary) or when it is not more than ``ci.n``."""
    half = (ci.hi - ci.lo) / 2
    gap = min(abs(ci.mean - b) for b in boundaries)
    if not np.isfinite(half) or half <= 0 or gap <= 1e-12 * max(1.0, half):
        return None
    n = int(np.ceil(ci.n * (half / gap) ** 2))
    return Needs(n, ci.over) if n > ci.n else None


def needed(ci: Interval, boundaries: Sequence[float]) -> str:
    """:func:`needs` as the end of a reason: ``"; at this spread about 12 seeds (now 3) would
    decide it"`` (or that a mean on the boundary cannot be decided; ``""`` otherwise)."""
    half = (ci.hi - ci.lo) / 2
    gap = min(abs(ci.mean - b) for b in boundaries)
    if not np.isfinite(half) or half <= 0:
        return ""
    if gap <= 1e-12 * max(1.0, half):
        return f"; its mean lies on the boundary: no number of {ci.over} would decide it"
    found = needs(ci, boundaries)
    return f"; at this spread {found.describe()} (now {ci.n}) would decide it" if found else ""


def describe_significant(ci: Interval) -> str:
    """:meth:`Interval.describe` to the third significant digit of the interval's half-width (of
    its mean when it has none: a deterministic comparison), with at most 6 decimals."""
    half = (ci.hi - ci.lo) / 2
    scale = half if half > 1e-9 * abs(ci.mean) else (abs(ci.mean) or 1.0)
    return ci.describe(digits=int(np.clip(2 - np.floor(np.log10(scale)), 0, 6)))
