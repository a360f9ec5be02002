"""The chapter's claims (Section 4, Figures 3 and 4) as predicates that can fail.

Every predicate returns an :class:`i2o.verdicts.decision.Decision`: ``holds`` is True or False when
the data can decide, ``None`` with the reason when they cannot; its ``reason`` is what the claim's
row shows. Each claim is decided behind its gates (:func:`i2o.verdicts.gates.gated`), whose values
are the chapter's :class:`Thresholds`.

**Figure 3** (one model each). Gates, in the order they are checked:

- *trained*: the model's outer training loss has settled — its fall between the last two windows
  of ``plateau_window`` × its outer steps is at most ``plateau_rtol`` of its level or of its
  whole fall (:func:`plateau`) — and it was meta-trained for at least ``min_outer_steps`` outer
  steps and has learned to use the support set — its test MSE at its training N is below
  ``baseline_mse``, the MSE of the best predictor that ignores the support set
  (:func:`i2o.chapters.meta.floor.task_agnostic_mse`, 3.006; predicting 0 scores 4.25);
- *diverged tasks*: tasks whose MSE became non-finite at some step count are counted; above
  ``max_diverged_fraction`` of the tasks the verdict is ``None`` (no silent exclusion that
  flatters a curve); below it they are excluded at every step count and reported.

Its comparisons are made on held-out tasks: the best step count k* is chosen on one half of the
test tasks (even indices) and the difference is measured on the other half (odd indices), as a
paired mean with the book's interval (:func:`i2o.verdicts.intervals.from_se`: Student's t at 90 %,
two one-sided tests at 5 %). A claim holds when the interval lies above 0, fails when it lies at or
below 0 (:func:`i2o.verdicts.margins.positive`), and is undecided when it contains 0, with the
number of held-out tasks that would decide it. Choosing k* and testing it on the same tasks would
favour the claim. Why this test and not the book's rule for more iterations
(:mod:`i2o.verdicts.rule`, which the DEQ chapters share) is stated there, as that rule's one
exception.

*Convergence* ("the best MSE is reached before convergence", Figure 3's caption and Section 4).
MAML: the test curve has converged at k_conv, the first grid count from which every later
count's mean test MSE is within resolution of the sweep's last count k_last: on the choosing half
of the tasks, for every k ≥ k_conv the 90 % interval of the paired difference MSE(k) − MSE(k_last)
contains 0 (:func:`settled_from`). When k_conv is k_last the curve is still moving at the end of
the sweep and the claim is undecided.
iMAML: the converged inner problem is the one a convergent solver reaches (jaxopt's L-BFGS,
float64, ``reference_iters`` iterations from the sweep's last iterate, :mod:`.evaluate`), and the
claim compares the test MSE at its solution with the sweep's best: the paper's solver (gradient
descent with line search) stalls on F's ReLU kinks, so no count of its steps is "converged".

**Figure 4** (every model of the figure at once; Section 4: "the better the model is at
overfitting the training dataset –i.e. low ℓ(z_N(θ*,N)) – the less it benefits from more
iterations at inference –i.e. higher D(N, ΔN)"): Kendall's τ between each model's training loss
ℓ(z_N(θ*,N)) and its D(N, ΔN) at the grid's largest ΔN, with its exact null distribution
(no ties), one-sided towards the paper's negative association at α = :data:`ALPHA`
(:func:`fit_ordering`, :func:`i2o.verdicts.ranks.rank_association`). Every model counts, whether or
not it learned to use the support set and whatever its outer loss did during training (the largest
rise of that loss, :func:`largest_rise`, is reported beside it, never used to select); gates:
the models were trained ``fig4_min_outer_steps`` outer steps, at most ``max_diverged_fraction``
of their training tasks diverged, every ℓ and D is finite, untied, and there are enough models
for the exact test to reach α.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from i2o.chapters.meta import FIGURE, evaluate, gradient_noise, mechanism
from i2o.chapters.meta.runs import MetaResults
from i2o.compute import profiles
from i2o.compute.profiles import Params
from i2o.verdicts import deciding, gates, intervals, margins, ranks
from i2o.verdicts.claims import Claims
from i2o.verdicts.decision import Decision, Gate, Over

#: Figure 4's significance level: the exact one-sided p-value of Kendall's τ must be at most this
#: (for a negative association the claim holds; for a positive one it fails)
ALPHA = ranks.RANK_ALPHA
#: the sections of the chapter's claims, in the order of their rows (the notebook concludes each)
SECTIONS = ("figure3", "figure4", "ablation", "noise")


@dataclass(frozen=True)
class Thresholds:
    """What a model and its sweep must satisfy before a claim about it is decided: the values of
    its gates."""

    min_outer_steps: int = 0
    fig4_min_outer_steps: int = 0
    baseline_mse: float = 3.0057  # floor.task_agnostic_mse()
    max_diverged_fraction: float = 0.05
    plateau_window: float = 0.1
    plateau_rtol: float = float("inf")


def finite_tasks(curves: dict[str, Any]) -> np.ndarray:
    """Tasks whose query MSE stayed finite at every step count of the sweep."""
    return np.all(np.isfinite(curves["query"]), axis=1)


def _model_name(curves: dict[str, Any]) -> str:
    norm = curves.get("normalization", "none")
    suffix = "" if norm == "none" else f", {norm}"
    method = {"maml": "MAML", "imaml": "iMAML"}[curves["method"]]
    return f"{method} (N = {curves['inner_steps']}{suffix})"


def plateau(losses: Any, window: float) -> float:
    """How far the outer training loss is from settled: its fall between the last two windows of
    ``window`` × the steps, as a fraction of the previous window's loss or of its whole fall from
    the first window to the last, whichever is smaller (0 when the last window did not fall).

    A model is mid-transition only when its loss still falls fast on both scales. The second
    scale serves a model that drives its loss towards 0 (a fixed training set it can
    interpolate): along a power law t^(−a) it loses the same fraction of its current value in
    every tenth of its training, so the first measure alone could never be met, while what it has
    left to fall becomes a vanishing share of what it has fallen."""
    values = np.asarray(losses, dtype=float)
    width = max(1, int(round(window * len(values))))
    if len(values) < 2 * width:
        return float("nan")
    first = values[:width].mean()
    previous, last = values[-2 * width:-width].mean(), values[-width:].mean()
    fall, whole = previous - last, first - last
    if fall <= 0:
        return 0.0
    of_whole = fall / whole if whole > 0 else float("inf")
    return float(min(fall / abs(previous), of_whole))


def plateau_gate(curves: dict[str, Any], limits: Thresholds) -> Decision:
    """Open when the model's outer loss has settled: its fall between the last two windows of
    ``plateau_window`` × its outer steps must be at most ``plateau_rtol`` of its level or of its
    whole fall (:func:`plateau`; a model still mid-transition would be judged on a passing
    state)."""
    if not np.isfinite(limits.plateau_rtol):
        return gates.condition(True, "")
    fall = plateau(curves.get("train_losses", ()), limits.plateau_window)
    return gates.condition(
        np.isfinite(fall) and fall <= limits.plateau_rtol,
        f"the outer training loss has not settled: over the last "
        f"{limits.plateau_window:.0%} of the {int(curves['outer_steps']):,} outer steps it "
        f"fell by {fall:.1%} of its level or of its whole fall (the smaller), more than "
        f"{limits.plateau_rtol:.0%}; more outer steps would decide it")


def _model_gates(curves: dict[str, Any], limits: Thresholds) -> Iterator[Decision]:
    """The gates of a claim about one model, in order (each evaluated only when the ones before
    are open): trained long enough, settled, learned to use the support set, few diverged
    tasks."""
    steps = int(curves["outer_steps"])
    yield gates.condition(steps >= limits.min_outer_steps,
                          f"trained {steps} outer steps, fewer than the {limits.min_outer_steps} "
                          f"needed to decide")
    yield plateau_gate(curves, limits)
    finite = finite_tasks(curves)
    grid = list(curves["grid"])
    at_n = float(np.mean(curves["query"][finite, grid.index(curves["inner_steps"])]))
    yield gates.condition(not at_n >= limits.baseline_mse,  # a NaN level is the next gate's
                          f"the model has not learned to use the support set: test MSE "
                          f"{at_n:.3f} at N, not below {limits.baseline_mse:.3f} (the best "
                          f"predictor ignoring the support)")
    n_bad, n = int((~finite).sum()), len(finite)
    yield gates.condition(n_bad <= limits.max_diverged_fraction * n,
                          f"{n_bad} of {n} tasks diverged (non-finite MSE), more than "
                          f"{limits.max_diverged_fraction:.0%}")


def _excluded(curves: dict[str, Any]) -> str:
    """The note a decided claim carries on the diverged tasks it excluded."""
    finite = finite_tasks(curves)
    n_bad, n = int((~finite).sum()), len(finite)
    return "" if n_bad == 0 else f"; {n_bad} of {n} tasks diverged and are excluded"


def _halves(n: int) -> tuple[np.ndarray, np.ndarray]:
    index = np.arange(n)
    return index[index % 2 == 0], index[index % 2 == 1]


def _paired_interval(per_task: np.ndarray, first: int, second: int, over: Over,
                     level: float = intervals.LEVEL) -> intervals.Interval:
    """The book's interval of the paired difference MSE(first) − MSE(second) (grid indices) over
    the tasks of ``per_task`` (tasks × grid), at ``level``."""
    gain, se = evaluate.paired_difference(per_task, first, second)
    return intervals.from_se(gain, se, len(per_task), over=over, level=level)


def _held_out_interval(per_task: np.ndarray, reference: int, best: int) -> intervals.Interval:
    """The book's interval of the paired difference MSE(reference) − MSE(best) over the held-out
    tasks."""
    return _paired_interval(per_task, reference, best, Over.HELD_OUT_TASKS)


def _held_out_gain(per_task: np.ndarray, reference: int, best: int) -> Decision:
    """:func:`i2o.verdicts.margins.positive` on :func:`_held_out_interval`, with the interval as its
    reason (and, when undecided, the held-out tasks that would decide it, also in its facts)."""
    ci = _held_out_interval(per_task, reference, best)
    found = margins.positive(ci)
    return Decision(found.holds, ci.describe(digits=4)
                    + ("" if found.holds is not None else f"; {found.reason}"), found.facts)


def _worded(found: Decision, reason: str) -> Decision:
    """``found`` with its reason written into the row's ``reason`` (its facts kept)."""
    return Decision(found.holds, reason, found.facts)


