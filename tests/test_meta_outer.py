"""Outer loop of the meta chapter: checkpoint/resume, the results cache, validation
(budget: < 40 s)."""

import jax
import numpy as np
import pytest

from i2o.chapters.meta import checkpoint, outer, runs


def _same_params(a, b):
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


@pytest.mark.parametrize("method", ["maml", "imaml"])
def test_interrupted_run_resumes_to_the_same_parameters(tmp_path, method):
    spec = runs.ModelSpec(method, inner_steps=2, outer_steps=6, hidden=(8,),
                                meta_batch_size=3, n_meta_batches=2 if method == "imaml" else None)
    straight = runs.train_uncached(spec, checkpoint_every=2)
    partial = runs.train_uncached(spec, tmp_path, checkpoint_every=2, stop_at=3)
    assert partial.steps_done == 4 and (tmp_path / checkpoint.FILENAME).exists()
    assert not _same_params(partial.params, straight.params)
    resumed = runs.train_uncached(spec, tmp_path, checkpoint_every=2)
    assert resumed.resumed_from == 4 and resumed.steps_done == 6
    # CPU time is counted on the chunks that did not compile: 2 of the 3 chunks of 2 steps
    assert straight.steady_steps == 4 and straight.steady_cpu_seconds > 0
    assert resumed.steady_steps == 0  # its one chunk compiled
    assert _same_params(resumed.params, straight.params)
    np.testing.assert_array_equal(resumed.losses, straight.losses)
    # a finished run found in its checkpoint directory returns at once, unchanged
    again = runs.train_uncached(spec, tmp_path, checkpoint_every=2)
    assert again.resumed_from == 6 and _same_params(again.params, straight.params)


def test_training_lowers_the_meta_loss():
    spec = runs.ModelSpec("maml", inner_steps=1, outer_steps=300, n_meta_batches=1,
                                meta_batch_size=5)
    losses = runs.train_uncached(spec, checkpoint_every=300).losses
    assert losses[-20:].mean() < 0.8 * losses[:20].mean()


def test_train_model_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    spec = runs.ModelSpec("maml", inner_steps=1, outer_steps=4, hidden=(8,),
                                meta_batch_size=2)
    first = runs.train_model(spec, checkpoint_every=2)
    assert first["losses"].shape == (4,) and first["resumed_from"] == 0
    assert list((tmp_path / "meta").glob("train-maml-N1-online-seed0-*.ckpt/state.npz"))
    second = runs.train_model(spec, checkpoint_every=2)
    assert second["seconds"] == first["seconds"]  # read from the cache, not recomputed
    assert _same_params(runs.params_of(first), runs.params_of(second))


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
    ({"method": "reptile"}, "method"), ({"outer_steps": 0}, "n_steps"),
    ({"n_meta_batches": 0}, "n_meta_batches"), ({"regularization": 0.0}, "regularization"),
    ({"inner_steps": 0}, "inner_steps"), ({"seed": -1}, "seed"),
    ({"learning_rate": 0.0}, "learning_rate")])
def test_model_spec_validation(kwargs, word):
    base = {"method": "imaml", "inner_steps": 16, "outer_steps": 10}
    with pytest.raises(ValueError, match=word):
        runs.ModelSpec(**{**base, **kwargs})


def test_outer_config_validation():
    with pytest.raises(ValueError, match="checkpoint_every"):
        outer.OuterConfig(n_steps=5, checkpoint_every=0)
