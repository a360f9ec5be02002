"""Why the outer training loss of some Figure 4 iMAML models rose late in training (issue 49):
the rule that names the mechanism from the probes of :mod:`.mechanism_probe` (issue 61).

The paper, on the practical implicit-differentiation descent (its Eq. 12): "This formula is
heuristic and does not necessarily provide a descent direction for arbitrary N." Three
mechanisms could make the outer loss L of a model trained on a fixed set rise: (a) the implicit
hypergradient ĝ is not a descent direction of the actual L (θ_N far from the inner solution, or
∇²ℓ_s(θ_N) + λI not positive definite, so that the implicit function theorem's system is
ill-posed: sign (a′)); (b) Adam's step: ĝ is a descent direction and the step is too long (the
late spikes of Adam on a small objective near interpolation); (c) the inner line search
exhausting its halvings and taking its last trial regardless.

**The onset rule** (issue 61; committed before the models it will decide were probed: the
paper profile's probes of every Figure 4 model that rose, and the 25 models of seeds 3 to 7):

- the probes are taken at every checkpoint s_1 < s_2 < … of each probed model, at the chunk's
  last parameters; L(s) is the outer training loss there (:func:`.outer.fixed_set_loss`, what the
  best-point tracker records);
- a *rise interval* is a checkpoint interval [s_i, s_{i+1}] with L(s_{i+1}) > 2 L(s_i) (or
  L(s_{i+1}) not finite while L(s_i) is); an *onset* is a rise interval whose L(s_i) is at most
  2 × the model's lowest finite L at s_i or before (the loss had not yet risen: a cascade of
  doublings is one onset, its continuations are not); every interval that is not a rise, with
  s_i ≥ T/10 (T the outer steps), is *calm*; an interval starting at a non-finite L is neither;
- three candidate signs, read at s_i: (a) "not a descent direction": ``descent_fd`` is 0, the
  central differences of L along −ĝ are ≥ 0 at both step lengths; (a′) "inner problem not
  strongly convex": ``indefinite_share`` > 0, some probed task has λ_min(∇²ℓ_s(θ_N)) + λ ≤ 0;
  (c) "line search exhausted": ``last_trial_share`` > 0, some inner iteration made its last
  allowed trial. A missing (NaN) value is not a sign;
- pooled over the probed models, with k of the n onsets and k′ of the m calm intervals showing a
  sign, the sign is *named* when 2k ≥ n (at least half of the onsets) and Fisher's exact test of
  the 2 × 2 table (onset or calm, sign or not) gives a one-sided p ≤ :data:`LEVEL` = 0.05 for a
  sign more frequent at onsets than when calm. The intervals of one model are not independent
  draws (a sign can persist over neighbouring checkpoints), so p measures how unusual the
  association would be between independent intervals, not a probability of this model's cause;
- (b) "Adam's step, not the direction" is named when no sign is named and −ĝ is a descent
  direction (``descent_fd`` = 1) at every onset;
- undecided (``None``) when a Figure 4 model rose more than twofold (anywhere in its training,
  over window means of its per-step loss, or after its best point: :func:`rose`) and was not
  probed (its rises could say otherwise), when no probed model rose, or when there are fewer
  than :data:`MIN_ONSETS` = 5 onsets: the smallest count at which a sign present at every onset
  can reach the level against a calm rate of one half (0.5⁵ ≈ 0.031; at 4 onsets 0.0625 > 0.05);
- otherwise the verdict holds when a mechanism is named and fails when none is (the probes
  explain none of the onsets), and its reason lists the counts (k of n onsets, k′ of m calm
  intervals, p) of every sign, and the counts at every rise interval as a description.

It replaces the rule of session 19 (issue 49), which named a sign from the starts of every rise
interval, continuations of a cascade included, with no test against the calm intervals; that
rule named (a′) at 5 of 10 rise intervals of the paper run, where (a′) was absent at 5 of the 6
onsets. The row is the book's own and states more than the paper: the paper says only that the
direction *need not* be one of descent (for an affine inner problem, with the pseudo-inverse),
not that it fails here, and says nothing of Adam or of line searches; the rule asks which of these
accompanies the onsets of these models' rises, an association, not a proof of cause.

:func:`name` applies it, :func:`rose` and :func:`unprobed` find the Figure 4 models it needs,
:func:`table` lists the probes at each rise and the calm medians, :func:`describe` writes the
verdict as a sentence. :func:`probe` and :class:`MechanismRun` are those of :mod:`.mechanism_probe`
(the job's module, which holds none of this rule: editing the rule recomputes no probe).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from i2o.chapters.meta.claims_figure4 import largest_rise
from i2o.chapters.meta.mechanism_probe import FIELDS, MechanismRun, probe
from i2o.verdicts.gates import Decision

__all__ = ["MechanismRun", "probe", "name", "table", "describe", "Verdict", "SignCount",
           "Interval", "intervals", "onset_intervals", "judge", "one_sided_fisher", "rose",
           "unprobed", "SIGNS", "ADAM_STEP", "LETTERS", "LEVEL", "MIN_ONSETS"]

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
#: A sign is named at most at this one-sided p of Fisher's exact test (onsets against calm).
LEVEL = 0.05
#: Fewer onsets than this leave the row undecided.
MIN_ONSETS = 5


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


def onset_intervals(run: Mapping[str, Any]) -> list[Interval]:
    """The onsets of one probed model: its rise intervals whose L(s_i) is at most
    :data:`RISE_FACTOR` times its lowest finite L at s_i or before."""
    steps = np.asarray(run["steps"], dtype=np.int64)
    loss = np.asarray(run["loss"], dtype=float)
    lowest, lowest_at = math.inf, {}
    for step, value in zip(steps, loss, strict=True):
        if math.isfinite(value):
            lowest = min(lowest, float(value))
        lowest_at[int(step)] = lowest
    return [i for i in intervals(run)
            if i.rise and i.loss_start <= RISE_FACTOR * lowest_at[i.start]]


def one_sided_fisher(at_onsets: int, onsets: int, at_calms: int, calms: int) -> float:
    """Fisher's exact p for a sign more frequent at the onsets than at the calm intervals: the
    hypergeometric probability of at least ``at_onsets`` signs among the ``onsets`` when the
    ``at_onsets + at_calms`` signs fall at random among all ``onsets + calms`` intervals."""
    total, signs = onsets + calms, at_onsets + at_calms
    if not onsets or not calms:
        return 1.0
    return float(sum(math.comb(signs, k) * math.comb(total - signs, onsets - k)
                     for k in range(at_onsets, min(signs, onsets) + 1)) / math.comb(total, onsets))


@dataclass(frozen=True)
class SignCount:
    """How often ``sign`` is present at the start of the ``onsets`` onsets, of the ``calms``
    calm intervals and (a description) of all ``rises`` rise intervals."""

    sign: str
    at_onsets: int
    onsets: int
    at_calms: int
    calms: int
    at_rises: int
    rises: int

    @property
    def p(self) -> float:
        """:func:`one_sided_fisher` of the counts."""
        return one_sided_fisher(self.at_onsets, self.onsets, self.at_calms, self.calms)

    @property
    def named(self) -> bool:
        """At ≥ half of the onsets and more often there than when calm (p ≤ :data:`LEVEL`)."""
        return self.onsets > 0 and 2 * self.at_onsets >= self.onsets and self.p <= LEVEL

    def text(self) -> str:
        return (f"({LETTERS[self.sign]}) {SIGNS[self.sign]}: {self.at_onsets} of {self.onsets} "
                f"onsets, {self.at_calms} of {self.calms} calm (one-sided p = {self.p:.2g}; "
                f"{self.at_rises} of {self.rises} rise intervals)")


@dataclass(frozen=True)
class Verdict:
    """The rule's outcome: ``holds`` (a mechanism named / none named / ``None``), its
    ``reason``, the ``named`` mechanisms (keys of :data:`SIGNS`, or :data:`ADAM_STEP`), every
    sign's counts, the onsets, calm intervals and rise intervals counted, at how many onsets −ĝ
    and Adam's step descended, and the Figure 4 models that rose without being probed."""

    holds: bool | None
    reason: str
    named: tuple[str, ...]
    counts: tuple[SignCount, ...]
    onsets: int
    calms: int
    rises: int
    descending_at_onsets: int
    adam_descending_at_onsets: int
    unprobed: tuple[str, ...] = ()

    def decision(self) -> Decision:
        """As the claims tables read a verdict (:class:`i2o.verdicts.gates.Decision`)."""
        return Decision(self.holds, self.reason)


