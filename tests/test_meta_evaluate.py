"""Test-time sweeps of i2o.chapters.meta (budget: < 30 s at one thread)."""

import jax
import numpy as np
import pytest

from i2o.chapters.meta import evaluate, imaml, maml, mlp, tasks
from i2o.compute import cache_entries


@pytest.fixture(scope="module")
def problem():
    params = mlp.init_mlp(jax.random.PRNGKey(0), (8,))
    return params, tasks.sample_tasks(jax.random.PRNGKey(1), 4)


def test_step_grid():
    grid = evaluate.step_grid(10_000, 4, include=(16, 5))
    assert grid[0] == 1 and grid[-1] == 10_000 and 16 in grid and 5 in grid
    assert np.all(np.diff(grid) > 0)
    with pytest.raises(ValueError, match="max_steps"):
        evaluate.step_grid(0)


@pytest.mark.parametrize("normalization", ["none", "joint_bn"])
def test_maml_sweep_reproduces_training_adaptation(problem, normalization):
    params, batch = problem
    config = maml.MAMLConfig(inner_steps=3, step_size=0.01, normalization=normalization)
    curves = evaluate.adaptation_curves("maml", params, batch, [0, 1, 3, 50], config,
                                        chunk_size=3)
    assert curves["query"].shape == (4, 4)
    for task in range(4):
        args = (batch.x_support[task], batch.y_support[task], batch.x_query[task],
                batch.y_query[task])
        np.testing.assert_allclose(curves["query"][task, 2],
                                   maml.task_query_loss(params, *args, config), rtol=1e-10)
        np.testing.assert_allclose(curves["query"][task, 0],
                                   mlp.mse(params, args[2], args[3], normalization, args[0]),
                                   rtol=1e-12)
    # gradient descent with a small step lowers the support loss
    assert np.all(curves["support"][:, -1] < curves["support"][:, 0])


def test_imaml_sweep_reproduces_training_adaptation(problem):
    params, batch = problem
    config = imaml.IMAMLConfig(regularization=2.0, inner_steps=16)
    curves = evaluate.adaptation_curves("imaml", params, batch, [4, 16, 64], config)
    for task in range(4):
        args = (batch.x_support[task], batch.y_support[task], batch.x_query[task],
                batch.y_query[task])
        np.testing.assert_allclose(curves["query"][task, 1],
                                   imaml.task_query_loss(params, *args, config), rtol=1e-10)
    # continuing the iteration drives the inner objective towards stationarity
    assert np.median(curves["grad_norm"][:, 2]) < np.median(curves["grad_norm"][:, 0])
    assert np.all(np.isnan(curves["objective_reference"]))  # no reference asked for
    assert np.all(np.isnan(curves["query_reference"]))


def test_imaml_reference_is_a_lower_objective_from_the_last_iterate(problem):
    params, batch = problem
    config = imaml.IMAMLConfig(regularization=2.0, inner_steps=16)
    curves = evaluate.adaptation_curves("imaml", params, batch, [2, 8], config,
                                        reference_iters=200)
    reference = curves["objective_reference"]
    assert reference.shape == (4, 2) and np.all(np.isfinite(reference))
    assert np.all(reference <= curves["objective"][:, -1:] + 1e-12)
    # two iterations leave F well above what the convergent solver reaches, on most tasks
    gap = (curves["objective"][:, 0] - reference[:, 0]) / np.abs(reference[:, 0])
    assert np.sum(gap > 1e-4) >= 3
    assert curves["grad_norm_0"].shape == (4,)
    assert np.all(curves["grad_norm_0"] > curves["grad_norm"][:, -1])
    # the test MSE at the converged solution: one finite value per task, not the sweep's last
    converged = curves["query_reference"]
    assert np.all(np.isfinite(converged)) and np.all(converged == converged[:, :1])
    assert np.any(np.abs(converged[:, 0] - curves["query"][:, -1]) > 1e-8)


def test_maml_objective_is_the_support_loss_and_its_start_gradient_is_recorded(problem):
    params, batch = problem
    config = maml.MAMLConfig(inner_steps=1, step_size=0.01)
    curves = evaluate.adaptation_curves("maml", params, batch, [1, 5], config)
    np.testing.assert_allclose(curves["objective"], curves["support"])
    start = [np.sqrt(sum(np.sum(np.square(g)) for g in jax.tree_util.tree_leaves(
        jax.grad(mlp.mse)(params, batch.x_support[t], batch.y_support[t], "none",
                          batch.x_query[t])))) for t in range(4)]
    np.testing.assert_allclose(curves["grad_norm_0"], start, rtol=1e-10)


def test_statistics():
    rng = np.random.default_rng(0)
    per_task = rng.standard_normal((400, 3)) + np.array([1.0, 2.0, 3.0])
    mean, se = evaluate.mean_and_standard_error(per_task)
    np.testing.assert_allclose(mean, per_task.mean(0))
    assert np.all(np.abs(se - 1 / 20) < 0.01)
    shared = rng.standard_normal((400, 1)) * 10
    paired = per_task + shared  # a large per-task effect shared by every column
    diff, diff_se = evaluate.paired_difference(paired, 2, 0)
    assert abs(diff - 2.0) < 0.3 and diff_se < 0.1  # pairing removes the shared effect
    np.testing.assert_allclose(evaluate.loss_increase(np.array([3.0, 1.0, 2.0]), [1, 5, 9], 5),
                               [2.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="grid"):
        evaluate.loss_increase(np.zeros(3), [1, 2, 3], 7)
    with pytest.raises(ValueError, match="method"):
        evaluate.adaptation_curves("reptile", {}, None, [1], None)


def test_sweep_jobs_fill_the_cache_entries_the_notebook_reads():
    """``python -m i2o.sweep meta`` runs each job of ``runs.jobs`` (a model's sweep, which trains
    the model first); afterwards the notebook's jobs of the same parameters find the model and
    its sweep cached."""
    from i2o.chapters.meta import runs
    from i2o.compute import profiles

    p = profiles.resolve("meta", "smoke", maml_outer_steps=3, n_test_tasks=4)
    jobs = runs.evaluations(p)
    assert runs.jobs(p) == [*runs.mechanism_runs(p), *jobs]
    names = [job.model.label for job in jobs]
    assert names == [m.label for m in runs.all_models(p)]
    assert "maml-N1-per_set_bn-online-seed0" in names  # the normalization ablation
    assert len(set(names)) == len(names)
    (maml_job,) = [job for job in jobs if job.name == "eval-maml-N1-online-seed0"]
    assert not maml_job.is_cached() and not maml_job.model.is_cached()
    maml_job.run()
    assert maml_job.is_cached() and maml_job.model.is_cached()
    (other,) = [job for job in jobs if job.model.label == "imaml-N4-lam8-set1-seed0"]
    assert not other.is_cached()
    before = {path.name for path in cache_entries.results_dir().rglob("*")}
    (again,) = [job for job in runs.jobs(p) if job == maml_job]  # what collect reads
    assert again.run()["query"].shape == (4, len(again.grid))
    assert {path.name for path in cache_entries.results_dir().rglob("*")} == before
