"""The computations behind the toy chapter, through the results cache.

:func:`jobs` lists one :class:`.jobs.ResidualJob` per seed; :func:`collect` computes the missing
ones (or reads them back) and returns them as :class:`ToyResults`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from i2o.compute.chapter import ChapterResults, run_jobs
from i2o.compute.job import Job
from i2o.compute.profiles import Params, require

from . import FIGURE
from .jobs import ResidualJob


def check_params(params: Params) -> None:
    """The rules between parameters the manifest's schema cannot state (the door calls it)."""
    require(FIGURE, params, [
        ("test_iters", params["test_iters"] > params["train_iters"],
         f"> train_iters = {params['train_iters']} (the claim compares the two)"),
        ("seeds", len(set(params["seeds"])) == len(params["seeds"]), "a list of distinct seeds"),
    ])


def jobs(params: Params) -> list[Job]:
    """One job per seed, in the order of ``seeds``."""
    return [ResidualJob(seed=seed, replicate=params["replicate"], dim=params["dim"],
                        contraction=params["contraction"], test_iters=params["test_iters"])
            for seed in params["seeds"]]


@dataclass(frozen=True)
class ToyResults(ChapterResults):
    """Relative residuals, one row per seed, one column per iteration n = 0 … test_iters."""

    residuals: np.ndarray


def collect(params: Params) -> ToyResults:
    """Every result of the chapter for these (validated) parameters, computed or read back."""
    found, cost = run_jobs(FIGURE, jobs(params))
    return ToyResults(residuals=np.stack([result["residuals"] for result in found]),
                      params=params, cost=cost)
