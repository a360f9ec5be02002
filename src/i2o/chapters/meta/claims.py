"""The chapter's claims (Section 4, Figures 3 and 4) as predicates that can fail.

Every predicate returns an :data:`i2o.gates.Decision` ``(holds, value)``: ``holds`` is True or
False when the data can decide, ``None`` with the reason when they cannot; ``value`` is what the
claim's row shows. Each claim is decided behind its gates (:func:`i2o.gates.gated`), whose values
are the chapter's :class:`Thresholds`; the gates, in the order they are checked:

- *trained*: the model's outer training loss has settled — its fall between the last two windows
  of ``plateau_window`` × its outer steps is at most ``plateau_rtol`` of its level or of its
  whole fall (:func:`plateau`) — and it was
  meta-trained for at least ``min_outer_steps`` outer steps
  (``fig4_min_outer_steps`` for the Figure 4 models, which cycle through a fixed set) and has
  learned to use the support set — its test MSE at its training N is below ``baseline_mse``, the
  MSE of the best predictor that ignores the support set
  (:func:`i2o.chapters.meta.floor.task_agnostic_mse`, 3.006; predicting 0 scores 4.25);
- *diverged tasks*: tasks whose MSE became non-finite at some step count are counted; above
  ``max_diverged_fraction`` of the tasks the verdict is ``None`` (no silent exclusion that
  flatters a curve); below it they are excluded at every step count and reported;
- *converged* (the "before convergence" claim only): MAML — a task's inner problem has converged
  at k when the gradient of its support loss has fallen to ``grad_fraction`` of its value at
  θ_meta, ‖∇ℓ(θ_k)‖ ≤ ``grad_fraction`` · ‖∇ℓ(θ_0)‖ (near an interpolating minimum ℓ ∝ ‖∇ℓ‖², so
  a 100-fold fall of the gradient is a 10⁴-fold fall of the loss; a relative change of the
  support loss cannot serve, since a model that interpolates drives the loss towards 0, where its
  relative change stays large), and the inner problem *has converged at* k_conv, the first grid
  count at which at least ``min_converged_fraction`` of the tasks have (0.5 in every profile: the
  median task); without one the claim is undecided. iMAML — the converged inner problem is the
  one a convergent solver reaches (jaxopt's L-BFGS, float64, ``reference_iters`` iterations from
  the sweep's last iterate, :mod:`.evaluate`), and the claim compares the test MSE at its solution
  with the sweep's best: the paper's solver (gradient descent with line search) stalls on F's
  ReLU kinks, so no count of its steps is "converged" (in quick, its F stays a median 5·10⁻⁴ to
  4·10⁻³ above the reference from k ≈ 300 to 1,024).
  Until 2026-11-25 MAML's k_conv needed 90 % of the tasks, and iMAML's converged point was the
  first count where 90 % of the tasks had F within 10⁻⁴ of the reference. Both were replaced after
  replicates 0–2 of quick had been read: 5–15 % of MAML's tasks hover at 1–7 % of their starting
  gradient for thousands of steps, so the 90 % count fell anywhere from 46 to beyond 10,000
  between replicates of one setup (the median's count: 15–46), which decided the verdict; and
  iMAML's 90 % was never reached (18–44 % of tasks by 1,024) by a solver that had stalled, not one
  that needed more steps. The new rules were checked on fresh replicates (the closing note of
  session 11 gives them).

Figure 3's comparisons are made on held-out tasks: the best step count k* is chosen on one half of
the test tasks (even indices) and the difference is measured on the other half (odd indices), as
a paired mean with the book's interval (:func:`i2o.gates.from_se`: Student's t at 90 %, two
one-sided tests at 5 %). The claim holds when the interval lies above 0, fails when it lies at or
below 0 (:func:`i2o.gates.positive`), and is undecided when it contains 0, with the number of
held-out tasks that would decide it. Choosing k* and testing it on the same tasks would favour the
claim. (Until 2026-11-25 a difference below 2 standard errors counted as a fail: a lack of power
read as evidence against the claim.)

Figure 4's ordering is a Spearman rank correlation across the training-set sizes between the
seed-mean training loss at N and the seed-mean D(N, ΔN_max), with ≥ ``min_seeds`` seeds per size:
it holds at ρ ≤ −0.9, fails at ρ ≥ +0.9 and is undecided in between
(:func:`i2o.gates.rank_correlation`).
The threshold's false-positive rate under a random ordering (exact, by enumerating permutations)
is stated with the verdict and must be ≤ 5 %: with 5 sizes, ρ ≤ −0.9 has p = 5/120 = 0.042.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from i2o import deciding, door, gates, profiles
from i2o.chapters.meta import FIGURE, evaluate, gradient_noise
from i2o.chapters.meta.runs import MetaResults
from i2o.claims import Claims
from i2o.gates import Decision, Facts, Needs
from i2o.profiles import Params

RANK_CORRELATION_THRESHOLD = -0.9
MAX_FALSE_POSITIVE_RATE = 0.05
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
    grad_fraction: float = 1e-2
    min_converged_fraction: float = 0.5
    min_seeds: int = 3


def finite_tasks(curves: dict[str, Any]) -> np.ndarray:
    """Tasks whose query MSE stayed finite at every step count of the sweep."""
    return np.all(np.isfinite(curves["query"]), axis=1)


def converged_tasks(curves: dict[str, Any], limits: Thresholds) -> np.ndarray:
    """Per task and grid count (tasks × grid), whether MAML's inner problem has converged there by
    the rule of the module docstring."""
    start = np.asarray(curves["grad_norm_0"], dtype=float)[:, None]
    return np.asarray(curves["grad_norm"], dtype=float) <= limits.grad_fraction * start


def convergence_rule(limits: Thresholds) -> str:
    return f"‖∇ support loss‖ ≤ {limits.grad_fraction:g} × its value at θ_meta"


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


def _held_out_interval(per_task: np.ndarray, reference: int, best: int) -> gates.Interval:
    """The book's interval of the paired difference MSE(reference) − MSE(best) over the held-out
    tasks."""
    gain, se = evaluate.paired_difference(per_task, reference, best)
    return gates.from_se(gain, se, len(per_task), over="held-out tasks")


def _held_out_gain(per_task: np.ndarray, reference: int, best: int) -> Decision:
    """:func:`i2o.gates.positive` on :func:`_held_out_interval`, with the interval as its reason
    (and, when undecided, the held-out tasks that would decide it, also in its facts)."""
    ci = _held_out_interval(per_task, reference, best)
    found = gates.positive(ci)
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
    return (f"{_model_name(curves)}: the best test MSE is reached before the inner problem "
            f"converges")


def best_before_convergence(curves: dict[str, Any], limits: Thresholds) -> Decision:
    """*The best test MSE is reached before convergence*: k* = argmin of the mean test MSE over
    the grid on the even tasks, compared on the odd tasks with the converged inner problem
    (module docstring). MAML: decided only when the inner problem converges within the grid, at
    k_conv; holds when k* < k_conv and the interval of MSE(k_conv) − MSE(k*) lies above 0, fails
    when k* ≥ k_conv or the interval lies at or below 0. iMAML: holds when the interval of
    MSE(converged) − MSE(k*) lies above 0 and fails when it lies at or below 0, or when it
    contains 0 and k* is the sweep's last count (the best is then the iterate nearest
    convergence, and the converged solution is no worse: the analogue of MAML's k* ≥ k_conv).
    Otherwise undecided when the interval contains 0."""

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
        share = converged_tasks(curves, limits)[finite].mean(axis=0)
        reached = np.flatnonzero(share >= limits.min_converged_fraction)

        def against_convergence() -> Decision:
            at = int(reached[0])
            if best >= at:  # the best count is not before convergence, whatever the difference
                found = Decision(False, _held_out_interval(mse[test], at, best).describe(digits=4))
            else:
                found = _held_out_gain(mse[test], at, best)
            return _worded(found, f"{chosen}MSE(k_conv) − MSE(k*) = {found.reason} (needs k* < "
                                  f"k_conv and the interval above 0); converged at k_conv = "
                                  f"{grid[at]} ({share[at]:.0%} of tasks: "
                                  f"{convergence_rule(limits)}){note}")

        converged = gates.condition(
            reached.size > 0,
            f"the inner problem has not converged on {limits.min_converged_fraction:.0%} of the "
            f"tasks by k_max = {grid[-1]} ({share[-1]:.0%} have: {convergence_rule(limits)}); a "
            f"longer sweep would decide it")
        return gates.gated([converged], against_convergence)

    return gates.gated(_model_gates(curves, limits), measured)


def _imaml_best_before(curves: dict[str, Any], finite: np.ndarray, mse: np.ndarray,
                       test: np.ndarray, best: int, chosen: str, note: str) -> Decision:
    reference = np.asarray(curves.get("query_reference", np.full_like(mse, np.nan)),
                           dtype=float)[finite]

    def against_reference() -> Decision:
        per_task = np.column_stack([reference[:, 0], mse])  # column 0: the converged test MSE
        if best == mse.shape[1] - 1:  # the best count is the sweep's nearest to convergence
            ci = _held_out_interval(per_task[test], 0, best + 1)
            found = Decision(gates.positive(ci).holds, ci.describe(digits=4))
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
    the counts of the grid, as :mod:`i2o.diagnose.verdicts` widens a search over counts: the check
    fails when one count's interval lies below 0, and holds otherwise (a floor can only be
    contradicted, so there is no undecided side)."""
    finite = finite_tasks(curves)
    mean, se = evaluate.mean_and_standard_error(curves["query"][finite])
    n, counts = int(np.count_nonzero(finite)), len(mean)
    level = 1.0 - (1.0 - gates.LEVEL) / counts
    cis = [gates.from_se(float(m - floor), math.hypot(e, floor_se), n, "tasks", level)
           for m, e in zip(mean, se, strict=True)]
    i = int(np.argmin(mean))
    below = [k for k, ci in enumerate(cis) if gates.negative(ci).holds is True]
    return gates.Decision(not below,
                          f"lowest mean test MSE {mean[i]:.3f} ± {se[i]:.3f} at k = "
                          f"{int(curves['grid'][i])}; floor {floor:.3f} ± {floor_se:.3f}; mean − "
                          f"floor there {cis[i].describe(digits=3)} (Bonferroni over {counts} "
                          "counts; fails when one lies below 0)")


