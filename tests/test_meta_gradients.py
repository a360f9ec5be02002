"""Meta-gradients of the meta chapter: MAML against finite differences, iMAML's implicit
hypergradient against differentiating through a high-precision inner solve (float64;
budget: < 40 s)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from i2o.chapters.meta import imaml, maml, mlp, tasks


def _small_problem(hidden, n_tasks=3, seed=0):
    params = mlp.init_mlp(jax.random.PRNGKey(seed), hidden)
    batch = tasks.sample_tasks(jax.random.PRNGKey(seed + 1), n_tasks)
    return params, batch


@pytest.mark.parametrize("normalization", ["none", "per_set_bn", "joint_bn"])
def test_maml_meta_gradient_matches_finite_differences(normalization):
    params, batch = _small_problem((6, 6))
    config = maml.MAMLConfig(inner_steps=3, step_size=0.01, normalization=normalization)
    flat, unravel = ravel_pytree(params)

    @jax.jit
    def loss(v):
        return maml.meta_loss(unravel(v), batch, config)

    grad = jax.jit(jax.grad(loss))(flat)
    rng = np.random.default_rng(0)
    for _ in range(3):
        direction = jnp.asarray(rng.standard_normal(flat.shape))
        eps = 1e-7
        numeric = (loss(flat + eps * direction) - loss(flat - eps * direction)) / (2 * eps)
        np.testing.assert_allclose(jnp.vdot(grad, direction), numeric, rtol=1e-6)


def test_maml_gradient_is_second_order():
    """Dropping the Hessian terms (first-order MAML) gives a different gradient: the test above
    would catch an implementation that stopped gradients through the inner steps."""
    params, batch = _small_problem((6, 6))
    config = maml.MAMLConfig(inner_steps=3, step_size=0.05)
    exact = ravel_pytree(jax.grad(maml.meta_loss)(params, batch, config))[0]

    def first_order(p):
        adapted = jax.vmap(lambda xs, ys: maml.adapt(p, xs, ys, 3, 0.05))(
            batch.x_support, batch.y_support)
        adapted = jax.lax.stop_gradient(jax.tree_util.tree_map(lambda a, q: a - q, adapted, p))
        shifted = jax.tree_util.tree_map(lambda a, q: a + q, adapted, p)
        return jnp.mean(jax.vmap(mlp.mse)(shifted, batch.x_query, batch.y_query))

    approx = ravel_pytree(jax.grad(first_order)(params))[0]
    assert float(jnp.linalg.norm(exact - approx)) > 1e-4 * float(jnp.linalg.norm(exact))


def _unrolled_reference(meta, x_s, y_s, x_q, y_q, lam, n_gd=300, n_newton=25):
    """Query loss after solving the inner problem to machine precision — ``n_gd`` fixed-step
    gradient steps on F from θ_meta, then ``n_newton`` Newton steps — differentiable by autodiff
    through every step (and through the initialization θ_0 = θ_meta, whose influence Newton's
    quadratic convergence removes)."""
    flat, unravel = ravel_pytree(meta)

    def objective(v, m):
        return imaml.regularized_loss(unravel(v), unravel(m), x_s, y_s, lam)

    hessian = jax.hessian(objective)(flat, flat)
    step = 1.0 / float(jnp.max(jnp.linalg.eigvalsh(hessian))) / 2.0

    def loss(m):
        def gd(v, _):
            return v - step * jax.grad(objective)(v, m), None

        def newton(v, _):
            return v - jnp.linalg.solve(jax.hessian(objective)(v, m),
                                        jax.grad(objective)(v, m)), None

        solution, _ = jax.lax.scan(gd, m, None, length=n_gd)
        solution, _ = jax.lax.scan(newton, solution, None, length=n_newton)
        return mlp.mse(unravel(solution), x_q, y_q), solution

    return loss, objective, flat, unravel


def test_imaml_hypergradient_matches_differentiating_a_precise_solve():
    params, batch = _small_problem((4,), n_tasks=1, seed=2)
    lam = 5.0
    x_s, y_s, x_q, y_q = (batch.x_support[0], batch.y_support[0], batch.x_query[0],
                          batch.y_query[0])
    loss, objective, flat, unravel = _unrolled_reference(params, x_s, y_s, x_q, y_q, lam)
    (_, solution), reference = jax.value_and_grad(loss, has_aux=True)(flat)
    # the reference solve has converged and F is strongly convex there, so the IFT applies
    assert float(jnp.linalg.norm(jax.grad(objective)(solution, flat))) < 1e-10
    assert float(jnp.min(jnp.linalg.eigvalsh(jax.hessian(objective)(solution, flat)))) > 0

    precise = imaml.IMAMLConfig(regularization=lam, inner_steps=3000, cg_maxiter=50,
                                  cg_tol=1e-14, tol=1e-13)
    adapted = imaml.adapt(params, x_s, y_s, precise, context=x_q)
    np.testing.assert_allclose(ravel_pytree(adapted)[0], solution, atol=1e-8)
    hypergrad = jax.grad(imaml.task_query_loss)(params, x_s, y_s, x_q, y_q, precise)
    np.testing.assert_allclose(ravel_pytree(hypergrad)[0], reference, rtol=1e-6, atol=1e-9)


def test_imaml_paper_settings_hypergradient_is_close_to_exact():
    """With 16 inner iterations and 5 CG iterations (the paper's settings) the hypergradient is
    an approximation; on this small problem it points the same way as the exact one."""
    params, batch = _small_problem((4,), n_tasks=1, seed=2)
    lam = 5.0
    x_s, y_s, x_q, y_q = (batch.x_support[0], batch.y_support[0], batch.x_query[0],
                          batch.y_query[0])
    loss, _, flat, _ = _unrolled_reference(params, x_s, y_s, x_q, y_q, lam)
    reference = jax.grad(lambda m: loss(m)[0])(flat)
    paper = imaml.IMAMLConfig(regularization=lam)
    approx = ravel_pytree(jax.grad(imaml.task_query_loss)(params, x_s, y_s, x_q, y_q, paper))[0]
    cosine = jnp.vdot(approx, reference) / (jnp.linalg.norm(approx) * jnp.linalg.norm(reference))
    assert float(cosine) > 0.9


@pytest.mark.parametrize("kwargs, word", [
    ({"regularization": 0.0}, "regularization"), ({"regularization": -1.0}, "regularization"),
    ({"inner_steps": 0}, "inner_steps"), ({"cg_maxiter": 0}, "cg_maxiter"),
    ({"tol": -1.0}, "tol"), ({"cg_tol": -1.0}, "cg_tol"),
    ({"normalization": "bn"}, "normalization")])
def test_imaml_config_validation(kwargs, word):
    with pytest.raises(ValueError, match=word):
        imaml.IMAMLConfig(**kwargs)


@pytest.mark.parametrize("kwargs, word", [({"inner_steps": 0}, "inner_steps"),
                                          ({"inner_steps": 1.5}, "inner_steps"),
                                          ({"step_size": 0.0}, "step_size"),
                                          ({"normalization": "batch"}, "normalization")])
def test_maml_config_validation(kwargs, word):
    with pytest.raises(ValueError, match=word):
        maml.MAMLConfig(**kwargs)


@pytest.mark.parametrize("normalization", ["none", "joint_bn"])
def test_imaml_batched_meta_loss_matches_per_task_jaxopt_implicit_diff(normalization):
    """``meta_loss`` solves the tasks one after the other and applies its own vmapped IFT
    backward (``adapt_tasks``); its value and gradient equal the mean over tasks of jaxopt's
    per-task implicit differentiation (``task_query_loss``), also when the support loss reads the
    query inputs (``joint_bn``)."""
    params, batch = _small_problem((8, 8), n_tasks=4, seed=3)
    config = imaml.IMAMLConfig(regularization=2.0, normalization=normalization)
    value, grad = jax.value_and_grad(imaml.meta_loss)(params, batch, config)
    per_task = [jax.value_and_grad(imaml.task_query_loss)(
        params, batch.x_support[t], batch.y_support[t], batch.x_query[t], batch.y_query[t],
        config) for t in range(4)]
    np.testing.assert_allclose(value, np.mean([v for v, _ in per_task]), rtol=1e-12)
    expected = np.mean([ravel_pytree(g)[0] for _, g in per_task], axis=0)
    np.testing.assert_allclose(ravel_pytree(grad)[0], expected, rtol=1e-9, atol=1e-12)
    assert float(jnp.linalg.norm(expected)) > 0
