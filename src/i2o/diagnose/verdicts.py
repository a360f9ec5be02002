r"""The verdicts of a diagnosis and the recommended test-time ``N'``, decided by :mod:`i2o.gates`.

With ``I(N')`` the improvement of ``N'`` over the training count ``N`` (:mod:`.curves`; ``> 0``
means better), ``[lo_{N'}, hi_{N'}]`` its confidence interval, ``δ > 0`` the margin (a difference
that matters, in the metric's units) and ``A = {N' > N}`` the counts above ``N`` on the grid:

- **more iterations help**: holds when some ``N' ∈ A`` has ``lo > δ``; fails when every
  ``N' ∈ A`` has ``hi < δ``; undecided otherwise;
- **more iterations hurt**: holds when some ``N' ∈ A`` has ``hi < −δ``; fails when every one has
  ``lo > −δ``; undecided otherwise;
- **no difference beyond δ**: holds when every ``N' ∈ A`` has its interval inside ``(−δ, δ)``
  (:func:`i2o.gates.equivalent`, an intersection–union test: no correction needed); fails when
  one interval lies entirely outside; undecided otherwise;
- **fewer iterations hurt**: at the smallest ``N' < N``, holds when ``hi < 0``
  (:func:`i2o.gates.positive` on ``−I``), fails when ``lo ≥ 0``.

"Help" and "hurt" look for one count among ``|A|``: their intervals are widened by Bonferroni
(level ``1 − (1 − level) / |A|``) so that the chance of a false "holds" stays at most
``(1 − level) / 2`` over the whole grid.

The overall answer about more iterations (:func:`more_label`) is ``"help"`` when "help" holds (and
notes a later "hurt"), else ``"hurt"`` when "hurt" holds, else ``"no difference"`` when that
holds, else ``"undecided"``.

**Recommendation.** ``N_b`` is the count of the best mean metric. A count ``N'`` is *as good as
the best* when the interval of ``I(N', N_b)`` lies above ``−δ`` (:func:`i2o.gates.not_below`).
The recommendation is the smallest such ``N'`` (the cheapest), reported with the interval of
its improvement over ``N`` and the range of counts as good as the best — except when the data
cannot rank ``N`` itself against the best (its ``not_below`` is undecided): then the
recommendation is ``N`` (test like you train), not a count chosen by noise. It is *decided* when
the recommended count is as good as the best and every smaller count is decidedly worse
(``not_below`` fails); otherwise the recommendation says that the data cannot decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from i2o import gates
from i2o.diagnose.curves import Curves

Decision = gates.Decision


def _mark(ci: gates.Interval, n: int) -> str:
    return f"N'={n}: [{ci.lo:+.3g}, {ci.hi:+.3g}]"


def help_beyond(cis: Sequence[gates.Interval], counts: Sequence[int], margin: float) -> Decision:
    """Some count improves on ``N`` by more than δ (``lo > δ``); fails when all ``hi < δ``."""
    d = float(margin)
    if not cis:
        return None, "no N' above N on the grid"
    winners = [_mark(ci, n) for ci, n in zip(cis, counts, strict=True) if ci.lo > d]
    if winners:
        return True, f"improvement CI above +{d:g} at {winners[0]}"
    if all(ci.hi < d for ci in cis):
        return False, f"every improvement CI below +{d:g}"
    return None, f"too little power: no CI above +{d:g}, some contain it"


def hurt_beyond(cis: Sequence[gates.Interval], counts: Sequence[int], margin: float) -> Decision:
    """Some count is worse than ``N`` by more than δ (``hi < −δ``); fails when all ``lo > −δ``."""
    d = float(margin)
    if not cis:
        return None, "no N' above N on the grid"
    losers = [_mark(ci, n) for ci, n in zip(cis, counts, strict=True) if ci.hi < -d]
    if losers:
        return True, f"improvement CI below −{d:g} at {losers[0]}"
    if all(ci.lo > -d for ci in cis):
        return False, f"every improvement CI above −{d:g}"
    return None, f"too little power: no CI below −{d:g}, some contain it"


def no_difference(cis: Sequence[gates.Interval], counts: Sequence[int],
                  margin: float) -> Decision:
    """Every count's interval inside ``(−δ, δ)``; fails when one lies entirely outside."""
    if not cis:
        return None, "no N' above N on the grid"
    decisions = [gates.equivalent(ci, margin) for ci in cis]
    outside = [_mark(ci, n) for (ok, _), ci, n in zip(decisions, cis, counts, strict=True)
               if ok is False]
    if outside:
        return False, f"CI entirely outside ±{margin:g} at {outside[0]}"
    if all(ok is True for ok, _ in decisions):
        return True, f"every CI inside ±{margin:g} ({len(cis)} counts)"
    open_ = [_mark(ci, n) for (ok, _), ci, n in zip(decisions, cis, counts, strict=True)
             if ok is None]
    return None, f"too little power: CI straddles ±{margin:g} at {open_[0]}"


