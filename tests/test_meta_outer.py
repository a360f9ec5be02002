"""Outer loop of the meta chapter: checkpoint/resume, the best point of a model on a fixed
training set, the results cache, validation (budget: < 60 s)."""

import jax
import numpy as np
import pytest

from i2o.chapters.meta import checkpoint, outer, runs
from i2o.chapters.meta.imaml import IMAMLModel
from i2o.chapters.meta.maml import MAMLModel
from i2o.chapters.meta.model import best_point as model_best_point
from i2o.chapters.meta.model import params_of
from i2o.compute import import_graph, profiles

MODELS = {"maml": MAMLModel, "imaml": IMAMLModel}


def _same_params(a, b):
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


@pytest.mark.parametrize("method", ["maml", "imaml"])
def test_interrupted_run_resumes_to_the_same_parameters(tmp_path, method):
    """MAML on tasks drawn on the fly (last point), iMAML on a fixed set (best point)."""
    model = MODELS[method](inner_steps=2, outer_steps=6, hidden=(8,), meta_batch_size=3,
                           n_meta_batches=2 if method == "imaml" else None, checkpoint_every=2)
    straight = model.train()
    partial = model.train(tmp_path, stop_at=3)
    assert partial.steps_done == 4 and (tmp_path / checkpoint.FILENAME).exists()
    assert not _same_params(partial.final_params, straight.final_params)
    resumed = model.train(tmp_path)
    assert resumed.resumed_from == 4 and resumed.steps_done == 6
    # CPU time is counted on the chunks that did not compile: 2 of the 3 chunks of 2 steps
    assert straight.steady_steps == 4 and straight.steady_cpu_seconds > 0
    assert resumed.steady_steps == 0  # its one chunk compiled
    assert _same_params(resumed.params, straight.params)
    assert _same_params(resumed.final_params, straight.final_params)
    np.testing.assert_array_equal(resumed.losses, straight.losses)
    np.testing.assert_array_equal(resumed.checkpoint_losses, straight.checkpoint_losses)
    assert (resumed.best_step, resumed.best_loss) == (straight.best_step, straight.best_loss)
    # a finished run found in its checkpoint directory returns at once, unchanged
    again = model.train(tmp_path)
    assert again.resumed_from == 6 and _same_params(again.params, straight.params)


def test_training_lowers_the_meta_loss():
    model = MAMLModel(inner_steps=1, outer_steps=300, n_meta_batches=1, meta_batch_size=5,
                      checkpoint_every=300)
    losses = model.train().losses
    assert losses[-20:].mean() < 0.8 * losses[:20].mean()


def test_a_trained_model_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    model = MAMLModel(inner_steps=1, outer_steps=4, hidden=(8,), meta_batch_size=2,
                      checkpoint_every=2)
    assert model.name == "train-maml-N1-online-seed0" and not model.is_cached()
    first = model.run()
    assert first["losses"].shape == (4,) and first["resumed_from"] == 0
    assert list((tmp_path / "meta").glob("train-maml-N1-online-seed0-*.ckpt/state.npz"))
    second = MAMLModel(inner_steps=1, outer_steps=4, hidden=(8,), meta_batch_size=2,
                       checkpoint_every=4).run()  # another interval: the same model
    assert second["seconds"] == first["seconds"]  # read from the cache, not recomputed
    assert _same_params(params_of(first), params_of(second))


