"""The converged reference solve (:mod:`i2o.deq.reference`), the book's own row that reads it
(``<task>_reference``) and the language model's temperature check (:mod:`.calibration`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bank import GRID, N_TRAIN, gap_table, inverse_result

from i2o.chapters.deq_gaps.calibration import calibrate, calibration_report
from i2o.chapters.deq_gaps.language import TEMPERATURES, LanguageJob, language_probes
from i2o.chapters.deq_gaps.language import temperature_metric as tm
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
