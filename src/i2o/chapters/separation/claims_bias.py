"""The claims of Section 3 (the implicit bias of the diagonal linear DEQ): Theorem 3's argmin,
with either sign, the density of its interpolant, and the rebuttal's Figure 2 (the density of a
ReLU DEQ's features, measured on the GOTU task).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from i2o.chapters.separation.claims_fit import MARGIN, seen_fit, symmetric_gate
from i2o.compute.profiles import Params
from i2o.verdicts import gates, margins


def problem_seeds(diagonal: dict[str, Any]) -> list[str]:
    return sorted(key for key in diagonal if key.startswith("s") and key[1:].isdigit())


def argmin_claim(diagonal: dict[str, Any], sign: str, p: Params,
                 kkt_tol: float = 1e-6) -> gates.Decision:
    """The gradient flow's limit is the argmin of Q_sign: relative distance ≤ ``argmin_rtol`` to
    the convex solver's minimizer. Where the solver finds none (Q_− can be unbounded below), the
    limit is tested directly: it fails when it is not even a KKT point (null-space part of ∇Q
    above ``kkt_tol``), and is undecided otherwise. Gate: the gradient flow interpolated on
    every problem (relative residual not above ``10 × diag_tol``); the problems' verdicts are
    combined by :func:`i2o.verdicts.gates.all_of`."""
    seeds = problem_seeds(diagonal)

    def interpolated() -> Iterator[gates.Decision]:
        for seed in seeds:
            flow = diagonal[seed]["flow"]
            residual = float(flow["relative_residual"])
            yield gates.condition(  # not "≤": a NaN residual does not close the gate
                not residual > 10 * p["diag_tol"],
                f"{seed}: the gradient flow did not interpolate (relative residual "
                f"{residual:.1e} at time {flow['time']:g})")

    def problem(seed: str) -> gates.Decision:
        sol = diagonal[seed][sign]
        stationarity = float(sol["stationarity"])
        if bool(sol["found"]):
            distance = float(sol["distance"])
            return gates.compare(distance, "<=", p["argmin_rtol"]).with_reason(
                f"{seed}: distance {distance:.1e} (gradient descent "
                f"{float(sol['distance_gd']):.1e}), KKT {stationarity:.1e}")
        text = (f"{seed}: no minimizer found ({sol['reason']}); the limit's KKT residual is "
                f"{stationarity:.1e}")
        # no minimizer to compare with: the limit can only be refuted, when it is no KKT
        # point (a NaN residual refutes nothing)
        refuted = gates.compare(stationarity, ">", kkt_tol).holds is True
        return gates.gated([gates.condition(refuted, text)], gates.Decision(False, text))

    def measured() -> gates.Decision:
        found = gates.all_of(problem(seed) for seed in seeds)
        return found.with_reason(
            found.reason + f" (the argmin needs distance ≤ {p['argmin_rtol']:g})")

    return gates.gated(interpolated(), measured)


def density_claim(diagonal: dict[str, Any], p: Params) -> gates.Decision:
    """The DEQ's interpolant is denser than the diagonal linear network's, on every problem (a
    larger participation ratio: :func:`i2o.verdicts.gates.compare`, on all of them:
    :func:`i2o.verdicts.gates.all_of`). Gate: both models interpolated on every problem."""
    seeds = problem_seeds(diagonal)
    interpolated = (gates.condition(  # not "≤": a NaN residual does not close the gate
        not float(diagonal[seed][model]["relative_residual"]) > 10 * p["diag_tol"],
        f"{seed}: the {model.upper()} did not interpolate")
        for seed in seeds for model in ("flow", "dln"))

    def measured() -> gates.Decision:
        deq = [float(diagonal[seed]["density_deq"]) for seed in seeds]
        dln = [float(diagonal[seed]["density_dln"]) for seed in seeds]
        found = gates.all_of(gates.compare(a, ">", b) for a, b in zip(deq, dln, strict=True))
        return found.with_reason(
            f"participation ratio DEQ {np.mean(deq):.3f} vs DLN {np.mean(dln):.3f} "
            f"(mean over {len(deq)}; every problem must agree)")

    return gates.gated(interpolated, measured)


def feature_density_claim(gotu: dict[str, Any], p: Params, target: str = "f2"
                          ) -> gates.Decision:
    """Rebuttal Figure 2: the ReLU DEQ's features are denser than the FNN's (GOTU task)."""
    entry = gotu[target]

    def measured() -> gates.Decision:
        found = margins.lower_than(entry["fnn"]["feature_density"],
                                 entry["deq_contractive"]["feature_density"], MARGIN)
        return found.with_reason("FNN vs ReLU DEQ feature participation ratio: " + found.reason)

    return symmetric_gate(seen_fit(entry, "deq_contractive", p), seen_fit(entry, "fnn", p),
                          "the FNN", measured)