def more_steps_claim(curves: dict[str, Any]) -> str:
    return f"{_model_name(curves)}: more inner steps than in training lower the test MSE"


def more_steps_help(curves: dict[str, Any], limits: Thresholds) -> Decision:
    """*More inner steps than N help*: k* = argmin over the grid points beyond N of the mean test
    MSE on the even tasks; on the odd tasks the interval of MSE(N) − MSE(k*) lies above 0 (fails:
    at or below 0; undecided: it contains 0)."""
    grid = list(curves["grid"])
    n = int(curves["inner_steps"])

    def measured() -> Decision:
        mse = curves["query"][finite_tasks(curves)]
        choose, test = _halves(len(mse))
        beyond = [i for i, k in enumerate(grid) if k > n]
        best = beyond[int(np.argmin(mse[choose][:, beyond].mean(axis=0)))]
        found = _held_out_gain(mse[test], grid.index(n), best)
        return _worded(found, f"k* = {grid[best]} chosen on {len(choose)} tasks; on the "
                              f"held-out tasks MSE(N) − MSE(k*) = {found.reason} (needs the "
                              f"interval above 0){_excluded(curves)}")

    checks = itertools.chain(_model_gates(curves, limits), [
        gates.condition(grid[-1] > n, f"the grid stops at N = {n}")])
    return gates.gated(checks, measured)