def _mechanism_text(key: str) -> str:
    return f"({LETTERS[key]}) {ADAM_STEP_TEXT if key == ADAM_STEP else SIGNS[key]}"


def rose(curves: Mapping[str, Any]) -> bool:
    """Whether a Figure 4 model's outer training loss rose more than :data:`RISE_FACTOR`-fold:
    anywhere in its training (the largest rise of its per-step loss over 20 window means,
    :func:`.claims_figure4.largest_rise`, as the Figure 4 row reports it) or after its best point
    (the checkpoints' ``peak_after_best`` against ``best_loss``; a non-finite peak rose)."""
    low, high = largest_rise(curves.get("train_losses", ()))
    if math.isfinite(low) and (math.isinf(high) or high > RISE_FACTOR * low):
        return True
    best, peak = curves.get("best_loss"), curves.get("peak_after_best")
    if best is None or peak is None or not math.isfinite(float(best)):
        return False
    peak = float(peak)
    return math.isinf(peak) or peak > RISE_FACTOR * float(best)


def unprobed(figure4: Mapping[str, Mapping[str, Any]], probed: Iterable[str]) -> list[str]:
    """The labels of the Figure 4 models (``figure4``: curves by label) that :func:`rose` and
    are not among the ``probed`` labels."""
    known = set(probed)
    return [label for label, curves in figure4.items() if rose(curves) and label not in known]


