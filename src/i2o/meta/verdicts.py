"""The chapter's claims (Section 4, Figures 3 and 4) as predicates over the computed curves.

Figure 3, for each model trained with N inner steps, on the fixed test tasks:

- *more inner steps than in training help*: the lowest mean test MSE over the grid is at some
  k* = N + ΔN > N, and MSE(N) − MSE(k*) exceeds ``z`` paired standard errors (pairing by task);
- *the best MSE is reached before convergence*: MSE(k_max) − MSE(k*) exceeds ``z`` paired standard
  errors at the largest k of the grid (the inner gradient norm there is reported to show how close
  to convergence k_max is).

Figure 4: *the better a model fits its training set, the higher D*: across the training-set sizes,
the Spearman rank correlation between the training loss at N, ℓ(z_N(θ^{*,N})), and
D(N, ΔN_max) is ≤ −0.7 (with 5 sets: at most one adjacent pair out of order).

A claim is left undecided (``None``) when its models were trained for fewer than
``min_outer_steps`` outer steps: the planning runs showed undertrained models (iMAML below about
20k steps) whose curves say nothing about the paper's trained ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from i2o.meta import evaluate

Z_SCORE = 2.0
RANK_CORRELATION_THRESHOLD = -0.7


def finite_tasks(curves: dict[str, Any]) -> np.ndarray:
    """Tasks whose query MSE stayed finite at every step count of the sweep.

    jaxopt's iteration, run far beyond its training N, diverges on some tasks (its line search
    restarts the step size at 1 once it falls below 10⁻⁶ and accepts the last trial after 15
    halvings even without sufficient decrease). Those tasks are excluded from every mean and
    comparison, at every step count (so comparisons stay paired), and their number is reported."""
    return np.all(np.isfinite(curves["query"]), axis=1)


def _decided(holds: bool, outer_steps: int, min_outer_steps: int) -> bool | None:
    return bool(holds) if outer_steps >= min_outer_steps else None


def figure3_claims(curves: dict[str, Any], min_outer_steps: int) -> list[tuple[str, bool | None,
                                                                                  str]]:
    """(statement, holds, measured value) rows for one model's Figure 3 curves."""
    grid = list(curves["grid"])
    n = curves["inner_steps"]
    finite = finite_tasks(curves)
    mse = curves["query"][finite]
    diverged = "" if finite.all() else (f"; {int((~finite).sum())} of {len(finite)} tasks "
                                         "diverged (non-finite MSE) and are excluded")
    mean, _ = evaluate.mean_and_standard_error(mse)
    i_n, i_best, i_last = grid.index(n), int(np.argmin(mean)), len(grid) - 1
    gain, gain_se = evaluate.paired_difference(mse, i_n, i_best)
    rise, rise_se = evaluate.paired_difference(mse, i_last, i_best)
    name = f"{curves['method'].upper()} (N = {n})"
    steps = curves["outer_steps"]
    grad_best = float(np.median(curves["grad_norm"][finite, i_best]))
    grad_last = float(np.median(curves["grad_norm"][finite, i_last]))
    more = (f"{name}: more inner steps than in training help (min test MSE at N + ΔN > N)",
            _decided(grid[i_best] > n and gain > Z_SCORE * gain_se, steps, min_outer_steps),
            f"MSE {mean[i_n]:.4f} at N = {n}, min {mean[i_best]:.4f} at N + ΔN = {grid[i_best]}; "
            f"paired difference {gain:.4f} ± {gain_se:.4f}{diverged}")
    before = (f"{name}: the best test MSE is reached before convergence",
              _decided(i_best < i_last and rise > Z_SCORE * rise_se, steps, min_outer_steps),
              f"MSE at N + ΔN = {grid[i_last]} is {mean[i_last]:.4f}, above the minimum by "
              f"{rise:.4f} ± {rise_se:.4f} (paired); median inner gradient norm "
              f"{grad_best:.2e} at the minimum, {grad_last:.2e} at {grid[i_last]}{diverged}")
    return [more, before]


def figure4_claim(per_set: dict[str, Any], min_outer_steps: int) -> tuple[str, bool | None, str]:
    """The ordering claim of Figure 4 over every training-set size."""
    rows = sorted(per_set.values(), key=lambda c: c["n_meta_batches"])
    loss = np.array([c["loss_at_n"] for c in rows])
    final_increase = np.array([c["increase"][-1] for c in rows])
    rho = float(stats.spearmanr(loss, final_increase).statistic) if len(rows) > 2 else float("nan")
    steps = min(c["outer_steps"] for c in rows)
    ordered = ", ".join(f"B={c['n_meta_batches']}: ℓ={c['loss_at_n']:.3g}, "
                        f"D={c['increase'][-1]:.3g}" for c in rows)
    return ("the better a model fits its training set (low ℓ(z_N)), the higher D(N, ΔN)",
            _decided(rho <= RANK_CORRELATION_THRESHOLD, steps, min_outer_steps),
            f"Spearman ρ(ℓ(z_N), D(N, ΔN_max)) = {rho:.2f} (≤ {RANK_CORRELATION_THRESHOLD} "
            f"needed); {ordered}")


def chapter_numbers(fig3: dict[str, Any], fig4: dict[str, Any]) -> dict[str, Any]:
    """Numbers quoted in the chapter's text (glued by the notebook), keyed by stable names."""
    numbers: dict[str, Any] = {}
    for method in ("maml", "imaml"):
        chosen = [c for c in fig3.values() if c["method"] == method]
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
            f"meta-{method}-diverged": int((~finite).sum()),
        }
        numbers["meta-n-test-tasks"] = int(c["query"].shape[0])
    if fig4:
        rows = sorted(fig4.values(), key=lambda c: c["n_meta_batches"])
        loss = np.array([c["loss_at_n"] for c in rows])
        final_increase = np.array([c["increase"][-1] for c in rows])
        numbers["meta-fig4-rho"] = (float(stats.spearmanr(loss, final_increase).statistic)
                                    if len(rows) > 2 else float("nan"))
        numbers["meta-fig4-outer-steps"] = int(min(c["outer_steps"] for c in rows))
        numbers["meta-fig4-max-delta"] = int(rows[0]["grid"][-1] - rows[0]["inner_steps"])
    return numbers
