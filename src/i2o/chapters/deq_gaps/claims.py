"""The deq_gaps chapter's claims: the book's one rule (:mod:`i2o.verdicts.rule`) applied to
each task's trained DEQs, gated by the task's fit criterion, plus the overparametrization sweep.

For each task and data split the curves are :class:`i2o.diagnose.Curves` (lower is better): on
**test data** the task's metric (error, perplexity, −PSNR); on **training data** the training
loss (cross-entropy, NLL, MSE), the quantity of Theorem 1, which can still move when the training
error is already 0 %. The rows "fewer iterations hurt", "more iterations than N bring no
improvement beyond δ" and the residual sanity check are :func:`i2o.verdicts.rule.decide`'s,
with its corrections, intervals and gates (resolution, power, an established reference effect).

**Margins** are pre-registered fractions ``f = margin_fraction`` of a reference effect measured in
the same run (the manifest gives the reason): on test data what the fewest iterations cost
(:meth:`i2o.verdicts.margin_gates.Margin.fewest`), on training data the training loss at N (the most
that more iterations could remove from a non-negative loss); never below the metric's
pre-registered absolute floor (the task's :attr:`~.tasks.Task.metric_floor` and ``loss_floor``):
the last digit a results table of the field prints, so that a smaller difference would not be
reported as one (top-1 error 0.1 points, perplexity 0.1, PSNR 0.01 dB, cross-entropy 0.001
nats). The reconstruction networks' training MSE has no floor: its reference, the training MSE
at N, is a level that is always measured, and an MSE has no unit a table fixes. Where the fewest
iterations' cost is not established, δ is the floor alone.

**The rows and the paper's sentences.** Per task and split (Section 4, Figure 2 and G.1/G.2):
``<task>_<split>_no_gain`` tests "the performance of the model does not improve when increasing
the number of iterations at test time"; ``<task>_<split>_fewer_hurt`` tests "using fewer
iterations at inference is almost always detrimental" over every ``N' < N``;
``<task>_residual`` the paper's guard that these "were not artefacts of the convergence being
already attained or stuck" (the residual keeps falling beyond N from above the solver's floor,
without which the rows on more iterations are undecided; ``<task>_tenfold`` and ``<task>_near``
are the book's own stricter checks and gate nothing). Appendix G.4 states the reconstruction
networks differently, and has rows of its own, read as signs (READING.md, principle 1):
``deq_test_fewer_better`` ("it's better to use fewer iterations than at training time (for
DEQ)": some ``N' < N`` improves the test PSNR on N beyond the metric's floor, 0.01 dB) and
``elder_test_more_better`` ("it's better to use more iterations (for ELDER)": some ``N' > N``
does, behind the solver guard). The paper gives two possible reasons for these mismatches ("The
outer optimization is not optimal", "We do not have an overparametrized (or close to) inner
solving procedure"); the networks here are trained by the book (×2 super-resolution on
CIFAR-10), not Zou et al.'s.
``overparam`` is the book's own (the paper's Figure 4 statement, made for iMAML, asked of DEQs).

**Which models, which intervals.** The classifier and the language model are trained once per seed;
their claims are decided on the seeds whose model fits its training set by the task's criterion
(:func:`fit_check`) when at least ``fit_quorum`` do (:func:`i2o.verdicts.gates.fit_quorum`; the
others are named), with intervals over those seeds. The reconstruction networks are trained once:
their intervals are over the evaluation examples (paired per-example differences), and their gate is
that they *have learned* (training PSNR at least ``inv_fit_db`` above the initial guess ``A⁺y``) —
which is not the overparametrized regime of Theorem 1: whether that regime was reached (training
PSNR above test PSNR, :func:`regime_check`) is a typed fact of their rows
(:attr:`i2o.verdicts.decision.Facts.regime_reached`). A model whose training diverged
(:mod:`i2o.train.health`) makes its task's claims undecided.

**Test-data rows read only models that generalise** (``READING.md``, principle 4): the row
``<task>_generalises`` (:func:`generalisation_check`) holds when the test metric at N of the
models it reads beats the task's trivial baseline fitted on the same training data
(:mod:`.baselines`: a linear classifier on the pixels, each seed against its own; the bigram
model of the training text; ``A⁺y``) beyond the metric's floor; otherwise every test-data row of
the task is undecided (closed by :attr:`i2o.verdicts.decision.Gate.REGIME`), its test curve
being a memoriser's. The training-data rows do not need it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from i2o.chapters.deq_gaps import FIGURE, paper_claims
from i2o.chapters.deq_gaps.curves import GapCurve
from i2o.chapters.deq_gaps.runs import GapsResults
from i2o.chapters.deq_gaps.tasks import TASKS, FitScore
from i2o.train import health
from i2o.verdicts import converged, deciding, gates, intervals, margins, ranks, readings, rows
from i2o.verdicts.claims import Claim, Claims
from i2o.verdicts.curves import Curves
from i2o.verdicts.decision import EVALUATION_SET, Over
from i2o.verdicts.margin_gates import Margin
from i2o.verdicts.questions import RESIDUAL_FALL
from i2o.verdicts.rule import Verdicts, decide


def fit_score(task: str, result: Mapping[str, Any], train: Curves, train_loss: Curves,
              train_iters: int) -> float:
    """One model's fit score on its training examples at its training N: training accuracy
    (classification), training NLL (language model), PSNR gain over ``A⁺y`` in dB (inverse).
    ``train`` and ``train_loss``: that model's curves of the task metric and the training loss
    on its training data."""
    at = train.at(train_iters)
    score = TASKS[task].fit.score
    if score is FitScore.ACCURACY:
        return 1.0 - float(train.mean()[at]) / 100.0
    if score is FitScore.LOSS:
        return float(train_loss.mean()[at])
    return float(result["train_baseline_neg_psnr"]) - float(train.mean()[at])


def fit_check(task: str, scores: Sequence[float], params: Mapping[str, Any],
              names: Sequence[str] | None = None) -> tuple[gates.Decision, np.ndarray]:
    """The task's fit gate over its models and the mask of those that fit.

    - classification: training accuracy ``≥ cls_fit_accuracy``;
    - language model: training NLL ``≤ lm_fit_nll`` nats per character;
    - inverse problems: *has learned*: training PSNR at least ``inv_fit_db`` dB above the initial
      guess ``A⁺y`` (not a fit of the training set: see :func:`regime_check`).

    At least ``fit_quorum`` models (all of them when there are fewer) must pass.
    """
    spec = TASKS[task]
    fit, name = spec.fit, spec.label
    quorum = max(1, min(int(params["fit_quorum"]), len(scores)))
    labels = {name: list(names)} if names is not None else None
    decision, masks = gates.fit_quorum({name: scores}, float(params[fit.threshold]), quorum,
                                       labels, fit.criterion, fit.higher_is_better, fit.unit,
                                       fit.scale)
    return decision, masks[name]


def regime_check(result: Mapping[str, Any], train_iters: int) -> tuple[bool, str]:
    """Is a reconstruction network in the overparametrized regime? Reached when it reconstructs
    its training images better than its test images: the 90 % Welch interval over the evaluation
    images of ``PSNR(training) − PSNR(test)`` at N lies above 0."""
    column = list(np.asarray(result["test"]["iterations"])).index(int(train_iters))
    test = np.asarray(result["test"]["metrics"]["neg_psnr"], dtype=float)[:, column]
    train = np.asarray(result["train"]["metrics"]["neg_psnr"], dtype=float)[:, column]
    ci = intervals.difference(test, train, over=Over.EXAMPLES)  # −PSNR(test) − (−PSNR(train))
    reached = margins.positive(ci).holds is True
    return reached, ("overparametrized regime " + ("reached" if reached else "not reached")
                     + f": training − test PSNR at N {ci.describe(1, ' dB')}")


def health_check(task: str, result: Mapping[str, Any], score: float) -> str | None:
    history = result.get("history", {})
    losses = np.asarray(history.get("loss", []), dtype=float)
    chance = TASKS[task].chance
    stopped = np.asarray(history.get("nonfinite_step", []), dtype=float).ravel()
    return health.diverged(losses.tolist(), score if chance else None, chance,
                           nonfinite_step=int(stopped[0]) if stopped.size else None)


def baseline_values(task: str, results: Sequence[Mapping[str, Any]],
                    baselines: Mapping[str, Any] | None) -> list[float] | None:
    """Per model, the value on its test data of the task's trivial baseline fitted on that
    model's training data (:mod:`.baselines`), in the units of the task's curve: a linear
    classifier's top-1 error in % (one per seed: each seed draws its training subset), the bigram
    model's perplexity (one training text for every seed), ``A⁺y``'s −PSNR (stored with the
    reconstruction job). ``None`` when the run has none."""
    if TASKS[task].inverse:
        if any(r.get("test_baseline_neg_psnr") is None for r in results):
            return None
        return [float(r["test_baseline_neg_psnr"]) for r in results]
    if not baselines or baselines.get(task) is None:
        return None
    if task == "classification":
        fitted = list(baselines[task])
        if len(fitted) != len(results):
            return None
        return [100.0 * float(np.mean(b["test_error"])) for b in fitted]
    return [float(np.exp(np.mean(baselines[task]["test_nll"])))] * len(results)


def generalisation_check(task: str, curves: Curves, baseline: Sequence[float] | None,
                         train_iters: int) -> gates.Decision:
    """Principle 4 (:func:`i2o.verdicts.readings.generalises`): the test metric at N of the models
    the rows read (``curves``) beats the task's baseline (``baseline``, one value per model)
    beyond the metric's floor. Over seeds the interval is paired (each model against its own
    seed's baseline); over the examples of one model, against its baseline's value."""
    spec = TASKS[task]
    if baseline is None:
        return gates.undecided(f"no baseline ({spec.baseline}) was fitted in this run",
                               gates.Gate.REGIME)
    mean = float(np.mean(baseline))
    ci = curves.value(train_iters, offsets=list(baseline) if curves.n_models >= 2 else None)
    return readings.generalises(ci, mean, higher_is_better=curves.sign > 0,
                                floor=spec.metric_floor, baseline_name=spec.baseline)


def reference_check(task: str, results: Sequence[Mapping[str, Any]], test: Curves,
                    margin: Margin, train_iters: int) -> tuple[gates.Decision, str]:
    """The book's own row ``<task>_reference``, gating nothing: the shared reading of a converged
    reference solve (:func:`i2o.verdicts.converged.reference_check`) on the task's test metric,
    against the test data's δ (:func:`split_margin`), shown in the metric's unit with the
    decimals of :func:`digits_of`. Returns the decision and the measured text."""
    spec = TASKS[task]
    return converged.reference_check(
        results, test, margin, train_iters, lambda metrics: metrics[spec.metric],
        unit=f" {spec.metric_unit}", digits=digits_of(test, train_iters))


def split_margin(task: str, curves: Curves, split: str, fraction: float, train_iters: int
                 ) -> Margin:
    """A split's δ: on test data a fraction of what the fewest iterations cost
    (:meth:`~i2o.verdicts.margin_gates.Margin.fewest`), on training data of the training loss at N
    (:meth:`~i2o.verdicts.margin_gates.Margin.relative`); never below the task's floor."""
    spec = TASKS[task]
    if split == "test":
        low = int(np.asarray(curves.grid)[0])
        return Margin.fewest(curves, train_iters, fraction, spec.metric_unit,
                             named=f"|gap at {low}|", floor=spec.metric_floor)
    level = float(curves.mean()[curves.at(train_iters)])
    return Margin.relative(fraction, level, f"the training loss at N = {train_iters}",
                           spec.loss_unit, floor=spec.loss_floor)


