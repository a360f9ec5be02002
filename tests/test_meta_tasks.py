"""Sinusoid task sampler and MLP of i2o.chapters.meta (budget: < 10 s at one thread)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from i2o.chapters.meta import mlp, tasks


def test_task_ranges_shapes_and_targets():
    batch = tasks.sample_tasks(jax.random.PRNGKey(0), n_tasks=2000, n_support=10, n_query=7)
    assert batch.x_support.shape == (2000, 10, 1) and batch.x_query.shape == (2000, 7, 1)
    assert batch.x_support.dtype == jnp.float64
    amp, phase = np.asarray(batch.amplitude), np.asarray(batch.phase)
    assert 0.1 <= amp.min() and amp.max() <= 5.0
    assert 0.0 <= phase.min() and phase.max() <= np.pi
    for x in (batch.x_support, batch.x_query):
        assert -5.0 <= float(x.min()) and float(x.max()) <= 5.0
    # the draws fill their ranges (uniform, not a constant or a sub-interval)
    assert amp.min() < 0.2 and amp.max() > 4.9 and phase.min() < 0.05 and phase.max() > 3.09
    assert abs(amp.mean() - 2.55) < 0.1
    expected = amp[:, None, None] * np.sin(np.asarray(batch.x_query) - phase[:, None, None])
    np.testing.assert_allclose(np.asarray(batch.y_query), expected, rtol=1e-12)


def test_sampler_is_deterministic_and_keyed():
    a = tasks.sample_tasks(jax.random.PRNGKey(3), 5)
    b = tasks.sample_tasks(jax.random.PRNGKey(3), 5)
    c = tasks.sample_tasks(jax.random.PRNGKey(4), 5)
    assert np.array_equal(a.x_support, b.x_support) and np.array_equal(a.amplitude, b.amplitude)
    assert not np.array_equal(a.amplitude, c.amplitude)
    # support and query points are independent draws
    assert not np.allclose(a.x_support, a.x_query)


def test_fixed_training_set_layout():
    fixed = tasks.fixed_training_set(jax.random.PRNGKey(1), n_meta_batches=3, meta_batch_size=4)
    assert fixed.x_support.shape == (3, 4, 10, 1) and fixed.amplitude.shape == (3, 4)
    flat = tasks.flatten_batches(fixed)
    assert flat.x_support.shape == (12, 10, 1)
    assert np.array_equal(flat.amplitude[4:8], fixed.amplitude[1])


@pytest.mark.parametrize("kwargs", [{"n_tasks": 0}, {"n_tasks": 2, "n_support": 0},
                                    {"n_tasks": 2.5}, {"n_tasks": 2, "n_query": -1}])
def test_sampler_rejects_bad_sizes(kwargs):
    with pytest.raises(ValueError, match="must be an integer"):
        tasks.sample_tasks(jax.random.PRNGKey(0), **kwargs)


def test_mlp_shapes_and_normalizations():
    params = mlp.init_mlp(jax.random.PRNGKey(0))
    assert sum(p.size for p in params.values()) == 40 + 40 + 1600 + 40 + 40 + 1
    params = jax.tree_util.tree_map(lambda p: 30 * p + 0.01, params)  # away from the init's zeros
    x = jnp.linspace(-5, 5, 10)[:, None]
    other = jnp.linspace(-1, 4, 10)[:, None]
    plain = mlp.apply_mlp(params, x)
    assert plain.shape == (10, 1) and plain.dtype == jnp.float64
    # no normalization: a point's output is its own, and shifting the inputs changes it
    np.testing.assert_allclose(mlp.apply_mlp(params, x[:5]), plain[:5], rtol=1e-12)
    assert not np.allclose(mlp.apply_mlp(params, x + 2.0), plain)
    # per-set BN: shifting the whole set by a constant leaves the outputs unchanged (the set's
    # position is erased), and a point's output depends on the other points of its set
    per_set = mlp.apply_mlp(params, x, "per_set_bn")
    np.testing.assert_allclose(mlp.apply_mlp(params, x + 2.0, "per_set_bn"), per_set, rtol=1e-9)
    assert not np.allclose(mlp.apply_mlp(params, x[:5], "per_set_bn")[0], per_set[0])
    # joint BN: statistics over the set and its context; shifting only the set is seen
    joint = mlp.apply_mlp(params, x, "joint_bn", context=other)
    assert joint.shape == (10, 1)
    np.testing.assert_allclose(mlp.apply_mlp(params, x + 2.0, "joint_bn", context=other + 2.0),
                               joint, rtol=1e-9)
    assert not np.allclose(mlp.apply_mlp(params, x + 2.0, "joint_bn", context=other), joint)
    np.testing.assert_allclose(
        mlp.apply_mlp(params, jnp.concatenate([x, other]), "per_set_bn")[:10], joint, rtol=1e-12)
    with pytest.raises(ValueError, match="context"):
        mlp.apply_mlp(params, x, "joint_bn")
    with pytest.raises(ValueError, match="normalization"):
        mlp.apply_mlp(params, x, "layer_norm")
    with pytest.raises(ValueError, match="hidden"):
        mlp.init_mlp(jax.random.PRNGKey(0), hidden=(0,))