def best_before_claim(curves: dict[str, Any]) -> str:
    if curves["method"] == "maml":
        return (f"{_model_name(curves)}: the best test MSE is reached before convergence (before "
                f"the test MSE stops moving with more inner steps)")
    return (f"{_model_name(curves)}: the best test MSE is reached before the inner problem "
            f"converges")


def _contains_zero(ci: intervals.Interval) -> bool:
    return ci.lo <= 0.0 <= ci.hi


def settled_from(per_task: np.ndarray) -> tuple[int, list[intervals.Interval]]:
    """Where a test curve has stopped moving: the first grid index k_conv from which, for every
    k ≥ k_conv, the interval of the paired difference MSE(k) − MSE(k_last) over the tasks of
    ``per_task`` (tasks × grid) contains 0; with every count's interval. "Some later count still
    differs from the last" is a union over the counts, so the intervals are Bonferroni-widened
    over the grid's other counts (as :mod:`i2o.verdicts.rule` widens "some count"). k_conv
    is the last index when the count before it is still resolved from the last (the curve is
    moving at the end)."""
    last = per_task.shape[1] - 1
    level = 1.0 - (1.0 - intervals.LEVEL) / max(1, last)
    per_count = [_paired_interval(per_task, k, last, Over.CHOOSING_TASKS, level)
                 for k in range(last + 1)]
    start = last
    while start > 0 and _contains_zero(per_count[start - 1]):
        start -= 1
    return start, per_count


def best_before_convergence(curves: dict[str, Any], limits: Thresholds) -> Decision:
    """*The best test MSE is reached before convergence* — the paper, Figure 3's caption: "Note
    that the best MSE is reached before convergence."; Section 4: "the best MSE is reached before
    convergence. As for DEQs, reaching convergence does not provide the best performance."

    k* = argmin of the mean test MSE over the grid on the even (choosing) tasks, compared on the
    odd (held-out) tasks with the converged point (module docstring).

    MAML: convergence is where the test curve has stopped moving, k_conv of :func:`settled_from`
    on the choosing tasks; undecided when k_conv is the sweep's last count (a longer sweep would
    decide it). Holds when k* < k_conv and the held-out interval of MSE(k_conv) − MSE(k*) lies
    above 0; fails when k* ≥ k_conv or the interval lies at or below 0; undecided when it
    contains 0 (with the held-out tasks that would decide it). The row states more than the
    paper in requiring the rise from k* to k_conv to be resolved on held-out tasks, and less in
    that "convergence" is where the mean test MSE stops changing within the sweep's range and its
    resolution (the paper does not define it).

    iMAML: holds when the interval of MSE(converged) − MSE(k*) lies above 0 (converged: the
    L-BFGS reference) and fails when it lies at or below 0, or when it contains 0 and k* is the
    sweep's last count (the best is then the iterate nearest convergence, and the converged
    solution is no worse: the analogue of MAML's k* ≥ k_conv). Otherwise undecided when the
    interval contains 0."""

    def measured() -> Decision:
        grid = list(curves["grid"])
        note = _excluded(curves)
        finite = finite_tasks(curves)
        mse = curves["query"][finite]
        choose, test = _halves(len(mse))
        best = int(np.argmin(mse[choose].mean(axis=0)))
        chosen = f"k* = {grid[best]} chosen on {len(choose)} tasks; on the held-out tasks "
        if curves["method"] != "maml":
            return _imaml_best_before(curves, finite, mse, test, best, chosen, note)
        return _maml_best_before(grid, mse, choose, test, best, chosen, note)

    return gates.gated(_model_gates(curves, limits), measured)


def _maml_best_before(grid: list[int], mse: np.ndarray, choose: np.ndarray, test: np.ndarray,
                      best: int, chosen: str, note: str) -> Decision:
    """MAML's branch of :func:`best_before_convergence`."""
    at, intervals = settled_from(mse[choose])
    last = len(grid) - 1
    moving = intervals[last - 1] if last > 0 else None
    still = gates.condition(
        at < last,
        f"the test curve is still moving at the end of the sweep: on the {len(choose)} choosing "
        f"tasks MSE(k) − MSE(k_last = {grid[last]}) at k = {grid[max(last - 1, 0)]} is "
        + (moving.describe(digits=4) if moving is not None else "undefined (one count)")
        + " (needs an interval that contains 0); a longer sweep would decide it")

    def against_convergence() -> Decision:
        if best >= at:  # the best count is not before convergence, whatever the difference
            found = Decision(False, _held_out_interval(mse[test], at, best).describe(digits=4))
        else:
            found = _held_out_gain(mse[test], at, best)
        means = mse[choose].mean(axis=0)
        return _worded(found, f"{chosen}MSE(k_conv) − MSE(k*) = {found.reason} (needs k* < "
                              f"k_conv and the interval above 0); the test curve has stopped "
                              f"moving from k_conv = {grid[at]} on: on the {len(choose)} "
                              f"choosing tasks every later count's 90 % interval of MSE(k) − "
                              f"MSE(k_last = {grid[last]}) contains 0 (mean MSE "
                              f"{means[at]:.4f} at k_conv, {means[last]:.4f} at k_last, "
                              f"{means[best]:.4f} at k*){note}")

    return gates.gated([still], against_convergence)