def split_rows(table: Claims, task: str, curves: Curves, split: str, gate: gates.Decision,
               fraction: float, health: gates.Decision, train_iters: int
               ) -> tuple[Verdicts, dict[str, list[intervals.Interval]]]:
    """A split's two rows, "fewer iterations hurt" and "no improvement beyond δ" (and, on test
    data, Appendix G.4's row of a reconstruction network), from the book's rule
    (:func:`i2o.verdicts.rule.decide` with :func:`split_margin`), written by
    :func:`i2o.verdicts.rows.write`."""
    spec = TASKS[task]
    name = spec.label
    data = "test data" if split == "test" else "training data (training loss)"
    margin = split_margin(task, curves, split, fraction, train_iters)
    verdicts, intervals = decide(curves, train_iters, margin, gate, health=health)
    scale = digits_of(curves, train_iters)
    mean, grid = curves.mean(), [int(n) for n in np.asarray(curves.grid)]
    lowest = int(np.nanargmin(mean))
    label = spec.metric_label if split == "test" else spec.loss_label
    fewer_counts = [n for n in grid if n < train_iters]
    found = rows.largest(intervals["fewer"], fewer_counts)
    assert found is not None, "Margin.fewest and relative need a count below N"
    few_v = (f"cost of N' = {grid[0]}: {intervals['below'][0].describe(digits=scale)} ({label}); "
             f"largest mean improvement below N, at {found[0]}: "
             f"{found[1].describe(digits=scale)} ({len(fewer_counts)} counts below N); lowest "
             f"mean at {grid[lowest]} iterations ({mean[lowest]:.3g}, "
             f"{mean[curves.at(train_iters)]:.3g} at N)")
    counts = [n for n in grid if n > train_iters]
    best = rows.largest(intervals["above"], counts)
    more_v = (f"largest mean improvement above N, at {best[0]}: "
              f"{best[1].describe(digits=scale)} ({len(counts)} counts above N)" if best
              else "not computed")
    written = [
        rows.Row("fewer", "fewer_hurt", f"{name}, {data}: fewer iterations than in training "
                 f"(every N' < N = {train_iters}) hurt, none improving on N by more than δ",
                 few_v),
        rows.Row("no_gain", "no_gain", f"{name}, {data}: more iterations than N bring no "
                 "improvement beyond δ", more_v)]
    rows.write(table, verdicts, written, prefix=f"{task}_{split}_", section=task)
    g4 = spec.appendix_g4
    if split == "test" and g4 is not None:
        rows.write(table, verdicts, [rows.Row(
            g4.verdict, g4.row_id, f"{name}, test data (Figure G.4): {g4.claim}",
            few_v if g4.side == "below" else more_v)], section=task)
    return verdicts, intervals