def spearman_false_positive_rate(n: int, threshold: float,
                                 samples: int = 200_000, seed: int = 0) -> float:
    """P(ρ ≤ threshold) for the Spearman correlation of n untied values under a uniformly random
    ordering: exact for n ≤ 8 (every permutation), Monte Carlo above."""
    ranks = np.arange(n)
    if n <= 8:
        perms = np.array(list(itertools.permutations(ranks)))
    else:
        rng = np.random.default_rng(seed)
        perms = np.argsort(rng.random((samples, n)), axis=1)
    rho = 1 - 6 * np.sum((perms - ranks) ** 2, axis=1) / (n * (n ** 2 - 1))
    return float(np.mean(rho <= threshold + 1e-12))


def figure4_summary(per_set: dict[str, Any]) -> list[dict[str, Any]]:
    """Per training-set size (ascending): seeds, the seed means and standard errors of the
    training loss at N and of D(N, ΔN_max), and the mean D curve."""
    sizes: dict[int, list[dict[str, Any]]] = {}
    for curves in per_set.values():
        sizes.setdefault(int(curves["n_meta_batches"]), []).append(curves)
    rows = []
    for size in sorted(sizes):
        runs = sizes[size]
        loss = np.array([c["loss_at_n"] for c in runs])
        final = np.array([c["increase"][-1] for c in runs])
        curves = np.array([c["increase"] for c in runs])

        def se(values: np.ndarray) -> float:
            return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 \
                else float("nan")

        rows.append({"n_meta_batches": size, "seeds": len(runs),
                     "loss_at_n": float(loss.mean()), "loss_se": se(loss),
                     "final_increase": float(final.mean()), "final_increase_se": se(final),
                     "increase": curves.mean(axis=0), "increase_se": (
                         curves.std(axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1
                         else np.full(curves.shape[1], np.nan)),
                     "grid": runs[0]["grid"], "inner_steps": runs[0]["inner_steps"],
                     "outer_steps": min(int(c["outer_steps"]) for c in runs),
                     "n_diverged": sum(int(c.get("n_diverged", 0)) for c in runs),
                     "n_tasks": sum(int(c["query"].shape[0]) for c in runs)})
    return rows


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


def _set_aside(name: str, curves: dict[str, Any], limits: Thresholds) -> str:
    """Why a Figure 4 model does not count (its loss at N, or its unsettled loss), with the
    largest rise of its outer training loss (a spike of training shows there)."""
    why = (f"training loss at N {curves['loss_at_n']:.3g}"
           if not curves["loss_at_n"] < limits.baseline_mse else "not settled")
    low, high = largest_rise(curves.get("train_losses", ()))
    rise = f", outer loss from {low:.3g} up to {high:.3g}" if np.isfinite(low) and high > low \
        else ""
    return f"{_without_seed(name)} seed {name.rsplit('-seed', 1)[-1]}: {why}{rise}"


def seeds_to_learn(counts: dict[int, int], trained: dict[int, int], needed: int) -> int | None:
    """Seeds per training-set size at which each size would have ``needed`` that meta-learned,
    at the rate each size had (the pooled rate for a size where none did); ``None`` when no model
    learned."""
    pooled = sum(counts.values()) / max(sum(trained.values()), 1)
    if pooled == 0:
        return None
    rates = [counts[size] / trained[size] if counts[size] else pooled for size in trained]
    return max(math.ceil(needed / rate - 1e-9) for rate in rates)


def _enough_learned(seeds: int, needed: int, counts: dict[int, int], trained: dict[int, int],
                    closed: str) -> Decision:
    """The count gate of Figure 4's ordering, with the seeds per size that would open it
    (:func:`seeds_to_learn`) in its facts."""
    gate = gates.enough(seeds, needed, "", closed)
    per_size = seeds_to_learn(counts, trained, needed)
    if gate.holds is True or per_size is None:
        return gate
    return Decision(None, gate.reason, gate.facts.merged(
        Facts(needs=Needs(per_size, "seeds per training-set size"))))


FIT_ORDERING_CLAIM = ("the better a model fits its training set (low ℓ(z_N)), the higher "
                      "D(N, ΔN)")


def fit_ordering(per_set: dict[str, Any], limits: Thresholds) -> Decision:
    """*The better a model fits its training set, the higher D*: Spearman ρ between the
    seed-mean training loss at N and the seed-mean D(N, ΔN_max) across set sizes ≤ −0.9 (fails:
    ρ ≥ +0.9, the opposite ordering at the same false-positive rate; undecided in between, where
    no ordering is told from a random one; until 2026-11-25 any ρ > −0.9 counted as a fail).

    Only models that meta-learned count: training loss at N below ``limits.baseline_mse`` (the
    best predictor ignoring the support set); each size needs ``limits.min_seeds`` of them."""
    learned = {name: c for name, c in per_set.items() if c["loss_at_n"] < limits.baseline_mse
               and plateau_gate(c, limits)[0] is True}
    set_aside = "; ".join(
        _set_aside(name, c, limits) for name, c in sorted(
            per_set.items(), key=lambda item: (int(item[1]["n_meta_batches"]), item[0]))
        if name not in learned)
    all_rows = figure4_summary(per_set)
    steps = min(r["outer_steps"] for r in all_rows)
    trained = {r["n_meta_batches"]: r["seeds"] for r in all_rows}
    counts = {size: sum(int(c["n_meta_batches"]) == size for c in learned.values())
              for size in trained}
    rows = figure4_summary(learned) if learned else []
    seeds = min(counts.values())
    rate = spearman_false_positive_rate(len(rows), RANK_CORRELATION_THRESHOLD) \
        if len(rows) > 1 else 1.0
    diverged, tasks = (sum(r["n_diverged"] for r in all_rows),
                       sum(r["n_tasks"] for r in all_rows))
    learned_counts = ", ".join(f"B = {size}: {count} of {trained[size]}"
                               for size, count in counts.items())
    checks = [
        gates.condition(steps >= limits.fig4_min_outer_steps,
                        f"trained {steps} outer steps, fewer than the "
                        f"{limits.fig4_min_outer_steps} needed to decide"),
        gates.condition(diverged <= limits.max_diverged_fraction * tasks,
                        f"{diverged} of {tasks} training tasks diverged (non-finite MSE), more "
                        f"than {limits.max_diverged_fraction:.0%}"),
        _enough_learned(seeds, limits.min_seeds, counts, trained,
                        f"fewer than {limits.min_seeds} seeds per training-set size meta-learned "
                        f"(training loss at N below {limits.baseline_mse:.3f}, the best "
                        f"predictor ignoring the support set, and settled): {learned_counts}"
                        + (f"; set aside (outer loss: means over twentieths of training): "
                           f"{set_aside}" if set_aside else "")),
        gates.condition(rate <= MAX_FALSE_POSITIVE_RATE,
                        f"{len(rows)} training-set sizes: ρ ≤ {RANK_CORRELATION_THRESHOLD} has a "
                        f"false-positive rate {rate:.3f} under a random ordering, above "
                        f"{MAX_FALSE_POSITIVE_RATE:.0%}")]

    def measured() -> Decision:
        loss = np.array([r["loss_at_n"] for r in rows])
        final = np.array([r["final_increase"] for r in rows])
        rho = float(stats.spearmanr(loss, final).statistic)
        detail = "; ".join(f"B = {r['n_meta_batches']}: ℓ = {r['loss_at_n']:.3g} ± "
                           f"{r['loss_se']:.2g}, D = {r['final_increase']:.3g} ± "
                           f"{r['final_increase_se']:.2g}" for r in rows)
        holds, _ = gates.rank_correlation(rho, RANK_CORRELATION_THRESHOLD)
        between = ("" if holds is not None else
                   f"; between {RANK_CORRELATION_THRESHOLD} and {-RANK_CORRELATION_THRESHOLD} "
                   f"the ordering is not told from a random one: more seeds per size (less "
                   f"noisy means) or more sizes would decide it")
        return holds, (f"Spearman ρ = {rho:.2f} (holds at ≤ {RANK_CORRELATION_THRESHOLD}, fails "
                       f"at ≥ {-RANK_CORRELATION_THRESHOLD}; each has false-positive rate "
                       f"{rate:.3f} under a random ordering){between}; {seeds} seeds per size "
                       f"(mean ± SE over seeds): {detail}")

    return gates.gated(checks, measured)


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
    imaml_row = noise.get(gradient_noise.imaml_row(regularization))
    maml_rows = _noise_rows(noise, "maml-")

    def measured() -> Decision:
        maml_name, maml_row = next(iter(maml_rows.items()))
        ratio = float(imaml_row["noise"]) / float(maml_row["noise"])
        holds, _ = gates.compare(ratio, "<=", max_ratio)
        return holds, (f"noise {float(imaml_row['noise']):.3g} against "
                       f"{float(maml_row['noise']):.3g} for {maml_name} ({ratio:.2f}×; needs ≤ "
                       f"{max_ratio:g}×); signal/noise {float(imaml_row['ratio']):.2f}, pure "
                       f"noise {gradient_noise.noise_level(int(imaml_row['n_batches'])):.2f} over "
                       f"{int(imaml_row['n_batches'])} meta-batches")

    measured_rows = gates.condition(imaml_row is not None and bool(maml_rows),
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
                      plateau_window=p["plateau_window"], plateau_rtol=p["plateau_rtol"],
                      grad_fraction=p["converged_grad_fraction"],
                      min_converged_fraction=p["min_converged_fraction"])


def _without_seed(label: str) -> str:
    """A model's label without its seed (``maml-N1-online``): a replicate redraws the seed, and a
    claim's id must name the same claim at every replicate (:mod:`i2o.robustness` matches rows by
    id)."""
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
    (:mod:`i2o.deciding`).

    - A row undecided for want of held-out tasks (the odd half of the test tasks) names
      ``n_test_tasks`` at twice what its held-out half needs. The size enters only the keys of
      the sweeps of Figure 3's and the ablation's models: those sweeps run again at the new size
      (their measured time, scaled) and the trained models are read from the cache.
    - Figure 4's ordering, undecided below the paper's scale, names the paper profile's run,
      costed at the CPU time per outer step each of this run's models measured; undecided at
      the paper's scale for want of models that meta-learned, it names ``fig4_seeds`` raised to
      the seeds per size at which each size would have enough at the rate it had
      (:func:`seeds_to_learn`), costed at this run's CPU time per Figure 4 model."""
    p = results.params
    online = [c for section in (results.figure3, results.ablation) for c in section.values()]
    sweeps = sum(float(c.get("seconds", math.nan)) for c in online)
    for row in list(table.rows):
        needs = row.facts.needs
        if row.holds is None and needs is not None and needs.of == "held-out tasks":
            found = deciding.more_examples(FIGURE, p, Needs(2 * needs.count, "examples"),
                                           "n_test_tasks", sweeps, sweeps)
            if found is not None:
                table.remedy(row.id, found)
    ordering = table.by_id.get("figure4/fit-ordering")
    if ordering is None or ordering.holds is not None:
        return
    if p.profile == "paper":
        if (found := _more_figure4_seeds(p, ordering.facts.needs, results)) is not None:
            table.remedy(ordering.id, found)
        return
    paper = profiles.resolve(FIGURE, "paper")
    steps = {("maml", None): paper["maml_outer_steps"], ("imaml", None): paper["imaml_outer_steps"]}
    seconds = sum(float(c.get("train_cpu_seconds_per_step", math.nan))
                  * steps.get((c["method"], c.get("n_meta_batches")), paper["fig4_outer_steps"])
                  for section in (results.figure3, results.figure4, results.ablation)
                  for c in section.values())
    table.remedy(ordering.id, deciding.Remedy(FIGURE, "paper", (), seconds))


def _more_figure4_seeds(p: Params, needs: Needs | None,
                        results: MetaResults) -> deciding.Remedy | None:
    """``fig4_seeds`` raised to :data:`i2o.deciding.HEADROOM` × the seeds per size that
    ``needs`` counts, costed at this run's mean CPU time per Figure 4 model (training and
    sweep); ``None`` when ``needs`` counts something else or the manifest refuses it."""
    if needs is None or needs.of != "seeds per training-set size":
        return None
    seeds = list(p["fig4_seeds"])
    extra = max(0, math.ceil(deciding.HEADROOM * needs.count) - len(seeds))
    if extra == 0:
        return None
    per_model = np.mean([float(c.get("train_cpu_seconds_per_step", math.nan))
                         * int(c["outer_steps"]) + float(c.get("seconds", 0.0))
                         for c in results.figure4.values()])
    start = max(seeds) + 1
    chosen = [*seeds, *range(start, start + extra)]
    remedy = deciding.Remedy(FIGURE, p.profile, (("fig4_seeds", chosen),),
                             extra * len(p["fig4_meta_batches"]) * float(per_model))
    try:
        door.enter(FIGURE, p.profile, fig4_seeds=chosen)
    except profiles.ParameterError:
        return None
    return remedy


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
        rows = figure4_summary(results.figure4)
        numbers["meta-fig4-outer-steps"] = int(min(r["outer_steps"] for r in rows))
        numbers["meta-fig4-max-delta"] = int(rows[0]["grid"][-1] - rows[0]["inner_steps"])
        numbers["meta-fig4-seeds"] = int(min(r["seeds"] for r in rows))
    return numbers
