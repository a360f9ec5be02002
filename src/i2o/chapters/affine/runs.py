"""The computations behind the affine-theory chapter (Figure 1, Figure G.3), through the cache.

:func:`collect` runs, or reads back from :mod:`i2o.results`, the five results the chapter
plots and checks, each a dict of arrays and numbers:

- ``left``: :func:`.sweeps.corollary1_sweep`, D(N, ΔN) on one instance with U surjective
  (Figure 1 left, Corollary 1);
- ``right``: :func:`.sweeps.lower_bound_sweep` with K_in and K_out square, both problems
  strongly convex (Figure 1 right, Corollary 2);
- ``g3``: the same sweep with neither problem strongly convex (Figure G.3);
- ``checks``: Lemma A.2, Theorem 1, Corollary 1, Lemma 1 and Theorem 2 on random instances;
- ``cor2``: :func:`.checks.corollary2_nonnormal_check`, Corollary 2 with a non-normal K_out.

The cache key holds the chapter's parameters and the source of the modules that compute
(theory, sweeps, checks, and this one, which decides which parameter feeds which sweep).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from i2o import replicates, results
from i2o.chapters.affine import FIGURE, checks, sweeps
from i2o.profiles import require

CACHE_SOURCES = ("chapters.affine.theory", "chapters.affine.sweeps", "chapters.affine.checks",
                 "chapters.affine.runs")


def check_params(params: Mapping[str, Any]) -> None:
    """Relations between the chapter's parameters that a per-parameter schema cannot express.

    Raises :class:`i2o.profiles.ParameterError` naming the parameter, before any compute.
    """
    rules = [
        ("left_d_x", params["left_d_x"] <= params["left_d_z"],
         f"≤ left_d_z = {params['left_d_z']} (K_in must be surjective, Assumption 3.2)"),
        ("left_rank_out", params["left_rank_out"] <= params["left_d_z"],
         f"≤ left_d_z = {params['left_d_z']}"),
        ("g3_d_x", params["g3_d_x"] <= params["g3_d_z"],
         f"≤ g3_d_z = {params['g3_d_z']} (K_in must be surjective, Assumption 3.2)"),
        ("g3_rank_out", params["g3_rank_out"] <= params["g3_d_z"],
         f"≤ g3_d_z = {params['g3_d_z']}"),
        ("right_d_theta_panel", max(params["right_d_theta_panel"]) <= params["d_theta_max"],
         f"a list of values ≤ d_theta_max = {params['d_theta_max']}"),
        ("g3_d_theta_panel", max(params["g3_d_theta_panel"]) <= params["g3_d_theta_max"],
         f"a list of values ≤ g3_d_theta_max = {params['g3_d_theta_max']}"),
    ]
    require(FIGURE, params, rules)


@dataclass(frozen=True)
class AffineResults:
    """The chapter's results, in the stored form of :func:`i2o.results.cached`."""

    left: dict
    right: dict
    g3: dict
    checks: dict
    cor2: dict
    seconds: dict[str, float] = field(default_factory=dict)  # time to compute or read, per result


def collect(params: Mapping[str, Any]) -> AffineResults:
    """Every result of the chapter for these (validated) parameters, computed or read back."""
    p = dict(params)
    seconds: dict[str, float] = {}

    def cached(name: str, compute: Callable[[], dict]) -> dict:
        start = time.perf_counter()
        result = results.cached(FIGURE, name, p, compute, sources=CACHE_SOURCES)
        seconds[name] = time.perf_counter() - start
        return result

    seed = replicates.seed(p["seed"], p["replicate"])
    common = {"eta_scale": p["eta_scale"], "rtol": p["rank_rtol"]}
    lower_bound_grid = {"n_seeds": p["n_seeds"], "n_max": p["n_max"], "n_points": p["n_points"],
                        "n_reference": p["n_reference"], "delta_n_max": p["delta_n_max"]}
    left = cached("corollary1", lambda: sweeps.corollary1_sweep(
        seed=seed, d_z=p["left_d_z"], d_theta=p["left_d_theta"], rank_in=p["left_d_x"],
        rank_out=p["left_rank_out"], n_list=p["left_n_list"], delta_n_min=p["delta_n_min"],
        delta_n_max=p["delta_n_max"], **common))
    right = cached("corollary2", lambda: sweeps.lower_bound_sweep(
        seed=seed, d_z=p["right_d_z"], rank_in=p["right_d_z"], rank_out=p["right_d_z"],
        d_theta_max=p["d_theta_max"], **lower_bound_grid, **common))
    g3 = cached("figure-g3", lambda: sweeps.lower_bound_sweep(
        seed=seed + 1, d_z=p["g3_d_z"], rank_in=p["g3_d_x"], rank_out=p["g3_rank_out"],
        d_theta_max=p["g3_d_theta_max"], **lower_bound_grid, **common))
    checked = cached("checks", lambda: _checks(p, seed))
    cor2 = cached("corollary2-nonnormal", lambda: checks.corollary2_nonnormal_check(
        seed=seed, n_instances=p["cor2_instances"], d_z=p["cor2_d_z"], n=p["cor2_n"],
        delta_n_max=p["delta_n_max"], n_draws=p["cor2_draws"], **common))
    return AffineResults(left=left, right=right, g3=g3, checks=checked, cor2=cor2, seconds=seconds)


def _checks(p: Mapping[str, Any], seed: int) -> dict:
    n, rtol = p["n_check_instances"], p["rank_rtol"]
    return {
        "lemma_a2": checks.lemma_a2_check(seed, n),
        "theorem1": checks.theorem1_check(seed, n, rtol=rtol),
        "corollary1": checks.corollary1_check(seed, n, rtol=rtol),
        "ift": checks.ift_check(seed, n, max_steps=p["ift_max_steps"], rtol=rtol),
        "ift_not_surjective": checks.ift_check(seed, n, max_steps=p["ift_max_steps"],
                                               surjective_U=False, rtol=rtol),
    }
