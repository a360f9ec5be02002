"""Figure 4's claim (every model of the figure at once; Section 4: "the better the model is at
overfitting the training dataset –i.e. low ℓ(z_N(θ*,N)) – the less it benefits from more
iterations at inference –i.e. higher D(N, ΔN)"): Kendall's τ between each model's training loss
ℓ(z_N(θ*,N)) and D̄, its mean D(N, ΔN) over the grid's ΔN > 0, with its exact null distribution
(no ties), one-sided towards the paper's negative association at α = :data:`ALPHA`
(:func:`fit_ordering`, :func:`i2o.verdicts.ranks.rank_association`); the caption's
"the more overparametrized the model, the higher D(N, ΔN)" against the training-set size B
(:func:`size_ordering`). Every model counts, whether or
not it learned to use the support set and whatever its outer loss did during training (the largest
rise of that loss, :func:`largest_rise`, is reported beside it, never used to select); gates:
the models were trained ``fig4_min_outer_steps`` outer steps, at most ``max_diverged_fraction``
of their training tasks diverged, every ℓ and D is finite, untied, and there are enough models
for the exact test to reach α.

Also here: each model as the claim reads it (:class:`Figure4Point`), their table, the numbers
the chapter quotes about them, and the statement of the book's own row on the probed models'
mechanism (:data:`MECHANISM_CLAIM`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from i2o.chapters.meta.claims_gates import Thresholds
from i2o.verdicts import gates, ranks
from i2o.verdicts.decision import Decision, Gate

#: Figure 4's significance level: the exact one-sided p-value of Kendall's τ must be at most this
#: (for a negative association the claim holds; for a positive one it fails)
ALPHA = ranks.RANK_ALPHA


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
    mean_increase: float = float("nan")

    def is_finite(self) -> bool:
        return bool(np.isfinite(self.loss_at_n) and np.isfinite(self.increase_at_max)
                    and np.isfinite(self.mean_increase))

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
        return (f"{self.label}: ℓ = {self.loss_at_n:.4g}, D̄ = {self.mean_increase:.4g}, "
                f"D = {self.increase_at_max:.4g} "
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
        peak_after_best=_optional(curves, "peak_after_best"),
        mean_increase=mean_increase(grid, n, increase))


def mean_increase(grid: Sequence[int], inner_steps: int, increase: Any) -> float:
    """D̄ = the mean of D(N, ΔN) over the ΔN > 0 points of the grid: Figure 4's whole curve over
    ΔN in one number per model (NaN when the grid has no count beyond N)."""
    values = np.asarray(increase, dtype=float)[np.asarray(grid) > inner_steps]
    return float(values.mean()) if values.size else float("nan")


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
    for values in ([p.loss_at_n for p in points], [p.mean_increase for p in points]):
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

    **The reading** (READING.md's Figure 4 row, committed before the models that confirm it
    trained): over every Figure 4 model, x = its ℓ(z_N), y = D̄, the mean of D(N, ΔN) over the
    ΔN > 0 points of the grid (:func:`mean_increase`: the whole curve the figure shows, not one
    ΔN); Kendall's τ with its exact null distribution
    (:func:`i2o.verdicts.ranks.rank_association`), one-sided at α = :data:`ALPHA` = 0.05: holds
    when the p-value of a negative association (lower loss, higher D̄) is ≤ 0.05, fails when the
    p-value of a positive association is ≤ 0.05, undecided otherwise (more models would decide
    it). D at the largest ΔN and at ΔN ≈ N (:func:`near_n_index`) and each model's largest rise
    of its outer loss are reported beside it, never used to select. Every model counts, each at
    its best point: one that did not learn to use the support set (ℓ above the task-agnostic
    MSE) is a model that fits its training set badly, which is what the claim is about. The
    companion row, :func:`size_ordering`, reads the paper's lever, the training-set size B.

    This reading changed after results were read: until issue 61 the row read D at the single
    largest ΔN (τ = −0.276, p = 0.084 over the 15 paper-profile models, undecided). Its verdicts
    count as confirmed only on models trained after the change.

    Undecided, naming them, when a model's ℓ or D̄ is non-finite or tied with another's; and when
    the models were trained fewer than ``fig4_min_outer_steps`` outer steps, more than
    ``max_diverged_fraction`` of their training tasks diverged, or there are too few models for
    the exact test to reach 0.05 (1/n! > 0.05: n ≤ 3).

    The row states less than the paper's picture in that it tests a rank association (a tendency,
    not every pair of models in order); and more in that the association must be told from a
    random ordering of the models at 5 %."""
    points = figure4_points(per_set)
    n = len(points)

    def measured() -> Decision:
        x, y = [p.loss_at_n for p in points], [p.mean_increase for p in points]
        found = ranks.kendall(x, y)
        verdict = ranks.rank_association(x, y, direction=-1, alpha=ALPHA)
        at_max = stats.kendalltau(x, [p.increase_at_max for p in points]).statistic
        near = stats.kendalltau(x, [p.increase_near_n for p in points]).statistic
        first = points[0]
        text = (f"Kendall τ = {found.tau:+.3f} over {n} models between ℓ(z_N) and D̄, the mean "
                f"of D(N, ΔN) over the ΔN > 0 grid (reported: at ΔN = {first.delta_max}, "
                f"τ = {float(at_max):+.3f}; at ΔN = {first.delta_near_n} ≈ N, "
                f"τ = {float(near):+.3f}); exact one-sided p = {found.p_negative:.3g} for a "
                f"negative association (holds at ≤ {ALPHA:g}), {found.p_positive:.3g} for a "
                f"positive one (fails at ≤ {ALPHA:g})")
        if verdict.holds is None:
            text += f"; neither reaches {ALPHA:g}: {MORE_MODELS}"
        details = "; ".join(p.describe() for p in points)
        return Decision(verdict.holds, f"{text}; every model counts: {details}", verdict.facts)

    return gates.gated(_figure4_gates(points, per_set, limits), measured)


