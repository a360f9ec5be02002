"""The stability chapter's claims, decided by gated predicates (:mod:`i2o.gates`).

Per seed ``s`` and arm, with ``acc_s(N')`` the test accuracy after ``N'`` test-time Broyden steps
and ``N`` the training count:

- ``deviation_s = mean_{N' ≠ N} |acc_s(N') − acc_s(N)|`` (how much a change of ``N'`` moves the
  accuracy);
- ``gain_s = max_{N' > N} acc_s(N') − acc_s(N)`` (what more iterations bring);
- ``loss_s = acc_s(N) − acc_s(min N')`` (what fewer iterations cost).

**Which models.** Every model is trained until it fits (:mod:`.jobs`); the claims are decided on the
models that meet the fit criterion (``train_accuracy ≥ fit_accuracy`` at N, own training images,
after training) when at least ``fit_quorum`` of each arm's do (:func:`i2o.gates.fit_quorum`;
the others are named), and none of those diverged (:mod:`i2o.train.health`); otherwise every claim
is undecided with the count.

**Margins** are pre-registered fractions (``margin_fraction``, the manifest gives the reason) of a
reference effect measured in the same run, on the same models (:func:`i2o.gates.relative_margin`):

- comparison of the arms: ``δ = f × mean deviation of the unrolled arm`` (the reference arm; the
  ratio form "IFT's change is at least ``1 − f`` of unrolled's");
- "more iterations do not help" per arm: ``δ = f × mean loss of that arm`` (the accuracy its
  models lose with the fewest iterations: the effect of ``N'`` the figure shows).

**Can the comparison fail?** A margin below the resolution of the measurement cannot be told from
evaluation noise; where accuracy hardly moves with ``N'``, "not more stable" then holds whatever
IFT does. The measurement is a change of accuracy between two counts on the same test images, so
its resolution is the standard error of a *paired* difference, ``sd_i(e_i(N') − e_i(N)) / √n``
over the test images ``i`` (``e`` the 0/1 error), averaged over ``N' ≠ N`` and the models of the
reference arm (without per-image errors: the largest binomial standard error of one accuracy,
``0.5 / √n_test``). Each claim with a margin is decided only when ``δ`` is at least that
resolution (:func:`i2o.gates.resolves`), and is otherwise undecided with that reason.

**Power.** Seeds vary more than test images: in this proxy one seed's mean change with ``N'``
spreads over several points, about as much as ``δ``. Every claim with a margin (the comparison
of the arms, "more iterations do not help") is therefore decided only when its interval's
half-width is at most ``POWER_RATIO × δ`` (one half, fixed with this rule: an interval that
narrow lies on one side of ``±δ`` unless the difference is within ``δ/2`` of it), and is
otherwise undecided with the number of seeds that would give that width
(:func:`i2o.gates.powered`). Without it, a difference near ``−δ`` is decided or not by the draw
of seeds.

Confidence intervals (90 %) are over the fitting seeds, in accuracy points. The comparison of
the arms is **paired by seed** (:func:`paired_difference`): a seed draws the same initial weights,
warm-up, batch order and dropout masks in both arms, so the interval is over the seeds that fit in
both arms of ``deviation_s(IFT) − deviation_s(unrolled)``. (Chosen after replicate 0 of commit
7a99af4 was read, where it narrowed the interval's half-width from 0.81 to 0.75 points without
changing a verdict; an unpaired Welch interval was used before.)

The residual row is a *sanity check* of the solver on the last iterate of each test solve
(``trace_rel``): per seed, the log-ratio of the mean last-iterate residual over the iterates
beyond ``N`` to the residual at ``N``; it holds when the interval over seeds lies below 0 (the
solver keeps converging), fails when it lies above 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from i2o import gates
from i2o.chapters.stability import FIGURE
from i2o.chapters.stability.runs import StabilityResults
from i2o.claims import Claims

LABELS = {"ift": "IFT", "unrolled": "unrolled"}
#: the arm whose change with N' is the reference effect of the comparison
REFERENCE_ARM = "unrolled"
#: a claim with a margin is decided only when its interval's half-width is at most this
#: fraction of δ (:func:`i2o.gates.powered`)
POWER_RATIO = 0.5


def per_seed(runs: Sequence[Mapping[str, Any]], test_iters: Sequence[int], train_iter: int
             ) -> dict[str, Any]:
    """The per-seed measures of the module docstring, fit, epochs, health, last-iterate
    residuals."""
    its = np.asarray(test_iters)
    at = int(np.flatnonzero(its == train_iter)[0])
    acc = np.stack([np.asarray(r["test"]["accuracy"], dtype=float) for r in runs])
    above = its > train_iter
    trace = [np.asarray(r["test"]["trace_rel"], dtype=float) for r in runs]
    beyond = [t[train_iter + 1:int(its.max()) + 1] for t in trace]
    return {
        "at_train": acc[:, at],
        "deviation": np.abs(acc[:, its != train_iter] - acc[:, [at]]).mean(axis=1),
        "gain_more": (acc[:, above].max(axis=1) - acc[:, at]) if above.any()
        else np.zeros(len(runs)),
        "loss_fewer": acc[:, at] - acc[:, int(np.argmin(its))],
        "last_residual_at_train": np.array([t[train_iter] for t in trace]),
        "last_residual_beyond": np.array([b.mean() if b.size else np.nan for b in beyond]),
        "train_accuracy": np.array([float(r.get("train_accuracy", np.nan)) for r in runs]),
        "epochs_used": np.array([float(r.get("epochs_used", np.nan)) for r in runs]),
        "cap_reached": np.array([bool(r.get("cap_reached", False)) for r in runs]),
        "diverged": [str(r.get("diverged", "")) for r in runs],
        "paired_se": np.array([paired_se(r["test"].get("errors"), at) for r in runs]),
    }


def paired_se(errors: Any, at: int) -> float:
    """Mean over counts ``N' ≠ N`` of the standard error of ``acc(N') − acc(N)`` over the test
    images (paired: the same images), from per-image 0/1 errors (images × counts); NaN without
    them."""
    if errors is None:
        return float("nan")
    e = np.asarray(errors, dtype=float)
    if e.ndim != 2 or e.shape[0] < 2:
        return float("nan")
    d = np.delete(e - e[:, [at]], at, axis=1)
    return float((d.std(axis=0, ddof=1) / np.sqrt(e.shape[0])).mean())


def paired_difference(every: Mapping[str, Mapping[str, Any]], masks: Mapping[str, np.ndarray]
                      ) -> tuple[gates.Interval | None, gates.Decision]:
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
    if pairs[0] is not True:
        return None, pairs
    differences = 100 * (every["ift"]["deviation"][both] - every["unrolled"]["deviation"][both])
    return gates.interval(differences, "seed pairs"), pairs


def _points(x: float) -> str:
    return f"{100 * x:.2f}"


def resolution_points(test_size: int, paired: Sequence[float] = ()) -> tuple[float, str]:
    """The resolution of an accuracy change, in points, and what it is: the mean paired standard
    error of ``paired`` (:func:`paired_se`, fractions) when known, else the largest binomial
    standard error of one accuracy on ``test_size`` images."""
    known = np.asarray(paired, dtype=float)
    known = known[np.isfinite(known)]
    if known.size:
        return (100 * float(known.mean()), f"mean standard error of a paired accuracy change on "
                f"{test_size:,} test images")
    return 100 * 0.5 / float(np.sqrt(test_size)), f"of one accuracy on {test_size:,} test images"


def _seed_names(params: Mapping[str, Any], n: int) -> list[str]:
    seeds = list(params.get("seeds", range(n)))
    return [f"seed {s}" for s in seeds[:n]] + [f"#{i}" for i in range(len(seeds), n)]


def _models(m: Mapping[str, Any], names: Sequence[str]) -> str:
    """Per model: training accuracy, epochs used, and '(cap)' for a model that never fitted."""
    return ", ".join(f"{name} {100 * a:.1f} % after {e:g} epochs" + (" (cap)" if cap else "")
                     for name, a, e, cap in zip(names, m["train_accuracy"], m["epochs_used"],
                                                m["cap_reached"], strict=True))


def claims_table(params: Mapping[str, Any], runs: Mapping[str, Sequence[Mapping[str, Any]]],
                 costs: Mapping[str, Mapping[str, Any]] | None = None) -> Claims:
    """The chapter's claims table, its rows recorded by id for :mod:`.prose` (``health``,
    ``fit``, ``not_more_stable``, ``equally_stable``, ``<arm>_no_gain``, ``<arm>_fewer_hurt``,
    ``<arm>_residual``, ``memory`` when the step costs were measured).

    ``runs`` maps each arm to its seeds' job results at the training N ``train_iters[0]``.
    """
    train_n = int(params["train_iters"][0])
    its = list(params["test_iters"])
    fraction = float(params["margin_fraction"])
    table = Claims(FIGURE, str(getattr(params, "profile", params.get("profile", ""))))
    every = {arm: per_seed(runs[arm], its, train_n) for arm in LABELS}
    names = {arm: _seed_names(params, len(runs[arm])) for arm in LABELS}

    flagged = [f"{LABELS[a]} {names[a][i]}: {why}" for a in LABELS
               for i, why in enumerate(every[a]["diverged"]) if why]
    healthy, _ = gates.health_gate({LABELS[a]: every[a]["diverged"] for a in LABELS})
    table.add(
        "Training health: no model diverged (non-finite loss, final loss above its start, or "
        "chance-level training accuracy)", healthy is True,
        "; ".join(flagged) if flagged else f"{sum(len(every[a]['diverged']) for a in LABELS)} "
        "models checked", check="warning row: a flagged model that fits makes the claims "
        "undecided", id="health")

    quorum = int(params["fit_quorum"])
    fit, masks = gates.fit_quorum({LABELS[a]: every[a]["train_accuracy"] for a in LABELS},
                                  float(params["fit_accuracy"]), quorum,
                                  {LABELS[a]: names[a] for a in LABELS})
    m = {arm: {k: (np.asarray(v)[masks[LABELS[arm]]] if not isinstance(v, list) else
                   [x for x, ok in zip(v, masks[LABELS[arm]], strict=True) if ok])
               for k, v in every[arm].items()} for arm in LABELS}
    capped = [f"{LABELS[a]} {names[a][i]}" for a in LABELS
              for i in np.flatnonzero(every[a]["cap_reached"])]
    table.add(
        f"Fit criterion: at least {quorum} models per arm reach ≥ "
        f"{100 * float(params['fit_accuracy']):g} % training accuracy at N = {train_n} (the "
        "regime of Theorem 1 / Corollary 1), each trained until it fits plus "
        f"{params['extra_epochs']} epochs, at most {params['epochs']}",
        fit[0] is True, "; ".join(f"{LABELS[a]}: {_models(every[a], names[a])}" for a in LABELS)
        + (f"; reached the cap without fitting: {', '.join(capped)}" if capped else ""),
        check=fit[1], id="fit")

    health = gates.health_gate({LABELS[a]: m[a]["diverged"] for a in LABELS})
    n_seeds = min(len(m[a]["at_train"]) for a in LABELS)
    power = gates.enough(n_seeds, 2, f"{n_seeds}+ fitting seeds per arm",
                         f"{n_seeds} fitting seed in an arm: a confidence interval over seeds "
                         "needs ≥ 2")
    gate = gates.combine(health, fit, power)

    def margin_of(arm: str, key: str, what: str) -> tuple[float, str, gates.Decision]:
        reference = m[arm][key]
        ref = float(100 * np.mean(reference)) if len(reference) else float("nan")
        if not np.isfinite(ref):
            return float("nan"), "n/a", (None, f"no {what} measured")
        delta = gates.relative_margin(fraction, ref)
        text = f"±{delta:.2f} points = {fraction:g} × {what} ({ref:.2f} points)"
        resolution, floor = resolution_points(int(params["test_size"]), m[arm]["paired_se"])
        return delta, text, gates.resolves(
            delta, resolution, f"{fraction:g} × {what} {ref:.2f} points", floor)

    if gate[0] is True:
        delta, delta_text, resolved = margin_of(
            REFERENCE_ARM, "deviation", f"the {LABELS[REFERENCE_ARM]} arm's mean "
            f"|acc(N') − acc({train_n})|")
        between, pairs = paired_difference(every, masks)
        value = (f"mean |acc(N') − acc({train_n})|: IFT {_points(m['ift']['deviation'].mean())}, "
                 f"unrolled {_points(m['unrolled']['deviation'].mean())} points; IFT − unrolled "
                 + (between.describe(1, " pt") if between else "not computed"))
        compare = gates.combine(gate, resolved, pairs)
        if compare[0] is True:
            compare = gates.combine(compare, gates.powered(between, delta, POWER_RATIO))
        table.decide(
            f"IFT is not more stable than unrolled: the IFT networks' accuracy change away from "
            f"N = {train_n} is not smaller by more than δ", gates.decide(
                compare, gates.not_below(between, delta) if compare[0] else compare),
            value, delta_text, id="not_more_stable")
        table.decide(
            "IFT and unrolled are equally stable (the difference of their accuracy changes lies "
            "within ±δ)", gates.decide(
                compare, gates.equivalent(between, delta) if compare[0] else compare),
            value, delta_text, id="equally_stable")
    else:
        for key, text in (("not_more_stable", "IFT is not more stable than unrolled"),
                          ("equally_stable", "IFT and unrolled are equally stable")):
            table.decide(text, gate, "not computed: " + gate[1],
                         f"{fraction:g} × the unrolled arm's mean change", id=key)

    for arm, label in LABELS.items():
        s = m[arm]
        if gate[0] is True:
            delta, delta_text, resolved = margin_of(
                arm, "loss_fewer", f"the {label} arm's loss acc({train_n}) − acc({min(its)})")
            gain = gates.interval(100 * s["gain_more"])
            loss = gates.interval(100 * s["loss_fewer"])
            gain_gate = gates.combine(gate, resolved)
            if gain_gate[0] is True:
                gain_gate = gates.combine(gain_gate, gates.powered(gain, delta, POWER_RATIO))
            gain_d = gates.not_above(gain, delta) if gain_gate[0] else gain_gate
            loss_d = gates.positive(loss)
            gain_v = f"best gain over N' > {train_n}: " + gain.describe(1, " pt")
            loss_v = f"acc({train_n}) − acc({min(its)}): " + loss.describe(1, " pt")
        else:
            gain_d = loss_d = (None, "")
            gain_gate = gate
            gain_v = loss_v = "not computed: " + gate[1]
            delta_text = f"{fraction:g} × the {label} arm's loss at N' = {min(its)}"
        table.decide(
            f"{label}: more test iterations than in training do not raise accuracy by more than "
            "δ (inner-iterations overfitting)", gates.decide(gain_gate, gain_d), gain_v,
            delta_text, id=f"{arm}_no_gain")
        table.decide(
            f"{label}: fewer test iterations ({min(its)}) than in training lower accuracy",
            gates.decide(gate, loss_d), loss_v, "0", id=f"{arm}_fewer_hurt")
        every_model = every[arm]  # a check of the solver: every model, fitting or not
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.log10(every_model["last_residual_beyond"]
                             / every_model["last_residual_at_train"])
        if len(ratio) >= 2 and np.all(np.isfinite(ratio)):
            falling = gates.interval(ratio)
            residual_d = gates.decide(health, gates.negative(falling))
            residual_v = ("log10(mean last-iterate residual over N' in "
                          f"({train_n}, {max(its)}] / residual at N = {train_n}): "
                          + falling.describe(1, "", 2))
        else:
            residual_d = (None, "needs ≥ 2 seeds with finite residuals")
            residual_v = "not computed"
        table.decide(
            f"Sanity check, {label}: the residual of the last iterate keeps decreasing beyond "
            f"N = {train_n} (the solver is not stuck; every model)", residual_d,
            residual_v + f"; mean residual {np.mean(every_model['last_residual_at_train']):.3g} "
            f"at N = {train_n}, {np.mean(every_model['last_residual_beyond']):.3g} beyond",
            id=f"{arm}_residual")
    if costs is not None:
        more, _ = gates.compare(costs["unrolled"]["peak_mb"], ">", costs["ift"]["peak_mb"])
        table.add(
            "Unrolled training needs more memory per step than IFT", more,
            f"peak +{costs['unrolled']['peak_mb']:.0f} MB unrolled vs "
            f"+{costs['ift']['peak_mb']:.0f} MB IFT", check="one measurement per arm",
            id="memory")
    return table


def numbers(results: StabilityResults) -> dict[str, Any]:
    """The numbers the chapter's text quotes (``glue`` names → formatted values)."""
    params = results.params
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
    out["stability-collect-seconds"] = f"{results.cost.seconds:.0f}"  # wall time of collect
    for arm in LABELS:
        cost = (results.costs or {}).get(arm)
        out[f"stability-{arm}-step-seconds"] = f"{cost['cpu_seconds']:.2f}" if cost else "n/a"
        out[f"stability-{arm}-step-mb"] = f"{cost['peak_mb']:.0f}" if cost else "n/a"
    return out


def claims(results: StabilityResults) -> Claims:
    """:func:`claims_table` of the chapter's results."""
    return claims_table(results.params, results.runs, results.costs)