def test_model_and_sweep_keys_hold_what_they_depend_on():
    """A model's key is its hyperparameters (its method's only; not the checkpoint interval) and
    the code of its own method; a sweep's key holds its model's, and its code the model's."""
    maml = MAMLModel(inner_steps=1, outer_steps=4)
    imaml = IMAMLModel(inner_steps=16, outer_steps=4, regularization=8.0)
    assert set(maml.key()) == {"inner_steps", "outer_steps", "n_meta_batches", "meta_batch_size",
                               "learning_rate", "hidden", "normalization", "seed", "step_size"}
    assert {"regularization", "cg_maxiter", "acceleration"} <= set(imaml.key())
    assert "step_size" not in imaml.key()
    assert imaml.name == "train-imaml-N16-lam8-online-seed0"
    closure = {m: set(import_graph.closure(m)) for m in (maml.module, imaml.module)}
    assert "i2o.chapters.meta.imaml" not in closure[maml.module]  # editing iMAML keeps MAML
    assert "i2o.chapters.meta.maml" not in closure[imaml.module]
    for training in closure.values():
        assert not {"i2o.chapters.meta.evaluate", "i2o.chapters.meta.floor",
                    "i2o.chapters.meta.claims", "i2o.chapters.meta.figures",
                    "i2o.chapters.meta.runs"} & training
    params = profiles.resolve("meta", "smoke")
    for sweep in runs.evaluations(params):
        assert sweep.name == f"eval-{sweep.model.label}"
        assert sweep.key()["model"] == sweep.model.key()
        assert set(import_graph.closure(sweep.model.module)) <= set(
            import_graph.closure(sweep.module))


def test_checkpoint_rejects_another_model(tmp_path):
    checkpoint.save(tmp_path, {"a": np.zeros(3)})
    with pytest.raises(ValueError, match="shape"):
        checkpoint.load(tmp_path, {"a": np.zeros(4)})
    assert checkpoint.load(tmp_path / "missing", {"a": np.zeros(3)}) is None


def test_cycled_tasks_visit_the_training_set_in_order():
    from i2o.chapters.meta.tasks import fixed_training_set

    fixed = fixed_training_set(jax.random.PRNGKey(0), 3, 2)
    source = outer.cycled_tasks(fixed)
    assert np.array_equal(source(jax.numpy.asarray(4)).amplitude, fixed.amplitude[1])


@pytest.mark.parametrize("kwargs, word", [
    ({"checkpoint_every": 0}, "checkpoint_every"), ({"outer_steps": 0}, "n_steps"),
    ({"n_meta_batches": 0}, "n_meta_batches"), ({"regularization": 0.0}, "regularization"),
    ({"inner_steps": 0}, "inner_steps"), ({"seed": -1}, "seed"),
    ({"learning_rate": 0.0}, "learning_rate")])
def test_model_validation(kwargs, word):
    base = {"inner_steps": 16, "outer_steps": 10}
    with pytest.raises(ValueError, match=word):
        IMAMLModel(**{**base, **kwargs})


def test_outer_config_validation():
    with pytest.raises(ValueError, match="checkpoint_every"):
        outer.OuterConfig(n_steps=5, checkpoint_every=0)


# -- the best point of a model on a fixed training set -----------------------------------------

def _tree(value: float):
    return {"w": jax.numpy.full((2,), value)}


def test_keep_lowest_keeps_the_minimum_not_the_last():
    best = outer.no_best_point(_tree(0.0))
    for step, loss in [(1, 3.0), (2, 1.0), (3, 0.5), (4, 0.7), (5, 4.0)]:
        best = outer.keep_lowest(best, _tree(float(step)), loss, step)
    assert (best.step, best.loss) == (3, 0.5)
    assert float(best.params["w"][0]) == 3.0


def test_keep_lowest_never_keeps_a_non_finite_loss():
    best = outer.no_best_point(_tree(0.0))
    for step, loss in [(1, np.nan), (2, -np.inf), (3, np.inf)]:
        best = outer.keep_lowest(best, _tree(float(step)), loss, step)
    assert best.step == -1 and best.loss == np.inf
    best = outer.keep_lowest(best, _tree(4.0), 2.0, 4)
    best = outer.keep_lowest(best, _tree(5.0), np.nan, 5)
    best = outer.keep_lowest(best, _tree(6.0), 2.0, 6)  # a tie keeps the earlier point
    assert (best.step, best.loss) == (4, 2.0)