def _imaml_best_before(curves: dict[str, Any], finite: np.ndarray, mse: np.ndarray,
                       test: np.ndarray, best: int, chosen: str, note: str) -> Decision:
    reference = np.asarray(curves.get("query_reference", np.full_like(mse, np.nan)),
                           dtype=float)[finite]

    def against_reference() -> Decision:
        per_task = np.column_stack([reference[:, 0], mse])  # column 0: the converged test MSE
        if best == mse.shape[1] - 1:  # the best count is the sweep's nearest to convergence
            ci = _held_out_interval(per_task[test], 0, best + 1)
            found = margins.positive(ci).with_reason(ci.describe(digits=4))
            if found.holds is None:
                found = Decision(False, found.reason + "; k* is the sweep's last count, nearest "
                                 "convergence, and the converged solution is no worse")
        else:
            found = _held_out_gain(per_task[test], 0, best + 1)
        objective = np.asarray(curves["objective"], dtype=float)[finite][:, best]
        f_ref = np.asarray(curves["objective_reference"], dtype=float)[finite][:, best]
        gap = float(np.median((objective - f_ref) / np.abs(f_ref)))
        return _worded(found, f"{chosen}MSE(converged) − MSE(k*) = {found.reason} (needs the "
                              f"interval above 0); converged: L-BFGS on F from the sweep's last "
                              f"iterate, whose F the median task's k* iterate exceeds by "
                              f"{gap:.1e} (relative){note}")

    computed = gates.condition(np.all(np.isfinite(reference)),
                               "no convergence reference was computed (reference_iters = 0)")
    return gates.gated([computed], against_reference)


def above_floor_claim(curves: dict[str, Any]) -> str:
    return (f"{_model_name(curves)}: the test MSE never goes below the per-set-BN floor (sanity "
            f"check)")


def above_floor(curves: dict[str, Any], floor: float, floor_se: float) -> Decision:
    """Sanity check of the per-set-BN floor: no step count brings the mean test MSE decidedly
    below it. Per count, the interval of ``mean − floor`` (standard errors of the mean over the
    tasks and of the floor's Monte Carlo, combined) at the book's level Bonferroni-widened over
    the counts of the grid, as :mod:`i2o.verdicts.rule` widens a search over counts: the check
    fails when one count's interval lies below 0, and holds otherwise (a floor can only be
    contradicted, so there is no undecided side)."""
    finite = finite_tasks(curves)
    mean, se = evaluate.mean_and_standard_error(curves["query"][finite])
    n, counts = int(np.count_nonzero(finite)), len(mean)
    level = 1.0 - (1.0 - intervals.LEVEL) / counts
    cis = [intervals.from_se(float(m - floor), math.hypot(e, floor_se), n, Over.TASKS, level)
           for m, e in zip(mean, se, strict=True)]
    i = int(np.argmin(mean))
    below = [k for k, ci in enumerate(cis) if margins.negative(ci).holds is True]
    return gates.Decision(not below,
                          f"lowest mean test MSE {mean[i]:.3f} ± {se[i]:.3f} at k = "
                          f"{int(curves['grid'][i])}; floor {floor:.3f} ± {floor_se:.3f}; mean − "
                          f"floor there {cis[i].describe(digits=3)} (Bonferroni over {counts} "
                          "counts; fails when one lies below 0)")


def largest_rise(losses: Any, windows: int = 20) -> tuple[float, float]:
    """The largest rise of the outer training loss: over the means of ``windows`` equal windows
    of the training, the pair (lowest mean so far, later mean) with the largest ratio; ``(nan,
    nan)`` without ``windows`` steps."""
    values = np.asarray(losses, dtype=float)
    if len(values) < windows:
        return float("nan"), float("nan")
    means = np.array([w.mean() for w in np.array_split(values, windows)])
    lowest = np.minimum.accumulate(means)
    ratios = means[1:] / lowest[:-1]
    at = int(np.nanargmax(ratios)) + 1 if np.isfinite(ratios).any() else 1
    return float(lowest[at - 1]), float(means[at])


