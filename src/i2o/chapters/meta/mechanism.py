"""Why the outer training loss of some Figure 4 iMAML models rose late in training (issue 49):
the rule that names the mechanism from the probes of :mod:`.mechanism_probe`.

The paper, on the practical implicit-differentiation descent (its Eq. 12): "This formula is
heuristic and does not necessarily provide a descent direction for arbitrary N." Three
mechanisms could make the outer loss L of a model trained on a fixed set rise: (a) the implicit
hypergradient ĝ is not a descent direction of the actual L (θ_N far from the inner solution, or
∇²ℓ_s(θ_N) + λI not positive definite, so that the implicit function theorem's system is
ill-posed: sign (a′)); (b) Adam's step: ĝ is a descent direction and the step is too long (the
late spikes of Adam on a small objective near interpolation); (c) the inner line search
exhausting its halvings and taking its last trial regardless.

**The rule** (fixed from the paper's wording before any probe was computed):

- the probes are taken at every checkpoint s_1 < s_2 < … of each probed model, at the chunk's
  last parameters; L(s) is the outer training loss there (:func:`.outer.fixed_set_loss`, what the
  best-point tracker records);
- a *rise interval* is a checkpoint interval [s_i, s_{i+1}] with L(s_{i+1}) > 2 L(s_i) (or
  L(s_{i+1}) not finite while L(s_i) is); every other interval with s_i at or after the first
  tenth of training (s_i ≥ T/10, T the outer steps) is *calm*; an interval starting at a
  non-finite L is neither;
- three candidate signs, read at s_i: (a) "not a descent direction": ``descent_fd`` is 0, the
  central differences of L along −ĝ are ≥ 0 at both step lengths; (a′) "inner problem not
  strongly convex": ``indefinite_share`` > 0, some probed task has λ_min(∇²ℓ_s(θ_N)) + λ ≤ 0;
  (c) "line search exhausted": ``last_trial_share`` > 0, some inner iteration made its last
  allowed trial. A missing (NaN) value is not a sign (``descent_fd`` is NaN when the two step
  lengths disagree);
- a sign is *named* when it is present at the start of at least half of all rise intervals
  (pooled over the probed models: 2k ≥ n) and at fewer than half of the calm intervals
  (2k′ < m; with no calm interval nothing can be named, a sign present everywhere explains
  nothing);
- (b) "Adam's step, not the direction" is named when no sign is named and −ĝ is a descent
  direction (``descent_fd`` = 1) at the start of every rise interval;
- no rise interval at all: undecided (``None``); otherwise the verdict holds when a mechanism is
  named and fails when none is (the probes explain none of the rises), and its reason lists the
  counts (k of n rise intervals, k′ of m calm ones) of every sign.

The rule states more than the paper: the paper says only that the direction *need not* be one of
descent (for an affine inner problem, with the pseudo-inverse), not that it fails here, and says
nothing of Adam or of line searches; the rule asks which of these accompanies the rises of these
particular models, and an association with the rises, not a proof of cause.

:func:`name` applies it, :func:`table` lists the probes at each rise and the calm medians,
:func:`describe` writes the verdict as a sentence. :func:`probe` and :class:`MechanismRun` are
those of :mod:`.mechanism_probe` (the job's module, which holds none of this rule: editing the
rule recomputes no probe).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from i2o.chapters.meta.mechanism_probe import FIELDS, MechanismRun, probe
from i2o.verdicts.gates import Decision

__all__ = ["MechanismRun", "probe", "name", "table", "describe", "Verdict", "SignCount",
           "Interval", "intervals", "SIGNS", "ADAM_STEP", "LETTERS"]

#: The candidate signs, by key: what each means, read at the start of an interval.
SIGNS: dict[str, str] = {"a": "not a descent direction",
                         "a_prime": "inner problem not strongly convex",
                         "c": "line search exhausted"}
#: How the text writes each key (the paper-style letters).
LETTERS: dict[str, str] = {"a": "a", "a_prime": "a′", "c": "c", "b": "b"}
#: The mechanism named when no sign is and −ĝ descends at every rise.
ADAM_STEP = "b"
ADAM_STEP_TEXT = "Adam's step, not the direction"
#: L must be more than this multiple of its value at the previous checkpoint for a rise.
RISE_FACTOR = 2.0
#: Calm intervals start at or after this fraction of the outer steps.
WARMUP_FRACTION = 0.1


@dataclass(frozen=True)
class Interval:
    """A checkpoint interval [start, end] of one model, its L at both ends, whether it is a rise
    (else calm) and the probe at its start (:data:`.mechanism_probe.FIELDS`)."""

    label: str
    start: int
    end: int
    loss_start: float
    loss_end: float
    rise: bool
    probe: Mapping[str, float]


def is_rise(loss_start: float, loss_end: float) -> bool:
    """L(s_{i+1}) > 2 L(s_i), or L(s_{i+1}) not finite (L(s_i) finite)."""
    return not math.isfinite(loss_end) or loss_end > RISE_FACTOR * loss_start


def intervals(run: Mapping[str, Any]) -> list[Interval]:
    """The rise and calm intervals of one probed model (a :class:`MechanismRun` result: its
    ``label``, ``outer_steps``, ``steps``, ``loss`` and the probe fields by checkpoint)."""
    steps = np.asarray(run["steps"], dtype=np.int64)
    loss = np.asarray(run["loss"], dtype=float)
    warmup = WARMUP_FRACTION * float(run["outer_steps"])
    found = []
    for i in range(len(steps) - 1):
        if not math.isfinite(loss[i]):
            continue
        rise = is_rise(float(loss[i]), float(loss[i + 1]))
        if not rise and steps[i] < warmup:
            continue
        found.append(Interval(str(run["label"]), int(steps[i]), int(steps[i + 1]),
                              float(loss[i]), float(loss[i + 1]), rise,
                              {field: float(np.asarray(run[field])[i]) for field in FIELDS
                               if field in run}))
    return found


def sign_present(sign: str, values: Mapping[str, float]) -> bool:
    """Whether ``sign`` (a key of :data:`SIGNS`) is present in one probe; NaN is absent."""
    if sign == "a":
        return values.get("descent_fd", math.nan) == 0.0
    if sign == "a_prime":
        return values.get("indefinite_share", math.nan) > 0
    if sign == "c":
        return values.get("last_trial_share", math.nan) > 0
    raise ValueError(f"sign must be one of {', '.join(SIGNS)}; got {sign!r}")


@dataclass(frozen=True)
class SignCount:
    """How often ``sign`` is present at the start of the ``rises`` rise intervals and of the
    ``calms`` calm ones."""

    sign: str
    at_rises: int
    rises: int
    at_calms: int
    calms: int

    @property
    def named(self) -> bool:
        """At ≥ half of the rise intervals and < half of the calm ones."""
        return self.rises > 0 and 2 * self.at_rises >= self.rises and 2 * self.at_calms < self.calms

    def text(self) -> str:
        return (f"({LETTERS[self.sign]}) {SIGNS[self.sign]}: {self.at_rises} of {self.rises} rise "
                f"intervals, {self.at_calms} of {self.calms} calm")


@dataclass(frozen=True)
class Verdict:
    """The rule's outcome: ``holds`` (a mechanism named / none named / ``None``: no rise), its
    ``reason``, the ``named`` mechanisms (keys of :data:`SIGNS`, or :data:`ADAM_STEP`), every
    sign's counts and at how many rise starts −ĝ descended."""

    holds: bool | None
    reason: str
    named: tuple[str, ...]
    counts: tuple[SignCount, ...]
    rises: int
    calms: int
    descending_at_rises: int

    def decision(self) -> Decision:
        """As the claims tables read a verdict (:class:`i2o.verdicts.gates.Decision`)."""
        return Decision(self.holds, self.reason)


