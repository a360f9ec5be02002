"""The stability chapter's claims, decided by gated predicates (:mod:`i2o.gates`).

Per seed ``s`` and arm, with ``acc_s(N')`` the test accuracy after ``N'`` test-time Broyden steps
and ``N`` the training count:

- ``deviation_s = mean_{N' ≠ N} |acc_s(N') − acc_s(N)|`` (how much a change of ``N'`` moves the
  accuracy);
- ``gain_s = max_{N' > N} acc_s(N') − acc_s(N)`` (what more iterations bring);
- ``loss_s = acc_s(N) − acc_s(min N')`` (what fewer iterations cost).

Confidence intervals (90 %) are over seeds, Welch's for the difference between arms, in accuracy
points; the margin ``δ`` is the manifest's ``margin`` (accuracy as a fraction) × 100. The
paper's claims are decided only when every model of both arms fits its training set
(``train_accuracy ≥ fit_accuracy`` at its training N, on its own training images) and none
diverged (:mod:`i2o.train.health`).

The residual row is a *sanity check* of the solver, on the **last** iterate of each test solve
(``trace_rel``), not on the lowest-residual iterate the solver returns (which cannot rise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from i2o import gates
from i2o.claims import Claim, Claims

LABELS = {"ift": "IFT", "unrolled": "unrolled"}


def per_seed(runs: Sequence[Mapping[str, Any]], test_iters: Sequence[int], train_iter: int
             ) -> dict[str, np.ndarray]:
    """The per-seed measures of the module docstring, fit, health, last-iterate residuals."""
    its = np.asarray(test_iters)
    at = int(np.flatnonzero(its == train_iter)[0])
    acc = np.stack([np.asarray(r["test"]["accuracy"], dtype=float) for r in runs])
    above = its > train_iter
    trace = [np.asarray(r["test"]["trace_rel"], dtype=float) for r in runs]
    return {
        "at_train": acc[:, at],
        "deviation": np.abs(acc[:, its != train_iter] - acc[:, [at]]).mean(axis=1),
        "gain_more": (acc[:, above].max(axis=1) - acc[:, at]) if above.any()
        else np.zeros(len(runs)),
        "loss_fewer": acc[:, at] - acc[:, int(np.argmin(its))],
        "last_residual_at_train": np.array([t[train_iter] for t in trace]),
        "last_residual_at_max": np.array([t[int(its.max())] for t in trace]),
        "train_accuracy": np.array([float(r.get("train_accuracy", np.nan)) for r in runs]),
        "diverged": [str(r.get("diverged", "")) for r in runs],
    }


def _points(x: float) -> str:
    return f"{100 * x:.2f}"


def claims_table(params: Mapping[str, Any], runs: Mapping[str, Sequence[Mapping[str, Any]]],
                 costs: Mapping[str, Mapping[str, Any]] | None = None
                 ) -> tuple[Claims, dict[str, Claim]]:
    """The chapter's claims table and its rows by key (for :mod:`.prose`).

    ``runs`` maps each arm to its seeds' job results at the training N ``train_iters[0]``.
    """
    train_n = int(params["train_iters"][0])
    its = list(params["test_iters"])
    margin = 100 * float(params["margin"])  # every interval below is in accuracy points
    table = Claims("stability", str(getattr(params, "profile", params.get("profile", ""))))
    rows: dict[str, Claim] = {}
    m = {arm: per_seed(runs[arm], its, train_n) for arm in LABELS}
    delta = f"±{margin:g} accuracy points"

    health = gates.health_gate({LABELS[a]: m[a]["diverged"] for a in LABELS})
    fit = gates.fit_gate({LABELS[a]: m[a]["train_accuracy"] for a in LABELS},
                         float(params["fit_accuracy"]))
    n_seeds = min(len(m[a]["at_train"]) for a in LABELS)
    power = ((True, f"{n_seeds} seeds per arm") if n_seeds >= 2 else
             (None, f"{n_seeds} seed per arm: a confidence interval over seeds needs ≥ 2"))
    gate = gates.combine(health, fit, power)

    flagged = [f"{LABELS[a]} seed #{i}: {why}" for a in LABELS
               for i, why in enumerate(m[a]["diverged"]) if why]
    rows["health"] = table.add(
        "Training health: no model diverged (non-finite loss, final loss above its start, or "
        "chance-level training accuracy)", not flagged,
        "; ".join(flagged) if flagged else f"{sum(len(m[a]['diverged']) for a in LABELS)} "
        "models checked", check="warning row: a flagged model makes its claims undecided")
    accs = "; ".join(f"{LABELS[a]} " + ", ".join(f"{100 * v:.1f}" for v in m[a]["train_accuracy"])
                     + " %" for a in LABELS)
    rows["fit"] = table.add(
        f"Fit criterion: every model reaches ≥ {100 * float(params['fit_accuracy']):g} % training "
        f"accuracy at N = {train_n} (the regime of Theorem 1 / Corollary 1)",
        fit[0] is True, f"training accuracy per seed: {accs}", check=fit[1])

    if gate[0] is True:
        between = gates.difference(100 * m["ift"]["deviation"], 100 * m["unrolled"]["deviation"])
        value = (f"mean |acc(N') − acc({train_n})|: IFT {_points(m['ift']['deviation'].mean())}, "
                 f"unrolled {_points(m['unrolled']['deviation'].mean())} points; IFT − unrolled "
                 + between.describe(1, " pt"))
        rows["not_more_stable"] = table.decide(
            f"IFT is not more stable than unrolled: the IFT networks' accuracy change away from "
            f"N = {train_n} is not smaller by more than δ", gates.decide(
                gate, gates.not_below(between, margin)), value, delta)
        rows["equally_stable"] = table.decide(
            "IFT and unrolled are equally stable (the difference of their accuracy changes lies "
            "within ±δ)", gates.decide(gate, gates.equivalent(between, margin)), value, delta)
    else:
        for key, text in (("not_more_stable", "IFT is not more stable than unrolled"),
                          ("equally_stable", "IFT and unrolled are equally stable")):
            rows[key] = table.decide(text, gate, "not computed: " + gate[1], delta)

    for arm, label in LABELS.items():
        s = m[arm]
        if gate[0] is True:
            gain = gates.interval(100 * s["gain_more"])
            loss = gates.interval(100 * s["loss_fewer"])
            gain_d, loss_d = gates.not_above(gain, margin), gates.positive(loss)
            gain_v = f"best gain over N' > {train_n}: " + gain.describe(1, " pt")
            loss_v = f"acc({train_n}) − acc({min(its)}): " + loss.describe(1, " pt")
        else:
            gain_d = loss_d = (None, "")
            gain_v = loss_v = "not computed: " + gate[1]
        rows[f"{arm}_no_gain"] = table.decide(
            f"{label}: more test iterations than in training do not raise accuracy by more than "
            "δ (inner-iterations overfitting)", gates.decide(gate, gain_d), gain_v, delta)
        rows[f"{arm}_fewer_hurt"] = table.decide(
            f"{label}: fewer test iterations ({min(its)}) than in training lower accuracy",
            gates.decide(gate, loss_d), loss_v, "0")
        lower = s["last_residual_at_max"] < s["last_residual_at_train"]
        rows[f"{arm}_residual"] = table.decide(
            f"Sanity check, {label}: the residual of the last iterate keeps decreasing beyond "
            f"N = {train_n} (the solver is not stuck)",
            gates.decide(health, (bool(np.all(lower)), f"{int(lower.sum())}/{lower.size} seeds "
                                  f"lower at N' = {max(its)}")),
            f"last-iterate relative residual {np.mean(s['last_residual_at_train']):.3g} at "
            f"N = {train_n}, {np.mean(s['last_residual_at_max']):.3g} at N' = {max(its)}")
    if costs is not None:
        rows["memory"] = table.add(
            "Unrolled training needs more memory per step than IFT",
            costs["unrolled"]["peak_mb"] > costs["ift"]["peak_mb"],
            f"peak +{costs['unrolled']['peak_mb']:.0f} MB unrolled vs "
            f"+{costs['ift']['peak_mb']:.0f} MB IFT", check="one measurement per arm")
    return table, rows


def numbers(params: Mapping[str, Any], results: Any) -> dict[str, str]:
    """The numbers the chapter's text quotes (``glue`` names → formatted values), from a
    :class:`.runs.StabilityResults`."""
    its = np.asarray(params["test_iters"])
    out: dict[str, str] = {}
    for arm, s in results.summary.items():
        out[f"stability-{arm}-acc"] = f"{100 * s['at_train'].mean():.1f}"
        out[f"stability-{arm}-deviation"] = f"{100 * s['deviation'].mean():.2f}"
        out[f"stability-{arm}-gain-more"] = f"{100 * s['gain_more'].mean():+.2f}"
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
    out["stability-collect-seconds"] = f"{results.collect_seconds:.0f}"
    for arm in LABELS:
        cost = (results.costs or {}).get(arm)
        out[f"stability-{arm}-step-seconds"] = f"{cost['cpu_seconds']:.2f}" if cost else "n/a"
        out[f"stability-{arm}-step-mb"] = f"{cost['peak_mb']:.0f}" if cost else "n/a"
    return out


def claims(params: Mapping[str, Any], results: Any) -> tuple[Claims, dict[str, Claim]]:
    """:func:`claims_table` for a :class:`.runs.StabilityResults`."""
    return claims_table(params, results.runs, results.costs)
