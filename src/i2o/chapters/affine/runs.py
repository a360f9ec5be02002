"""The computations behind the affine-theory chapter (Figure 1, Figure G.3), through the cache.

:func:`jobs` lists the five results the chapter plots and checks (:mod:`.jobs`), each a dict of
arrays and numbers; :func:`collect` computes them, or reads them back from the results cache:

- ``left``: :func:`.sweeps.corollary1_sweep`, D(N, ΔN) on one instance with U surjective
  (Figure 1 left, Corollary 1);
- ``right``: :func:`.sweeps.lower_bound_sweep` with K_in and K_out square, both problems
  strongly convex (Figure 1 right, Corollary 2);
- ``g3``: the same sweep with neither problem strongly convex (Figure G.3);
- ``checks``: Lemma A.2, Theorem 1, Corollary 1, Lemma 1 and Theorem 2 on random instances;
- ``cor2``: :func:`.checks.corollary2_nonnormal_check`, Corollary 2 with a non-normal K_out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from i2o.chapters.affine import FIGURE
from i2o.chapters.affine.jobs import (
    ChecksJob,
    Corollary1Job,
    Corollary2Job,
    FigureG3Job,
    NonnormalJob,
)
from i2o.compute.chapter import ChapterResults, run_jobs
from i2o.compute.job import Job
from i2o.compute.profiles import Params, require


def check_params(params: Params) -> None:
    """Relations between the chapter's parameters that a per-parameter schema cannot express.

    Raises :class:`i2o.compute.profiles.ParameterError` naming the parameter, before any compute.
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


def jobs(params: Params) -> list[Job]:
    """The chapter's five jobs, in the order of :class:`AffineResults`'s fields."""
    p = params
    common = {"seed": p["seed"], "replicate": p["replicate"], "eta_scale": p["eta_scale"],
              "rank_rtol": p["rank_rtol"]}
    grid = {"n_seeds": p["n_seeds"], "n_max": p["n_max"], "n_points": p["n_points"],
            "n_reference": p["n_reference"], "delta_n_max": p["delta_n_max"]}
    return [
        Corollary1Job(**common, left_d_z=p["left_d_z"], left_d_theta=p["left_d_theta"],
                      left_d_x=p["left_d_x"], left_rank_out=p["left_rank_out"],
                      left_n_list=tuple(p["left_n_list"]), delta_n_min=p["delta_n_min"],
                      delta_n_max=p["delta_n_max"]),
        Corollary2Job(**common, **grid, right_d_z=p["right_d_z"], d_theta_max=p["d_theta_max"]),
        FigureG3Job(**common, **grid, g3_d_z=p["g3_d_z"], g3_d_x=p["g3_d_x"],
                    g3_rank_out=p["g3_rank_out"], g3_d_theta_max=p["g3_d_theta_max"]),
        ChecksJob(**common, n_check_instances=p["n_check_instances"],
                  ift_max_steps=p["ift_max_steps"]),
        NonnormalJob(**common, cor2_instances=p["cor2_instances"], cor2_d_z=p["cor2_d_z"],
                     cor2_n=p["cor2_n"], cor2_draws=p["cor2_draws"],
                     delta_n_max=p["delta_n_max"]),
    ]


@dataclass(frozen=True)
class AffineResults(ChapterResults):
    """The chapter's results, each in the stored form of its job
    (:meth:`i2o.compute.job.Job.run`)."""

    left: dict[str, Any]
    right: dict[str, Any]
    g3: dict[str, Any]
    checks: dict[str, Any]
    cor2: dict[str, Any]


def collect(params: Params) -> AffineResults:
    """Every result of the chapter for these (validated) parameters, computed or read back."""
    (left, right, g3, checked, cor2), cost = run_jobs(FIGURE, jobs(params))
    return AffineResults(left=left, right=right, g3=g3, checks=checked, cor2=cor2,
                         params=params, cost=cost)