@dataclass(frozen=True)
class Figure4Point:
    """One Figure 4 model as its claim reads it: its training loss at N, ℓ(z_N(θ*,N)); its
    D(N, ΔN) at the grid's largest ΔN and at the grid's ΔN nearest N; the largest rise of its
    outer training loss (:func:`largest_rise`; NaN without a recorded loss); the point its
    training kept (θ*,N): the outer step (−1: its training loss was never finite), its training
    loss there, at the end and at its highest after it (``None`` when the curves do not carry
    them)."""

    label: str
    n_meta_batches: int
    loss_at_n: float
    increase_at_max: float
    delta_max: int
    increase_near_n: float
    delta_near_n: int
    rise_from: float
    rise_to: float
    best_step: int | None = None
    best_loss: float | None = None
    final_loss: float | None = None
    peak_after_best: float | None = None

    def is_finite(self) -> bool:
        return bool(np.isfinite(self.loss_at_n) and np.isfinite(self.increase_at_max))

    def rise(self) -> str:
        """The largest rise of the outer loss, or that it never rose; ``""`` when unknown."""
        if not (np.isfinite(self.rise_from) and np.isfinite(self.rise_to)):
            return ""
        if self.rise_to > self.rise_from:
            return f"outer loss rose {self.rise_from:.3g} → {self.rise_to:.3g}"
        return "outer loss never rose"

    def kept(self) -> str:
        """The point the training kept, as far as the curves carry it; ``""`` when they do
        not."""
        if self.best_step is None:
            return ""
        if self.best_step < 0:
            return "training loss never finite (last point kept)"
        losses = [(name, value) for name, value in (("training loss there", self.best_loss),
                                                    ("at the end", self.final_loss),
                                                    ("highest later", self.peak_after_best))
                  if value is not None and np.isfinite(value)]
        return f"kept step {self.best_step:,}" + "".join(f", {name} {value:.3g}"
                                                          for name, value in losses)

    def describe(self) -> str:
        extra = ", ".join(part for part in (self.rise(), self.kept()) if part)
        return (f"{self.label}: ℓ = {self.loss_at_n:.4g}, D = {self.increase_at_max:.4g} "
                f"(ΔN = {self.delta_near_n}: {self.increase_near_n:.4g})"
                + (f", {extra}" if extra else ""))


def near_n_index(grid: Sequence[int], inner_steps: int) -> int:
    """The grid index of the count nearest N + ΔN = 2N (ΔN = N) on a log scale, among the counts
    beyond N (the grid's last index when there are none)."""
    counts = np.asarray(grid, dtype=float)
    beyond = np.flatnonzero(counts > inner_steps)
    if beyond.size == 0:
        return len(counts) - 1
    distance = np.abs(np.log(counts[beyond]) - np.log(2.0 * inner_steps))
    return int(beyond[int(np.argmin(distance))])


def _optional(curves: dict[str, Any], key: str) -> float | None:
    """``curves[key]`` as a float, ``None`` when absent or when the model was not kept at its
    best point (``selection`` "last")."""
    value = curves.get(key)
    if value is None or curves.get("selection", "best") != "best":
        return None
    return float(value)


def figure4_point(name: str, curves: dict[str, Any]) -> Figure4Point:
    """The :class:`Figure4Point` of the Figure 4 model ``name`` with ``curves``."""
    grid = [int(k) for k in curves["grid"]]
    n = int(curves["inner_steps"])
    increase = np.asarray(curves["increase"], dtype=float)
    near = near_n_index(grid, n)
    low, high = largest_rise(curves.get("train_losses", ()))
    seed = name.rsplit("-seed", 1)[-1] if "-seed" in name else name
    best_step = _optional(curves, "best_step")
    return Figure4Point(
        label=f"B = {int(curves['n_meta_batches'])}, seed {seed}",
        n_meta_batches=int(curves["n_meta_batches"]), loss_at_n=float(curves["loss_at_n"]),
        increase_at_max=float(increase[-1]), delta_max=grid[-1] - n,
        increase_near_n=float(increase[near]), delta_near_n=grid[near] - n,
        rise_from=low, rise_to=high, best_step=None if best_step is None else int(best_step),
        best_loss=_optional(curves, "best_loss"), final_loss=_optional(curves, "final_loss"),
        peak_after_best=_optional(curves, "peak_after_best"))


def figure4_points(per_set: dict[str, Any]) -> list[Figure4Point]:
    """Every Figure 4 model (:class:`Figure4Point`), by training-set size then label."""
    points = [figure4_point(name, curves) for name, curves in per_set.items()]
    return sorted(points, key=lambda p: (p.n_meta_batches, p.label))


def figure4_table(per_set: dict[str, Any]) -> str:
    """Every Figure 4 model as a Markdown table row: ℓ(z_N), D at the largest ΔN and at ΔN ≈ N,
    the largest rise of its outer loss and the point its training kept."""
    points = figure4_points(per_set)
    if not points:
        return ""
    first = points[0]
    lines = [f"| model | ℓ(z_N) | D(N, ΔN = {first.delta_max}) | D(N, ΔN = {first.delta_near_n})"
             f" | largest rise of the outer loss | kept point |", "|---|---|---|---|---|---|"]
    lines += [f"| {p.label} | {p.loss_at_n:.4g} | {p.increase_at_max:.4g} | "
              f"{p.increase_near_n:.4g} | {p.rise() or '—'} | {p.kept() or '—'} |"
              for p in points]
    return "\n".join(lines)


def _tied(points: list[Figure4Point]) -> list[str]:
    """The models whose ℓ or D equals another model's (the exact null needs untied values)."""
    tied = []
    for values in ([p.loss_at_n for p in points], [p.increase_at_max for p in points]):
        counts = Counter(values)
        tied += [p.label for p, v in zip(points, values, strict=True) if counts[v] > 1]
    return sorted(set(tied))


#: The book's own row on the probed Figure 4 models (:mod:`.mechanism`): the paper says only that
#: the implicit hypergradient "is heuristic and does not necessarily provide a descent direction
#: for arbitrary N" (Section 3, on Eq. 12); the row names which mechanism accompanies the rises
#: of the outer training loss, by the rule of :mod:`.mechanism`, fixed before any probe ran.
MECHANISM_CLAIM = ("the probes name the mechanism of the rises of the probed models' outer "
                   "training loss (the book's own)")