def digits_of(curves: Curves, train_iters: int) -> int:
    """Decimals that show a change on the scale of the curve's value at N (3 for values ≥ 0.1,
    more for a training MSE of 1e-3, whose changes would otherwise print as +0.000)."""
    level = abs(float(curves.mean()[curves.at(train_iters)]))
    if not math.isfinite(level) or level == 0 or level >= 0.1:
        return 3
    return min(8, 2 - math.floor(math.log10(level)))


def task_claims(table: Claims, task: str, results: Sequence[Mapping[str, Any]],
                curves: Mapping[str, Curves], params: Mapping[str, Any], train_iters: int,
                seeds: Sequence[int] | None = None,
                baseline: Sequence[float] | None = None) -> None:
    """Add one task's rows (both splits and the residual check) to ``table`` (ids
    ``<task>_<what>``, section ``<task>``).

    ``results``: the task's job results, one per model; ``curves``: ``"test"`` (task metric on
    test data), ``"train"`` (task metric on training data, for the fit) and ``"train_loss"``
    (training loss on training data), each the :class:`i2o.diagnose.Curves` of every model;
    ``baseline``: per model, its trivial baseline's test value (:func:`baseline_values`), which
    the test-data rows' models must beat (:func:`generalisation_check`; none: they are
    undecided).
    """
    spec = TASKS[task]
    name = spec.label
    fraction = float(params["margin_fraction"])
    labels = [f"seed {s}" for s in seeds] if seeds is not None and len(seeds) == len(results) \
        else [f"#{i}" for i in range(len(results))]
    scores = [fit_score(task, r, curves["train"].select([k]), curves["train_loss"].select([k]),
                        train_iters) for k, r in enumerate(results)]
    fit, mask = fit_check(task, scores, params, labels)
    used = [i for i in range(len(results)) if mask[i]]
    flags = [health_check(task, results[i], scores[i]) for i in used]
    healthy = gates.health_gate({name: flags})
    parts = [healthy, fit]
    regime = ""
    if spec.inverse:
        reached, regime = regime_check(results[0], train_iters)
        parts.append(gates.Decision(True, regime, gates.Facts(regime_reached=reached)))
    if len(results) > 1:
        parts.append(gates.enough(len(used), 2, f"{len(used)} fitting seeds",
                                  "needs ≥ 2 fitting seeds for an interval over seeds"))
    gate = gates.combine(*parts)
    shown = ", ".join(f"{label} {s:.4g}" for label, s in zip(labels, scores, strict=True))
    what = (f"has learned (training PSNR ≥ A⁺y + {params['inv_fit_db']:g} dB, did not diverge; "
            "whether it is in the overparametrized regime is stated with it)" if spec.inverse
            else "in the regime of the claims (fits its training set, did not diverge)")
    table.decide(
        f"{name}: {what}", gates.Decision(gate.holds is True, gate.reason, gate.facts),
        f"fit score at N = {train_iters} per model: {shown}"
        + (f"; {regime}" if regime else ""), id=f"{task}_gate", section=task)
    chosen = used or [0]
    compared = None if baseline is None else [baseline[i] for i in chosen]
    beaten = generalisation_check(task, curves["test"].select(chosen), compared, train_iters)
    table.decide(
        f"{name}: generalises (the paper's regime, principle 4): its test metric at N beats "
        f"{spec.baseline}, fitted on the same training data (otherwise the test-data rows are "
        "undecided)", beaten,
        f"{spec.metric_label} at N = {train_iters}: "
        + (f"models {curves['test'].select(chosen).value(train_iters).describe(digits=3)}; "
           f"baseline {np.mean(compared):.4g}" if compared is not None else "no baseline"),
        id=f"{task}_generalises", section=task)
    test = None
    for split, key in (("test", "test"), ("train", "train_loss")):
        split_gate = gates.combine(gate, beaten) if split == "test" else gate
        found = split_rows(table, task, curves[key].select(chosen), split, split_gate, fraction,
                           healthy, train_iters)
        test = found if split == "test" else test
    assert test is not None
    verdicts, intervals = test
    ratios, over = curves["test"].select(chosen).falling(train_iters)
    rose = ([f"{labels[i]} {x:+.2f}" for i, x in zip(chosen, ratios, strict=True) if x > 0]
            if over == "models" else [])
    falling = intervals["residual"]
    top = int(np.asarray(curves["test"].grid)[-1])
    chosen_curves = curves["test"].select(chosen)
    at_n, at_top = chosen_curves.residual_at(train_iters), chosen_curves.residual_at(top)
    moved = (f"falls {at_n / at_top:.2g}-fold" if at_top < at_n
             else f"rises {at_top / at_n:.2g}-fold" if at_n > 0 else "moves")
    fall = (f"the mean last-iterate residual {moved}, from {at_n:.2g} at N = {train_iters} to "
            f"{at_top:.2g} at {top}; " if at_top > 0 else "")
    residual_v = (fall + f"log10(last-iterate residual at {top} / at N = {train_iters}): "
                  + (falling[0].describe(digits=2) if falling else "not computed")
                  + (f"; rose for {', '.join(rose)}" if rose else ""))
    rows.write(table, verdicts, [rows.Row(
        "residual", "residual", f"The paper's solver guard, {name}: the residual of the last "
        "iterate keeps falling beyond N and was not at the solver's floor at N (otherwise the "
        "rows on more iterations are undecided)", residual_v, margin=False),
        rows.Row("tenfold", "tenfold", f"Book's own (gates nothing), {name}: the residual falls "
                 f"at least {RESIDUAL_FALL:g}-fold beyond N", residual_v, margin=False),
        rows.Row("near", "near", f"Book's own (gates nothing), {name}: near equilibrium "
                 "(mean relative residual ≤ 0.05 at N and at the largest count)",
                 verdicts.near.reason, margin=False)],
        prefix=f"{task}_", section=task)
    margin = split_margin(task, chosen_curves, "test", fraction, train_iters)
    converged_solve, shown = reference_check(task, [results[i] for i in chosen], chosen_curves,
                                             margin, train_iters)
    table.decide(
        f"Book's own (gates nothing), {name}: a solve run to convergence (relative residual "
        "≤ 1e-4) improves on N by less than δ on test data", gates.gated(
            [gates.combine(gate, beaten)], converged_solve), shown, margin.text,
        id=f"{task}_reference", section=task)