SIZE_ORDERING_CLAIM = ("the more overparametrized the model (the smaller its training set B), "
                       "the higher D(N, ΔN) (its mean D̄ over the ΔN > 0 grid)")


def size_ordering(per_set: dict[str, Any], limits: Thresholds) -> Decision:
    """The book's own companion of :func:`fit_ordering` (READING.md's Figure 4 row), gating
    nothing. Figure 4's caption (L207) says "the more overparametrized the model, the higher
    D(N, ΔN) is" and measures overparametrization by ℓ(z_N) ("Generally, the more meta-batches
    there are in the training set, the higher this loss"), so the paper's claim is
    :func:`fit_ordering`'s; this row reads the lever the experiment varies, the training-set size
    B, and states more than the paper does. Kendall's τ-b between B
    and D̄ (:func:`mean_increase`) over every Figure 4 model, one-sided towards a negative
    association at α = :data:`ALPHA`. B repeats over seeds, so the exact null does not apply:
    the p-value is the normal approximation of τ-b with ties (scipy's ``asymptotic``), with at
    least two sizes and ten models. Holds when the negative direction's p ≤ α; fails when the
    positive's is; undecided otherwise. Behind the same gates as :func:`fit_ordering` but the
    untied check on ℓ."""
    points = figure4_points(per_set)
    sizes = [float(p.n_meta_batches) for p in points]

    def measured() -> Decision:
        y = [p.mean_increase for p in points]
        less = stats.kendalltau(sizes, y, method="asymptotic", alternative="less")
        greater = stats.kendalltau(sizes, y, method="asymptotic", alternative="greater")
        tau = float(less.statistic)
        text = (f"Kendall τ-b = {tau:+.3f} over {len(points)} models between B and D̄; "
                f"one-sided p = {float(less.pvalue):.3g} for a negative association (holds at "
                f"≤ {ALPHA:g}), {float(greater.pvalue):.3g} for a positive one (fails at "
                f"≤ {ALPHA:g})")
        if less.pvalue <= ALPHA:
            return Decision(True, text)
        if greater.pvalue <= ALPHA:
            return Decision(False, text)
        return gates.undecided(f"{text}; neither reaches {ALPHA:g}: {MORE_MODELS}", Gate.POWER)

    enough = gates.condition(len(set(sizes)) >= 2 and len(points) >= 10,
                             f"{len(points)} models over {len(set(sizes))} sizes: the normal "
                             f"approximation needs ≥ 10 models over ≥ 2 sizes", by=Gate.COUNT)
    checks = [g for g in _figure4_gates(points, per_set, limits, untied=False)]
    return gates.gated([*checks, enough], measured)


def _figure4_gates(points: list[Figure4Point], per_set: dict[str, Any],
                   limits: Thresholds, untied: bool = True) -> Iterator[Decision]:
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
                          f"non-finite ℓ(z_N) or D̄ for {', '.join(non_finite)}: the "
                          f"association over every model is undefined", by=Gate.HEALTH)
    tied = _tied(points) if untied else []
    yield gates.condition(not tied,
                          f"tied ℓ(z_N) or D(N, ΔN) for {', '.join(tied)}: the exact null "
                          f"distribution of Kendall's τ needs untied values")
    n = len(points)
    yield gates.condition(ranks.smallest_rank_p(n) <= ALPHA,
                          f"{n} models: the exact one-sided p-value cannot go below 1/{n}! = "
                          f"{ranks.smallest_rank_p(n):.3g}, above {ALPHA:g}; {MORE_MODELS}",
                          by=Gate.COUNT)


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
