"""Predicates that decide a claim from a confidence interval against a margin ``δ > 0``.

Every predicate is three-valued: ``True`` / ``False`` when the interval settles it, ``None`` when
it straddles the threshold (too little power), with a reason and the number of values that would
decide it (:func:`i2o.verdicts.intervals.needs`):

- :func:`equivalent`: ``−δ < lo`` and ``hi < δ`` (TOST equivalence); fails when the interval
  lies entirely outside ``(−δ, δ)``;
- :func:`above`: ``lo > δ`` (exceeds the margin); fails when ``hi < δ``;
- :func:`not_below`: ``lo > −δ``; fails when ``hi < −δ``;
- :func:`positive`: ``lo > 0``; fails when ``hi ≤ 0``;
- :func:`negative`: ``hi < 0``; fails when ``lo ≥ 0``.

:func:`relative_margin` states a margin as a fraction of a reference effect, :func:`powered` is
the gate that requires an interval narrow enough against ``δ``, and :func:`lower_than` compares
two groups' means with all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from i2o.verdicts.decision import Decision, Facts, Gate, Needs, Over
from i2o.verdicts.gates import enough, undecided
from i2o.verdicts.intervals import Interval, describe_significant, difference, needed, needs


def relative_margin(fraction: float, reference: float) -> float:
    """A pre-registered margin ``δ = fraction × |reference|``: a fraction, fixed before the run,
    of a named reference effect measured in the same run (e.g. the accuracy lost at N' = 1)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"a relative margin's fraction must be in (0, 1]; got {fraction!r}")
    if not np.isfinite(reference):
        raise ValueError(f"the reference effect of a relative margin is not finite: {reference}")
    return float(fraction * abs(reference))


def _straddles(ci: Interval, text: str, boundaries: Sequence[float]) -> Decision:
    """Undecided for want of power: ``ci`` contains a boundary; the facts say what would decide
    it."""
    return Decision(None, f"too little power: CI [{ci.lo:+.3g}, {ci.hi:+.3g}] {text}"
                    + needed(ci, boundaries), Facts(needs=needs(ci, boundaries)))


def _margin(margin: float) -> float:
    if not margin > 0:
        raise ValueError(f"margin must be > 0; got {margin!r}")
    return float(margin)


def equivalent(ci: Interval, margin: float) -> Decision:
    """Holds when the interval lies inside ``(−δ, δ)``; fails when it lies entirely outside."""
    d = _margin(margin)
    if -d < ci.lo and ci.hi < d:
        return Decision(True, f"CI inside ±{d:g}")
    if ci.lo >= d or ci.hi <= -d:
        return Decision(False, f"CI entirely outside ±{d:g}")
    return _straddles(ci, f"straddles ±{d:g}", (-d, d))


def above(ci: Interval, margin: float) -> Decision:
    """Holds when ``lo > δ`` (the quantity exceeds δ); fails when ``hi < δ``."""
    d = _margin(margin)
    if ci.lo > d:
        return Decision(True, f"CI above +{d:g}")
    if ci.hi < d:
        return Decision(False, f"CI below +{d:g}")
    return _straddles(ci, f"contains +{d:g}", (d,))


def not_below(ci: Interval, margin: float) -> Decision:
    """Holds when ``lo > −δ`` (the quantity is at least −δ); fails when ``hi < −δ``."""
    d = _margin(margin)
    if ci.lo > -d:
        return Decision(True, f"CI above −{d:g}")
    if ci.hi < -d:
        return Decision(False, f"CI below −{d:g}")
    return _straddles(ci, f"contains −{d:g}", (-d,))


def positive(ci: Interval) -> Decision:
    """Holds when ``lo > 0``; fails when ``hi ≤ 0``."""
    if ci.lo > 0:
        return Decision(True, "CI above 0")
    if ci.hi <= 0:
        return Decision(False, "CI at or below 0")
    return _straddles(ci, "contains 0", (0.0,))


def negative(ci: Interval) -> Decision:
    """Holds when ``hi < 0``; fails when ``lo ≥ 0``."""
    if ci.hi < 0:
        return Decision(True, "CI below 0")
    if ci.lo >= 0:
        return Decision(False, "CI at or above 0")
    return _straddles(ci, "contains 0", (0.0,))


def powered(ci: Interval, margin: float, ratio: float = 0.5) -> Decision:
    """Open when the interval's half-width is at most ``ratio × δ``: the study can tell "within
    δ" from "beyond δ" with headroom, so a verdict does not hinge on one draw of seeds. Closed
    otherwise, naming the number of values of the same spread that would open it."""
    d = _margin(margin)
    if not 0 < ratio:
        raise ValueError(f"ratio must be > 0; got {ratio!r}")
    half = (ci.hi - ci.lo) / 2
    if half <= ratio * d:
        return Decision(True, f"powered: CI half-width {half:.3g} ≤ {ratio:g} × δ = "
                              f"{ratio * d:.3g}")
    n = int(np.ceil(ci.n * (half / (ratio * d)) ** 2))
    return undecided(f"too little power: CI half-width {half:.3g} > {ratio:g} × δ = "
                  f"{ratio * d:.3g} over {ci.n} {ci.over}; at this spread about {n:,} "
                  f"{ci.over} would give it", Gate.POWER, Needs(n, ci.over))


def lower_than(a: Iterable[float], b: Iterable[float], fraction: float,
               over: Over = Over.SEEDS) -> Decision:
    """Is the mean of ``a`` lower than the mean of ``b`` (independent groups, e.g. a model's test
    errors over seeds against another's)? The rule: the Welch interval of ``mean(b) − mean(a)``
    (:func:`difference`) against the margin δ = ``fraction`` × the larger |mean|
    (:func:`relative_margin`) holds when it lies above δ and fails when it lies below (so equal
    means fail: :func:`above`; :func:`positive` when δ = 0, both means 0); undecided when it
    contains δ or when a group has fewer than 2 values (:func:`enough`). The reason gives both
    means, the interval (:func:`describe_significant`) and δ, then why an undecided one is."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    means = f"{np.mean(x):.4g} vs {np.mean(y):.4g}"
    count = enough(min(len(x), len(y)), 2, "", f"{means}; needs ≥ 2 {over}")
    if count.holds is not True:
        return count
    ci = difference(y, x, over)
    margin = relative_margin(fraction, max(abs(float(np.mean(x))), abs(float(np.mean(y)))))
    text = f"{means} (difference {describe_significant(ci)}, margin {margin:.2g})"
    found = above(ci, margin) if margin > 0 else positive(ci)
    return Decision(found.holds, text if found.holds is not None else f"{text}; {found.reason}",
                    found.facts)
