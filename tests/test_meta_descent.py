"""The vmappable inner solver of iMAML against jaxopt's GradientDescent (float64)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from i2o.chapters.meta import descent, imaml, mlp, tasks


def _problem(n_tasks=4, seed=0, hidden=(40, 40)):
    params = mlp.init_mlp(jax.random.PRNGKey(seed), hidden)
    batch = tasks.sample_tasks(jax.random.PRNGKey(seed + 1), n_tasks)
    theta, unravel = ravel_pytree(params)
    return theta, unravel, batch


def _objective(unravel, regularization=2.0):
    def objective(theta, theta_meta, x, y, context):
        return (mlp.mse(unravel(theta), x, y, "none", context)
                + 0.5 * regularization * jnp.sum(jnp.square(theta - theta_meta)))
    return objective


@pytest.mark.parametrize("acceleration", [False, True])
@pytest.mark.parametrize("steps", [1, 16, 50])
def test_iterates_match_jaxopt(acceleration, steps):
    theta, unravel, batch = _problem()
    config = imaml.IMAMLConfig(inner_steps=steps, acceleration=acceleration)
    reference = imaml.inner_solver(config, unravel)
    objective = _objective(unravel)
    ours = jax.jit(lambda x, y, c: descent.run(objective, theta, steps, config.max_line_search,
                                               acceleration, theta, x, y, c))
    for i in range(batch.x_support.shape[0]):
        args = (batch.x_support[i], batch.y_support[i], batch.x_query[i])
        expected = reference.run(theta, theta, *args).params
        np.testing.assert_allclose(ours(*args), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("acceleration", [False, True])
def test_vmap_over_tasks_equals_one_task_at_a_time(acceleration):
    theta, unravel, batch = _problem(n_tasks=5, seed=3)
    objective = _objective(unravel)

    def one(x, y, c):
        return descent.run(objective, theta, 16, 15, acceleration, theta, x, y, c)

    batched = jax.jit(jax.vmap(one))(batch.x_support, batch.y_support, batch.x_query)
    for i in range(5):
        alone = jax.jit(one)(batch.x_support[i], batch.y_support[i], batch.x_query[i])
        np.testing.assert_allclose(batched[i], alone, rtol=1e-10, atol=1e-13)


def test_line_search_halves_until_sufficient_decrease_and_stops_at_maxls():
    def quadratic(x):
        return 0.5 * 100.0 * jnp.sum(x ** 2)  # curvature 100: steps above 0.02 overshoot

    x = jnp.ones(3)
    value, grad = jax.value_and_grad(quadratic)(x)
    enough = descent.line_search(quadratic, x, value, grad, jnp.asarray(1.0), 15)
    assert float(enough.step) == pytest.approx(2.0 ** -7)  # the first halving with s ≤ 1/100
    assert int(enough.halvings) == 7 and bool(enough.satisfied)
    cut = descent.line_search(quadratic, x, value, grad, jnp.asarray(1.0), 3)
    assert float(cut.step) == pytest.approx(2.0 ** -3)  # three halvings, then the last trial
    assert int(cut.halvings) == 3 and not bool(cut.satisfied)  # taken although rejected


def test_meta_gradient_is_unchanged_by_the_forward_solver():
    theta, unravel, batch = _problem(n_tasks=3, seed=5)
    params = unravel(theta)
    config = imaml.IMAMLConfig(acceleration=True)
    ours = jax.jit(jax.grad(lambda p: imaml.meta_loss(p, batch, config, batched=True)))(params)
    reference = jax.jit(jax.grad(
        lambda p: imaml.meta_loss(p, batch, config, batched=False)))(params)
    for key in params:
        np.testing.assert_allclose(ours[key], reference[key], rtol=1e-8, atol=1e-12)
