"""The book's own near-equilibrium row on a converged solve, shared by the chapters that train DEQs
(deq_gaps' ``<task>_reference``, stability's ``<arm>_reference``).

A job with ``reference_iters > 0`` stores ``test_reference``: its test examples solved again by
the training solver until the relative residual is at most ``1e-4`` or ``reference_iters`` steps
(:func:`i2o.deq.reference.reference_solve`), scored per example as the sweep scores them. Set
beside the sweep's value at ``N`` on the same examples, it makes a two-count :class:`Curves`
(:func:`reference_curves`), so that the converged solve's improvement on ``N`` is read with the
machinery of every other row: paired over the seeds when there are several models, over the
examples when there is one (:meth:`Curves.improvement`). :func:`reference_check` reads it as
"no benefit beyond δ" (READING.md, principle 2) and leaves it undecided when a batch's solve did
not converge within its cap.

What is chapter-specific is passed in: which stored metric gives the curves' per-example values
(``metric``, e.g. deq_gaps' task metric, or stability's ``1 − error``), the unit and the decimals
shown. The chapter gates the row (its fit and regime gates); the row gates nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from i2o.verdicts import gates, readings
from i2o.verdicts.curves import Curves
from i2o.verdicts.margin_gates import Margin

#: From a reference solve's ``metrics`` (name → per-example values), the per-example values on
#: the scale of the curves it is compared with.
Metric = Callable[[Mapping[str, Any]], Any]


def reference_curves(results: Sequence[Mapping[str, Any]], test: Curves, train_iters: int,
                     metric: Metric) -> Curves | None:
    """Each model's per-example test values at N (from ``test``, the curves of the same models
    in the same order) and at its converged reference solve (the job's ``test_reference``, through
    ``metric``), as :class:`Curves` over the two "counts" ``[N, cap]`` (the same examples, so
    that :meth:`Curves.improvement` pairs them); ``None`` when a model has no reference solve."""
    if not results or any(r.get("test_reference") is None for r in results):
        return None
    found: list[Mapping[str, Any]] = [r["test_reference"] for r in results]
    cap = int(found[0]["cap"])
    at_n = test.at(train_iters)
    values = np.stack([np.stack([np.asarray(test.values[k])[:, at_n],
                                 np.asarray(metric(ref["metrics"]), dtype=np.float64)], axis=1)
                       for k, ref in enumerate(found)])
    residual = np.stack([np.stack([np.asarray(test.residual[k])[:, at_n],
                                   np.asarray(ref["residual_rel"], dtype=np.float64)], axis=1)
                         for k, ref in enumerate(found)])
    return Curves(np.asarray([train_iters, cap]), values, residual, test.sign, test.transform)


def reference_check(results: Sequence[Mapping[str, Any]], test: Curves, margin: Margin,
                    train_iters: int, metric: Metric, unit: str = "", digits: int = 3
                    ) -> tuple[gates.Decision, str]:
    """The book's own row, gating nothing (READING.md, "Book's own: near equilibrium"), asking
    more than the paper's guard ("increasing the number of iterations above N produces better
    approximation of the inner problem's solution, while not improving the performances",
    Section 4): at the solution itself, not only at the grid's counts. A solve run to
    convergence (relative residual ≤ 1e-4 within the cap, :mod:`i2o.deq.reference`) improves on
    N by less than ``margin``'s δ, read as :func:`i2o.verdicts.readings.no_benefit` on the 90 %
    interval of ``performance(converged) − performance(N)`` (:func:`reference_curves`: over the
    seeds, paired by seed, or over the examples of one network). Undecided when some batch's
    solve did not converge within the cap: it is then no converged reference; undecided too
    when the run made no reference solve. ``unit`` (with its leading space) and ``digits`` are
    how the interval is shown. Returns the decision and the measured text."""
    curves = reference_curves(results, test, train_iters, metric)
    if curves is None:
        return gates.undecided("no reference solve in this run (reference_factor = 0)",
                               gates.Gate.CONDITION), "not computed"
    refs = [r["test_reference"] for r in results]
    cap, tol = int(refs[0]["cap"]), float(refs[0]["tol"])
    batches = sum(len(ref["converged"]) for ref in refs)
    unconverged = sum(int(np.sum(~np.asarray(ref["converged"], dtype=bool))) for ref in refs)
    worst = max(float(np.max(ref["batch_residual_rel"])) for ref in refs)
    steps = np.concatenate([np.asarray(ref["steps"]) for ref in refs])
    ci = curves.improvement(cap, train_iters)
    shown = (f"improvement of the converged solve on N = {train_iters}: "
             f"{ci.describe(digits=digits, unit=unit)}; solve to relative "
             f"residual {tol:g} within {cap} steps: {batches - unconverged} of {batches} batches "
             f"converged (steps {int(steps.min())}–{int(steps.max())}, largest residual "
             f"{worst:.2g}); mean per-example residual {curves.residual_at(cap):.2g}")
    if unconverged:
        return gates.undecided(f"the reference solve did not converge in {unconverged} of "
                               f"{batches} batches within {cap} steps (largest batch residual "
                               f"{worst:.2g} > {tol:g})", gates.Gate.CONVERGENCE), shown
    return readings.no_benefit([ci], [cap], margin.delta,
                               what="improvement of the converged solve"), shown
