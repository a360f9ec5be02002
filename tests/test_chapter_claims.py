"""The DEQ chapters' claims on doctored results: each verdict holds on one and fails on another,
and a model that does not fit (or diverged) leaves the claims undecided with the reason."""

from __future__ import annotations

import numpy as np
import pytest

from i2o.chapters.deq_gaps import claims as gaps_claims
from i2o.chapters.deq_gaps import prose as gaps_prose
from i2o.chapters.deq_gaps.curves import curve_from_sweep
from i2o.chapters.stability import claims as stability_claims
from i2o.chapters.stability import prose as stability_prose
from i2o.claims import Claims

ITERS = [3, 9, 18, 25, 35]
PARAMS = {"profile": "quick", "train_iters": [18], "test_iters": ITERS, "margin_fraction": 0.25,
          "fit_accuracy": 0.9, "fit_quorum": 4, "test_size": 1000, "seeds": [0, 1, 2, 3, 4],
          "epochs": 60, "extra_epochs": 4}


def stability_run(curve, seed, train_accuracy=0.99, diverged="", rising=False):
    """One job result: test accuracy ``curve`` (per ITERS) plus seed noise, last-iterate trace."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, 0.002, len(ITERS))
    trace = np.geomspace(1.0, 1e-4, max(ITERS) + 1) * np.exp(rng.normal(0, 0.1, max(ITERS) + 1))
    if rising:
        trace = trace[::-1].copy()
    return {"test": {"accuracy": np.asarray(curve) + noise, "trace_rel": trace},
            "train_accuracy": train_accuracy, "diverged": diverged, "epochs_used": 20.0,
            "cap_reached": train_accuracy < 0.9}


PLATEAU = [0.30, 0.50, 0.60, 0.60, 0.60]       # I2O: fewer hurt, more do not help
DROPPING = [0.30, 0.50, 0.60, 0.50, 0.40]      # less stable
IMPROVING = [0.30, 0.50, 0.60, 0.66, 0.70]     # more iterations help


def table(ift, unrolled):
    return stability_claims.claims_table(PARAMS, {"ift": ift, "unrolled": unrolled})[1]


def seeds(curve, **kw):
    return [stability_run(curve, s, **kw) for s in range(5)]


def test_stability_claims_hold_on_the_papers_picture():
    rows = table(seeds(PLATEAU), seeds(PLATEAU))
    for key in ("health", "fit", "not_more_stable", "equally_stable", "ift_no_gain",
                "ift_fewer_hurt", "ift_residual", "unrolled_no_gain"):
        assert rows[key].holds is True, (key, rows[key])
    assert "5+ fitting seeds per arm" in rows["not_more_stable"].check
    assert "discriminates" in rows["not_more_stable"].check
    assert "0.25 × the unrolled arm's mean" in rows["not_more_stable"].margin
    text = stability_prose.conclusions(rows)
    assert "not more stable" in text and "does not give a better classifier" in text


def test_stability_claims_fail_when_ift_is_more_stable_and_more_iterations_help():
    rows = table(seeds(PLATEAU), seeds(DROPPING))
    assert rows["not_more_stable"].holds is False
    assert rows["equally_stable"].holds is False
    rows = table(seeds(IMPROVING), seeds(IMPROVING))
    assert rows["ift_no_gain"].holds is False
    assert "do improve" in stability_prose.conclusions(rows)
    rows = table(seeds([0.70, 0.65, 0.60, 0.60, 0.60]), seeds(PLATEAU))
    assert rows["ift_fewer_hurt"].holds is False


def test_stability_residual_check_reads_the_last_iterate():
    rows = table(seeds(PLATEAU, rising=True), seeds(PLATEAU))
    assert rows["ift_residual"].holds is False and rows["unrolled_residual"].holds is True


def test_stability_claims_use_the_models_that_fit_when_a_quorum_does():
    underfit = seeds(PLATEAU)
    underfit[2] = stability_run(DROPPING, 2, train_accuracy=0.41)  # excluded, so it cannot weigh
    rows = table(underfit, seeds(PLATEAU))
    assert rows["fit"].holds is True and "IFT 4/5" in rows["fit"].check
    assert "IFT seed 2 41.0%" in rows["fit"].check and "IFT seed 2" in rows["fit"].value
    assert "reached the cap without fitting: IFT seed 2" in rows["fit"].value
    for key in ("not_more_stable", "equally_stable", "ift_no_gain", "unrolled_fewer_hurt"):
        assert rows[key].holds is True, (key, rows[key])
    assert "over 4 seeds" in rows["ift_no_gain"].value
    assert "use those that do" in stability_prose.conclusions(rows)


def test_stability_claims_undecided_when_too_few_models_fit_or_one_diverged():
    underfit = seeds(PLATEAU)
    underfit[2]["train_accuracy"] = 0.41
    underfit[4]["train_accuracy"] = 0.87
    rows = table(underfit, seeds(PLATEAU))
    assert rows["fit"].holds is False
    for key in ("not_more_stable", "equally_stable", "ift_no_gain", "unrolled_fewer_hurt"):
        assert rows[key].holds is None
        assert "too few models fit" in rows[key].check and "IFT 3/5" in rows[key].check
        assert "41.0" in rows[key].check
    assert "not decided" in stability_prose.conclusions(rows)
    broken = seeds(PLATEAU)
    broken[0]["diverged"] = "loss became non-finite at step 7"
    rows = table(broken, seeds(PLATEAU))
    assert rows["health"].holds is False and rows["ift_no_gain"].holds is None
    assert "non-finite" in rows["ift_no_gain"].check
    assert "Warning" in stability_prose.conclusions(rows)


def test_stability_one_seed_is_undecided():
    one = {**PARAMS, "fit_quorum": 1}
    rows = stability_claims.claims_table(one, {"ift": seeds(PLATEAU)[:1],
                                               "unrolled": seeds(PLATEAU)[:1]})[1]
    assert rows["not_more_stable"].holds is None and "needs ≥ 2" in rows["not_more_stable"].check


FLAT = [0.59, 0.60, 0.60, 0.60, 0.60]            # accuracy hardly moves with N'


def test_stability_comparison_is_undecided_where_accuracy_does_not_move_with_n():
    rows = table(seeds(FLAT), seeds(FLAT))
    for key in ("not_more_stable", "equally_stable", "ift_no_gain", "unrolled_no_gain"):
        assert rows[key].holds is None, (key, rows[key])
        assert "cannot discriminate" in rows[key].check and "could not fail" in rows[key].check
    # the same flat IFT against an unrolled arm that moves: decided, and IFT is more stable
    rows = table(seeds(FLAT), seeds(DROPPING))
    assert rows["not_more_stable"].holds is False
    assert "cannot discriminate" in stability_prose.conclusions(table(seeds(FLAT), seeds(FLAT)))


def test_stability_resolution_is_the_paired_standard_error_of_an_accuracy_change():
    errors = np.zeros((1000, len(ITERS)), dtype=np.uint8)
    errors[:400, :] = 1
    errors[400:430, 0] = 1                # 30 images flip at N' = 3 only
    se = stability_claims.paired_se(errors, at=2)
    flips = np.r_[np.ones(30), np.zeros(970)]
    expected = flips.std(ddof=1) / np.sqrt(1000) / 4  # one count of four differs
    assert se == pytest.approx(expected)
    assert np.isnan(stability_claims.paired_se(None, 2))
    points, what = stability_claims.resolution_points(1000, [se, se])
    assert points == pytest.approx(100 * se) and "paired" in what
    points, what = stability_claims.resolution_points(1000, [np.nan])
    assert points == pytest.approx(100 * 0.5 / np.sqrt(1000)) and "one accuracy" in what
    # a flat arm whose images never flip has deviation 0: δ = 0 cannot discriminate
    flat = seeds([0.60] * 5)
    for run in flat:
        run["test"]["accuracy"] = np.full(len(ITERS), 0.6)
        run["test"]["errors"] = errors * 0
    rows = table(flat, flat)
    assert rows["equally_stable"].holds is None and "cannot discriminate" in \
        rows["equally_stable"].check


# -- deq_gaps -----------------------------------------------------------------------------------

GRID = [1, 4, 8, 16, 24]
N_TRAIN = 8
GAPS_PARAMS = {"cls_fit_accuracy": 0.9, "cls_margin": 2.0, "lm_fit_nll": 1.5, "lm_margin": 0.1,
               "inv_fit_db": 1.0, "inv_margin": 0.1, "cls_eval_size": 400}


def sweep(error_rate, n=400, seed=0, rising=False):
    """A doctored classification sweep: per example 0/1 errors with the given rate per count."""
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    errors = np.stack([(base < rate).astype(float) for rate in error_rate], axis=1)
    trace = np.geomspace(1.0, 1e-4, max(GRID) + 1)[None, :].repeat(4, axis=0)
    if rising:
        trace = trace[:, ::-1].copy()
    return {"iterations": np.asarray(GRID), "metrics": {"error": errors, "loss": errors},
            "residual_rel": np.full((n, len(GRID)), 0.01), "trace_rel": trace,
            "batch_sizes": np.full(4, n // 4)}


def gap_rows(test_rates, train_rates, losses=(2.3, 1.0, 0.2), rising=False):
    result = {"test": sweep(test_rates, rising=rising), "train": sweep(train_rates, seed=1),
              "history": {"loss": list(losses)}}
    curves = {split: curve_from_sweep(result[split], "error", N_TRAIN, split, "percent", "err")
              for split in ("test", "train")}
    train_loss = curve_from_sweep(result["train"], "loss", N_TRAIN, "train", "mean", "loss")
    table, rows = Claims("deq_gaps", "quick"), {}
    gaps_claims.task_claims(table, rows, "classification", result, curves, train_loss,
                            GAPS_PARAMS)
    return rows


FITTED = [0.9, 0.3, 0.02, 0.02, 0.02]


def test_gap_claims_hold_and_fail():
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED)
    assert rows["classification_gate"].holds is True
    assert rows["classification_test_no_gain"].holds is True
    assert rows["classification_test_fewer_hurt"].holds is True
    assert rows["classification_residual"].holds is True
    assert "examples" in rows["classification_test_no_gain"].value
    rows = gap_rows([0.9, 0.5, 0.4, 0.3, 0.2], FITTED, rising=True)
    assert rows["classification_test_no_gain"].holds is False
    assert rows["classification_residual"].holds is False
    rows = gap_rows([0.2, 0.3, 0.4, 0.4, 0.4], FITTED)
    assert rows["classification_test_fewer_hurt"].holds is False


def test_gap_claims_undecided_when_the_model_does_not_fit_or_diverged():
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], [0.9, 0.7, 0.6, 0.6, 0.6])
    assert rows["classification_gate"].holds is False
    assert rows["classification_test_no_gain"].holds is None
    assert "does not fit its training set" in rows["classification_test_no_gain"].check
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, losses=(2.3,) * 5 + (9.0,) * 5)
    assert rows["classification_test_no_gain"].holds is None
    assert "ended above its start" in rows["classification_test_no_gain"].check


def test_gap_prose_follows_the_rows():
    from i2o.prose import sentence

    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED)
    assert "no improvement beyond" in gaps_prose.task_paragraph(rows, "classification")
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], [0.9, 0.7, 0.6, 0.6, 0.6])
    assert "Not in the regime" in gaps_prose.task_paragraph(rows, "classification")
    undecided = sentence(rows["classification_test_no_gain"], "yes", "no", "open")
    assert undecided.startswith("open (model does not fit")


@pytest.mark.parametrize("task, fit", [("language", 1.2), ("deq", 3.0)])
def test_regression_fit_criteria(task, fit):
    from i2o.chapters.deq_gaps.curves import GapCurve

    its = np.asarray(GRID)
    curve = GapCurve("x", "m", N_TRAIN, its, np.full(5, -20.0), np.zeros(5), np.full(5, 0.1),
                     np.full(5, 0.01))
    loss = GapCurve("x", "m", N_TRAIN, its, np.full(5, fit), np.zeros(5), np.full(5, 0.1),
                    np.full(5, 0.01))
    result = {"train_baseline_neg_psnr": -18.0}
    opened = gaps_claims.fit_check(task, result, curve, loss, GAPS_PARAMS)
    assert opened[0] is True
    bad = dict(GAPS_PARAMS, lm_fit_nll=1.0, inv_fit_db=5.0)
    assert gaps_claims.fit_check(task, result, curve, loss, bad)[0] is None