def fewer_hurt(ci: gates.Interval | None, n: int | None) -> Decision:
    """At the smallest count below ``N``: holds when ``I < 0`` surely (``hi < 0``)."""
    if ci is None:
        return None, "no N' below N on the grid"
    loss = gates.Interval(-ci.mean, -ci.hi, -ci.lo, ci.n, ci.over, ci.level)
    holds, why = gates.positive(loss)
    return holds, f"loss from N'={n}: {why}"


def more_label(help_: Decision, hurt: Decision, same: Decision) -> str:
    """``"help"``, ``"hurt"``, ``"no difference"`` or ``"undecided"`` (module docstring)."""
    if help_[0] is True:
        return "help"
    if hurt[0] is True:
        return "hurt"
    if same[0] is True:
        return "no difference"
    return "undecided"


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
    improvement: gates.Interval
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
              level: float = gates.LEVEL) -> Recommendation:
    """The smallest count as good as the best within δ (module docstring)."""
    grid = [int(n) for n in np.asarray(curves.grid)]
    best = grid[int(np.argmax(curves.sign * curves.mean()))]
    decisions = {n: gates.not_below(curves.improvement(n, best, level), margin)[0] for n in grid}
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


@dataclass(frozen=True)
class Verdicts:
    """Every verdict of one diagnosis (each a ``(holds, reason)`` pair of :mod:`i2o.gates`),
    already passed through the gate."""

    gate: Decision
    help: Decision
    hurt: Decision
    same: Decision
    fewer: Decision
    more: str

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"more": self.more}
        for name in ("gate", "help", "hurt", "same", "fewer"):
            holds, why = getattr(self, name)
            out[name] = {"holds": holds, "reason": why}
        return out


def decide(curves: Curves, train_iters: int, margin: float, gate: Decision = (True, "no gate"),
           level: float = gates.LEVEL) -> tuple[Verdicts, dict[str, list[gates.Interval]]]:
    """The verdicts of the module docstring, each passed through ``gate`` (a closed gate makes
    them undecided, with its reason); also returns the intervals they used."""
    if not margin > 0:
        raise ValueError(f"the margin δ must be > 0; got {margin!r}")
    grid = [int(n) for n in np.asarray(curves.grid)]
    above = [n for n in grid if n > train_iters]
    below = [n for n in grid if n < train_iters]
    wide = 1.0 - (1.0 - level) / max(1, len(above))
    plain_cis = curves.improvements(train_iters, above, level)
    wide_cis = curves.improvements(train_iters, above, wide)
    help_ = help_beyond(wide_cis, above, margin)
    hurt = hurt_beyond(wide_cis, above, margin)
    same = no_difference(plain_cis, above, margin)
    low = curves.improvement(below[0], train_iters, level) if below else None
    fewer = fewer_hurt(low, below[0] if below else None)
    gated = [gates.decide(gate, d) for d in (help_, hurt, same, fewer)]
    verdicts = Verdicts(gate=gate, help=gated[0], hurt=gated[1], same=gated[2], fewer=gated[3],
                        more=more_label(gated[0], gated[1], gated[2]))
    return verdicts, {"above": plain_cis, "above_simultaneous": wide_cis,
                      "below": [low] if low is not None else []}
