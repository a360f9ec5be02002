"""The margin δ of the book's one rule (:mod:`i2o.verdicts.rule`) and the gates on it: δ has a
scale (gate 1, :func:`reference_gate`), and the measurement resolves δ with enough power
(gates 2 and 3, :func:`precision_gate`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from i2o.verdicts import gates, intervals, margins, readings
from i2o.verdicts.curves import Curves
from i2o.verdicts.decision import Decision, Gate

#: A row with a margin is decided only when the widest interval it reads has a half-width of at
#: most this fraction of δ (:mod:`i2o.verdicts.rule`).
POWER_RATIO = 0.5


@dataclass(frozen=True)
class Margin:
    """The margin δ, in the metric's units, and what it is (``text``, for the claim row).

    ``of_fewest``: δ is a fraction of what the fewest iterations cost, so it has a scale only
    where that cost is established (:mod:`i2o.verdicts.rule`). ``floor``: the metric's
    pre-registered absolute floor, below which δ never goes (0: none)."""

    delta: float
    text: str
    of_fewest: bool = False
    floor: float = 0.0
    unit: str = ""

    @classmethod
    def stated(cls, delta: float, unit: str = "") -> Margin:
        """A margin the user states."""
        return cls(float(delta), f"±{delta:g}" + (f" {unit}" if unit else "") + " (stated)",
                   unit=unit)

    @classmethod
    def relative(cls, fraction: float, reference: float, named: str, unit: str = "",
                 digits: int = 3, floor: float = 0.0) -> Margin:
        """``δ = max(fraction × |reference|, floor)``
        (:func:`i2o.verdicts.margins.relative_margin`), ``named`` the reference effect."""
        if not floor >= 0:
            raise ValueError(f"a margin's floor must be ≥ 0; got {floor!r}")
        scaled = margins.relative_margin(fraction, reference)
        delta = max(scaled, float(floor))
        shown = f"{{:.{digits}g}}"
        suffix = f" {unit}" if unit else ""
        of = f"{fraction:g} × {named} ({shown.format(abs(reference))})"
        if floor > 0:
            of = f"max({of}, floor {floor:g}{suffix})"
        return cls(delta, f"±{shown.format(delta)}{suffix} = {of}", floor=float(floor), unit=unit)

    @classmethod
    def fewest(cls, curves: Curves, train_iters: int, fraction: float, unit: str = "",
               named: str = "", floor: float = 0.0) -> Margin:
        """``δ = max(fraction × I(N, min N'), floor)``: a fraction of what the fewest iterations
        cost (the mean over the models), never below the metric's floor."""
        low = int(np.asarray(curves.grid)[0])
        if low >= train_iters:
            raise ValueError(f"no count below N = {train_iters} on the grid: what the fewest "
                             "iterations cost is not measured")
        cost = float(curves.sign * (curves.mean()[curves.at(train_iters)]
                                    - curves.mean()[curves.at(low)]))
        made = cls.relative(fraction, cost, named or f"what {low} iterations cost", unit,
                            floor=floor)
        return cls(made.delta, made.text, of_fewest=True, floor=made.floor, unit=unit)

    def on_floor(self, why: str) -> Margin:
        """δ = the floor alone, for a margin whose reference effect is not established
        (``why``)."""
        suffix = f" {self.unit}" if self.unit else ""
        return Margin(self.floor, f"±{self.floor:g}{suffix} = the metric's floor ({why})",
                      floor=self.floor, unit=self.unit)

def half_width(ci: intervals.Interval) -> float:
    return (ci.hi - ci.lo) / 2


def reference_gate(margin: Margin, reference: Decision | None) -> Decision:
    """Gate 1 (:mod:`i2o.verdicts.rule`): δ has a scale. Open when δ is positive and finite
    and, for a margin that is a fraction of what the fewest iterations cost (``reference``
    given), that cost is established."""
    parts = []
    if margin.of_fewest and reference is not None:
        parts.append(gates.condition(
            reference.holds is True,
            "no scale for δ: its reference effect, what the fewest iterations cost, is not "
            f"established ({reference.reason or 'undecided'})",
            "its reference effect is established (the fewest iterations cost)", by=Gate.REFERENCE))
    parts.append(gates.condition(margin.delta > 0 and math.isfinite(margin.delta),
                                 f"no margin: δ = {margin.delta:g}", by=Gate.REFERENCE))
    return gates.combine(*parts)


def precision_gate(curves: Curves, train_iters: int, margin: Margin,
                   cis: Sequence[intervals.Interval], bounds: Sequence[float],
                   power_ratio: float | None = POWER_RATIO) -> Decision:
    """Gates 2 and 3 (:mod:`i2o.verdicts.rule`), for the verdicts that every interval lies within
    a bound: δ at least the resolution of the statistic compared (one model's standard error
    over the examples of a change between two counts, divided by √m for a mean over m models),
    and enough power on those of ``cis`` that straddle one of ``bounds`` (principle 3,
    :func:`i2o.verdicts.readings.straddling`: an interval that clears its bound decides
    whatever its width)."""
    parts = []
    resolution = curves.resolution(train_iters)
    models = curves.n_models
    if math.isfinite(resolution):
        compared = resolution / math.sqrt(models) if models >= 2 else resolution
        parts.append(gates.resolves(
            margin.delta, compared, margin.text,
            "the standard error over the examples of the compared change between two counts"
            + (f", a mean over {models} models" if models >= 2 else ", one model"),
            curves.n_examples))
    open_ = readings.straddling(cis, bounds)
    if open_ and power_ratio is not None and margin.delta > 0:
        widest = max(open_, key=half_width)
        parts.append(margins.powered(widest, margin.delta, power_ratio))
    return gates.combine(*parts)
