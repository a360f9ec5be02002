"""What the toy chapter says about its results: the numbers its text quotes and its claims.

The one claim, "more iterations at test time help", is decided by :mod:`i2o.verdicts.gates`: the 90
% interval over seeds of the gain r(train_iters) − r(test_iters) in relative residual must lie
above :data:`MARGIN` (holds) or below it (fails); an interval that contains it leaves the claim
undecided, and :mod:`i2o.verdicts.deciding` names the run with more seeds that would decide it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from i2o.verdicts import deciding, intervals, margins
from i2o.verdicts.claims import Claims

from . import FIGURE, paper_claims
from .runs import ToyResults

#: the smallest gain in relative residual that counts as "helps"
MARGIN = 0.01
MORE_HELP = "more-iterations-help"


def gains(results: ToyResults) -> np.ndarray:
    """Per seed: relative residual at ``train_iters`` minus at ``test_iters``."""
    p = results.params
    return results.residuals[:, p["train_iters"]] - results.residuals[:, p["test_iters"]]


def numbers(results: ToyResults) -> dict[str, Any]:
    """The values the notebook glues into its text, by glue name."""
    p = results.params
    return {"toy-train-residual": float(results.residuals[:, p["train_iters"]].mean()),
            "toy-test-residual": float(results.residuals[:, p["test_iters"]].mean()),
            "toy-mean-gain": float(gains(results).mean())}


def claims(results: ToyResults) -> Claims:
    """The claims table: one row, with the run that would decide it when undecided."""
    p = results.params
    table = Claims(FIGURE, p.profile, paper=paper_claims.CLAIMS)
    ci = intervals.interval(gains(results), over="seeds")
    table.decide(f"Iterating {p['test_iters']} times instead of {p['train_iters']} lowers the "
                 f"relative residual by more than {MARGIN:g}", margins.above(ci, MARGIN),
                 ci.describe(digits=4), margin=f"{MARGIN:g}", id=MORE_HELP)
    seconds_per_seed = results.cost.seconds / max(1, results.cost.jobs)
    deciding.name_remedies(table, p, deciding.Rates(per_seed=seconds_per_seed))
    return table