def name(runs: Iterable[Mapping[str, Any]], not_probed: Sequence[str] = ()) -> Verdict:
    """The onset rule of the module docstring over the probed models ``runs`` (results of
    :class:`MechanismRun`), undecided while a Figure 4 model that rose is ``not_probed``."""
    runs = list(runs)
    found = [interval for run in runs for interval in intervals(run)]
    onsets = [interval for run in runs for interval in onset_intervals(run)]
    rises = [interval for interval in found if interval.rise]
    calms = [interval for interval in found if not interval.rise]

    def present(sign: str, at: Sequence[Interval]) -> int:
        return sum(sign_present(sign, i.probe) for i in at)

    counts = tuple(SignCount(sign, present(sign, onsets), len(onsets), present(sign, calms),
                             len(calms), present(sign, rises), len(rises)) for sign in SIGNS)
    descending = sum(i.probe.get("descent_fd", math.nan) == 1.0 for i in onsets)
    adam = sum(i.probe.get("adam_descent_fd", math.nan) == 1.0 for i in onsets)
    listing = "; ".join(count.text() for count in counts)
    descent = f"−ĝ descended at {descending} of {len(onsets)} onsets"

    def verdict(holds: bool | None, reason: str, named: tuple[str, ...] = ()) -> Verdict:
        return Verdict(holds, reason, named, counts, len(onsets), len(calms), len(rises),
                       descending, adam, tuple(not_probed))

    if not_probed:
        return verdict(None, f"{', '.join(not_probed)} rose more than {RISE_FACTOR:g}-fold and "
                       f"{'was' if len(not_probed) == 1 else 'were'} not probed; {listing}")
    if not rises:
        return verdict(None, "no probed model's loss rose (at least doubled between two "
                       "checkpoints)")
    if len(onsets) < MIN_ONSETS:
        return verdict(None, f"{len(onsets)} onset{'s' if len(onsets) != 1 else ''}, fewer than "
                       f"the {MIN_ONSETS} the rule needs; {listing}; {descent}")
    named = tuple(count.sign for count in counts if count.named)
    if not named and descending == len(onsets):
        named = (ADAM_STEP,)
    if named:
        return verdict(True, f"named {', '.join(_mechanism_text(key) for key in named)}; "
                       f"{listing}; {descent}", named)
    return verdict(False, f"no sign at ≥ half of the onsets and more often there than when calm "
                   f"(one-sided p ≤ {LEVEL:g}), and −ĝ did not descend at every onset; {listing}; "
                   f"{descent}")


def judge(figure4: Mapping[str, Mapping[str, Any]],
          probes: Mapping[str, Mapping[str, Any]]) -> Verdict:
    """:func:`name` over the ``probes`` (probe results by model label), undecided while a model of
    ``figure4`` (curves by label) rose without being probed (:func:`unprobed`)."""
    return name(probes.values(), unprobed(figure4, probes))


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
    signs = "; ".join(count.text() for count in verdict.counts)
    if verdict.unprobed:
        return (f"Undecided: {', '.join(verdict.unprobed)} rose more than {RISE_FACTOR:g}-fold "
                f"without being probed, so the probes cannot speak for every rise ({signs}).")
    if verdict.holds is None and not verdict.rises:
        return ("No probed model's outer training loss rose (at least doubled between two "
                "checkpoints), so there is no rise whose mechanism to name.")
    where = (f"{verdict.onsets} onset{'s' if verdict.onsets != 1 else ''} of the rises "
             f"({verdict.rises} rise interval{'s' if verdict.rises != 1 else ''}) and "
             f"{verdict.calms} calm interval{'s' if verdict.calms != 1 else ''}")
    descent = (f"−ĝ descended at {verdict.descending_at_onsets} and Adam's step at "
               f"{verdict.adam_descending_at_onsets} of the {verdict.onsets} onsets")
    if verdict.holds is None:
        return (f"Undecided: {where}, fewer onsets than the {MIN_ONSETS} the rule needs "
                f"({signs}); {descent}.")
    if not verdict.holds:
        return (f"Over {where} of the probed models, no mechanism is named: no sign was present "
                f"at at least half of the onsets and more often there than when calm ({signs}), "
                f"and {descent}.")
    if verdict.named == (ADAM_STEP,):
        return (f"Over {where} of the probed models, the rises are named "
                f"{_mechanism_text(ADAM_STEP)}: {descent}, and no sign singles the onsets out "
                f"({signs}).")
    named = ", ".join(_mechanism_text(key) for key in verdict.named)
    return (f"Over {where} of the probed models, the rises are named {named}: present at at "
            f"least half of the onsets and more often there than when calm ({signs}); {descent}.")
