r"""The book's one rule for its central question, decided by :mod:`i2o.verdicts.gates`: do more (or
fewer) test-time iterations than the training ``N`` help, hurt, or make no difference beyond a
margin, and does the solver keep converging? The stability and deq_gaps chapters take their rows
from here, and so do the diagnose chapter and ``python -m i2o.diagnose``.

With ``I(N')`` the improvement of ``N'`` over ``N`` (:mod:`.curves`; ``> 0`` means better),
``[lo_{N'}, hi_{N'}]`` its pointwise confidence interval at the level ``1 − α`` (90 %),
``[lo*_{N'}, hi*_{N'}]`` the same widened by Bonferroni over the ``|A|`` counts
``A = {N' > N}`` of the grid (level ``1 − α/|A|``), and ``δ > 0`` the margin:

- **more iterations help**: holds when some ``N' ∈ A`` has ``lo* > δ``; fails when every
  ``N' ∈ A`` has ``hi* < δ`` (READING.md, principle 2: "no benefit" is one-sided equivalence,
  Bonferroni over the counts the row spans); undecided otherwise. The paper's claim "more
  iterations bring no improvement beyond δ" (**no gain**) is its negation: it holds where "help"
  fails and fails where "help" holds. A gain that is significant (``lo* > 0``) but below δ is
  reported as such in the reason of a failed "help" (and so of a held "no gain");
- **more iterations hurt**: holds when some ``N' ∈ A`` has ``hi* < −δ``; fails when every one has
  ``lo > −δ``;
- **no difference beyond δ**: holds when every ``N' ∈ A`` has ``(lo, hi)`` inside ``(−δ, δ)``;
  fails when one has ``[lo*, hi*]`` entirely outside;
- **fewer iterations hurt** (the paper, Section 4: "using fewer iterations at inference is almost
  always detrimental"), over every count ``B = {N' < N}`` of the grid, the mirror of "no gain":
  it fails when the fewest iterations decidedly cost nothing (the interval of ``I(N, min N')``
  lies short of the metric's floor, principle 1) or when some ``N' ∈ B`` improves on ``N`` by
  more than δ (``lo* > δ``, Bonferroni over ``|B|``: fewer iterations help there); it holds when
  the fewest decidedly cost (interval beyond the floor) and every ``N' ∈ B`` has ``hi* < δ``;
  undecided otherwise. It reads δ, so it is behind the same resolution and power gates as the
  rows above, its power measured on the intervals over ``B`` that straddle δ. **Fewer
  iterations help** (``fewer_help``, Appendix G.4's "it's better to use fewer iterations than at
  training time") and **more iterations help by a sign** (``more_help``, G.4's ELDER) are
  directions (principle 1, :func:`i2o.verdicts.readings.some_direction`): some widened interval
  beyond the metric's floor holds, every one short of it fails; no margin, no precision gate;
- **the solver guard** (the paper's, Section 4: "We verified that these observations were not
  artefacts of the convergence being already attained or stuck ... increasing the number of
  iterations above N produces better approximation of the inner problem's solution"), a
  direction: the mean relative residual at ``N`` lies above the solver's floor
  (:data:`.questions.RESIDUAL_FLOOR`, 100 × float32's epsilon: not already attained) and the
  interval of ``log10`` of the residual at the largest count over its value at ``N`` lies below
  0 (it keeps falling; a fall of any size passes), of the solver's last iterate when stored
  (:meth:`.curves.Curves.falling`); fails when the residual is at its floor at N or the interval
  lies at or above 0; undecided otherwise. Unless it holds, the rows about more iterations (help,
  hurt, no difference, no gain) are undecided (:attr:`i2o.verdicts.decision.Gate.CONVERGENCE`):
  a curve that stays flat because the solver does not move beyond N says nothing about what
  convergence would bring. Until issue 61 the guard required a tenfold fall, the book's own
  stricter check; that check is now reported apart (``tenfold``), with ``near`` (the relative
  residual at N and at the largest count at most 0.05), and neither gates anything.

**Why these corrections.** A verdict that some count of ``A`` does something is a union over the
counts: one interval in ``|A|`` clearing its bound by chance would decide it, so those intervals
are widened by Bonferroni (no assumption on how the counts depend on each other, and the counts
of one curve depend strongly). A verdict that every count does something is an intersection:
each interval must clear its bound, and the chance that all do by chance is at most that of one,
so the pointwise intervals suffice (an intersection–union test). The choice is made once, here,
for every chapter and every user.

**The stated exception: meta-learning's "more inner steps help".** The meta chapter decides
its rows about more inner steps (:func:`i2o.chapters.meta.claims.more_steps_help`) by its own
test, not by this rule: the best count ``k*`` beyond N is chosen on one half of the test tasks
and the interval of ``MSE(N) − MSE(k*)`` on the other half must lie above 0. Three facts of that
chapter make the rule unusable there. (1) Its MAML models are trained with N = 1 (Finn et al.),
so no count lies below N: the rule's margin, a fraction of what the fewest iterations cost, has
no reference effect, and the paper's sentence ("more steps lower the test MSE") is about the
sign of the change, not a margin. (2) iMAML's inner solver (gradient descent with line search)
stalls on F's ReLU kinks, so no count of its steps is converged and the fall of its residual
does not say whether the solver converges: the chapter measures convergence against a converged
reference instead (L-BFGS, "best before convergence"), where the rule's convergence gate reads
the residual. (3) Its units are hundreds of exchangeable tasks, not a few seeds:
splitting them gives one interval chosen and tested on independent tasks, with no multiplicity
to correct, where the rule must widen every count's interval over the grid. Every other chapter
about iterations at test time decides through :func:`decide`.

**Intervals over seeds or over examples.** Over seeds whenever two or more trained models are
given (a claim about training must average over what training draws), over the evaluation
examples (paired differences) for one model (:meth:`.curves.Curves.improvement`).

**The margin** (:class:`Margin`) is stated by the user, or pre-registered by a chapter as a
fraction of a named reference effect measured in the same run (by default what the fewest
iterations cost, ``I(N, min N')``, :meth:`Margin.fewest`), never below a pre-registered absolute
**floor** of the metric (``Margin.floor``; a chapter fixes one per metric): ``δ = max(f ×
|reference|, floor)``, so a small reference cannot shrink δ to nothing. The rows with a margin are
decided only when (:func:`reference_gate` then :func:`precision_gate`, in this order):

1. the reference effect is established (for :meth:`Margin.fewest`: the interval of what the
   fewest iterations cost lies above 0). Where it is not and the margin has a floor, δ is the
   floor alone (:meth:`Margin.on_floor`; the reference is not measured, the floor is); without a
   floor, a fraction of a cost that may be 0 is no margin and the gate closes;
2. ``δ`` is at least the **resolution** of the statistic compared: one model's standard error
   over the examples of a change between two counts (:meth:`.curves.Curves.resolution`), over
   ``√m`` for a mean over ``m`` models: below it a difference of ``δ`` cannot be told from
   evaluation noise and the comparison could not fail;
3. the study has **power**: the widest of the intervals the verdict reads *that straddle its
   bound* has a half-width of at most ``POWER_RATIO × δ`` (one half); an interval that clears
   its bound decides at its level whatever its width (READING.md, principle 3); otherwise it is
   undecided with the number of seeds (or examples) that would give that width.

Gates 2 and 3 (the **precision** gates, :func:`precision_gate`) guard the verdicts that say every
interval lies within a bound (help fails, hurt fails, no difference holds, fewer hurt holds,
fewer help fails): an intersection over counts whose intervals are wide, or whose δ is below the
evaluation noise, could hold for want of data. They do not guard the verdicts decided by one
Bonferroni-widened interval lying beyond δ (help holds, hurt holds, no difference fails, fewer
hurt fails because a count below N is better by more than δ, fewer help holds): such an
interval is a finding at the family-wise level whatever the width of the others, and closing it
for want of precision would hide a decisive contrary result (a count below N better than N by
far more than δ, say). Those verdicts still need gate 1 (a margin with a scale), the caller's
gate and, for the rows about more iterations, the convergence gate.

The caller's gate (fit quorum, health) comes before all of them; a closed gate makes every row
undecided with its reason and its typed facts (:class:`i2o.verdicts.gates.Facts`).

The overall answer about more iterations (:func:`more_label`) is ``"help"`` when "help" holds,
else ``"hurt"`` when "hurt" holds, else ``"no difference"`` when that holds, else
``"undecided"``.

**Recommendation.** ``N_b`` is the count of the best mean metric. A count ``N'`` is *as good as
the best* when the interval of ``I(N', N_b)`` lies above ``−δ``
(:func:`i2o.verdicts.margins.not_below`). The recommendation is the smallest such ``N'`` (the
cheapest), reported with the interval of its improvement over ``N`` and the range of counts as good
as the best — except when the data cannot rank ``N`` itself against the best (its ``not_below`` is
undecided): then the recommendation is ``N`` (test like you train), not a count chosen by noise. It
is *decided* when the recommended count is as good as the best and every smaller count is decidedly
worse (``not_below`` fails); otherwise the recommendation says that the data cannot decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from i2o.verdicts import gates, intervals, readings
from i2o.verdicts.curves import Curves
from i2o.verdicts.decision import Decision, Gate
from i2o.verdicts.margin_gates import POWER_RATIO, Margin, precision_gate, reference_gate
from i2o.verdicts.questions import (
    OPEN,
    converging,
    falling,
    fewer_hurt,
    help_beyond,
    hurt_beyond,
    more_label,
    near_equilibrium,
    no_difference,
    no_gain,
    tenfold,
)
from i2o.verdicts.readings import some_direction


@dataclass(frozen=True)
class Verdicts:
    """Every verdict of one diagnosis (each a :class:`i2o.verdicts.gates.Decision`), already passed
    through the gates: ``gate`` the caller's, ``scale`` :func:`reference_gate` and
    :func:`precision_gate` combined for the counts above N (alone), ``converging``
    :func:`converging`'s."""

    gate: Decision
    scale: Decision
    help: Decision
    hurt: Decision
    same: Decision
    no_gain: Decision
    fewer: Decision
    residual: Decision
    more: str
    margin: Margin
    converging: Decision = OPEN
    fewer_help: Decision = OPEN
    more_help: Decision = OPEN
    tenfold: Decision = OPEN
    near: Decision = OPEN

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"more": self.more, "margin": self.margin.delta,
                                  "margin_text": self.margin.text}
        for name in ("gate", "scale", "converging", "help", "hurt", "same", "no_gain", "fewer",
                     "fewer_help", "more_help", "residual", "tenfold", "near"):
            found: Decision = getattr(self, name)
            out[name] = {"holds": found.holds, "reason": found.reason}
        return out


