"""Outer loop of the meta chapter: checkpoint/resume, the results cache, validation
(budget: < 40 s)."""

import jax
import numpy as np
import pytest

from i2o import import_graph, profiles
from i2o.chapters.meta import checkpoint, outer, runs
from i2o.chapters.meta.imaml import IMAMLModel
from i2o.chapters.meta.maml import MAMLModel
from i2o.chapters.meta.model import params_of

MODELS = {"maml": MAMLModel, "imaml": IMAMLModel}


def _same_params(a, b):
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


@pytest.mark.parametrize("method", ["maml", "imaml"])
def test_interrupted_run_resumes_to_the_same_parameters(tmp_path, method):
    model = MODELS[method](inner_steps=2, outer_steps=6, hidden=(8,), meta_batch_size=3,
                           n_meta_batches=2 if method == "imaml" else None, checkpoint_every=2)
    straight = model.train()
    partial = model.train(tmp_path, stop_at=3)
    assert partial.steps_done == 4 and (tmp_path / checkpoint.FILENAME).exists()
    assert not _same_params(partial.params, straight.params)
    resumed = model.train(tmp_path)
    assert resumed.resumed_from == 4 and resumed.steps_done == 6
    # CPU time is counted on the chunks that did not compile: 2 of the 3 chunks of 2 steps
    assert straight.steady_steps == 4 and straight.steady_cpu_seconds > 0
    assert resumed.steady_steps == 0  # its one chunk compiled
    assert _same_params(resumed.params, straight.params)
    np.testing.assert_array_equal(resumed.losses, straight.losses)
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
    for sweep in runs.jobs(params):
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