def name_remedies(table: Claims, results: Mapping[str, Sequence[Mapping[str, Any]]],
                  params: Mapping[str, Any]) -> None:
    """For each row left undecided for want of seeds or examples, the run that would decide it
    (:func:`i2o.verdicts.deciding.name_remedies`; a task's evaluation set is its
    :attr:`~.tasks.Task.eval_size`). More seeds train one more classifier and one more language
    model per seed: the cost is their measured training time per seed; a larger evaluation set
    is not costed (its time is not measured apart)."""
    seeded = [task for task, found in results.items() if len(found) > 1]
    per_seed = sum(float(np.mean([np.sum(r.get("history", {}).get("seconds", [np.nan]))
                                  for r in results[task]])) for task in seeded)

    def evaluation_set(row: Claim) -> dict[str, str]:
        task = TASKS.get(row.section)
        return {} if task is None else {EVALUATION_SET: task.eval_size}

    deciding.name_remedies(table, params, deciding.Rates(per_seed=per_seed), evaluation_set)


def claims_table(params: Mapping[str, Any], results: Mapping[str, Any],
                 curves: Mapping[str, Mapping[str, Curves]], train_iters: Mapping[str, int],
                 overparam: Sequence[Mapping[str, Any]] = ()) -> Claims:
    """The chapter's claims table, its rows recorded with ids (for :mod:`.prose`). ``curves``:
    split (``test``, ``train``, ``train_loss``) → task → every model's curves; ``train_iters``:
    task → its N."""
    table = Claims(FIGURE, str(getattr(params, "profile", params.get("profile", ""))),
                   paper=paper_claims.CLAIMS)
    models = {}
    for task in TASKS:
        found = results[task]
        models[task] = list(found) if isinstance(found, list | tuple) else [found]
        seeds = list(params.get("seeds", []))[:len(models[task])] or None
        task_claims(table, task, models[task],
                    {k: curves[k][task] for k in ("test", "train", "train_loss")}, params,
                    int(train_iters[task]), seeds,
                    baseline_values(task, models[task], results.get("baselines")))
    name_remedies(table, models, params)
    if len(overparam) > 1:
        add_overparam_claim(table, overparam, params)
    return table


