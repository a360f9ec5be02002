"""Each question of the book's one rule (:mod:`i2o.verdicts.rule`) decided on the intervals of
one curve: more iterations help, hurt or make no difference beyond δ, no gain, fewer hurt, the
residual falls for real, and the overall answer about more iterations."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from i2o.verdicts import gates, intervals, margins, readings
from i2o.verdicts.curves import Curves
from i2o.verdicts.decision import Decision, Gate
from i2o.verdicts.margin_gates import half_width

#: The book's own stricter residual check (:func:`tenfold`, gating nothing): the residual at the
#: largest count is at most this fraction's inverse of its value at N.
RESIDUAL_FALL = 10.0
#: The solver's floor for the guard (:func:`falling`): 100 × float32's machine epsilon, below
#: which a relative residual says the fixed point is already attained.
RESIDUAL_FLOOR = 100 * float(np.finfo(np.float32).eps)
#: The book's own "near equilibrium" bound on the relative residual (:func:`near_equilibrium`).
NEAR_EQUILIBRIUM = 0.05
OPEN = Decision(True, "")

def _mark(ci: intervals.Interval, n: int) -> str:
    return f"N'={n}: [{ci.lo:+.3g}, {ci.hi:+.3g}]"


def _family(counts: Sequence[int]) -> str:
    return f"Bonferroni over {len(counts)} counts"


def _open(wide: intervals.Interval, n: int, what: str, verb: str,
          boundaries: tuple[float, ...]) -> Decision:
    """Undecided for want of power, at the count ``n`` that blocks a verdict: its widened
    interval contains a boundary; the facts say how many values would decide it."""
    shown = " and ".join(f"{b:+g}" for b in boundaries)
    return Decision(None, f"too little power: {what}; at N'={n} the simultaneous CI "
                    f"[{wide.lo:+.3g}, {wide.hi:+.3g}] {verb} {shown}"
                    + intervals.needed(wide, boundaries),
                    gates.Facts(needs=intervals.needs(wide, boundaries)))


def _below_margin(wide: Sequence[intervals.Interval], counts: Sequence[int], margin: float,
                  sign: float) -> str:
    """The note of a change that is significant (its widened interval clears 0) but within δ:
    ``sign`` +1 for a gain, −1 for a loss; ``""`` when there is none."""
    found = [(ci, n) for ci, n in zip(wide, counts, strict=True)
             if (ci.lo > 0 if sign > 0 else ci.hi < 0)]
    if not found:
        return ""
    ci, n = max(found, key=lambda pair: sign * pair[0].mean)
    what = "gain" if sign > 0 else "loss"
    return (f"; a significant {what} smaller than δ = {margin:g}: {_mark(ci, n)} "
            f"({_family(counts)})")


def help_beyond(plain: Sequence[intervals.Interval], wide: Sequence[intervals.Interval],
                counts: Sequence[int], margin: float) -> Decision:
    """Some count improves on ``N`` by more than δ (``lo* > δ``); fails when every ``hi < δ``,
    naming a significant gain below δ if there is one."""
    d = float(margin)
    if not counts:
        return gates.undecided("no N' above N on the grid", Gate.COUNT)
    winners = [_mark(ci, n) for ci, n in zip(wide, counts, strict=True) if ci.lo > d]
    if winners:
        return Decision(True, f"improvement CI above +{d:g} at {winners[0]} ({_family(counts)})")
    if readings.no_benefit(wide, counts, d).holds is True:  # principle 2
        return Decision(False, f"every improvement CI below +{d:g} ({_family(counts)})"
                        + _below_margin(wide, counts, d, +1))
    k = int(np.argmax([ci.hi for ci in wide]))
    return _open(wide[k], counts[k], f"no CI above +{d:g}", "contains", (d,))


def hurt_beyond(plain: Sequence[intervals.Interval], wide: Sequence[intervals.Interval],
                counts: Sequence[int], margin: float) -> Decision:
    """Some count is worse than ``N`` by more than δ (``hi* < −δ``); fails when every
    ``lo > −δ``, naming a significant loss below δ if there is one."""
    d = float(margin)
    if not counts:
        return gates.undecided("no N' above N on the grid", Gate.COUNT)
    losers = [_mark(ci, n) for ci, n in zip(wide, counts, strict=True) if ci.hi < -d]
    if losers:
        return Decision(True, f"improvement CI below −{d:g} at {losers[0]} ({_family(counts)})")
    if all(ci.lo > -d for ci in plain):
        return Decision(False, f"every improvement CI above −{d:g} ({len(counts)} counts)"
                        + _below_margin(wide, counts, d, -1))
    k = int(np.argmin([ci.lo for ci in plain]))
    return _open(wide[k], counts[k], f"no CI below −{d:g}", "contains", (-d,))


def no_difference(plain: Sequence[intervals.Interval], wide: Sequence[intervals.Interval],
                  counts: Sequence[int], margin: float) -> Decision:
    """Every count's interval inside ``(−δ, δ)``; fails when one widened interval lies entirely
    outside."""
    d = float(margin)
    if not counts:
        return gates.undecided("no N' above N on the grid", Gate.COUNT)
    outside = [_mark(ci, n) for ci, n in zip(wide, counts, strict=True)
               if ci.lo >= d or ci.hi <= -d]
    if outside:
        return Decision(False, f"CI entirely outside ±{d:g} at {outside[0]} ({_family(counts)})")
    decisions = [margins.equivalent(ci, d) for ci in plain]
    if all(found.holds is True for found in decisions):
        return Decision(True, f"every CI inside ±{d:g} ({len(counts)} counts)")
    k = max((k for k, found in enumerate(decisions) if found.holds is not True),
            key=lambda k: half_width(wide[k]))
    return _open(wide[k], counts[k], f"not every CI inside ±{d:g}", "straddles", (-d, d))


def no_gain(help_: Decision) -> Decision:
    """"More iterations bring no improvement beyond δ": the negation of :func:`help_beyond`."""
    holds = None if help_.holds is None else not help_.holds
    return Decision(holds, help_.reason, help_.facts)


def fewer_hurt(cost: intervals.Interval | None, plain: Sequence[intervals.Interval],
               wide: Sequence[intervals.Interval], counts: Sequence[int],
               margin: float, floor: float = 0.0) -> Decision:
    """"Using fewer iterations at inference is almost always detrimental" over every count
    ``N' < N`` (:mod:`i2o.verdicts.rule`). ``cost``: the interval of ``I(N, min N')``, read as
    a direction beyond the metric's ``floor`` (principle 1, :func:`.readings.direction`);
    ``plain`` and ``wide``: the pointwise and Bonferroni-widened intervals of ``I(N', N)`` for
    ``N' ∈ counts``, every widened one below δ (principle 2)."""
    d = float(margin)
    if cost is None or not counts:
        return gates.undecided("no N' below N on the grid", Gate.COUNT)
    fewest = readings.direction(cost, floor, +1, f"cost of N'={counts[0]}")
    if fewest.holds is False:
        return Decision(False, f"{fewest.reason}: the fewest iterations decidedly cost nothing")
    winners = [_mark(ci, n) for ci, n in zip(wide, counts, strict=True) if ci.lo > d]
    if winners:
        return Decision(False, f"fewer iterations help: improvement CI above +{d:g} at "
                               f"{winners[0]} ({_family(counts)})")
    if fewest.holds is None:
        return Decision(None, fewest.reason, fewest.facts)
    if all(ci.hi < d for ci in wide):
        return Decision(True, f"{fewest.reason}, and every improvement CI below +{d:g} "
                              f"({len(counts)} counts below N, {_family(counts)})"
                        + _below_margin(wide, counts, d, +1))
    k = int(np.argmax([ci.hi for ci in wide]))
    return _open(wide[k], counts[k], f"{fewest.reason}, but no CI below N shown below +{d:g}",
                 "contains", (d,))


def falling(curves: Curves, train_iters: int, health: Decision = OPEN,
            level: float = intervals.LEVEL, floor: float = RESIDUAL_FLOOR
            ) -> tuple[Decision, intervals.Interval | None]:
    """The paper's solver guard (:mod:`i2o.verdicts.rule`), behind ``health``, and its interval:
    (i) the mean relative residual at N lies above the solver's ``floor`` (convergence not
    already attained), and (ii) the interval of ``log10(r(N'max) / r(N))`` lies below 0 (the
    residual keeps falling: a fall of any size passes, principle 1 with floor 0). Fails when the
    residual is at its floor at N, or when the interval lies at or above 0; undecided when it
    straddles 0."""
    ratios, over = curves.falling(train_iters)
    finite = ratios[np.isfinite(ratios)]
    if finite.size < 2:
        return gates.undecided(f"needs ≥ 2 finite residual ratios over {over}", Gate.COUNT), None
    ci = intervals.interval(finite, over, level)
    at_n = curves.residual_at(train_iters)
    top = int(np.asarray(curves.grid)[-1])
    at_top = curves.residual_at(top)
    shown = f"log10(residual at the largest count / at N) {ci.describe(digits=2)}"
    fold = (f"the mean relative residual goes from {at_n:.2g} at N to {at_top:.2g} at "
            f"N' = {top}")
    if not at_n > floor:
        found = Decision(False, f"residual at N {at_n:.3g} at or below the solver's floor "
                                f"{floor:.3g}: convergence already attained")
    elif ci.hi < 0:
        found = Decision(True, f"{shown} below 0: the residual keeps falling beyond N ({fold}; "
                               f"the floor is {floor:.3g})")
    elif ci.lo >= 0:
        found = Decision(False, f"{shown} at or above 0: the residual does not fall beyond N")
    else:
        found = Decision(None, f"{shown} contains 0" + intervals.needed(ci, (0.0,)),
                         gates.Facts(needs=intervals.needs(ci, (0.0,))))
    return gates.gated([health], found, quote=bool(health.reason)), ci


def tenfold(ci: intervals.Interval | None, health: Decision = OPEN) -> Decision:
    """The book's own stricter check, gating nothing: the residual falls at least
    :data:`RESIDUAL_FALL`-fold beyond N (the interval of the log10 ratio below −1)."""
    if ci is None:
        return gates.undecided("no residual ratios", Gate.COUNT)
    bound = -math.log10(RESIDUAL_FALL)
    shown = f"log10(residual at the largest count / at N) {ci.describe(digits=2)}"
    if ci.hi < bound:
        found = Decision(True, f"{shown} below {bound:g}: falls over {RESIDUAL_FALL:g}-fold")
    elif ci.lo >= bound:
        found = Decision(False, f"{shown} at or above {bound:g}: falls less than "
                                f"{RESIDUAL_FALL:g}-fold")
    else:
        found = Decision(None, f"{shown} contains {bound:g}" + intervals.needed(ci, (bound,)),
                         gates.Facts(needs=intervals.needs(ci, (bound,))))
    return gates.gated([health], found)


def near_equilibrium(curves: Curves, train_iters: int, health: Decision = OPEN) -> Decision:
    """The book's own row, gating nothing: the mean relative residual at N and at the largest
    count are at most :data:`NEAR_EQUILIBRIUM` (the DEQ authors' rule of thumb)."""
    at_n = curves.residual_at(train_iters)
    top = int(np.asarray(curves.grid)[-1])
    at_top = curves.residual_at(top)
    shown = (f"mean relative residual {at_n:.3g} at N = {train_iters}, {at_top:.3g} at "
             f"N' = {top}, against {NEAR_EQUILIBRIUM:g}")
    if not (math.isfinite(at_n) and math.isfinite(at_top)):
        return gates.undecided(f"residual not measured ({shown})", Gate.COUNT)
    found = Decision(bool(at_n <= NEAR_EQUILIBRIUM and at_top <= NEAR_EQUILIBRIUM), shown)
    return gates.gated([health], found)


def converging(residual: Decision) -> Decision:
    """The gate the solver guard sets before the rows about more iterations: open only when
    it holds (:mod:`i2o.verdicts.rule`)."""
    return gates.condition(residual.holds is True,
                           f"solver guard not met beyond N ({residual.reason or 'undecided'})",
                           by=Gate.CONVERGENCE)


def more_label(help_: Decision, hurt: Decision, same: Decision) -> str:
    """``"help"``, ``"hurt"``, ``"no difference"`` or ``"undecided"`` (:mod:`i2o.verdicts.rule`)."""
    if help_.holds is True:
        return "help"
    if hurt.holds is True:
        return "hurt"
    if same.holds is True:
        return "no difference"
    return "undecided"


