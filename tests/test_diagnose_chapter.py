"""The 'Test your own DEQ' chapter's claims and prose follow the verdicts (doctored curves, no
training); the chapter itself runs at smoke in tests/test_book.py."""

from __future__ import annotations

import numpy as np
import pytest

from i2o import profiles
from i2o.chapters.diagnose import claims, prose, runs
from i2o.diagnose import Curves, from_curves
from i2o.diagnose.metrics import resolve

GRID = np.arange(1, 13)


def curves(shift: float, n: int = 500) -> Curves:
    """Test accuracies: 50 % at N = 4, 0 below 3; above N a fraction |shift| of the examples
    turns right (shift > 0) or wrong (shift < 0)."""
    rng = np.random.default_rng(0)
    base = np.broadcast_to((rng.uniform(size=(1, n, 1)) < 0.5).astype(float), (1, n, GRID.size))
    flip = rng.uniform(size=(1, n, GRID.size)) < abs(shift)
    values = np.where(flip & (GRID > 4)[None, None, :], float(shift > 0), base)
    values[:, :, GRID < 3] = 0.0
    return Curves(GRID, values, np.broadcast_to(1.0 / GRID, values.shape).copy(), 1.0)


def training(level: float, n: int = 100) -> Curves:
    values = np.full((1, n, GRID.size), 1.0)
    values[:, int(level * n):, :] = 0.0
    return Curves(GRID, values, np.ones_like(values), 1.0)


def results(shift: float, fits: bool = True) -> runs.DiagnoseResults:
    accuracy = resolve("accuracy")
    diagnoses = {m: from_curves(curves(shift), training(1.0 if fits else 0.3),
                                name=runs.LABELS[m], metric=accuracy, train_iters=4, margin=0.02,
                                fit=0.9) for m in runs.MODELS}
    record = {"parameters": 10, "train_seconds": 1.0, "sweep_seconds": 1.0, "solves": 2}
    return runs.DiagnoseResults(diagnoses, {m: record for m in runs.MODELS}, 1.0)


@pytest.mark.parametrize(("shift", "says"), [
    (+0.3, "More iterations than in training help it beyond the margin"),
    (-0.3, "They hurt it beyond the margin"),
])
def test_the_prose_follows_the_verdicts(shift, says):
    params = profiles.resolve("diagnose", "smoke")
    table, rows = claims.claims(params, results(shift))
    assert len(table.rows) == 2 * len(claims.ROWS)
    text = prose.conclusions(rows, results(shift))
    assert says in text and "It fits its training images" in text
    assert set(claims.numbers(params, results(shift))) >= {"diagnose-torchdeq-rec",
                                                           "diagnose-mdeq-more"}


def test_a_model_that_does_not_fit_gets_no_verdict():
    params = profiles.resolve("diagnose", "smoke")
    table, rows = claims.claims(params, results(+0.3, fits=False))
    assert rows["torchdeq_fit"].holds is None and rows["torchdeq_help"].holds is None
    assert "does not fit its training images" in prose.conclusions(rows, results(+0.3, False))


def test_jobs_and_grids_follow_the_parameters():
    params = profiles.resolve("diagnose", "smoke", replicate=2)
    jobs = dict(runs.all_jobs(params))
    assert set(jobs) == {"torchdeq-r2", "mdeq-r2"}
    assert jobs["torchdeq-r2"]["grid"] == list(range(1, 2 * params["td_train_iters"] + 1))
    assert all(job["replicate"] == 2 for job in jobs.values())
    with pytest.raises(profiles.ParameterError, match="td_channels"):
        runs.check_params(profiles.resolve("diagnose", "smoke", td_channels=6))