def add_overparam_claim(table: Claims, overparam: Sequence[Mapping[str, Any]],
                        params: Mapping[str, Any]) -> None:
    """The book's own row: the paper's Figure 4 statement, made for iMAML ("the better the model
    is at overfitting the training dataset –i.e. low ℓ(z_N(θ*,N))– the less it benefits from
    more iterations at inference –i.e. higher D(N, ΔN)"), asked of the DEQ classifiers trained on
    nested training sets of the sizes ``op_sizes``: a decreasing rank association across the
    models between the training loss at N, ``L(N)``, and the training-loss increase at the
    largest count, ``D(N, ΔN_max)`` (:func:`i2o.verdicts.ranks.rank_association`: Kendall's τ, exact
    one-sided p ≤ 0.05). A rank statistic is scale-free: the sizes' training losses at N differ
    by orders of magnitude, which no difference or ratio of them compares on one scale. Decided
    when the best-fitting model is in the regime (meets ``cls_fit_accuracy``); with fewer than 4
    models no ordering can reach the level, which the row says."""
    ordered = sorted(overparam, key=lambda r: r["loss_at_n"])
    best = ordered[0]
    reached = []
    for r in ordered:
        curve = r["train_error"]
        reached.append((r["size"], 1.0 - float(curve.value[curve.at(curve.train_iters)]) / 100))
    gate = gates.fit_gate({f"{best['size']} images (best fit)": [reached[0][1]]},
                          float(params["cls_fit_accuracy"]))
    in_regime = [f"{size}" for size, acc in reached if acc >= float(params["cls_fit_accuracy"])]
    table.facts["overparam_in_regime"] = {"threshold": 100 * float(params["cls_fit_accuracy"]),
                                          "sizes": [int(size) for size in in_regime]}
    regime = (f"in the regime (training accuracy ≥ {100 * params['cls_fit_accuracy']:g} %): "
              + (", ".join(in_regime) + " images" if in_regime else "none"))
    losses = [float(r["loss_at_n"]) for r in ordered]
    increases = [float(r["train_loss"].gap[-1]) for r in ordered]
    decision = ranks.rank_association(losses, increases, direction=-1)
    text = "; ".join(
        f"{r['size']} images: loss at N {r['loss_at_n']:.3g}, D = {r['train_loss'].gap[-1]:+.2g}"
        f" ± {r['train_loss'].gap_se[-1]:.1g}" for r in ordered)
    table.decide(
        "The book's own: DEQs that fit their training set better (lower training loss at N) "
        "gain less from extra iterations: the training-loss increase D(N, ΔN) at the largest ΔN "
        "falls with the training loss at N across training-set sizes (the paper's Figure 4 "
        "statement, asked of DEQs)",
        gates.gated([gate, gates.Decision(True, regime)], decision, quote=True), text,
        "exact p ≤ 0.05",
        id="overparam")