def _mechanism_text(key: str) -> str:
    return f"({LETTERS[key]}) {ADAM_STEP_TEXT if key == ADAM_STEP else SIGNS[key]}"


def name(runs: Iterable[Mapping[str, Any]]) -> Verdict:
    """The rule of the module docstring over the probed models ``runs`` (results of
    :class:`MechanismRun`)."""
    found = [interval for run in runs for interval in intervals(run)]
    rises = [interval for interval in found if interval.rise]
    calms = [interval for interval in found if not interval.rise]
    counts = tuple(SignCount(sign, sum(sign_present(sign, i.probe) for i in rises), len(rises),
                             sum(sign_present(sign, i.probe) for i in calms), len(calms))
                   for sign in SIGNS)
    descending = sum(i.probe.get("descent_fd", math.nan) == 1.0 for i in rises)
    if not rises:
        return Verdict(None, "no probed model's loss rose (at least doubled between two "
                       "checkpoints)", (), counts, 0, len(calms), 0)
    named = tuple(count.sign for count in counts if count.named)
    if not named and descending == len(rises):
        named = (ADAM_STEP,)
    listing = "; ".join(count.text() for count in counts)
    descent = f"−ĝ descended at {descending} of {len(rises)} rise starts"
    if named:
        reason = (f"named {', '.join(_mechanism_text(key) for key in named)}; {listing}; "
                  f"{descent}")
    else:
        reason = (f"no sign at ≥ half of the rise intervals and < half of the calm ones, and −ĝ "
                  f"did not descend at every rise start; {listing}; {descent}")
    return Verdict(bool(named), reason, named, counts, len(rises), len(calms), descending)


