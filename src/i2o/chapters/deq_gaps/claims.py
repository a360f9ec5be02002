"""The deq_gaps chapter's claims, decided by gated predicates (:mod:`i2o.gates`).

For each task's trained DEQ and each data split, with ``gap(n) = P(n) − P(N)`` (lower is better,
so a positive gap means worse than at the training N):

- *fewer iterations hurt*: :func:`i2o.gates.positive` on the gap at the smallest count;
- *more iterations bring no improvement beyond δ*: :func:`i2o.gates.not_below` on the most
  negative gap over ``n > N`` (holds when its interval lies above ``−δ``, fails when it lies
  below ``−δ``). Taking the most negative of several counts favours finding an improvement, so a
  verdict "holds" is conservative;
- *sanity check*: the relative residual of the **last** iterate (``trace_rel``) at the largest
  count is below its value at ``N`` (not the returned lowest-residual iterate, which cannot rise).

There is one trained model per task, so every interval (90 %, Student's t) is over the
**evaluation examples** (paired per-example differences), not over training seeds. A task's claims
are decided only when its model fits its training set by the task's criterion (:data:`FIT`) and
its training did not diverge (:mod:`i2o.train.health`); otherwise they are ``null`` with the
reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from i2o import gates
from i2o.chapters.deq_gaps.curves import GapCurve
from i2o.claims import Claim, Claims
from i2o.train import health

NAMES = {"classification": "CIFAR-10 MDEQ", "language": "language model",
         "deq": "super-resolution DEQ", "elder": "super-resolution ELDER"}
#: task → (fit-criterion parameter, margin parameter, margin unit)
PARAMETERS = {"classification": ("cls_fit_accuracy", "cls_margin", "error points"),
              "language": ("lm_fit_nll", "lm_margin", "perplexity"),
              "deq": ("inv_fit_db", "inv_margin", "dB"),
              "elder": ("inv_fit_db", "inv_margin", "dB")}


def fit_check(task: str, result: Mapping[str, Any], train: GapCurve, train_loss: GapCurve,
              params: Mapping[str, Any]) -> gates.Decision:
    """The task's fit criterion, measured on its training examples at its training N.

    - classification: training accuracy ``≥ cls_fit_accuracy``;
    - language model: training NLL ``≤ lm_fit_nll`` nats per character;
    - inverse problems: training PSNR at least ``inv_fit_db`` dB above the initial guess ``A⁺y``
      (a regression network cannot be asked to interpolate; it must at least have learned).
    """
    at = train.at(train.train_iters)
    if task == "classification":
        accuracy = 1.0 - float(train.value[at]) / 100.0
        return gates.fit_gate({NAMES[task]: [accuracy]}, float(params["cls_fit_accuracy"]))
    if task == "language":
        nll = float(train_loss.value[train_loss.at(train_loss.train_iters)])
        return gates.fit_gate({NAMES[task]: [nll]}, float(params["lm_fit_nll"]),
                              "training NLL (nats/char)", higher_is_better=False, unit="",
                              scale=1.0)
    gain = float(result["train_baseline_neg_psnr"]) - float(train.value[at])
    return gates.fit_gate({NAMES[task]: [gain]}, float(params["inv_fit_db"]),
                          "training PSNR gain over A⁺y (dB)", unit=" dB", scale=1.0)


def health_check(task: str, result: Mapping[str, Any], train: GapCurve) -> gates.Decision:
    history = result.get("history", {})
    losses = np.asarray(history.get("loss", []), dtype=float)
    score = chance = None
    if task == "classification":
        score, chance = 1.0 - float(train.value[train.at(train.train_iters)]) / 100.0, 0.1
    stopped = np.asarray(history.get("nonfinite_step", []), dtype=float).ravel()
    flag = health.diverged(losses, score, chance,
                           nonfinite_step=int(stopped[0]) if stopped.size else None)
    return gates.health_gate({NAMES[task]: [flag]})


def _ci(curve: GapCurve, index: int, n_examples: int) -> gates.Interval:
    return gates.from_se(float(curve.gap[index]), float(curve.gap_se[index]), n_examples,
                         "examples")


def last_residuals(sweep: Mapping[str, Any], train_iters: int) -> tuple[float, float]:
    """Mean last-iterate relative residual at ``N`` and at the largest count of a sweep."""
    trace = np.asarray(sweep["trace_rel"], dtype=float)
    return float(trace[:, train_iters].mean()), float(trace[:, -1].mean())


def task_claims(table: Claims, rows: dict[str, Claim], task: str, result: Mapping[str, Any],
                curves: Mapping[str, GapCurve], train_loss: GapCurve,
                params: Mapping[str, Any]) -> None:
    """Add one task's rows (both splits) to ``table`` and ``rows`` (keys ``<task>_<what>``)."""
    _, margin_name, unit = PARAMETERS[task]
    margin = float(params[margin_name])
    name = NAMES[task]
    healthy = health_check(task, result, curves["train"])
    gate = gates.combine(healthy, fit_check(task, result, curves["train"], train_loss, params))
    rows[f"{task}_gate"] = table.add(
        f"{name}: in the regime of the claims (fits its training set, did not diverge)",
        gate[0] is True, f"training {curves['train'].metric} at N = {curves['train'].train_iters}: "
        f"{curves['train'].value[curves['train'].at(curves['train'].train_iters)]:.4g}",
        check=gate[1])
    for split, data in (("test", "test data"), ("train", "training data")):
        curve = curves[split]
        n = int(np.asarray(result[split]["batch_sizes"]).sum()) if "batch_sizes" in result[split] \
            else int(np.asarray(next(iter(result[split]["metrics"].values()))).shape[0])
        few = _ci(curve, 0, n)
        rows[f"{task}_{split}_fewer_hurt"] = table.decide(
            f"{name}, {data}: fewer iterations ({int(curve.iterations[0])}) than in training "
            f"(N = {curve.train_iters}) hurt", gates.decide(gate, gates.positive(few)),
            f"gap at {int(curve.iterations[0])}: {few.describe(digits=3)} ({curve.metric})", "0")
        above = np.flatnonzero(curve.delta > 0)
        if above.size == 0:
            continue
        best = int(above[np.nanargmin(curve.gap[above])])
        more = _ci(curve, best, n)
        rows[f"{task}_{split}_no_gain"] = table.decide(
            f"{name}, {data}: more iterations than N bring no improvement beyond δ",
            gates.decide(gate, gates.not_below(more, margin)),
            f"most negative gap above N, at {int(curve.iterations[best])}: "
            f"{more.describe(digits=3)} ({curve.metric})", f"±{margin:g} {unit}")
    at_n, at_max = last_residuals(result["test"], curves["test"].train_iters)
    rows[f"{task}_residual"] = table.decide(
        f"Sanity check, {name}: the residual of the last iterate keeps decreasing beyond N",
        gates.decide(healthy, (at_max < at_n, "last iterate, test data")),
        f"last-iterate relative residual {at_n:.3g} at N = {curves['test'].train_iters}, "
        f"{at_max:.3g} at {int(curves['test'].iterations[-1])}")