def test_largest_rise_after_the_best_checkpoint():
    losses = np.array([3.0, 0.5, 0.9, 0.7])
    assert outer.largest_rise_after(losses, 1) == (0.9, pytest.approx(0.4))
    assert outer.largest_rise_after(losses, 3) == (0.7, 0.0)
    assert outer.largest_rise_after(np.array([1.0, np.nan]), 0) == (np.inf, np.inf)
    assert all(np.isnan(outer.largest_rise_after(losses, -1)))


def _scripted_run(losses_at_checkpoints, tmp_path=None, stop_at=None, n_chunks=None):
    """A toy outer loop (a quadratic meta-loss, 2 steps per chunk, ``n_chunks`` chunks: one per
    scripted loss by default) whose training loss at each checkpoint it runs is the next
    scripted one; the parameters themselves are real Adam iterates."""
    script = iter(losses_at_checkpoints)
    n_chunks = len(losses_at_checkpoints) if n_chunks is None else n_chunks

    def meta_loss(params, tasks):
        return jax.numpy.sum(jax.numpy.square(params["w"] - 1.0))

    def training_loss(params):
        return next(script)

    config = outer.OuterConfig(n_steps=2 * n_chunks, checkpoint_every=2)
    return outer.train(meta_loss, lambda step: None, _tree(0.0), config,
                       checkpoint_dir=tmp_path, stop_at=stop_at, training_loss=training_loss)


def test_the_best_point_is_the_lowest_checkpoint_of_a_loss_that_falls_then_rises():
    scripted = [4.0, 2.0, 1.0, 3.0, np.nan]
    result = _scripted_run(scripted)
    assert (result.best_step, result.best_loss) == (6, 1.0)
    np.testing.assert_array_equal(result.checkpoint_steps, [2, 4, 6, 8, 10])
    np.testing.assert_array_equal(result.checkpoint_losses, scripted)
    assert np.isnan(result.final_loss) and result.rise_after_best == np.inf
    assert not _same_params(result.params, result.final_params)
    # the kept parameters are the iterate after 6 steps: a run of 6 steps ends there
    six = outer.train(lambda p, t: jax.numpy.sum(jax.numpy.square(p["w"] - 1.0)),
                      lambda step: None, _tree(0.0), outer.OuterConfig(6, checkpoint_every=2))
    assert _same_params(result.params, six.params)


def test_a_run_never_finite_keeps_its_last_point():
    result = _scripted_run([np.nan, np.inf])
    assert result.best_step == -1 and np.isnan(result.best_loss)
    assert _same_params(result.params, result.final_params)


def test_the_best_point_survives_an_interruption(tmp_path):
    scripted = [4.0, 1.0, 3.0, 2.0]
    partial = _scripted_run(scripted[:2], tmp_path / "run", stop_at=3, n_chunks=4)  # 2 chunks
    assert partial.steps_done == 4 and partial.best_step == 4
    resumed = _scripted_run(scripted[2:], tmp_path / "run", n_chunks=4)  # the 2 remaining
    straight = _scripted_run(scripted)
    assert resumed.resumed_from == 4
    assert (resumed.best_step, resumed.best_loss) == (straight.best_step, straight.best_loss)
    assert _same_params(resumed.params, straight.params)
    np.testing.assert_array_equal(resumed.checkpoint_losses, straight.checkpoint_losses)
    assert resumed.peak_after_best == 3.0 and resumed.rise_after_best == 2.0


def test_a_tracked_run_refuses_another_checkpoint_interval(tmp_path):
    def meta_loss(params, tasks):
        return jax.numpy.sum(jax.numpy.square(params["w"]))

    outer.train(meta_loss, lambda step: None, _tree(1.0), outer.OuterConfig(8, checkpoint_every=2),
                checkpoint_dir=tmp_path, stop_at=2, training_loss=lambda p: meta_loss(p, None))
    with pytest.raises(ValueError, match="interval|shape"):
        outer.train(meta_loss, lambda step: None, _tree(1.0),
                    outer.OuterConfig(8, checkpoint_every=4), checkpoint_dir=tmp_path,
                    training_loss=lambda p: meta_loss(p, None))


