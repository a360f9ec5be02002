"""The converged reference solve (:mod:`i2o.deq.reference`), the book's own row that reads it
(deq_gaps' ``<task>_reference``, stability's ``<arm>_reference``: :mod:`i2o.verdicts.converged`)
and the language model's temperature check (:mod:`.calibration`). Budget: ~15 s (two micro
stability jobs on 32 CIFAR-10 images, the second reading the first's training back)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bank import (
    GRID,
    ITERS,
    N_TRAIN,
    PLATEAU,
    gap_table,
    inverse_result,
    stability_seeds,
    stability_table,
)

from i2o.chapters.deq_gaps.calibration import calibrate, calibration_report
from i2o.chapters.deq_gaps.language import TEMPERATURES, LanguageJob, language_probes
from i2o.chapters.deq_gaps.language import temperature_metric as tm
from i2o.chapters.stability.jobs import TrainJob
from i2o.compute import door, profiles
from i2o.deq import Probe, SolverSpec
from i2o.deq.reference import reference_solve
from i2o.models.deq_transformer import DEQTransformerLM, TransformerConfig


def contraction_probes(rate: float, batches: int = 2, size: int = 4):
    """Batches of ``z ↦ rate · z + b`` (fixed point ``b / (1 − rate)``), scored by the distance
    to that fixed point."""
    generator = torch.Generator().manual_seed(0)
    for _ in range(batches):
        b = torch.randn(size, 6, generator=generator, dtype=torch.float64)
        star = b / (1 - rate)

        def score(z, fz, star=star):
            return {"distance": torch.linalg.vector_norm(z - star, dim=1)}

        yield Probe(g=lambda z, b=b: rate * z + b, z0=torch.zeros_like(b), score=score)


def test_reference_solve_reaches_the_fixed_point_and_says_so():
    found = reference_solve(contraction_probes(0.5), SolverSpec(method="fixed_point"), cap=200)
    assert found["converged"].tolist() == [True, True]
    assert np.all(found["steps"] < 200) and np.all(found["residual_rel"] < 1e-4)
    assert found["metrics"]["distance"].shape == (8,)
    assert np.all(found["metrics"]["distance"] < 1e-3)


def test_reference_solve_reports_a_cap_too_small_as_not_converged():
    found = reference_solve(contraction_probes(0.99), SolverSpec(method="fixed_point"), cap=20)
    assert found["converged"].tolist() == [False, False]
    assert found["steps"].tolist() == [20, 20] and found["cap"] == 20


@pytest.mark.parametrize("cap", [0, -3, 2.5, True])
def test_reference_solve_refuses_a_bad_cap(cap):
    with pytest.raises(ValueError, match="cap"):
        reference_solve(contraction_probes(0.5), SolverSpec(method="fixed_point"), cap=cap)


def test_a_job_refuses_a_reference_cap_not_above_n():
    with pytest.raises(ValueError, match="reference_iters"):
        LanguageJob(grid=(1, 8), eval_windows=4, reference_iters=8)
    assert LanguageJob(grid=(1, 8), eval_windows=4, reference_iters=9).reference_iters == 9


def with_reference(result, shift_db: float = 0.0, converged: bool = True):
    """``result`` (one reconstruction network) with a reference solve whose per-image −PSNR is
    the value at N plus ``shift_db``."""
    at_n = result["test"]["metrics"]["neg_psnr"][:, GRID.index(N_TRAIN)]
    return {**result, "test_reference": {
        "metrics": {"neg_psnr": at_n + shift_db}, "residual_rel": np.full(at_n.shape, 5e-5),
        "batch_residual_rel": np.asarray([5e-5, 5e-5 if converged else 3e-3]),
        "steps": np.asarray([40, 100]), "converged": np.asarray([True, converged]),
        "cap": 100, "tol": 1e-4}}


def test_reference_row_holds_when_convergence_changes_nothing_and_fails_when_it_helps():
    same = gap_table([with_reference(inverse_result(26.0, 26.0))], task="deq")["deq_reference"]
    assert same.holds is True, same.check
    assert "2 of 2 batches converged" in same.value
    better = gap_table([with_reference(inverse_result(26.0, 26.0), shift_db=-2.0)],
                       task="deq")["deq_reference"]
    assert better.holds is False, better.check


def test_reference_row_is_undecided_without_a_converged_solve():
    stuck = gap_table([with_reference(inverse_result(26.0, 26.0), converged=False)], task="deq")
    assert stuck["deq_reference"].holds is None
    assert stuck["deq_reference"].facts.closed_by == "convergence"
    absent = gap_table([inverse_result(26.0, 26.0)], task="deq")["deq_reference"]
    assert absent.holds is None and "no reference solve" in absent.check


# -- stability: <arm>_reference ----------------------------------------------------------------

def test_stability_reference_factor_is_checked_before_any_compute_and_scales_each_jobs_n():
    chapter = door.enter("stability", "smoke", train_iters=[9, 18])
    assert chapter.params["reference_factor"] == 3
    assert sorted({(job.train_iter, job.reference_iters) for job in chapter.jobs()}) == [
        (9, 27), (18, 54)]
    assert {job.reference_iters for job in door.enter("stability", "smoke",
                                                      reference_factor=0).jobs()} == {0}
    for profile in ("quick", "paper"):
        assert profiles.resolve("stability", profile)["reference_factor"] == 10
    with pytest.raises(profiles.ParameterError, match="'reference_factor' of figure 'stability'"):
        door.enter("stability", "smoke", reference_factor=1)
    with pytest.raises(profiles.ParameterError, match="reference_factor"):
        door.enter("stability", "smoke", reference_factor=-1)  # the schema's bound


def test_a_stability_job_refuses_a_reference_cap_not_above_its_n():
    params = profiles.resolve("stability", "smoke")
    job = TrainJob.of(params, 0, "ift", 18)
    assert job.reference_iters == 54 and job.training_key() == {
        k: v for k, v in job.key().items() if k != "reference_iters"}
    with pytest.raises(ValueError, match="reference_iters"):
        TrainJob.of({**params, "reference_factor": 1}, 0, "ift", 18)


def test_a_stability_job_stores_its_converged_reference(tmp_path, monkeypatch, data_dir):
    """A micro job solves its test images to convergence after the sweep; the same job without it
    reads the finished training back (``reference_iters`` is an evaluation field) and sweeps the
    same numbers."""
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    params = dict(profiles.resolve("stability", "smoke"))
    params.update(model="micro", train_size=32, test_size=20, epochs=1, batch_size=16,
                  pretrain_steps=1, train_iters=[4], backward_iter=4, test_iters=[1, 4, 8],
                  eval_batch=10, fit_every=0, reference_factor=3)
    job = TrainJob.of(params, 0, "ift", 4)
    found = job.compute(progress=False)
    reference = found["test_reference"]
    assert reference["cap"] == 12 and reference["tol"] == 1e-4
    assert reference["metrics"]["error"].shape == (20,) and reference["residual_rel"].shape == (20,)
    assert set(np.unique(reference["metrics"]["error"])) <= {0.0, 1.0}
    assert reference["converged"].shape == (2,) and np.all(reference["steps"] <= 12)
    assert np.array_equal(reference["converged"], reference["batch_residual_rel"] < 1e-4)
    plain = TrainJob.of({**params, "reference_factor": 0}, 0, "ift", 4)
    assert plain.checkpoints() == job.checkpoints()
    again = plain.compute(progress=False)
    assert "test_reference" not in again
    assert np.array_equal(again["test"]["errors"], found["test"]["errors"])


def with_stability_reference(result: dict, gain: float = 0.0, converged: bool = True) -> dict:
    """A stability job result with a reference solve whose per-image errors are those at N, with
    a share ``gain`` of the images turned from wrong to right (the converged solve's gain)."""
    errors = np.asarray(result["test"]["errors"], dtype=float)[:, ITERS.index(18)].copy()
    wrong = np.flatnonzero(errors)
    errors[wrong[:int(round(gain * errors.size))]] = 0.0
    return {**result, "test_reference": {
        "metrics": {"error": errors, "loss": errors.copy()},
        "residual_rel": np.full(errors.shape, 5e-5),
        "batch_residual_rel": np.asarray([5e-5, 5e-5 if converged else 3e-3]),
        "steps": np.asarray([60, 180]), "converged": np.asarray([True, converged]),
        "cap": 180, "tol": 1e-4}}


def stability_rows(gain: float = 0.0, converged: bool = True, arm_gain: float | None = None):
    """The claims of two PLATEAU arms (the paper's picture) with reference solves: the IFT
    arm's converged solve gains ``gain``, the unrolled arm's ``arm_gain`` (default the same)."""
    other = gain if arm_gain is None else arm_gain
    return stability_table(
        [with_stability_reference(r, gain, converged) for r in stability_seeds(PLATEAU)],
        [with_stability_reference(r, other) for r in stability_seeds(PLATEAU)])


def test_stability_reference_row_holds_within_delta_and_fails_beyond_it():
    same = stability_rows()
    for arm in ("ift", "unrolled"):
        row = same[f"{arm}_reference"]
        assert row.holds is True, row.check
        assert row.margin == same[f"{arm}_no_gain"].margin  # the arm's no_gain δ
        assert row.section == arm and "over 5 seeds" in row.value
        assert "10 of 10 batches converged" in row.value
    assert same["ift_reference"].claim.startswith("Book's own (gates nothing), IFT: a solve run")
    small = stability_rows(gain=0.002)  # 0.2 points: inside δ (a quarter of what N' = 3 costs)
    assert small["ift_reference"].holds is True, small["ift_reference"].check
    better = stability_rows(gain=0.2, arm_gain=0.0)  # 20 points: beyond δ
    assert better["ift_reference"].holds is False, better["ift_reference"].check
    assert "+20.00 pt" in better["ift_reference"].value
    assert better["unrolled_reference"].holds is True
    # the row gates nothing: the paper's rows read the same
    for key in ("ift_no_gain", "ift_fewer_hurt", "ift_residual", "not_more_stable"):
        assert better[key].holds == same[key].holds, key


def test_stability_reference_row_is_undecided_without_a_converged_solve():
    stuck = stability_rows(converged=False)["ift_reference"]
    assert stuck.holds is None and stuck.facts.closed_by == "convergence"
    assert "did not converge in 5 of 10 batches" in stuck.check
    absent = stability_table(stability_seeds(PLATEAU), stability_seeds(PLATEAU))
    assert absent["ift_reference"].holds is None
    assert "no reference solve" in absent["ift_reference"].check


def test_stability_reference_row_is_decided_on_the_models_that_fit():
    ift = [with_stability_reference(r) for r in stability_seeds(PLATEAU)]
    unfit = [dict(r, train_accuracy=0.5, cap_reached=True) for r in ift[:2]] + ift[2:]
    rows = stability_table(unfit, ift)
    assert rows["ift_reference"].holds is None and "too few models fit" in rows[
        "ift_reference"].check
    one_off = [dict(ift[0], train_accuracy=0.5, cap_reached=True)] + ift[1:]
    rows = stability_table(one_off, ift)
    assert rows["ift_reference"].holds is True and "over 4 seeds" in rows["ift_reference"].value


def fake_language_sweep(best_temperature: float, windows: int = 40) -> dict:
    """A test sweep whose NLL at N is lowest at ``best_temperature`` (a parabola in log T),
    the held-out half the same as the fitted one, and a top-1 error lowest at the largest count."""
    grid = np.asarray(GRID)
    noise = np.random.default_rng(0).normal(0, 0.01, (windows, 1))
    metrics = {tm(t): 2.0 + (np.log(t) - np.log(best_temperature)) ** 2 + noise
               + np.zeros((1, len(grid))) for t in TEMPERATURES}
    metrics["nll"] = metrics[tm(1.0)]
    metrics["top1_error"] = np.tile(np.linspace(0.6, 0.4, len(grid)), (windows, 1))
    return {"iterations": grid, "metrics": metrics}


def test_the_temperature_is_fitted_on_one_half_and_read_on_the_other():
    found = calibrate(fake_language_sweep(1.35), N_TRAIN)
    assert found.temperature == 1.35 and not found.at_edge
    at_n = GRID.index(N_TRAIN)
    assert found.calibrated[at_n] < found.raw[at_n]
    assert found.best(found.top1_error) == GRID[-1]
    plain = calibrate(fake_language_sweep(1.0), N_TRAIN)
    assert plain.temperature == 1.0 and np.array_equal(plain.calibrated, plain.raw)
    assert calibrate(fake_language_sweep(4.0), N_TRAIN).at_edge


def test_a_sweep_without_temperatures_is_reported_not_computed():
    old = fake_language_sweep(1.0)
    old["metrics"] = {"nll": old["metrics"]["nll"]}
    with pytest.raises(KeyError, match="predates"):
        calibrate(old, N_TRAIN)
    text = calibration_report([old, fake_language_sweep(1.2)], [0, 1], N_TRAIN)
    assert "seed 0: not computed" in text and "seed 1: T̂ = 1.2" in text


def test_language_probes_score_the_nll_at_every_temperature_and_the_top1_error():
    torch.manual_seed(0)
    model = DEQTransformerLM(TransformerConfig(vocab_size=7, context=8, width=8, heads=2,
                                               ffn_width=16))
    ids = np.random.default_rng(0).integers(0, 7, 200)
    probe = next(language_probes(model, ids, windows=4))
    z = probe.z0
    with torch.no_grad():
        found = probe.score(z, probe.g(z))
    assert torch.equal(found["nll"], found[tm(1.0)])
    assert set(found) == {"nll", "top1_error", *(tm(t) for t in TEMPERATURES)}
    assert bool(((found["top1_error"] >= 0) & (found["top1_error"] <= 1)).all())
    assert not torch.equal(found[tm(0.5)], found[tm(2.0)])
