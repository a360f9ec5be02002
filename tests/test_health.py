"""The divergence flag (i2o.train.health), and a smoke training run with a learning rate that
diverges."""

from __future__ import annotations

import math

import pytest

from i2o.train import health


def test_healthy_run_is_not_flagged():
    assert health.diverged([2.3, 2.0, 1.5, 1.0, 0.5, 0.3], 0.9, 0.1) is None


@pytest.mark.parametrize("losses, score, expected", [
    ([2.3, 2.0, math.nan, 1.0], 0.9, "non-finite at step 2"),
    ([2.3, 2.2, 2.4, 2.6, 5.0, 9.0], 0.9, "ended above its start"),
    ([2.3, 2.0, 1.9, 1.8], 0.105, "chance level"),
])
def test_each_condition_flags(losses, score, expected):
    assert expected in health.diverged(losses, score, 0.1, window=2)


def test_stopped_loop_is_flagged():
    history = {"loss": [2.3, 2.0, math.inf], "nonfinite_step": [2]}
    assert "step 2" in health.classifier_flag(history, 0.5, 10)
    assert health.classifier_flag({"loss": [2.3, 1.0]}, 0.8, 10) is None


def test_diverging_learning_rate_is_flagged_and_nulls_the_claims(tmp_path, monkeypatch, data_dir):
    """A smoke stability job with lr = 10 diverges (at lr = 1 the unrolled arm stayed above chance
    under the portable pins): its result carries the flag and the chapter's claims that depend on
    it are undecided, naming it."""
    from i2o.chapters.stability import claims as stability_claims
    from i2o.chapters.stability.jobs import TrainJob
    from i2o.compute import profiles

    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    params = dict(profiles.resolve("stability", "smoke"))
    params.update(lr=10.0, train_size=40, test_size=20, test_iters=[3, 18, 20], batch_size=20,
                  epochs=2, seeds=[0], eval_batch=20)
    results = {}
    for arm in ("ift", "unrolled"):
        results[arm] = [TrainJob.of(params, 0, arm, 18).compute(progress=False)]
    flags = [r[0]["diverged"] for r in results.values()]
    assert all(flags), flags
    rows = stability_claims.claims_table(params, results)
    assert rows["health"].holds is False  # the warning row names the diverged models
    assert "IFT seed 0" in rows["health"].value and "unrolled seed 0" in rows["health"].value
    # a diverged model does not fit (chance-level accuracy), so the claims it would feed are
    # undecided by the fit gate, which names it
    for key in ("not_more_stable", "ift_no_gain", "unrolled_fewer_hurt"):
        assert rows[key].holds is None, rows[key]
        assert "too few models fit" in rows[key].check and "IFT seed 0" in rows[key].check