FIT_ORDERING_CLAIM = ("the better a model fits its training set (low ℓ(z_N)), the less it "
                      "benefits from more iterations at inference (higher D(N, ΔN))")

MORE_MODELS = "more models (seeds per size) would decide it"


def fit_ordering(per_set: dict[str, Any], limits: Thresholds) -> Decision:
    """*The better a model fits its training set, the higher D* — the paper, Section 4: "We
    observe that the better the model is at overfitting the training dataset –i.e. low
    ℓ(z_N(θ*,N)) – the less it benefits from more iterations at inference –i.e. higher
    D(N, ΔN)." (and Figure 4's caption: "Note that the more overparametrized the model, the
    higher D(N, ΔN) is.").

    Over every Figure 4 model, x = its ℓ(z_N), y = its D(N, ΔN) at the grid's largest ΔN;
    Kendall's τ with its exact null distribution (:func:`i2o.verdicts.ranks.rank_association`),
    one-sided at α = :data:`ALPHA` = 0.05: holds when the p-value of a negative association (lower
    loss, higher D) is ≤ 0.05, fails when the p-value of a positive association is ≤ 0.05, undecided
    otherwise (more models would decide it). D at ΔN ≈ N (:func:`near_n_index`) and each model's
    largest rise of its outer loss are reported beside it, never used to select. Every model
    counts: one that did not learn to use the support set (ℓ above the task-agnostic MSE) is a
    model that fits its training set badly, which is what the claim is about.

    Undecided, naming them, when a model's ℓ or D is non-finite or tied with another's; and when
    the models were trained fewer than ``fig4_min_outer_steps`` outer steps, more than
    ``max_diverged_fraction`` of their training tasks diverged, or there are too few models for
    the exact test to reach 0.05 (1/n! > 0.05: n ≤ 3).

    The row states less than the paper's picture in that it tests a rank association (a tendency,
    not every pair of models in order) at one ΔN, the largest of the grid; and more in that the
    association must be told from a random ordering of the models at 5 %."""
    points = figure4_points(per_set)
    n = len(points)

    def measured() -> Decision:
        x, y = [p.loss_at_n for p in points], [p.increase_at_max for p in points]
        found = ranks.kendall(x, y)
        verdict = ranks.rank_association(x, y, direction=-1, alpha=ALPHA)
        near = stats.kendalltau([p.loss_at_n for p in points],
                                [p.increase_near_n for p in points]).statistic
        first = points[0]
        text = (f"Kendall τ = {found.tau:+.3f} over {n} models between ℓ(z_N) and D(N, ΔN = "
                f"{first.delta_max}) (at ΔN = {first.delta_near_n} ≈ N: τ = {float(near):+.3f}, "
                f"reported); exact one-sided p = {found.p_negative:.3g} for a negative "
                f"association (holds at ≤ {ALPHA:g}), {found.p_positive:.3g} for a positive "
                f"one (fails at ≤ {ALPHA:g})")
        if verdict.holds is None:
            text += f"; neither reaches {ALPHA:g}: {MORE_MODELS}"
        details = "; ".join(p.describe() for p in points)
        return Decision(verdict.holds, f"{text}; every model counts: {details}", verdict.facts)

    return gates.gated(_figure4_gates(points, per_set, limits), measured)


def _figure4_gates(points: list[Figure4Point], per_set: dict[str, Any],
                   limits: Thresholds) -> Iterator[Decision]:
    """The gates of Figure 4's claim, in order (each evaluated only when the ones before are
    open): trained long enough, few diverged training tasks, every ℓ and D finite, untied, and
    enough models for the exact test to reach :data:`ALPHA`."""
    steps = min(int(c["outer_steps"]) for c in per_set.values())
    yield gates.condition(steps >= limits.fig4_min_outer_steps,
                          f"trained {steps} outer steps, fewer than the "
                          f"{limits.fig4_min_outer_steps} needed to decide")
    diverged = sum(int(c.get("n_diverged", 0)) for c in per_set.values())
    tasks = sum(int(np.shape(c["query"])[0]) for c in per_set.values())
    yield gates.condition(diverged <= limits.max_diverged_fraction * tasks,
                          f"{diverged} of {tasks} training tasks diverged (non-finite MSE), "
                          f"more than {limits.max_diverged_fraction:.0%}")
    non_finite = [p.label for p in points if not p.is_finite()]
    yield gates.condition(not non_finite,
                          f"non-finite ℓ(z_N) or D(N, ΔN) for {', '.join(non_finite)}: the "
                          f"association over every model is undefined", by=Gate.HEALTH)
    tied = _tied(points)
    yield gates.condition(not tied,
                          f"tied ℓ(z_N) or D(N, ΔN) for {', '.join(tied)}: the exact null "
                          f"distribution of Kendall's τ needs untied values")
    n = len(points)
    yield gates.condition(ranks.smallest_rank_p(n) <= ALPHA,
                          f"{n} models: the exact one-sided p-value cannot go below 1/{n}! = "
                          f"{ranks.smallest_rank_p(n):.3g}, above {ALPHA:g}; {MORE_MODELS}",
                          by=Gate.COUNT)


