"""Figure 3's claims about one model (MAML or iMAML, and the ablation's models): more inner
steps than in training help, the best test MSE is reached before convergence, and the per-set-BN
floor's sanity check. Each is decided behind the model's gates (:mod:`.claims_gates`).

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
MAML (READING.md): convergence is the sweep's last count k_last, where the inner problem is
solved: the median task's support-loss gradient norm at k_last is at most
:data:`SOLVED_GRADIENT_RATIO` (10⁻³) times its value at k = 0; otherwise the sweep is too short
and the claim is undecided, with an estimate of the count that would reach it. The claim is a
direction (principle 1): MSE(k_last) − MSE(k*) on the held-out tasks beyond the MSE's floor
:data:`MSE_FLOOR`. Until issue 61 convergence was where the test curve stopped moving
(:func:`settled_from`, kept for the chapter's description): more tasks moved it later, so the row
failed by absence of evidence.
iMAML: the converged inner problem is the one a convergent solver reaches (jaxopt's L-BFGS,
float64, ``reference_iters`` iterations from the sweep's last iterate, :mod:`.evaluate`), and the
claim compares the test MSE at its solution with the sweep's best: the paper's solver (gradient
descent with line search) stalls on F's ReLU kinks, so no count of its steps is "converged".
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from i2o.chapters.meta import evaluate
from i2o.chapters.meta.claims_gates import (
    Thresholds,
    excluded_note,
    finite_tasks,
    model_gates,
    model_name,
)
from i2o.verdicts import gates, intervals, margins, readings
from i2o.verdicts.decision import Decision, Gate, Over


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
    return f"{model_name(curves)}: more inner steps than in training lower the test MSE"


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
                              f"interval above 0){excluded_note(curves)}")

    checks = itertools.chain(model_gates(curves, limits), [
        gates.condition(grid[-1] > n, f"the grid stops at N = {n}")])
    return gates.gated(checks, measured)


def best_before_claim(curves: dict[str, Any]) -> str:
    if curves["method"] == "maml":
        return (f"{model_name(curves)}: the best test MSE is reached before convergence (before "
                f"the sweep's last count, where the inner problem is solved)")
    return (f"{model_name(curves)}: the best test MSE is reached before the inner problem "
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

    MAML (READING.md's row, module docstring): convergence = k_last, where the inner problem is
    solved (the median task's ‖∇ support loss‖ at k_last ≤ 10⁻³ × at k = 0; otherwise undecided,
    naming the count that would reach it). Holds when the held-out interval of MSE(k_last) −
    MSE(k*) lies above the floor :data:`MSE_FLOOR`; fails when it lies short of it (as it does
    when k* = k_last); undecided when it straddles it (with the held-out tasks that would decide
    it). The paper does not define convergence; the row reads it as the inner problem solved.

    iMAML: holds when the interval of MSE(converged) − MSE(k*) lies above 0 (converged: the
    L-BFGS reference) and fails when it lies at or below 0, or when it contains 0 and k* is the
    sweep's last count (the best is then the iterate nearest convergence, and the converged
    solution is no worse: the analogue of MAML's k* ≥ k_conv). Otherwise undecided when the
    interval contains 0."""

    def measured() -> Decision:
        grid = list(curves["grid"])
        note = excluded_note(curves)
        finite = finite_tasks(curves)
        mse = curves["query"][finite]
        choose, test = _halves(len(mse))
        best = int(np.argmin(mse[choose].mean(axis=0)))
        chosen = f"k* = {grid[best]} chosen on {len(choose)} tasks; on the held-out tasks "
        if curves["method"] != "maml":
            return _imaml_best_before(curves, finite, mse, test, best, chosen, note)
        return _maml_best_before(curves, finite, mse, test, best, chosen, note)

    return gates.gated(model_gates(curves, limits), measured)


#: MAML's inner problem counts as solved at k_last when the median task's support-loss gradient
#: norm there is at most this fraction of its value at k = 0 (READING.md)
SOLVED_GRADIENT_RATIO = 1e-3
#: The floor of a test-MSE difference: the chapter reports MSE to four decimals
MSE_FLOOR = 1e-4


def solved_at_last(grid: list[int], grad_norm: np.ndarray, grad_norm_0: np.ndarray
                   ) -> Decision:
    """Open when the median task's ‖∇‖ at the sweep's last count is at most
    :data:`SOLVED_GRADIENT_RATIO` × its value at k = 0; closed otherwise, with the count that
    would reach it extrapolated on a log-log line through the last two counts (an estimate)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.asarray(grad_norm, dtype=float) / np.asarray(grad_norm_0, dtype=float)[:, None]
    median = np.nanmedian(ratios, axis=0)
    last = float(median[-1])
    shown = (f"median task's support-gradient norm at k_last = {grid[-1]} is {last:.3g} × its "
             f"value at k = 0 (solved at ≤ {SOLVED_GRADIENT_RATIO:g})")
    if last <= SOLVED_GRADIENT_RATIO:
        return Decision(True, shown)
    estimate = ""
    if len(grid) >= 2 and median[-2] > 0 and last > 0 and grid[-1] > grid[-2]:
        slope = math.log(last / median[-2]) / math.log(grid[-1] / grid[-2])
        if slope < 0:
            needed = grid[-1] * (SOLVED_GRADIENT_RATIO / last) ** (1.0 / slope)
            estimate = f"; about {needed:,.0f} inner steps would reach it (log-log estimate)"
    return gates.undecided(f"the inner problem is not solved within the sweep: {shown}"
                           f"{estimate}; a longer sweep would decide it", Gate.CONDITION)


def _maml_best_before(curves: dict[str, Any], finite: np.ndarray, mse: np.ndarray,
                      test: np.ndarray, best: int, chosen: str, note: str) -> Decision:
    """MAML's branch of :func:`best_before_convergence`."""
    grid = [int(k) for k in curves["grid"]]
    last = len(grid) - 1
    solved = solved_at_last(grid, np.asarray(curves["grad_norm"])[finite],
                            np.asarray(curves["grad_norm_0"])[finite])

    def against_convergence() -> Decision:
        ci = _held_out_interval(mse[test], last, best)
        found = readings.direction(ci, MSE_FLOOR, +1, "MSE(k_last) − MSE(k*)")
        means = mse[test].mean(axis=0)
        return _worded(found, f"{chosen}{found.reason}, {ci.describe(digits=4)} (needs the "
                              f"interval above the floor +{MSE_FLOOR:g}); convergence is "
                              f"k_last = {grid[last]}: {solved.reason} (held-out mean MSE "
                              f"{means[best]:.4f} at k*, {means[last]:.4f} at k_last){note}")

    return gates.gated([solved], against_convergence)


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
    return (f"{model_name(curves)}: the test MSE never goes below the per-set-BN floor (sanity "
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