def table(runs: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per rise interval of each model (its start and end, L at both and the probe at
    its start), then one row per model with the medians of the probes at its calm intervals'
    starts (``kind`` "calm median", ``start`` and ``end`` empty, ``intervals`` their count)."""
    rows: list[dict[str, Any]] = []
    for run in runs:
        found = intervals(run)
        for interval in (i for i in found if i.rise):
            rows.append({"model": interval.label, "kind": "rise", "start": interval.start,
                         "end": interval.end, "intervals": 1, "loss_start": interval.loss_start,
                         "loss_end": interval.loss_end, **interval.probe})
        calm = [i for i in found if not i.rise]
        medians = {field: _median([i.probe.get(field, math.nan) for i in calm])
                   for field in FIELDS}
        rows.append({"model": str(run["label"]), "kind": "calm median", "start": None,
                     "end": None, "intervals": len(calm),
                     "loss_start": _median([i.loss_start for i in calm]),
                     "loss_end": _median([i.loss_end for i in calm]), **medians})
    return pd.DataFrame(rows)


def _median(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def describe(verdict: Verdict) -> str:
    """The verdict as a sentence for the chapter page."""
    if verdict.holds is None:
        return ("No probed model's outer training loss rose (at least doubled between two "
                "checkpoints), so there is no rise whose mechanism to name.")
    signs = "; ".join(count.text() for count in verdict.counts)
    rises = (f"{verdict.rises} rise interval{'s' if verdict.rises != 1 else ''} and "
             f"{verdict.calms} calm one{'s' if verdict.calms != 1 else ''}")
    descent = ("the central differences found −ĝ a descent direction at "
               f"{verdict.descending_at_rises} of the {verdict.rises} rise starts")
    if not verdict.holds:
        return (f"Over {rises} of the probed models, no mechanism is named: no sign was present "
                f"at the start of at least half of the rises and fewer than half of the calm "
                f"intervals ({signs}), and {descent}.")
    if verdict.named == (ADAM_STEP,):
        return (f"Over {rises} of the probed models, the rises are named "
                f"{_mechanism_text(ADAM_STEP)}: "
                f"{descent}, and no sign singles the rises out ({signs}).")
    named = ", ".join(_mechanism_text(key) for key in verdict.named)
    return (f"Over {rises} of the probed models, the rises are named {named}: present at the "
            f"start of at least half of the rises and fewer than half of the calm intervals "
            f"({signs}); {descent}.")