def _noise_rows(noise: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    return {name: row for name, row in noise.items() if name.startswith(prefix)}


def usable_meta_gradient_claim(regularization: float) -> str:
    return (f"iMAML (λ = {regularization:g}): at initialization its meta-gradient in the hidden "
            f"layers is not dominated by noise (book check of λ)")


def usable_meta_gradient(noise: dict[str, Any], regularization: float,
                         max_ratio: float) -> Decision:
    """*The chapter's iMAML meta-gradient is not noise at initialization* (a check of the book's
    choice of λ, not a claim of the paper): the noise of the hidden layers' meta-gradient over
    the measured meta-batches (:mod:`.gradient_noise`) is at most ``max_ratio`` × MAML's."""
    name = gradient_noise.imaml_row(regularization)
    maml_rows = _noise_rows(noise, "maml-")

    def measured() -> Decision:  # behind the gate: both rows were measured
        imaml_row = noise[name]
        maml_name, maml_row = next(iter(maml_rows.items()))
        ratio = float(imaml_row["noise"]) / float(maml_row["noise"])
        return gates.compare(ratio, "<=", max_ratio).with_reason(
            f"noise {float(imaml_row['noise']):.3g} against {float(maml_row['noise']):.3g} for "
            f"{maml_name} ({ratio:.2f}×; needs ≤ {max_ratio:g}×); signal/noise "
            f"{float(imaml_row['ratio']):.2f}, pure noise "
            f"{gradient_noise.noise_level(int(imaml_row['n_batches'])):.2f} over "
            f"{int(imaml_row['n_batches'])} meta-batches")

    measured_rows = gates.condition(noise.get(name) is not None and bool(maml_rows),
                                    "the meta-gradient noise of this λ or of MAML was not "
                                    "measured")
    return gates.gated([measured_rows], measured)


def noise_table(noise: dict[str, Any]) -> str:
    """The measured signal and noise of every meta-gradient, as a Markdown table."""
    maml_noise = next(iter(_noise_rows(noise, "maml-").values()), {}).get("noise", math.nan)
    lines = ["| meta-gradient | signal ‖ḡ‖ | noise s | signal/noise | noise / MAML's |",
             "|---|---|---|---|---|"]
    for name, row in noise.items():
        lines.append(f"| {name} | {float(row['signal']):.3g} | {float(row['noise']):.3g} | "
                     f"{float(row['ratio']):.2f} | {float(row['noise']) / maml_noise:.2f} |")
    return "\n".join(lines)


def thresholds_of(p: Params, floor: dict[str, float]) -> Thresholds:
    """The gates' values of a parameter set ``p`` (the ``meta`` entry of figures.yaml)."""
    return Thresholds(min_outer_steps=p["min_outer_steps_to_decide"],
                      fig4_min_outer_steps=p["fig4_min_outer_steps_to_decide"],
                      baseline_mse=floor["task_agnostic"],
                      max_diverged_fraction=p["max_diverged_fraction"],
                      plateau_window=p["plateau_window"], plateau_rtol=p["plateau_rtol"])


def _without_seed(label: str) -> str:
    """A model's label without its seed (``maml-N1-online``): a replicate redraws the seed, and a
    claim's id must name the same claim at every replicate (:mod:`i2o.provenance.robustness` matches
    rows by id)."""
    return label.rsplit("-seed", 1)[0]


def claims(results: MetaResults) -> Claims:
    """The chapter's claims (the paper's, then the ablation's and the book's check of λ), one
    row per claim with the id ``<section>/<model without its seed>/<claim>``;
    ``facts["sections"]`` lists each section's ids in order, for the chapter's prose
    (:mod:`.prose`)."""
    params = results.params
    limits = thresholds_of(params, results.floor)
    table = Claims(FIGURE, params.profile)
    sections: dict[str, list[str]] = {section: [] for section in SECTIONS}

    def record(section: str, id: str, claim: str, decision: Decision) -> None:
        table.decide(claim, decision, "", id=id, section=section)  # its reason quotes the measure
        sections[section].append(id)

    def figure3_claims(section: str, name: str, curves: dict[str, Any]) -> None:
        record(section, f"{section}/{_without_seed(name)}/more-steps", more_steps_claim(curves),
               more_steps_help(curves, limits))
        record(section, f"{section}/{_without_seed(name)}/best-before-convergence",
               best_before_claim(curves), best_before_convergence(curves, limits))

    for name, curves in results.figure3.items():
        figure3_claims("figure3", name, curves)
    if results.figure4:
        record("figure4", "figure4/fit-ordering", FIT_ORDERING_CLAIM,
               fit_ordering(results.figure4, limits))
    if results.mechanism:
        record("figure4", "figure4/mechanism", MECHANISM_CLAIM,
               mechanism.name(results.mechanism.values()).decision())
    floor = results.floor
    for name, curves in results.ablation.items():
        figure3_claims("ablation", name, curves)
        if curves.get("normalization") == "per_set_bn":
            record("ablation", f"ablation/{_without_seed(name)}/above-floor",
                   above_floor_claim(curves),
                   above_floor(curves, floor["centred"], floor["standard_error"]))
    regularization = float(params["imaml_regularization"])
    record("noise", "noise/usable-meta-gradient", usable_meta_gradient_claim(regularization),
           usable_meta_gradient(results.noise, regularization, float(params["max_noise_ratio"])))
    table.facts["sections"] = sections
    name_remedies(table, results)
    return table


def name_remedies(table: Claims, results: MetaResults) -> None:
    """The run that would decide each row this run leaves open for want of data
    (:func:`i2o.verdicts.deciding.name_remedies`).

    - A row undecided for want of held-out tasks (the odd half of the test tasks) names
      ``n_test_tasks`` at twice what its held-out half needs
      (:data:`i2o.verdicts.deciding.PER_UNIT`). The size enters only the keys of the sweeps of
      Figure 3's and the ablation's models: those sweeps run again at the new size (their measured
      time, scaled) and the trained models are read from the cache.
    - Figure 4's ordering, undecided below the paper's scale, names the paper profile's run (more
      models, trained longer), costed at the CPU time per outer step each of this run's models
      measured. At the paper's scale no run is named: its reason says what would decide it."""
    p = results.params
    online = [c for section in (results.figure3, results.ablation) for c in section.values()]
    sweeps = sum(float(c.get("seconds", math.nan)) for c in online)
    deciding.name_remedies(table, p, deciding.Rates(rerun=sweeps, evaluation=sweeps))
    ordering = table.by_id.get("figure4/fit-ordering")
    if ordering is None or ordering.holds is not None or p.profile == "paper":
        return
    paper = profiles.resolve(FIGURE, "paper")
    steps = {("maml", None): paper["maml_outer_steps"], ("imaml", None): paper["imaml_outer_steps"]}
    seconds = sum(float(c.get("train_cpu_seconds_per_step", math.nan))
                  * steps.get((c["method"], c.get("n_meta_batches")), paper["fig4_outer_steps"])
                  for section in (results.figure3, results.figure4, results.ablation)
                  for c in section.values())
    table.remedy(ordering.id, deciding.at_profile(FIGURE, "paper", seconds))


def figure4_numbers(per_set: dict[str, Any]) -> dict[str, Any]:
    """Figure 4's numbers: its outer steps, largest ΔN and ΔN ≈ N, models and seeds per size,
    and Kendall's τ with its exact one-sided p-values when every ℓ and D is finite and untied."""
    points = figure4_points(per_set)
    numbers: dict[str, Any] = {
        "meta-fig4-outer-steps": min(int(c["outer_steps"]) for c in per_set.values()),
        "meta-fig4-max-delta": points[0].delta_max,
        "meta-fig4-near-n-delta": points[0].delta_near_n,
        "meta-fig4-models": len(points),
        "meta-fig4-seeds": min(Counter(p.n_meta_batches for p in points).values())}
    if len(points) > 1 and all(p.is_finite() for p in points) and not _tied(points):
        found = ranks.kendall([p.loss_at_n for p in points], [p.increase_at_max for p in points])
        numbers |= {"meta-fig4-tau": found.tau, "meta-fig4-p-negative": found.p_negative,
                    "meta-fig4-p-positive": found.p_positive}
    return numbers


def numbers(results: MetaResults) -> dict[str, Any]:
    """Numbers quoted in the chapter's text (glued by the notebook), keyed by stable names."""
    p = results.params
    numbers: dict[str, Any] = {}
    for method in ("maml", "imaml"):
        chosen = [c for c in results.figure3.values() if c["method"] == method]
        if not chosen:
            continue
        c = chosen[0]
        grid = list(c["grid"])
        finite = finite_tasks(c)
        mean, _ = evaluate.mean_and_standard_error(c["query"][finite])
        best = int(np.argmin(mean))
        numbers |= {
            f"meta-{method}-n": int(c["inner_steps"]),
            f"meta-{method}-outer-steps": int(c["outer_steps"]),
            f"meta-{method}-mse-n": float(mean[grid.index(c["inner_steps"])]),
            f"meta-{method}-best-k": int(grid[best]),
            f"meta-{method}-best-mse": float(mean[best]),
            f"meta-{method}-last-k": int(grid[-1]),
            f"meta-{method}-last-mse": float(mean[-1]),
            f"meta-{method}-ms-per-step": 1e3 * float(c["train_seconds_per_step"]),
            f"meta-{method}-cpu-ms-per-step": 1e3 * float(c.get("train_cpu_seconds_per_step",
                                                                 float("nan"))),
            f"meta-{method}-diverged": int((~finite).sum()),
        }
        numbers["meta-n-test-tasks"] = int(c["query"].shape[0])
    for c in results.ablation.values():
        finite = finite_tasks(c)
        mean, _ = evaluate.mean_and_standard_error(c["query"][finite])
        numbers |= {"meta-ablation-normalization": c["normalization"],
                    "meta-ablation-mse-n": float(mean[list(c["grid"]).index(c["inner_steps"])]),
                    "meta-ablation-best-mse": float(mean.min()),
                    "meta-ablation-last-mse": float(mean[-1]),
                    "meta-ablation-last-k": int(c["grid"][-1])}
    floor = results.floor
    numbers |= {"meta-floor-centred": floor["centred"], "meta-floor-standardized":
                floor["standardized"], "meta-target-variance": floor["target_variance"],
                "meta-task-agnostic-mse": floor["task_agnostic"],
                "meta-min-outer-steps": int(p["min_outer_steps_to_decide"]),
                "meta-imaml-lambda": f"{float(p['imaml_regularization']):g}",
                "meta-noise-batches": int(p["noise_batches"]),
                "meta-noise-level": gradient_noise.noise_level(int(p["noise_batches"])),
                "meta-imaml-solver": ("FISTA (jaxopt's accelerated gradient descent) with "
                                      "backtracking line search" if p["imaml_acceleration"] else
                                      "plain gradient descent with backtracking line search")}
    if results.figure4:
        numbers |= figure4_numbers(results.figure4)
    return numbers