#: Appended to a verdict decided by one simultaneous interval beyond δ (module docstring).
BEYOND = "one simultaneous interval beyond δ decides this, whatever the resolution and power"


def _settled(found: Decision, beyond: bool, scaled: Sequence[Decision], precise: Decision,
             moving: Decision = OPEN) -> Decision:
    """``found`` behind its gates (module docstring): when its outcome is ``beyond`` (the one a
    simultaneous interval beyond δ decides), behind ``scaled`` and ``moving`` only; otherwise
    behind ``scaled``, the precision gates ``precise``, then ``moving``. The open gates' reasons
    head the verdict's."""
    checks = [*scaled, moving] if found.holds is beyond else [*scaled, precise, moving]
    decided = gates.gated(checks, found)
    if decided.holds is None and found.holds is not None:
        return decided  # a gate closed it
    said = [part for gate in checks for part in gate.reason.split("; ") if part]
    tail = [BEYOND] if found.holds is beyond else []
    return Decision(decided.holds, "; ".join([*said, found.reason, *tail]), decided.facts)


def _widened(level: float, counts: Sequence[int]) -> float:
    """The level of a family of ``len(counts)`` intervals, Bonferroni-widened."""
    return 1.0 - (1.0 - level) / max(1, len(counts))


def decide(curves: Curves, train_iters: int, margin: float | Margin, gate: Decision = OPEN,
           level: float = intervals.LEVEL, health: Decision = OPEN,
           power_ratio: float | None = POWER_RATIO
           ) -> tuple[Verdicts, dict[str, list[intervals.Interval]]]:
    """The verdicts of the module docstring: the rows about more iterations behind ``gate``,
    :func:`reference_gate`, :func:`precision_gate` and :func:`converging`; "fewer iterations
    hurt" behind ``gate`` and its own scale gate (resolution, power over the counts below N);
    the residual check behind ``health``. An open ``gate`` is stated once, in its own row, not
    in each verdict's reason (which starts with the open scale gates' reasons); a closed one is
    each verdict's reason. Also returns the intervals they read (``above`` pointwise,
    ``above_simultaneous`` widened, ``below`` the cost of the fewest, ``fewer`` and
    ``fewer_simultaneous`` the improvements of the counts below N, ``residual``)."""
    if not isinstance(margin, Margin):
        if not margin > 0:
            raise ValueError(f"the margin δ must be > 0; got {margin!r}")
        margin = Margin.stated(float(margin))
    grid = [int(n) for n in np.asarray(curves.grid)]
    above = [n for n in grid if n > train_iters]
    below = [n for n in grid if n < train_iters]
    plain = curves.improvements(train_iters, above, level)
    wide = curves.improvements(train_iters, above, _widened(level, above))
    plain_below = curves.improvements(train_iters, below, level)
    wide_below = curves.improvements(train_iters, below, _widened(level, below))
    cost = curves.improvement(train_iters, below[0], level) if below else None
    reference = (readings.direction(cost, margin.floor, +1, f"cost of N'={below[0]}")
                 if cost is not None
                 else gates.undecided("no N' below N on the grid", Gate.COUNT))
    if margin.of_fewest and reference.holds is not True and margin.floor > 0:
        margin = margin.on_floor("what the fewest iterations cost is not established")
    d = margin.delta
    scaled = reference_gate(margin, reference)
    scale = gates.combine(scaled, precision_gate(curves, train_iters, margin, wide, (-d, d),
                                                 power_ratio))
    residual, ci = falling(curves, train_iters, health, level)
    moving = converging(residual)
    if gate.holds is not True:
        help_ = hurt = same = Decision(None, gate.reason, gate.facts)
    elif scaled.holds is not True:
        help_ = hurt = same = gates.combine(gate, scaled)
    else:
        help_, hurt, same = (
            _settled(rule(plain, wide, above, d), beyond, [scaled],
                     precision_gate(curves, train_iters, margin, read, bounds, power_ratio),
                     moving)
            for rule, beyond, read, bounds in ((help_beyond, True, wide, (d,)),
                                               (hurt_beyond, True, plain, (-d,)),
                                               (no_difference, False, plain, (-d, d))))
    fewer = fewer_hurt(cost, plain_below, wide_below, below, d, margin.floor)
    fewer_precise = precision_gate(curves, train_iters, margin, wide_below, (d,), power_ratio)
    fewer_scaled = reference_gate(margin, None)
    if reference.holds is False:  # fails on what the fewest cost alone: δ is not read
        fewer = gates.gated([gate], fewer)
    else:
        fewer = gates.gated([gate], _settled(fewer, False, [fewer_scaled], fewer_precise))
    fewer_help = (gates.gated([gate], some_direction(wide_below, below, margin.floor, +1))
                  if below else gates.undecided("no N' below N on the grid", Gate.COUNT))
    more_sign = (gates.gated([gate, moving], some_direction(wide, above, margin.floor, +1))
                 if above else gates.undecided("no N' above N on the grid", Gate.COUNT))
    verdicts = Verdicts(gate=gate, scale=scale, help=help_, hurt=hurt, same=same,
                        no_gain=no_gain(help_), fewer=fewer, residual=residual,
                        more=more_label(help_, hurt, same), margin=margin, converging=moving,
                        fewer_help=fewer_help, more_help=more_sign,
                        tenfold=tenfold(ci, health),
                        near=near_equilibrium(curves, train_iters, health))
    return verdicts, {"above": plain, "above_simultaneous": wide,
                      "below": [cost] if cost is not None else [],
                      "fewer": plain_below, "fewer_simultaneous": wide_below,
                      "residual": [ci] if ci is not None else []}
