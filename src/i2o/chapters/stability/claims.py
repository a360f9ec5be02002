"""The stability chapter's claims: each arm's rows from the book's one rule
(:mod:`i2o.verdicts.rule`), and the chapter's own comparison of the arms.

**Which models.** Every model is trained until it fits (:mod:`.jobs`); the claims are decided on the
models that meet the fit criterion (``train_accuracy ≥ fit_accuracy`` at N, own training images,
after training) when at least ``fit_quorum`` of each arm's do
(:func:`i2o.verdicts.gates.fit_quorum`; the others are named), and none of those diverged
(:mod:`i2o.train.health`); otherwise every claim is undecided with the count.

**Each arm** (IFT, unrolled): its fitting models' test accuracy in points at every ``N'``, read from
the per-image errors the jobs store (:func:`i2o.verdicts.curves.from_evaluations`), decides "more
test iterations do not raise accuracy by more than δ", "fewer lower it" and the residual sanity
check (the last iterate's residual at the largest ``N'`` over that at ``N``) by the rule every DEQ
chapter and ``i2o.diagnose`` share: intervals over the seeds, Bonferroni over the counts for "some
count", pointwise for "every count", δ a pre-registered fraction ``margin_fraction`` of what the
fewest iterations cost that arm (:meth:`i2o.verdicts.margin_gates.Margin.fewest`), decided only
when δ clears the resolution, the intervals are at most δ/2 wide and that cost is established, and
never below :data:`FLOOR_POINTS` (0.1 points, the last digit a CIFAR-10 accuracy table prints: a
smaller difference is not reported as one). The rows, with the paper's sentences (Section 5 and
Figure 5's caption):

- ``<arm>_no_gain``: Figure 2's "the performance of the model does not improve when increasing the
  number of iterations at test time", for each arm of Figure 5;
- ``<arm>_fewer_hurt``: "using fewer iterations at inference is almost always detrimental", over
  every ``N' < N`` (:func:`i2o.verdicts.questions.fewer_hurt`);
- ``<arm>_residual``: the paper's guard that the observations "were not artefacts of the
  convergence being already attained or stuck": the residual keeps falling beyond N (a fall of
  any size) from above the solver's floor, and unless it does the arm's ``no_gain`` is undecided;
  ``<arm>_tenfold`` (a tenfold fall) and ``<arm>_near`` (relative residual ≤ 0.05) are the
  book's own and gate nothing;
- ``<arm>_reference``, the book's own, gating nothing: a solve run to convergence (the training
  solver until relative residual ≤ 1e-4 or ``reference_factor`` × N steps, the job's
  ``test_reference``) does not raise accuracy over N by more than the arm's ``no_gain`` δ
  (:func:`reference_row`);
- ``not_more_stable``: "Note that the IFT trained network does not appear more stable than its
  unrolled counterpart" and "there is no gain of stability when using IFT gradient descent over
  unrolling";
- ``equally_stable`` is **the book's own**: it states more than the paper (the two arms within ±δ
  of each other, whichever is more stable), which says only that IFT is not more stable.

**The comparison of the arms** (is IFT more stable than unrolled?) is the chapter's own. Per
seed, ``deviation_s = mean_{N' ≠ N} |acc_s(N') − acc_s(N)|``; the interval over the seeds that fit
in both arms of ``deviation_s(IFT) − deviation_s(unrolled)`` is **paired by seed**
(:func:`paired_difference`: a seed draws the same initial weights, warm-up, batch order and
dropout masks in both arms); δ is ``margin_fraction`` × the unrolled arm's mean deviation (the
ratio form "IFT's change is at least ``1 − f`` of unrolled's"). It is decided only when δ is at
least the resolution of the statistic compared (READING.md, principle 3: one count's change's
standard error over the test images, :meth:`i2o.verdicts.curves.Curves.resolution`, times
``√(2/m)`` for a difference of two arms' means over ``m`` seed pairs; the counts, which share
their images, are not credited) and, where the interval straddles its bound, it is at most
``POWER_RATIO × δ`` wide (:func:`i2o.verdicts.margins.powered`; an interval that clears its bound
decides whatever its width). Where accuracy hardly moves with ``N'``, "not more stable" would hold
whatever IFT does: the resolution gate leaves it undecided.

A row left undecided for want of seeds or test images names the run that would decide it
(:func:`name_remedies`, :mod:`i2o.verdicts.deciding`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from i2o.chapters.stability import FIGURE, paper_claims
from i2o.chapters.stability.runs import StabilityResults
from i2o.verdicts import converged, deciding, gates, intervals, margins, readings, rows
from i2o.verdicts.claims import Claims
from i2o.verdicts.curves import Curves, from_evaluations
from i2o.verdicts.decision import EVALUATION_SET, Over
from i2o.verdicts.margin_gates import POWER_RATIO, Margin
from i2o.verdicts.questions import RESIDUAL_FALL
from i2o.verdicts.rule import decide

LABELS = {"ift": "IFT", "unrolled": "unrolled"}
#: the arm whose change with N' is the reference effect of the comparison
REFERENCE_ARM = "unrolled"
#: The absolute floor of every margin in accuracy points (module docstring).
FLOOR_POINTS = 0.1


def per_seed(runs: Sequence[Mapping[str, Any]], test_iters: Sequence[int], train_iter: int
             ) -> dict[str, Any]:
    """Per seed: accuracy at N, ``deviation`` (module docstring), fit, epochs, health, and the
    last-iterate residual at N and beyond it (shown with the residual row)."""
    its = np.asarray(test_iters)
    at = int(np.flatnonzero(its == train_iter)[0])
    acc = np.stack([np.asarray(r["test"]["accuracy"], dtype=float) for r in runs])
    trace = [np.asarray(r["test"]["trace_rel"], dtype=float) for r in runs]
    beyond = [t[train_iter + 1:int(its.max()) + 1] for t in trace]
    return {
        "at_train": acc[:, at],
        "deviation": np.abs(acc[:, its != train_iter] - acc[:, [at]]).mean(axis=1),
        "last_residual_at_train": np.array([t[train_iter] for t in trace]),
        "last_residual_beyond": np.array([b.mean() if b.size else np.nan for b in beyond]),
        "train_accuracy": np.array([float(r.get("train_accuracy", np.nan)) for r in runs]),
        "epochs_used": np.array([float(r.get("epochs_used", np.nan)) for r in runs]),
        "cap_reached": np.array([bool(r.get("cap_reached", False)) for r in runs]),
        "diverged": [str(r.get("diverged", "")) for r in runs],
    }


def paired_difference(every: Mapping[str, Mapping[str, Any]], masks: Mapping[str, np.ndarray]
                      ) -> tuple[intervals.Interval | None, gates.Decision]:
    """The interval over seeds of ``deviation_s(IFT) − deviation_s(unrolled)``, on the seeds whose
    models fit in both arms, and whether there are enough such pairs (≥ 2).

    A seed fixes the initial weights, the warm-up, the batch order and the dropout masks in both
    arms, so the two arms form a paired design (common random numbers): the pairs' differences
    carry less seed-to-seed spread than two independent groups.
    """
    both = np.asarray(masks[LABELS["ift"]], bool) & np.asarray(masks[LABELS["unrolled"]], bool)
    pairs = gates.enough(int(both.sum()), 2, f"{int(both.sum())} seed pairs fit in both arms",
                         f"{int(both.sum())} seed fits in both arms: an interval over seed "
                         "pairs needs ≥ 2")
    if pairs.holds is not True:
        return None, pairs
    differences = 100 * (every["ift"]["deviation"][both] - every["unrolled"]["deviation"][both])
    return intervals.interval(differences, Over.SEED_PAIRS), pairs


def _points(x: float) -> str:
    return f"{100 * x:.2f}"


def resolution_points(test_size: int) -> tuple[float, str]:
    """The largest binomial standard error of one accuracy on ``test_size`` images, in points
    (what the figure's caption quotes before the per-image resolution is measured)."""
    return 100 * 0.5 / float(np.sqrt(test_size)), f"of one accuracy on {test_size:,} test images"


def _seed_names(params: Mapping[str, Any], n: int) -> list[str]:
    seeds = list(params.get("seeds", range(n)))
    return [f"seed {s}" for s in seeds[:n]] + [f"#{i}" for i in range(len(seeds), n)]


def _models(m: Mapping[str, Any], names: Sequence[str]) -> str:
    """Per model: training accuracy, epochs used, and '(cap)' for a model that never fitted."""
    return ", ".join(f"{name} {100 * a:.1f} % after {e:g} epochs" + (" (cap)" if cap else "")
                     for name, a, e, cap in zip(names, m["train_accuracy"], m["epochs_used"],
                                                m["cap_reached"], strict=True))


@dataclass(frozen=True)
class Decided:
    """What every row of the chapter is decided on: per arm, every seed's measures
    (:func:`per_seed`), the seeds' names and which fit; the fit quorum, the health of the
    fitting models and the gate of every row; the curves of the fitting models (of the first
    seed when none fits) and those models' job results, in the same order."""

    every: dict[str, dict[str, Any]]
    names: dict[str, list[str]]
    masks: dict[str, np.ndarray]
    fitting: dict[str, dict[str, Any]]
    fit: gates.Decision
    health: gates.Decision
    gate: gates.Decision
    curves: dict[str, Curves]
    results: dict[str, list[Mapping[str, Any]]]


def decided_on(params: Mapping[str, Any], runs: Mapping[str, Sequence[Mapping[str, Any]]]
               ) -> Decided:
    """The models the claims are decided on and the gate of every row (module docstring)."""
    train_n = int(params["train_iters"][0])
    its = list(params["test_iters"])
    every = {arm: per_seed(runs[arm], its, train_n) for arm in LABELS}
    names = {arm: _seed_names(params, len(runs[arm])) for arm in LABELS}
    fit, masks = gates.fit_quorum({LABELS[a]: every[a]["train_accuracy"] for a in LABELS},
                                  float(params["fit_accuracy"]), int(params["fit_quorum"]),
                                  {LABELS[a]: names[a] for a in LABELS})
    chosen = {arm: [i for i, ok in enumerate(masks[LABELS[arm]]) if ok] for arm in LABELS}
    m: dict[str, dict[str, Any]] = {
        arm: {k: (np.asarray(v)[masks[LABELS[arm]]] if not isinstance(v, list) else
                  [x for x, ok in zip(v, masks[LABELS[arm]], strict=True) if ok])
              for k, v in every[arm].items()} for arm in LABELS}
    health = gates.health_gate({LABELS[a]: m[a]["diverged"] for a in LABELS})
    n_seeds = min(len(m[a]["at_train"]) for a in LABELS)
    count = gates.enough(n_seeds, 2, f"{n_seeds}+ fitting seeds per arm",
                         f"{n_seeds} fitting seed in an arm: a confidence interval over seeds "
                         "needs ≥ 2")
    used = {arm: [runs[arm][i] for i in chosen[arm] or [0]] for arm in LABELS}
    curves = {arm: from_evaluations([r["test"] for r in used[arm]]) for arm in LABELS}
    return Decided(every, names, masks, m, fit, health, gates.combine(health, fit, count),
                   curves, used)


def best_gain(params: Mapping[str, Any], curves: Curves) -> tuple[int, intervals.Interval] | None:
    """The count above the training N of the largest mean accuracy gain over N, in points, with
    its interval over the fitting seeds: what the arm's ``no_gain`` row quotes."""
    train_n = int(params["train_iters"][0])
    counts = [n for n in sorted(params["test_iters"]) if n > train_n]
    return rows.largest(curves.improvements(train_n, counts), counts)


def _regime_rows(table: Claims, params: Mapping[str, Any], on: Decided) -> None:
    """The ``health`` warning row (every model) and the ``fit`` row (the quorum)."""
    every, names = on.every, on.names
    flagged = [f"{LABELS[a]} {names[a][i]}: {why}" for a in LABELS
               for i, why in enumerate(every[a]["diverged"]) if why]
    everyone = gates.health_gate({LABELS[a]: every[a]["diverged"] for a in LABELS})
    table.add(
        "Training health: no model diverged (non-finite loss, final loss above its start, or "
        "chance-level training accuracy)", everyone.holds is True,
        "; ".join(flagged) if flagged else f"{sum(len(every[a]['diverged']) for a in LABELS)} "
        "models checked", check="warning row: a flagged model that fits makes the claims "
        "undecided", id="health")
    capped = [f"{LABELS[a]} {names[a][i]}" for a in LABELS
              for i in np.flatnonzero(every[a]["cap_reached"])]
    table.decide(
        f"Fit criterion: at least {int(params['fit_quorum'])} models per arm reach ≥ "
        f"{100 * float(params['fit_accuracy']):g} % training accuracy at N = "
        f"{int(params['train_iters'][0])} (the regime of Theorem 1 / Corollary 1), each trained "
        f"until it fits plus {params['extra_epochs']} epochs, at most {params['epochs']}",
        gates.Decision(on.fit.holds is True, on.fit.reason, on.fit.facts),
        "; ".join(f"{LABELS[a]}: {_models(every[a], names[a])}" for a in LABELS)
        + (f"; reached the cap without fitting: {', '.join(capped)}" if capped else ""),
        id="fit")


def _comparison_rows(table: Claims, params: Mapping[str, Any], on: Decided) -> None:
    """``not_more_stable`` and ``equally_stable``: the chapter's own comparison of the arms
    (module docstring)."""
    train_n = int(params["train_iters"][0])
    fraction = float(params["margin_fraction"])
    m, gate = on.fitting, on.gate
    reference = on.curves[REFERENCE_ARM]
    change = f"the {LABELS[REFERENCE_ARM]} arm's mean |acc(N') − acc({train_n})|"
    between: intervals.Interval | None = None

    def paired(rule: Callable[[intervals.Interval, float], gates.Decision]) -> gates.Decision:
        """``rule`` on the paired interval against δ; called behind ``compare``, which opens only
        once the interval exists."""
        assert between is not None
        return rule(between, margin.delta)

    if gate.holds is True:
        ref = float(100 * np.mean(m[REFERENCE_ARM]["deviation"]))
        margin = Margin.relative(fraction, ref, change, "points", digits=3,
                                 floor=FLOOR_POINTS)
        between, pairs = paired_difference(on.every, on.masks)
        n_pairs = between.n if between is not None else 1
        resolved = gates.resolves(
            margin.delta, reference.resolution(train_n) * np.sqrt(2.0 / n_pairs), margin.text,
            f"the standard error over the test images of the compared statistic, a difference "
            f"of two arms' means over {n_pairs} seed pairs (one count's change's standard error "
            f"× √(2/{n_pairs}); the counts, which share their images, are not credited)",
            reference.n_examples)
        value = (f"mean |acc(N') − acc({train_n})|: IFT {_points(m['ift']['deviation'].mean())}, "
                 f"unrolled {_points(m['unrolled']['deviation'].mean())} points; IFT − unrolled "
                 + (between.describe(1, " pt") if between else "not computed"))
        compare = gates.combine(gate, resolved, pairs)
        margin_text = margin.text
    else:
        compare, value = gate, "not computed: " + gate.reason
        margin_text = f"{fraction:g} × {change}"

    def powered(bounds: Sequence[float]) -> gates.Decision:
        """Principle 3: power reads the interval only where it straddles one of ``bounds``."""
        if compare.holds is not True or between is None:
            return compare
        if not readings.straddling([between], bounds):
            return compare
        return gates.combine(compare, margins.powered(between, margin.delta, POWER_RATIO))

    table.decide(
        f"IFT is not more stable than unrolled: the IFT networks' accuracy change away from "
        f"N = {train_n} is not smaller by more than δ", gates.gated(
            [powered((-margin.delta,)) if gate.holds is True else compare],
            lambda: paired(margins.not_below), quote=True),
        value, margin_text, id="not_more_stable", section="comparison")
    table.decide(
        "The book's own: IFT and unrolled are equally stable (the difference of their accuracy "
        "changes lies within ±δ; the paper says only that IFT is not more stable)", gates.gated(
            [powered((-margin.delta, margin.delta)) if gate.holds is True else compare],
            lambda: paired(margins.equivalent), quote=True),
        value, margin_text, id="equally_stable", section="comparison")


def _arm_rows(table: Claims, params: Mapping[str, Any], on: Decided, arm: str) -> None:
    """An arm's rows from the book's one rule (:func:`i2o.verdicts.rule.decide`, written by
    :func:`i2o.verdicts.rows.write`): ``<arm>_no_gain``, ``<arm>_fewer_hurt``,
    ``<arm>_residual``, ``<arm>_tenfold``, ``<arm>_near``; then :func:`reference_row` with the
    ``no_gain`` row's δ."""
    train_n = int(params["train_iters"][0])
    its = list(params["test_iters"])
    label, gate, low = LABELS[arm], on.gate, min(its)
    margin = Margin.fewest(on.curves[arm], train_n, float(params["margin_fraction"]), "points",
                           named=f"the {label} arm's loss acc({train_n}) − acc({low})",
                           floor=FLOOR_POINTS)
    verdicts, intervals = decide(on.curves[arm], train_n, margin, gate, health=on.health,
                                 power_ratio=POWER_RATIO)
    counts = [n for n in sorted(its) if n > train_n]
    gain = rows.largest(intervals["above"], counts)
    gain_v = (f"largest mean gain over N' > {train_n}, at N' = {gain[0]}: "
              + gain[1].describe(1, " pt") + f" ({len(counts)} counts)"
              if gain and gate.holds is True else "not computed: " + gate.reason)
    counts_below = [n for n in sorted(its) if n < train_n]
    fewer = rows.largest(intervals["fewer"], counts_below)
    loss_v = (f"acc({train_n}) − acc({low}): " + intervals["below"][0].describe(1, " pt")
              + f"; largest mean gain over N' < {train_n}, at N' = {fewer[0]}: "
              + fewer[1].describe(1, " pt") + f" ({len(counts_below)} counts)"
              if gate.holds is True and fewer else "not computed: " + gate.reason)
    falling = intervals["residual"]
    residual_v = (f"log10(last-iterate residual at N' = {max(its)} / at N = {train_n}): "
                  + (falling[0].describe(1, "", 2) if falling else "not computed")
                  + f"; mean residual {np.mean(on.every[arm]['last_residual_at_train']):.3g}"
                  f" at N = {train_n}, {np.mean(on.every[arm]['last_residual_beyond']):.3g} "
                  "beyond (every model)")
    rows.write(table, verdicts, [
        rows.Row("no_gain", "no_gain", f"{label}: more test iterations than in training do not "
                 "raise accuracy by more than δ (inner-iterations overfitting)", gain_v),
        rows.Row("fewer", "fewer_hurt", f"{label}: fewer test iterations than in training (every "
                 f"N' < {train_n}) lower accuracy, none raising it by more than δ", loss_v),
        rows.Row("residual", "residual", f"The paper's solver guard, {label}: the residual of "
                 f"the last iterate keeps falling beyond N = {train_n} and was not at the "
                 "solver's floor there (otherwise the rows on more iterations are undecided)",
                 residual_v, margin=False),
        rows.Row("tenfold", "tenfold", f"Book's own (gates nothing), {label}: the residual "
                 f"falls at least {RESIDUAL_FALL:g}-fold beyond N = {train_n}", residual_v,
                 margin=False),
        rows.Row("near", "near", f"Book's own (gates nothing), {label}: near equilibrium (mean "
                 "relative residual ≤ 0.05 at N and at the largest count)",
                 verdicts.near.reason, margin=False)], prefix=f"{arm}_", section=arm)
    reference_row(table, on, arm, margin, train_n)


def reference_row(table: Claims, on: Decided, arm: str, margin: Margin, train_n: int) -> None:
    """``<arm>_reference``, the book's own row, gating nothing. The paper's guard (Section 4):
    "We verified that these observations were not artefacts of the convergence being already
    attained or stuck due to some instability by plotting it alongside the performance (orange
    lines). The figures show that increasing the number of iterations above N produces better
    approximation of the inner problem’s solution, while not improving the performances." The
    paper reads this on the counts it plots; the row asks more than the paper, at the solution
    itself: each fitting model's test images, solved by its training solver until the relative
    residual is at most 1e-4 (within ``reference_factor`` × N steps,
    :func:`i2o.deq.reference.reference_solve`), do not gain more than the arm's ``no_gain`` δ of
    accuracy over N. The interval is over the seeds, paired by seed (the same test images at N
    and at the converged solve), read as
    :func:`i2o.verdicts.readings.no_benefit` by :func:`i2o.verdicts.converged.reference_check`;
    undecided when some batch's solve did not converge within its cap, or when the run made no
    reference solve. Decided on the models that fit, behind the chapter's gate (health, fit
    quorum, enough seeds); no other row reads it."""
    found, shown = converged.reference_check(
        on.results[arm], on.curves[arm], margin, train_n,
        lambda metrics: 1.0 - np.asarray(metrics["error"], dtype=float), unit=" pt", digits=2)
    table.decide(
        f"Book's own (gates nothing), {LABELS[arm]}: a solve run to convergence (relative "
        f"residual ≤ 1e-4) does not raise test accuracy over N = {train_n} by more than δ",
        gates.gated([on.gate], found), shown, margin.text, id=f"{arm}_reference", section=arm)


def claims_table(params: Mapping[str, Any], runs: Mapping[str, Sequence[Mapping[str, Any]]],
                 costs: Mapping[str, Mapping[str, Any]] | None = None) -> Claims:
    """The chapter's claims table, its rows recorded by id for :mod:`.prose` (``health``,
    ``fit``, ``not_more_stable``, ``equally_stable``, ``<arm>_no_gain``, ``<arm>_fewer_hurt``,
    ``<arm>_residual``, ``<arm>_tenfold``, ``<arm>_near``, ``<arm>_reference``, ``memory`` when
    the step costs were measured); the rows of an arm are in
    the section ``<arm>``, the comparison of the arms in ``comparison``.

    ``runs`` maps each arm to its seeds' job results at the training N ``train_iters[0]``.
    """
    table = Claims(FIGURE, str(getattr(params, "profile", params.get("profile", ""))),
                   paper=paper_claims.CLAIMS)
    on = decided_on(params, runs)
    _regime_rows(table, params, on)
    _comparison_rows(table, params, on)
    for arm in LABELS:
        _arm_rows(table, params, on, arm)
    if costs is not None:
        more = gates.compare(costs["unrolled"]["peak_mb"], ">", costs["ift"]["peak_mb"])
        # The peaks are measured costs, glued as such (stability-<arm>-step-mb) and shown with
        # the chapter's costs; quoted here they would differ between runs of the same results.
        table.decide(
            "Unrolled training needs more memory per step than IFT",
            more.with_reason("one measurement per arm"),
            "unrolled's peak " + ("above" if more.holds else "not above") + " IFT's (the "
            "measured peaks: the step costs)", id="memory")
    name_remedies(table, params, runs)
    return table


def name_remedies(table: Claims, params: Mapping[str, Any],
                  runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
    """For each row left undecided for want of seeds or test images, the run that would decide
    it (:func:`i2o.verdicts.deciding.name_remedies`), costed at this run's measured training and
    evaluation time."""
    def mean(arm: str, key: str) -> float:
        return float(np.mean([float(r.get(key, np.nan)) for r in runs[arm]]))

    per_seed = sum(mean(arm, "train_seconds") + mean(arm, "eval_seconds") for arm in LABELS)
    evaluation = sum(len(runs[arm]) * mean(arm, "eval_seconds") for arm in LABELS)
    everything = sum(len(runs[arm]) * (mean(arm, "train_seconds") + mean(arm, "eval_seconds"))
                     for arm in LABELS)
    deciding.name_remedies(table, params, deciding.Rates(per_seed, everything, evaluation),
                           {EVALUATION_SET: "test_size"})


def numbers(results: StabilityResults) -> dict[str, Any]:
    """The numbers the chapter's text quotes (``glue`` names → formatted values)."""
    params = results.params
    its = np.asarray(params["test_iters"])
    out: dict[str, str] = {}
    curves = decided_on(params, results.runs).curves
    for arm, s in results.summary.items():
        out[f"stability-{arm}-acc"] = f"{100 * s['at_train'].mean():.1f}"
        out[f"stability-{arm}-deviation"] = f"{100 * s['deviation'].mean():.2f}"
        gain = best_gain(params, curves[arm])  # the no_gain row's number
        out[f"stability-{arm}-gain-more"] = f"{gain[1].mean:+.2f}" if gain else "n/a"
        out[f"stability-{arm}-loss-fewer"] = f"{100 * s['loss_fewer'].mean():.1f}"
        out[f"stability-{arm}-acc-min"] = f"{100 * s['mean'][np.argmin(its)]:.1f}"
        out[f"stability-{arm}-acc-max"] = f"{100 * s['mean'][np.argmax(its)]:.1f}"
        out[f"stability-{arm}-res-train"] = f"{s['residual_at_train'].mean():.3f}"
        out[f"stability-{arm}-res-max"] = f"{s['residual_at_max'].mean():.3f}"
        out[f"stability-{arm}-train-seconds"] = f"{results.train_seconds[arm]:.0f}"
    out["stability-parameters"] = f"{results.n_parameters:,}"
    out["stability-parameters-tiny"] = f"{results.n_parameters_tiny:,}"
    out["stability-seeds"] = str(len(params["seeds"]))
    out["stability-train-n"] = str(results.train_n)
    out["stability-n-min"] = str(its.min())
    out["stability-n-max"] = str(its.max())
    out["stability-collect-seconds"] = f"{results.cost.seconds:.0f}"  # wall time of collect
    for arm in LABELS:
        cost = (results.costs or {}).get(arm)
        out[f"stability-{arm}-step-seconds"] = f"{cost['cpu_seconds']:.2f}" if cost else "n/a"
        out[f"stability-{arm}-step-mb"] = f"{cost['peak_mb']:.0f}" if cost else "n/a"
    return out


def claims(results: StabilityResults) -> Claims:
    """:func:`claims_table` of the chapter's results."""
    return claims_table(results.params, results.runs, results.costs)