def test_a_model_on_a_fixed_set_resumed_keeps_a_bit_identical_best_point(tmp_path):
    """A tiny model on a fixed set, interrupted after 2 of 4 chunks and resumed, ends with the best
    point of an uninterrupted run: the same step, loss and parameters, bit for bit (MAML here;
    iMAML's Figure 4 model in ``test_interrupted_run_resumes_to_the_same_parameters``)."""
    model = MAMLModel(inner_steps=2, outer_steps=8, hidden=(8,), meta_batch_size=3,
                      n_meta_batches=2, checkpoint_every=2)
    straight = model.train()
    assert straight.tracked and 2 <= straight.best_step <= 8
    assert straight.best_loss == np.min(straight.checkpoint_losses)
    interrupted = model.train(tmp_path, stop_at=3)
    assert interrupted.steps_done == 4
    resumed = model.train(tmp_path)
    assert resumed.resumed_from == 4 and resumed.steps_done == 8
    assert (resumed.best_step, resumed.best_loss) == (straight.best_step, straight.best_loss)
    assert _same_params(resumed.params, straight.params)
    np.testing.assert_array_equal(resumed.checkpoint_losses, straight.checkpoint_losses)


def test_the_training_loss_is_the_mean_meta_loss_over_the_fixed_set():
    model = IMAMLModel(inner_steps=2, outer_steps=2, hidden=(8,), meta_batch_size=3,
                       n_meta_batches=2, checkpoint_every=2)
    from i2o.chapters.meta.mlp import init_mlp

    params = init_mlp(model.random_keys()[0], model.hidden)
    fixed = model.training_set()
    loss = outer.fixed_set_loss(model.meta_loss(), fixed)
    per_batch = [model.meta_loss()(params, jax.tree_util.tree_map(lambda a, b=b: a[b], fixed))
                 for b in range(2)]
    assert float(loss(params)) == pytest.approx(np.mean(per_batch), rel=1e-12)


def test_an_online_model_keeps_its_last_point():
    model = MAMLModel(inner_steps=1, outer_steps=4, hidden=(8,), meta_batch_size=2,
                      checkpoint_every=2)
    result = model.train()
    assert not result.tracked and result.best_step == -1
    assert _same_params(result.params, result.final_params)
    assert result.checkpoint_losses.size == 0
    # the same parameters as Adam on the same meta-batches with no tracker at all
    init_key, task_key = model.random_keys()
    from i2o.chapters.meta.mlp import init_mlp

    plain = outer.train(model.meta_loss(), outer.online_tasks(task_key, 2),
                        init_mlp(init_key, (8,)), outer.OuterConfig(4, checkpoint_every=4))
    assert _same_params(result.params, plain.params)
    chosen = model_best_point(result)
    assert chosen["selection"] == "last" and chosen["best_step"] == 4
    assert np.isnan(chosen["best_loss"]) and np.isnan(chosen["final_loss"])


def test_a_figure4_models_key_holds_its_checkpoint_interval():
    fixed = IMAMLModel(inner_steps=16, outer_steps=4, n_meta_batches=2)
    online = IMAMLModel(inner_steps=16, outer_steps=4)
    assert "checkpoint_every" in fixed.key() and "checkpoint_every" not in online.key()


def test_the_best_point_reaches_the_figure4_curves(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    params = profiles.resolve("meta", "smoke")
    model = runs.figure4_models(params)[0]
    job = runs.evaluation(params, model)
    trained = model.run()
    curves = runs._figure4_curves(model, runs._curves(job, job.run()))
    for key in ("best_step", "best_loss", "final_loss", "rise_after_best"):
        assert curves[key] == trained[key]
    assert curves["selection"] == "best" and 1 <= curves["best_step"] <= model.outer_steps
    # the kept point's training loss is the swept loss at N on the training tasks
    assert curves["best_loss"] == pytest.approx(curves["loss_at_n"], rel=1e-6)
