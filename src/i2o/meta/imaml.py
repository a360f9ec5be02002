"""iMAML (Rajeswaran et al. 2019; the paper's Eq. 5) with jaxopt (Blondel et al. 2022).

The task-adapted parameters approximately minimize the proximally regularized support loss

    F(θ; θ_meta) = ℓ(θ, support) + λ/2 ‖θ − θ_meta‖²,

by N iterations of jaxopt's ``GradientDescent`` started at θ_meta with backtracking line search
(``stepsize=0``; ``maxiter`` = N = 16 in the paper). One such *inner step* is one jaxopt
iteration: one gradient of F, a backtracking search on the step size (halving from the previous
iteration's accepted step times two, at most ``maxls`` trials) and, with ``acceleration=True``
(jaxopt's default, FISTA), Nesterov momentum. The step size is carried from one iteration to the
next, so evaluating N + ΔN steps at test time simply continues the same iteration.

The hypergradient treats θ_N as the exact minimizer θ* and applies the implicit function theorem
to ∇_θ F(θ*, θ_meta) = 0 (the paper's Eq. 3):

    ∂θ*/∂θ_meta = λ (∇²ℓ(θ*) + λ I)⁻¹,   ∇_meta ℓ(θ*, query) = λ (∇²ℓ(θ*) + λ I)⁻¹ ∇ℓ(θ*, query),

with the linear system solved by ``cg_maxiter`` (5 in the paper) conjugate-gradient iterations.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import jaxopt
from jaxopt import linear_solve

from i2o.meta.mlp import Params, mse
from i2o.meta.tasks import TaskBatch


@dataclass(frozen=True)
class IMAMLConfig:
    """``regularization`` = λ; ``inner_steps`` = N = jaxopt ``maxiter``; ``cg_maxiter`` and
    ``cg_tol`` (relative residual; JAX's default 10⁻⁵) for the IFT linear system; ``tol`` jaxopt's
    stopping tolerance of the inner solver (0: always exactly N iterations)."""

    regularization: float = 2.0
    inner_steps: int = 16
    cg_maxiter: int = 5
    cg_tol: float = 1e-5
    max_line_search: int = 15
    acceleration: bool = True
    tol: float = 0.0

    def __post_init__(self) -> None:
        for name in ("inner_steps", "cg_maxiter", "max_line_search"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer ≥ 1; got {value!r}")
        lam = self.regularization
        if not (isinstance(lam, int | float) and not isinstance(lam, bool) and lam > 0):
            raise ValueError(f"regularization (λ) must be a number > 0; got {lam!r}")
        for name in ("tol", "cg_tol"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and not isinstance(value, bool) and value >= 0):
                raise ValueError(f"{name} must be a number ≥ 0; got {value!r}")


def regularized_loss(params: Params, meta_params: Params, x: jax.Array, y: jax.Array,
                     regularization: float) -> jax.Array:
    """F(θ; θ_meta) = ℓ(θ, (x, y)) + λ/2 ‖θ − θ_meta‖²."""
    sq = sum(jnp.sum(jnp.square(p - m)) for p, m in
             zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(meta_params),
                 strict=True))
    return mse(params, x, y) + 0.5 * regularization * sq


def inner_solver(config: IMAMLConfig, maxiter: int | None = None) -> jaxopt.GradientDescent:
    """The jaxopt solver of the inner problem, with implicit differentiation by CG."""
    objective = functools.partial(regularized_loss, regularization=config.regularization)
    return jaxopt.GradientDescent(
        fun=objective,
        stepsize=0.0,
        maxiter=config.inner_steps if maxiter is None else maxiter,
        maxls=config.max_line_search,
        tol=config.tol,
        acceleration=config.acceleration,
        implicit_diff=True,
        implicit_diff_solve=functools.partial(linear_solve.solve_cg, maxiter=config.cg_maxiter,
                                              tol=config.cg_tol),
    )


def adapt(meta_params: Params, x: jax.Array, y: jax.Array, config: IMAMLConfig) -> Params:
    """θ_N ≈ argmin F(·; θ_meta) from θ_meta; differentiable in θ_meta by implicit differentiation
    (the initialization is not differentiated through, as in iMAML)."""
    init = jax.lax.stop_gradient(meta_params)
    return inner_solver(config).run(init, meta_params, x, y).params


def task_query_loss(meta_params: Params, x_s: jax.Array, y_s: jax.Array, x_q: jax.Array,
                    y_q: jax.Array, config: IMAMLConfig) -> jax.Array:
    """ℓ(θ_N(θ_meta, support), query) for one task."""
    return mse(adapt(meta_params, x_s, y_s, config), x_q, y_q)


def meta_loss(meta_params: Params, tasks: TaskBatch, config: IMAMLConfig) -> jax.Array:
    """Mean query loss over the tasks of a meta-batch (the outer objective of Eq. 5)."""

    def one_task(x_s: jax.Array, y_s: jax.Array, x_q: jax.Array, y_q: jax.Array) -> jax.Array:
        return task_query_loss(meta_params, x_s, y_s, x_q, y_q, config)

    per_task = jax.vmap(one_task)(tasks.x_support, tasks.y_support, tasks.x_query, tasks.y_query)
    return jnp.mean(per_task)