def claims_table(params: Mapping[str, Any], results: Mapping[str, Any],
                 test: Mapping[str, GapCurve], train: Mapping[str, GapCurve],
                 train_loss: Mapping[str, GapCurve],
                 overparam: Sequence[Mapping[str, Any]] = ()) -> tuple[Claims, dict[str, Claim]]:
    """The chapter's claims table and its rows by key (for :mod:`.prose`)."""
    table = Claims("deq_gaps", str(getattr(params, "profile", params.get("profile", ""))))
    rows: dict[str, Claim] = {}
    for task in NAMES:
        task_claims(table, rows, task, results[task], {"test": test[task], "train": train[task]},
                    train_loss[task], params)
    if len(overparam) > 1:
        add_overparam_claim(table, rows, overparam, params)
    return table, rows


def add_overparam_claim(table: Claims, rows: dict[str, Claim],
                        overparam: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> None:
    """Beyond the paper: the better a DEQ fits its training set, the larger the training-loss
    increase D(N, ΔN) at the largest ΔN. Decided when the best-fitting model meets the
    classification fit criterion: D ordered inversely to the training loss at N, and the
    best-fitting model's D positive (90 % CI over training examples)."""
    ordered = sorted(overparam, key=lambda r: r["loss_at_n"])
    best = ordered[0]
    accuracy = 1.0 - float(best["train_error"].value[best["train_error"].at(
        best["train_error"].train_iters)]) / 100.0
    gate = gates.fit_gate({f"{best['size']} images": [accuracy]},
                          float(params["cls_fit_accuracy"]))
    curve = best["train_loss"]
    ci = gates.from_se(float(curve.gap[-1]), float(curve.gap_se[-1]),
                       min(int(params["cls_eval_size"]), int(best["size"])), "examples")
    increases = [r["train_loss"].gap[-1] for r in ordered]
    ordered_ok = bool(np.all(np.diff(increases) <= 0))
    holds, why = gates.positive(ci)
    decision = (holds and ordered_ok if holds is not None else None,
                f"{why}; D ordered by fit: {ordered_ok}")
    text = "; ".join(f"{r['size']} images: loss {r['loss_at_n']:.3g}, "
                     f"D = {r['train_loss'].gap[-1]:+.2g} ± {r['train_loss'].gap_se[-1]:.1g}"
                     for r in ordered)
    rows["overparam"] = table.decide(
        "DEQs that fit their training set better (lower training loss) lose more from extra "
        "iterations (larger D(N, ΔN) at the largest ΔN; the best-fitting one > 0)",
        gates.decide(gate, decision), text, "0")


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


def numbers(params: Mapping[str, Any], results: Any) -> dict[str, str]:
    """The numbers the chapter's text quotes (``glue`` names → formatted values), from a
    :class:`.runs.GapsResults`."""
    out: dict[str, str] = {}
    for prefix, curves in (("gaps", results.test), ("gaps-train", results.train),
                           ("gaps-trainloss", results.train_loss)):
        for task, curve in curves.items():
            out.update(_task_numbers(f"{prefix}-{task}", curve))
    out["gaps-baseline"] = f"{results.results['deq']['test_baseline_neg_psnr']:.2f}"
    return out


def claims(params: Mapping[str, Any], results: Any) -> tuple[Claims, dict[str, Claim]]:
    """:func:`claims_table` for a :class:`.runs.GapsResults`."""
    return claims_table(params, results.results, results.test, results.train,
                        results.train_loss, results.overparam)
