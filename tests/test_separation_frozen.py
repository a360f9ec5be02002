"""The frozen-coordinate GOTU task: its closed form, its training, and the claims on it."""

import numpy as np
import pytest

from i2o.chapters.separation import claims, frozen
from i2o.compute.profiles import resolve_namespace


@pytest.fixture
def p():
    return resolve_namespace("separation", {"profile": "smoke"})


@pytest.mark.parametrize("mean", [0.3, 1.0, 2.0, 5.0])
def test_predicted_beta0_solves_the_conservation_law(mean):
    beta0 = frozen.predicted_beta0(mean)
    assert beta0 > 0
    assert beta0 ** -3 + 3 * (mean - beta0) == pytest.approx(1.0, abs=1e-9)


def test_the_deq_is_predicted_lower_exactly_when_the_mean_exceeds_its_start():
    assert frozen.predictions(2.0)["linear_deq"] < frozen.predictions(2.0)["dln"]
    assert frozen.predictions(0.5)["linear_deq"] > frozen.predictions(0.5)["dln"]
    at_one = frozen.predictions(1.0)
    assert at_one["linear_deq"] == pytest.approx(at_one["dln"])


def test_seen_part_fixes_x0_and_the_target_ignores_it():
    data = frozen.task(5, 2.0, seed=0)
    assert np.all(data["x_seen"][:, 0] == 1) and np.all(data["x_unseen"][:, 0] == -1)
    assert len(data["x_seen"]) == len(data["x_unseen"]) == 16
    assert np.mean(data["y_seen"]) == pytest.approx(2.0)  # f̂(∅) on the seen half too


@pytest.mark.parametrize("mean", [0.5, 2.0])
def test_gradient_descent_follows_the_flow_prediction(mean):
    out = frozen.experiment(6, mean, seed=1, alpha=0.01, lr=0.005, steps=200_000, tol=1e-12)
    deq, dln = out["linear_deq"], out["dln"]
    assert deq["train_mse"] <= 1e-12 and dln["train_mse"] <= 1e-12
    assert deq["beta0"] == pytest.approx(out["prediction"]["beta0"], rel=2e-2)
    assert deq["unseen_mse"] == pytest.approx(out["prediction"]["linear_deq"], rel=2e-2)
    assert dln["unseen_mse"] == pytest.approx(4 * mean ** 2, rel=1e-4)
    assert deq["conserved_drift"] < 0.05


def test_a_large_step_breaks_the_conservation_law():
    small = frozen.experiment(6, 2.0, seed=1, alpha=0.01, lr=0.002, steps=200_000, tol=1e-12)
    large = frozen.experiment(6, 2.0, seed=1, alpha=0.01, lr=0.05, steps=200_000, tol=1e-12)
    assert large["linear_deq"]["conserved_drift"] > 3 * small["linear_deq"]["conserved_drift"]


def _entry(mean, deq, dln, deq_train=0.0, dln_train=0.0):
    pred = frozen.predictions(mean)
    return {"mean": mean, "prediction": pred, "seen_variance": np.array([4.0, 4.0, 4.0]),
            "linear_deq": {"unseen_mse": np.array(deq, dtype=float),
                           "train_mse": np.full(3, deq_train)},
            "dln": {"unseen_mse": np.array(dln, dtype=float), "train_mse": np.full(3, dln_train)}}


def test_frozen_comparison_holds_fails_and_is_gated(p):
    assert claims.frozen_comparison(_entry(2.0, [12.0, 12.01, 11.99], [16.0] * 3), p).holds is True
    assert claims.frozen_comparison(_entry(0.5, [2.6, 2.59, 2.61], [1.0] * 3), p).holds is False
    found = claims.frozen_comparison(_entry(2.0, [12.0] * 3, [16.0] * 3, deq_train=3.0), p)
    assert found.holds is False and claims.UNTRAINABLE in found.reason
    found = claims.frozen_comparison(_entry(2.0, [12.0] * 3, [16.0] * 3, dln_train=3.0), p)
    assert found.holds is None and "does not fit" in found.reason
    assert found.facts.closed_by == "fit"  # the symmetric gate's facts reach the row


def test_frozen_prediction_claim_holds_fails_and_needs_a_fit(p):
    low, high = frozen.predictions(0.5), frozen.predictions(2.0)
    good = {"c0": _entry(0.5, [low["linear_deq"]] * 3, [1.0] * 3),
            "c1": _entry(2.0, [high["linear_deq"]] * 3, [16.0] * 3)}
    assert claims.frozen_prediction_claim(good, "linear_deq", p).holds is True
    assert claims.frozen_prediction_claim(good, "dln", p).holds is True
    off = {**good, "c1": _entry(2.0, [16.0] * 3, [16.0] * 3)}  # no implicit bias at work
    assert claims.frozen_prediction_claim(off, "linear_deq", p).holds is False
    unfit = {**good, "c1": _entry(2.0, [high["linear_deq"]] * 3, [16.0] * 3, deq_train=3.0)}
    assert claims.frozen_prediction_claim(unfit, "linear_deq", p).holds is None
