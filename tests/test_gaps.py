"""The generic N + ΔN sweep, the gap curves and the step-based training loop (budget: ~10 s)."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
import torch

from i2o.chapters.deq_gaps.curves import GapCurve, curve_from_sweep, plot_gap
from i2o.deq import SolverSpec
from i2o.deq.sweep import Probe, check_grid, iteration_grid, sweep_iterations
from i2o.train.loop import Plan, train_steps

matplotlib.use("Agg")
torch.set_num_threads(1)
DIM, BATCH = 6, 5


def _affine_problem(seed: int = 0, contraction: float = 0.8):
    """``f(z) = W z + x`` with ‖W‖ = contraction: fixed point ``z* = (I − W)⁻¹ x``."""
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(DIM, DIM, generator=generator, dtype=torch.float64)
    w *= contraction / torch.linalg.matrix_norm(w, 2)
    x = torch.randn(BATCH, DIM, generator=generator, dtype=torch.float64)
    z_star = torch.linalg.solve(torch.eye(DIM, dtype=torch.float64) - w, x.T).T
    return w, x, z_star


def _probes(w, x, z_star, batches: int = 2):
    for b in range(batches):
        xb, zb = x + b, z_star + torch.linalg.solve(
            torch.eye(DIM, dtype=torch.float64) - w, torch.full((DIM, BATCH), float(b),
                                                               dtype=torch.float64)).T

        def score(z, fz, zb=zb):
            return {"distance": (z - zb).pow(2).sum(1), "one": torch.ones(z.shape[0])}

        yield Probe(g=lambda z, xb=xb: z @ w.T + xb, z0=torch.zeros_like(xb), score=score)


def test_fixed_point_sweep_matches_hand_iteration():
    w, x, z_star = _affine_problem()
    grid = [0, 1, 3, 7]
    result = sweep_iterations(_probes(w, x, z_star, batches=1), grid,
                              SolverSpec(method="fixed_point", return_best=False))
    z, expected = torch.zeros_like(x), []
    for n in range(max(grid) + 1):
        if n in grid:
            expected.append((z - z_star).pow(2).sum(1).numpy())
        z = z @ w.T + x
    np.testing.assert_allclose(result["metrics"]["distance"], np.stack(expected, 1), rtol=1e-10)
    assert result["metrics"]["distance"].shape == (BATCH, len(grid))
    assert result["trace_rel"].shape == (1, max(grid) + 1)
    # a contraction: the residual of z_n decreases with n
    assert np.all(np.diff(result["residual_rel"].mean(0)) < 0)


@pytest.mark.parametrize("method", ["fixed_point", "anderson", "broyden"])
@pytest.mark.parametrize("return_best", [True, False])
def test_shared_solve_equals_one_solve_per_count(method, return_best):
    w, x, z_star = _affine_problem(seed=1)
    spec = SolverSpec(method=method, return_best=return_best)
    grid = [9, 0, 2, 5]
    shared = sweep_iterations(_probes(w, x, z_star), grid, spec, shared_solve=True)
    separate = sweep_iterations(_probes(w, x, z_star), grid, spec, shared_solve=False)
    np.testing.assert_array_equal(shared["iterations"], grid)
    for key in ("residual_rel", "residual_abs", "batch_residual_rel"):
        np.testing.assert_allclose(shared[key], separate[key], rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(shared["metrics"]["distance"], separate["metrics"]["distance"],
                               rtol=1e-9, atol=1e-14)
    assert shared["metrics"]["one"].shape == (2 * BATCH, len(grid))


def test_best_iterate_rule_never_increases_the_batch_residual():
    """With return_best the reported residual is the running minimum of the trace."""
    w, x, z_star = _affine_problem(seed=2, contraction=1.3)  # expansive: residual grows
    grid = list(range(8))
    result = sweep_iterations(_probes(w, x, z_star, batches=1), grid,
                              SolverSpec(method="fixed_point", return_best=True))
    trace = result["trace_rel"][0]
    np.testing.assert_allclose(result["batch_residual_rel"][0], np.minimum.accumulate(trace))
    last = sweep_iterations(_probes(w, x, z_star, batches=1), grid,
                            SolverSpec(method="fixed_point", return_best=False))
    np.testing.assert_allclose(last["batch_residual_rel"][0], trace)


def test_the_head_is_scored_once_per_returned_iterate():
    """A constant map reaches its fixed point in one step: from then on the best iterate stays
    z_1, and every later grid point reads its scores instead of scoring it again. The rows are
    those of a solve per count; returning the last iterate scores at every point."""
    target = torch.arange(2 * DIM, dtype=torch.float64).reshape(2, DIM)
    calls = []

    def probes():
        def score(z, fz):
            calls.append(1)
            return {"distance": (z - target).pow(2).sum(1)}

        yield Probe(g=lambda z: target.clone(), z0=torch.zeros_like(target), score=score)

    grid = [0, 1, 3, 5, 7]
    for method in ("fixed_point", "broyden"):
        calls.clear()
        spec = SolverSpec(method=method, return_best=True)
        shared = sweep_iterations(probes(), grid, spec)
        assert len(calls) == 2, method  # z_0, then z_1 for the four points from 1 on
        separate = sweep_iterations(probes(), grid, spec, shared_solve=False)
        np.testing.assert_array_equal(shared["metrics"]["distance"],
                                      separate["metrics"]["distance"])
        np.testing.assert_array_equal(shared["residual_rel"], separate["residual_rel"])
    calls.clear()
    sweep_iterations(probes(), grid, SolverSpec(method="fixed_point", return_best=False))
    assert len(calls) == len(grid)  # a new iterate at every point: scored each time


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_the_finiteness_of_an_iterate_is_read_from_its_float64_norm(dtype):
    """The recorder tells a non-finite ``f(z)`` from its float64 norm where that is exact (entries
    of 32 bits or fewer, even at the largest finite value) and tests every entry otherwise: a
    float64 map whose squares overflow is still finite."""
    from i2o.deq.sweep import _all_finite

    largest = torch.finfo(dtype).max
    cases = [torch.zeros(3, 4, dtype=dtype), torch.full((3, 4), largest, dtype=dtype)]
    for bad in (math.inf, -math.inf, math.nan):
        case = torch.ones(3, 4, dtype=dtype)
        case[1, 2] = bad
        cases.append(case)
    for fz in cases:
        scale = float(torch.linalg.vector_norm(fz.double()))
        assert _all_finite(fz, scale) == bool(torch.isfinite(fz).all()), fz
    if dtype == torch.float64:
        assert not math.isfinite(float(torch.linalg.vector_norm(cases[1])))
        assert _all_finite(cases[1], math.inf)


def test_grid_and_spec_are_checked_before_compute():
    with pytest.raises(ValueError, match="distinct integers"):
        check_grid([1, 1])
    with pytest.raises(ValueError, match="distinct integers"):
        check_grid([-1, 2])
    with pytest.raises(ValueError, match="distinct integers"):
        check_grid([])
    with pytest.raises(TypeError, match="SolverSpec"):
        sweep_iterations([], [1], "broyden")
    with pytest.raises(ValueError, match="no probe"):
        sweep_iterations([], [1], SolverSpec())


def test_iteration_grid_spans_one_to_factor_n():
    grid = iteration_grid(8, factor=3.0, points=10)
    assert grid[0] == 1 and grid[-1] == 24 and 8 in grid
    assert grid == sorted(set(grid))


def _fake_sweep(values: np.ndarray, grid: list[int]) -> dict:
    return {"iterations": np.asarray(grid), "metrics": {"m": values},
            "residual_rel": np.tile(1.0 / (1 + np.asarray(grid, float)), (values.shape[0], 1))}


def test_curve_gap_and_paired_standard_error():
    rng = np.random.default_rng(0)
    grid = [1, 4, 8, 16]
    values = rng.normal(size=(50, 4)) + np.array([3.0, 1.0, 0.0, 0.5])
    curve = curve_from_sweep(_fake_sweep(values, grid), "m", train_iters=8, label="t")
    assert curve.gap[2] == 0.0 and curve.gap_se[2] == 0.0
    diff = values[:, 3] - values[:, 2]
    assert curve.gap[3] == pytest.approx(diff.mean())
    assert curve.gap_se[3] == pytest.approx(diff.std(ddof=1) / math.sqrt(50))
    percent = curve_from_sweep(_fake_sweep(values, grid), "m", 8, "t", transform="percent")
    np.testing.assert_allclose(percent.gap, 100 * curve.gap)
    flipped = curve_from_sweep(_fake_sweep(values, grid), "m", 8, "t", sign=-1.0)
    np.testing.assert_allclose(flipped.gap, -curve.gap)


def test_perplexity_transform_uses_the_delta_method():
    grid = [2, 4]
    nll = np.array([[1.0, 0.9], [1.2, 1.0], [0.8, 0.8]])
    curve = curve_from_sweep(_fake_sweep(nll, grid), "m", train_iters=4, label="lm",
                             transform="exp_mean")
    np.testing.assert_allclose(curve.value, np.exp(nll.mean(0)))
    linear = np.exp(nll.mean(0)) * nll
    diff = linear[:, 0] - linear[:, 1]
    assert curve.gap_se[0] == pytest.approx(diff.std(ddof=1) / math.sqrt(3))


def test_curve_rejects_unknown_metric_and_missing_training_count():
    sweep = _fake_sweep(np.zeros((3, 2)), [1, 2])
    with pytest.raises(KeyError, match="metric 'x'"):
        curve_from_sweep(sweep, "x", 1, "t")
    with pytest.raises(ValueError, match="N = 5"):
        curve_from_sweep(sweep, "m", 5, "t")
    with pytest.raises(ValueError, match="transform"):
        curve_from_sweep(sweep, "m", 1, "t", transform="log")


def test_summary_reports_most_negative_gap_above_n():
    its = np.array([1, 2, 4, 6, 8])
    gap = np.array([5.0, 1.0, 0.0, -0.3, 0.2])
    curve = GapCurve("t", "err", 4, its, gap + 10, gap, np.full(5, 0.1), 1.0 / its)
    s = curve.summary()
    assert s["best_gap"] == pytest.approx(-0.3) and s["best_gap_n"] == 6
    assert s["min_negative_gap"] == pytest.approx(1.0)
    assert s["fraction_negative_worse"] == 1.0
    assert s["value_at_n"] == 10.0 and s["value_at_max"] == pytest.approx(10.2)
    with pytest.raises(ValueError, match="not among"):
        GapCurve("t", "err", 3, its, gap, gap, gap, gap)


def test_plot_gap_draws_both_axes():
    import matplotlib.pyplot as plt

    its = np.array([1, 2, 4, 8])
    curve = GapCurve("t", "err", 4, its, its * 1.0, its - 4.0, np.full(4, 0.1), 1.0 / its)
    fig, ax = plt.subplots()
    twin = plot_gap(ax, curve)
    assert twin is not None and twin.get_yscale() == "log"
    assert len(ax.lines) >= 3  # the curve and the two dashed reference lines
    no_residual = GapCurve("t", "err", 4, its, its * 1.0, its - 4.0, np.full(4, np.nan),
                           np.full(4, np.nan))
    assert plot_gap(ax, no_residual) is None
    plt.close(fig)


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)


def _tiny_step_loss(model):
    def step_loss(step):
        generator = torch.Generator().manual_seed(step)
        x = torch.randn(8, 3, generator=generator)
        noise = torch.randn(1, generator=generator)
        return (model.linear(x).squeeze(1) - x.sum(1) + 0.01 * noise).pow(2).mean(), {"aux": step}
    return step_loss


def test_training_resumes_to_the_same_parameters(tmp_path):
    plan = Plan(steps=6, lr=0.05, checkpoint_every=3)
    torch.manual_seed(0)
    straight = _Tiny()
    history = train_steps(straight, _tiny_step_loss(straight), plan)
    torch.manual_seed(0)
    first = _Tiny()
    train_steps(first, _tiny_step_loss(first), Plan(steps=6, lr=0.05, checkpoint_every=3),
                tmp_path)
    torch.manual_seed(1)  # different initial weights: everything must come from the checkpoint
    resumed = _Tiny()
    resumed_history = train_steps(resumed, _tiny_step_loss(resumed), plan, tmp_path)
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    assert resumed_history["aux"] == history["aux"] == list(range(6))
    assert history["loss"][-1] < history["loss"][0]
    with pytest.raises(ValueError, match="another run"):
        train_steps(resumed, _tiny_step_loss(resumed), Plan(steps=7, lr=0.05), tmp_path)


def test_training_stops_on_a_non_finite_loss():
    from i2o.train import health

    model = _Tiny()
    before = [w.detach().clone() for w in model.parameters()]
    history = train_steps(model, lambda step: (model.linear.weight.sum() * float("nan"), {}),
                          Plan(steps=2))
    assert history["nonfinite_step"] == [0]
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert "non-finite at step 0" in health.diverged(history["loss"], nonfinite_step=0)
    with pytest.raises(ValueError, match="steps"):
        Plan(steps=0)


def test_chapter_jobs_train_per_seed_to_the_regime_and_the_sweep_on_a_fixed_budget():
    from i2o.chapters.deq_gaps import runs
    from i2o.compute import profiles

    params = profiles.resolve("deq_gaps", "quick")
    jobs = runs.build_jobs(params)
    assert [job.seed for job in jobs.classification] == params["seeds"]
    assert [job.seed for job in jobs.language] == params["seeds"]
    assert len(params["seeds"]) >= 3
    main = jobs.classification[0]
    assert main.fit_every > 0 and main.settings().fit_every == main.fit_every
    steps = main.epochs * math.ceil(main.train_size / main.batch_size)  # the cap's steps
    for job in jobs.overparam:  # a fixed budget: at least the cap's steps on every size
        assert job.fit_every == 0 and job.seed == main.seed
        assert job.epochs * math.ceil(job.train_size / job.batch_size) >= steps
    for task in runs.TASKS:
        n = runs._train_iters(jobs, task)
        grid = (getattr(jobs, task)[0] if task in ("classification", "language")
                else getattr(jobs, task)).grid
        assert grid[0] == 1 and n in grid and grid[-1] >= 2 * n


def test_each_task_carries_its_solvers_built_once_from_the_manifest():
    """N becomes ``max_iter`` in one place (:func:`runs.solver`); training and the sweep read
    the job's specs (the classifier's training settings rebuild exactly them)."""
    from i2o.chapters.deq_gaps import runs
    from i2o.compute import profiles

    params = profiles.resolve("deq_gaps", "quick", cls_backward_iter=11, inv_backward_iter=13)
    jobs = runs.build_jobs(params)
    for job in (*jobs.classification, *jobs.overparam):
        assert job.forward_spec == SolverSpec(method="broyden", max_iter=params["cls_train_iters"],
                                              tol=0.0)
        assert job.backward_spec.max_iter == 11 and job.train_iters == params["cls_train_iters"]
        settings = job.settings()
        assert settings.forward is job.forward_spec and settings.backward is job.backward_spec
    for job in jobs.language:
        assert job.forward_spec == job.backward_spec == SolverSpec(
            method=params["lm_method"], max_iter=params["lm_train_iters"], tol=0.0)
        assert job.deq().forward_spec == job.forward_spec  # IFT: the spec as carried
    for job in (jobs.deq, jobs.elder):
        assert job.forward_spec == runs.solver("fixed_point", params["inv_train_iters"])
        assert job.backward_spec.max_iter == 13
        assert job.deq().backward_spec is job.backward_spec
    unrolled = runs.build_jobs(params.with_(lm_backward="unrolled")).language[0]
    assert unrolled.deq().forward_spec.return_best is False  # the sweep's rule is training's


def test_jobs_are_distinct_picklable_values_whose_modules_stay_out_of_plots_and_claims():
    import pickle

    from i2o.chapters.deq_gaps import runs
    from i2o.compute import import_graph, profiles
    from i2o.compute.job import Job

    params = profiles.resolve("deq_gaps", "smoke")
    jobs = runs.jobs(params)
    names = [job.name for job in jobs]
    assert names[:3] == ["language", "inverse-elder", "inverse-deq"]  # the longest first
    assert set(names) == {"classification", "language", "inverse-deq", "inverse-elder",
                          "baseline-pixels", "baseline-bigram"}
    assert names[-2:] == ["baseline-pixels", "baseline-bigram"]  # the cheapest last
    assert len(jobs) == len(set(jobs)) == 8  # the main classifier listed once
    for job in jobs:
        assert isinstance(job, Job) and job.figure == "deq_gaps"
        assert pickle.loads(pickle.dumps(job)) == job  # what the sweep sends to a worker
        assert not job.is_cached()  # the tests' results folder starts empty
        reached = import_graph.closure(job.module)
        assert not {f"i2o.chapters.deq_gaps.{m}" for m in ("runs", "claims", "figures",
                                                           "prose", "curves")} & set(reached)
    assert len({repr(sorted(job.key().items())) for job in jobs}) == len(jobs)


def test_mdeq_training_warm_up_then_ift_and_resume(tmp_path):
    from i2o.chapters.deq_gaps.classification import ClassificationJob, train_mdeq
    from i2o.train.evaluate import classification_probes

    forward = SolverSpec(method="broyden", max_iter=3, tol=0.0)
    job = ClassificationJob(architecture="micro", forward_spec=forward, backward_spec=forward,
                            train_size=20, epochs=1, batch_size=10, pretrain_steps=1,
                            grid=(0, 3, 6), eval_size=20)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(20, 3, 32, 32, generator=generator)
    labels = torch.arange(20) % 10
    model, history = train_mdeq(job, images, labels, tmp_path)
    assert len(history["loss"]) == job.steps() == 2
    assert math.isnan(history["residual_rel"][0]) and math.isfinite(history["residual_rel"][1])
    again, resumed = train_mdeq(job, images, labels, tmp_path)  # finished: nothing retrained
    assert resumed["loss"] == history["loss"]
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    result = sweep_iterations(classification_probes(again, images, labels, batch_size=8),
                              job.grid, job.forward_spec)
    errors = result["metrics"]["error"]
    assert errors.shape == (20, 3) and set(np.unique(errors)) <= {0.0, 1.0}


@pytest.mark.parametrize("change, named", [
    ({"cls_pretrain_steps": 10_000}, "cls_pretrain_steps"),
    ({"lm_heads": 3}, "lm_heads"),
    ({"inv_crop": 15}, "inv_crop"),
    ({"op_sizes": [40, 40]}, "op_sizes"),
    ({"lm_pretrain_steps": 100_000}, "lm_pretrain_steps"),
    ({"lm_train_chars": 64}, "lm_train_chars"),
])
def test_check_params_names_the_parameter_before_any_compute(change, named):
    from i2o.compute import door, profiles

    door.enter("deq_gaps", "quick")  # the profiles themselves pass
    with pytest.raises(profiles.ParameterError, match=named):
        door.enter("deq_gaps", "quick", **change)


def _toy_corpus(length: int = 600):
    from i2o.data.shakespeare import CharCorpus

    ids = np.random.default_rng(0).integers(0, 5, size=length)
    return CharCorpus(vocabulary="abcde", train=ids[:500], test=ids[500:], source="toy")


def _language_job(**fields):
    from i2o.chapters.deq_gaps.language import LanguageJob

    return LanguageJob(**{"grid": (1, 3), "eval_windows": 2, **fields})


def test_language_model_warms_up_shallow_then_trains_the_deq_on_its_text_slice(tmp_path):
    from i2o.chapters.deq_gaps.language import train_language_model

    spec = SolverSpec(method="broyden", max_iter=3, tol=0.0)
    job = _language_job(context=8, width=8, heads=2, ffn_width=8, forward_spec=spec,
                        backward_spec=spec, steps=4, pretrain_steps=2, train_chars=40,
                        batch_size=4, jac_weight=0.1)
    corpus = _toy_corpus()
    assert len(job.training_text(corpus)) == 40
    assert len(_language_job(context=8).training_text(corpus)) == 500  # 0: the whole split
    model, history = train_language_model(job, corpus, tmp_path)
    residuals, jacobian = history["residual_rel"], history["jacobian"]
    assert len(history["loss"]) == len(residuals) == len(jacobian) == 4
    assert all(math.isnan(r) for r in residuals[:2] + jacobian[:2])  # the shallow warm-up
    assert all(math.isfinite(r) for r in residuals[2:] + jacobian[2:])  # then the DEQ
    _, resumed = train_language_model(job, corpus, tmp_path)  # finished: read back
    assert resumed["loss"] == history["loss"]


@pytest.mark.parametrize("change, message", [
    ({"pretrain_steps": 4}, "pretrain_steps"), ({"train_chars": 8}, "train_chars"),
    ({"train_chars": -1}, "train_chars"), ({"pretrain_layers": 0}, "pretrain_layers"),
    ({"forward_spec": SolverSpec(max_iter=0, tol=0.0)}, "forward_spec.max_iter"),
])
def test_language_job_refuses_a_warm_up_or_text_it_cannot_train(change, message):
    _language_job(context=8, steps=4, pretrain_steps=3, train_chars=9)  # the limits themselves
    with pytest.raises(ValueError, match=message):
        _language_job(**{"context": 8, "steps": 4, **change})


def test_every_task_spec_names_a_job_role_and_parameters_of_the_manifest():
    """The registry of tasks is the chapter's one table: each spec's name is a role of the
    chapter's jobs, its fit threshold and evaluation set are manifest parameters, and its
    metrics are curves the sweep can draw."""
    from dataclasses import fields

    from i2o.chapters.deq_gaps.runs import ChapterJobs
    from i2o.chapters.deq_gaps.tasks import TASKS
    from i2o.compute import profiles
    from i2o.verdicts.curves import TRANSFORMS

    roles = {f.name for f in fields(ChapterJobs)}
    parameters = profiles.entry("deq_gaps")["parameters"]
    assert list(TASKS) == ["classification", "language", "deq", "elder"]
    for name, task in TASKS.items():
        assert task.name == name and name in roles
        assert task.fit.threshold in parameters and task.eval_size in parameters
        assert task.transform in TRANSFORMS
        assert task.inverse == (task.appendix_g4 is not None)