def _task_numbers(prefix: str, curve: GapCurve) -> dict[str, str]:
    s = curve.summary()
    digits = 2 if "error" in curve.metric else 3
    return {f"{prefix}-n": str(curve.train_iters),
            f"{prefix}-at-n": f"{s['value_at_n']:.{digits}f}",
            f"{prefix}-n-max": str(int(s["n_max"])),
            f"{prefix}-at-max": f"{s['value_at_max']:.{digits}f}",
            f"{prefix}-at-1": f"{curve.value[0]:.{digits}f}",
            f"{prefix}-best-gap": f"{s['best_gap']:+.{digits}f} ± {s['best_gap_se']:.{digits}f}",
            f"{prefix}-best-n": str(int(s["best_gap_n"])),
            f"{prefix}-res-n": f"{s['residual_at_n']:.2g}",
            f"{prefix}-res-max": f"{s['residual_at_max']:.2g}"}


def numbers(results: GapsResults) -> dict[str, Any]:
    """The numbers the chapter's text quotes (``glue`` names → formatted values)."""
    out: dict[str, Any] = {}
    for prefix, curves in (("gaps", results.test), ("gaps-train", results.train),
                           ("gaps-trainloss", results.train_loss)):
        for task, curve in curves.items():
            out.update(_task_numbers(f"{prefix}-{task}", curve))
    out["gaps-baseline"] = f"{results.results['deq']['test_baseline_neg_psnr']:.2f}"
    out["gaps-seeds"] = str(len(results.params["seeds"]))
    return out


def claims(results: GapsResults) -> Claims:
    """The chapter's claims table (:func:`claims_table`), its rows recorded with ids."""
    return claims_table(results.params, results.results, results.curves,
                        {task: curve.train_iters for task, curve in results.test.items()},
                        results.overparam)
