r"""The five principles by which the book reads the paper's claims (``READING.md`` of the
project's design notes), as predicates on intervals. Every chapter's row that reads a sentence of
the paper decides through one of them; a row of the book's own may ask more, and gates nothing.

1. **A direction is tested as a direction** (:func:`direction`, :func:`some_direction`): a sign
   holds when the whole interval of the effect lies beyond the metric's resolution floor ``f`` on
   the stated side, fails when the whole interval lies short of it, and is undecided when it
   straddles it. No fraction of a reference effect stands in front of a sign.
2. **"No benefit" is one-sided equivalence** (:func:`no_benefit`): holds when the upper bound of
   every tested improvement is below δ, fails when some improvement's lower bound is above δ,
   the intervals widened by Bonferroni over the counts the row spans.
3. **A gate closes a row only where it bears on its validity** (:func:`straddling`): an interval
   that clears its bound decides at its level whatever its width, so a power gate reads only the
   intervals that straddle their bound.
4. **The regime is the paper's** (:func:`generalises`): a test-data row needs models whose test
   metric beats a trivial baseline fitted on the same training data (principle 1 against the
   baseline's value).
5. **Fixed before it decides**: a reading is committed with a test where it holds and one where
   it fails before it decides anything (``tests/test_readings.py``); a change is reported with
   the before/after of every published verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from i2o.verdicts import gates
from i2o.verdicts.decision import Decision, Gate
from i2o.verdicts.intervals import Interval, needed, needs


def _shown(ci: Interval) -> str:
    return f"[{ci.lo:+.3g}, {ci.hi:+.3g}]"


def _check_floor(floor: float) -> float:
    if not floor >= 0:
        raise ValueError(f"a direction's floor must be ≥ 0; got {floor!r}")
    return float(floor)


def direction(ci: Interval, floor: float, side: int = +1, what: str = "the effect") -> Decision:
    """Principle 1 on one interval: ``side`` +1 asserts ``effect > floor``, −1 ``effect <
    −floor``. Holds when the whole interval lies beyond the floor on that side; fails when the
    whole interval lies short of it; undecided (with the values that would decide it) when it
    straddles it."""
    f = _check_floor(floor)
    if side not in (+1, -1):
        raise ValueError(f"side must be +1 or -1; got {side!r}")
    bound = side * f
    sign = ">" if side > 0 else "<"
    beyond = ci.lo > bound if side > 0 else ci.hi < bound
    if beyond:
        return Decision(True, f"{what} {_shown(ci)} {sign} {bound:+g}")
    if (ci.hi <= bound) if side > 0 else (ci.lo >= bound):
        return Decision(False, f"{what} {_shown(ci)} short of {bound:+g}")
    return Decision(None, f"{what} {_shown(ci)} straddles {bound:+g}" + needed(ci, (bound,)),
                    gates.Facts(needs=needs(ci, (bound,))))


def some_direction(wide: Sequence[Interval], counts: Sequence[int], floor: float,
                   side: int = +1, what: str = "improvement") -> Decision:
    """Principle 1 over a family ("some count does better"): ``wide`` are the intervals widened by
    Bonferroni over ``counts``. Holds when one lies beyond the floor on ``side``; fails when every
    one lies short of it; undecided otherwise, naming the count nearest to deciding."""
    if not counts:
        return gates.undecided("no count to compare", Gate.COUNT)
    found = [direction(ci, floor, side, f"{what} at N'={n}")
             for ci, n in zip(wide, counts, strict=True)]
    family = f" (Bonferroni over {len(counts)} counts)"
    for decision in found:
        if decision.holds is True:
            return Decision(True, decision.reason + family)
    if all(decision.holds is False for decision in found):
        return Decision(False, f"every {what} CI short of {side * _check_floor(floor):+g}"
                        + family)
    k = max((k for k, d in enumerate(found) if d.holds is None),
            key=lambda k: side * (wide[k].hi if side > 0 else wide[k].lo))
    return Decision(None, found[k].reason + family, found[k].facts)


def no_benefit(wide: Sequence[Interval], counts: Sequence[int], margin: float,
               what: str = "improvement") -> Decision:
    """Principle 2: "does not improve beyond δ" over ``counts``, on the intervals ``wide``
    widened by Bonferroni over them. Holds when every upper bound is below δ; fails when some
    lower bound is above δ; undecided otherwise (naming the interval that straddles δ)."""
    if not margin > 0:
        raise ValueError(f"the margin δ must be > 0; got {margin!r}")
    if not counts:
        return gates.undecided("no count to compare", Gate.COUNT)
    d = float(margin)
    family = f"Bonferroni over {len(counts)} counts"
    for ci, n in zip(wide, counts, strict=True):
        if ci.lo > d:
            return Decision(False, f"{what} CI above +{d:g} at N'={n}: {_shown(ci)} ({family})")
    if all(ci.hi < d for ci in wide):
        return Decision(True, f"every {what} CI below +{d:g} ({len(counts)} counts, {family})")
    k = max(range(len(wide)), key=lambda k: wide[k].hi)
    return Decision(None, f"{what} CI at N'={counts[k]} {_shown(wide[k])} straddles +{d:g} "
                    f"({family})" + needed(wide[k], (d,)),
                    gates.Facts(needs=needs(wide[k], (d,))))


def straddling(cis: Sequence[Interval], bounds: Sequence[float]) -> list[Interval]:
    """Principle 3: the intervals a power gate may read, those containing one of ``bounds``
    (an interval that clears every bound decides whatever its width)."""
    return [ci for ci in cis if any(ci.lo <= b <= ci.hi for b in bounds)]


def generalises(ci: Interval, baseline: float, higher_is_better: bool, floor: float = 0.0,
                baseline_name: str = "the baseline") -> Decision:
    """Principle 4: the models' test metric (``ci``, over seeds) beats a trivial baseline fitted
    on the same training data (value ``baseline``), by principle 1: its whole interval beyond
    the baseline by at least ``floor`` on the better side. Undecided or failed, a test-data row
    is outside the paper's regime (a memoriser's test curve) and says so."""
    side = +1 if higher_is_better else -1
    shifted = Interval(ci.mean - baseline, ci.lo - baseline, ci.hi - baseline, ci.n, ci.over,
                       ci.level)
    found = direction(shifted, floor, side, f"test metric minus {baseline_name} ({baseline:.4g})")
    if found.holds is True:
        return Decision(True, f"generalises: {found.reason}")
    return Decision(None, f"does not generalise beyond {baseline_name}: {found.reason}",
                    gates.Facts(closed_by=Gate.REGIME))
