"""iMAML (Rajeswaran et al. 2019; the paper's Eq. 5) with jaxopt (Blondel et al. 2022).

The task-adapted parameters approximately minimize the proximally regularized support loss

    F(θ; θ_meta) = ℓ(θ, support) + λ/2 ‖θ − θ_meta‖²,

by N iterations of jaxopt's ``GradientDescent`` started at θ_meta with backtracking line search
(``stepsize=0``; ``maxiter`` = N = 16 in the paper), one task after the other, or for a whole
meta-batch at once by :mod:`.descent` on a GPU (the same iterates, tested against jaxopt). One
such *inner step* is one iteration: one gradient of F and a backtracking search on the step
size (halving from the previous iteration's accepted step times two, at most ``maxls``
trials). The paper's solver
("gradient descent with line search"), jaxopt's iMAML example and the book's profiles have no
momentum (``acceleration=False``, this class's default); jaxopt's FISTA momentum stays available
(``imaml_acceleration``). The step size (and the momentum) is carried from one iteration to the
next, so evaluating N + ΔN steps at test time simply continues the same iteration.

λ is not given in the paper. At Finn et al.'s initialization the hidden layers' meta-gradient is
noise for λ ≤ 4 and not for λ = 8 (:mod:`.gradient_noise`), so the book's profiles use λ = 8.

The hypergradient treats θ_N as the exact minimizer θ* and applies the implicit function theorem
to ∇_θ F(θ*, θ_meta) = 0 (the paper's Eq. 3):

    ∂θ*/∂θ_meta = λ (∇²ℓ(θ*) + λ I)⁻¹,   ∇_meta ℓ(θ*, query) = λ (∇²ℓ(θ*) + λ I)⁻¹ ∇ℓ(θ*, query),

with the linear system solved by ``cg_maxiter`` conjugate-gradient iterations. The paper does not
state this count; the book's profiles use 5, the count of jaxopt's iMAML example (which also
solves the inner problem by 16 iterations of gradient descent with line search).

:class:`IMAMLModel` is a model meta-trained this way (a job, :mod:`.model`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import jaxopt
from jax.flatten_util import ravel_pytree
from jaxopt import implicit_diff, linear_solve

from i2o.chapters.meta import descent, outer
from i2o.chapters.meta.mlp import Params, check_normalization, mse
from i2o.chapters.meta.model import Model
from i2o.chapters.meta.tasks import TaskBatch

Unravel = Callable[[jax.Array], Params]


@dataclass(frozen=True)
class IMAMLConfig:
    """``regularization`` = λ; ``inner_steps`` = N = jaxopt ``maxiter``; ``cg_maxiter`` (not
    stated in the paper; 5 as in jaxopt's iMAML example) and ``cg_tol`` (relative residual;
    10⁻⁷ as in jaxopt's iMAML example) for the IFT linear system;
    ``tol`` jaxopt's stopping tolerance of the inner solver (0: always exactly N iterations);
    ``acceleration`` jaxopt's FISTA momentum (off: plain gradient descent, as in the paper);
    ``normalization`` of the MLP (:data:`i2o.chapters.meta.mlp.NORMALIZATIONS`)."""

    regularization: float = 2.0
    inner_steps: int = 16
    cg_maxiter: int = 5
    cg_tol: float = 1e-7
    max_line_search: int = 15
    acceleration: bool = False
    tol: float = 0.0
    normalization: str = "none"

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
        check_normalization(self.normalization)


def regularized_loss(params: Params, meta_params: Params, x: jax.Array, y: jax.Array,
                     regularization: float, normalization: str = "none",
                     context: jax.Array | None = None) -> jax.Array:
    """F(θ; θ_meta) = ℓ(θ, (x, y)) + λ/2 ‖θ − θ_meta‖² (``context``: ``joint_bn``'s query
    inputs)."""
    sq = sum(jnp.sum(jnp.square(p - m)) for p, m in
             zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(meta_params),
                 strict=True))
    return mse(params, x, y, normalization, context) + 0.5 * regularization * sq


def inner_solver(config: IMAMLConfig, unravel: Unravel,
                 maxiter: int | None = None) -> jaxopt.GradientDescent:
    """The jaxopt solver of the inner problem on *flat* parameter vectors (``unravel`` maps a
    vector back to the MLP's dict), with implicit differentiation by CG.

    Flat vectors make jaxopt's per-iteration tree arithmetic (and that of every line-search trial)
    one array operation instead of one per weight matrix: the same algorithm, about 1.4× faster.
    """

    return jaxopt.GradientDescent(
        fun=inner_objective(config, unravel),
        stepsize=0.0,
        maxiter=config.inner_steps if maxiter is None else maxiter,
        maxls=config.max_line_search,
        tol=config.tol,
        acceleration=config.acceleration,
        implicit_diff=True,
        implicit_diff_solve=cg_solver(config),
    )


def cg_solver(config: IMAMLConfig) -> Callable:
    """``solve(matvec, b)`` by ``cg_maxiter`` conjugate-gradient iterations (jaxopt)."""
    return functools.partial(linear_solve.solve_cg, maxiter=config.cg_maxiter, tol=config.cg_tol)


def adapt(meta_params: Params, x: jax.Array, y: jax.Array, config: IMAMLConfig,
          context: jax.Array) -> Params:
    """θ_N ≈ argmin F(·; θ_meta) from θ_meta; differentiable in θ_meta by implicit differentiation
    (the initialization is not differentiated through, as in iMAML). ``context``: the task's
    query inputs (read by ``joint_bn`` only)."""
    theta_meta, unravel = ravel_pytree(meta_params)
    init = jax.lax.stop_gradient(theta_meta)
    return unravel(inner_solver(config, unravel).run(init, theta_meta, x, y, context).params)


def task_query_loss(meta_params: Params, x_s: jax.Array, y_s: jax.Array, x_q: jax.Array,
                    y_q: jax.Array, config: IMAMLConfig) -> jax.Array:
    """ℓ(θ_N(θ_meta, support), query) for one task."""
    adapted = adapt(meta_params, x_s, y_s, config, context=x_q)
    return mse(adapted, x_q, y_q, config.normalization, context=x_s)


def inner_objective(config: IMAMLConfig, unravel: Unravel) -> Callable[..., jax.Array]:
    """F(θ; θ_meta) on flat vectors: ``objective(theta, theta_meta, x, y, context)``."""

    def objective(theta: jax.Array, theta_meta: jax.Array, x: jax.Array, y: jax.Array,
                  context: jax.Array) -> jax.Array:
        return (mse(unravel(theta), x, y, config.normalization, context)
                + 0.5 * config.regularization * jnp.sum(jnp.square(theta - theta_meta)))

    return objective


def adapt_tasks(theta_meta: jax.Array, x: jax.Array, y: jax.Array, context: jax.Array,
                config: IMAMLConfig, unravel: Unravel, batched: bool | None = None) -> jax.Array:
    """θ_N of every task of a batch (rows), as flat vectors; the same numbers as ``adapt`` per
    task, differentiable in θ_meta by the same implicit differentiation (jaxopt's ``root_vjp``
    with CG, vmapped over tasks).

    The forward solves run one task after the other with jaxopt (``lax.map``), or, with
    ``batched``, as one program over the tasks (:mod:`.descent`: the same iterates, one objective
    evaluation per line-search trial). On this book's CPU the batched program measured about 2×
    *slower* per outer step (``benchmarks/bench_meta.py``; a batched line search also runs every
    task for as many trials as the slowest needs), so ``None`` batches only on a GPU, where it
    has not been measured.
    """
    if batched is None:
        batched = jax.default_backend() == "gpu"
    return _adapt_tasks(config, unravel, not batched, theta_meta, x, y, context)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _adapt_tasks(config: IMAMLConfig, unravel: Unravel, sequential: bool, theta_meta: jax.Array,
                 x: jax.Array, y: jax.Array, context: jax.Array) -> jax.Array:
    if sequential:  # jaxopt, one task after the other
        solver = inner_solver(config, unravel)
        return jax.lax.map(lambda args: solver.run(theta_meta, theta_meta, *args).params,
                           (x, y, context))
    objective = inner_objective(config, unravel)
    return jax.vmap(lambda x_task, y_task, context_task: descent.run(
        objective, theta_meta, config.inner_steps, config.max_line_search, config.acceleration,
        theta_meta, x_task, y_task, context_task))(x, y, context)


def _adapt_tasks_forward(config, unravel, sequential, theta_meta, x, y, context):
    solutions = _adapt_tasks(config, unravel, sequential, theta_meta, x, y, context)
    return solutions, (solutions, theta_meta, x, y, context)


def _adapt_tasks_backward(config, unravel, sequential, residuals, cotangents):
    solutions, theta_meta, x, y, context = residuals
    solver = inner_solver(config, unravel)

    def one_task(solution, x_task, y_task, context_task, cotangent):
        return implicit_diff.root_vjp(solver.optimality_fun, solution,
                                      (theta_meta, x_task, y_task, context_task), cotangent,
                                      solve=cg_solver(config))

    d_meta, d_x, d_y, d_context = jax.vmap(one_task)(solutions, x, y, context, cotangents)
    return jnp.sum(d_meta, axis=0), d_x, d_y, d_context


_adapt_tasks.defvjp(_adapt_tasks_forward, _adapt_tasks_backward)


def meta_loss(meta_params: Params, tasks: TaskBatch, config: IMAMLConfig,
              batched: bool | None = None) -> jax.Array:
    """Mean query loss over the tasks of a meta-batch (the outer objective of Eq. 5);
    ``batched``: see :func:`adapt_tasks`."""
    theta_meta, unravel = ravel_pytree(meta_params)
    adapted = adapt_tasks(theta_meta, tasks.x_support, tasks.y_support, tasks.x_query, config,
                          unravel, batched)
    per_task = jax.vmap(lambda theta, x, y, context: mse(unravel(theta), x, y,
                                                         config.normalization, context))(
        adapted, tasks.x_query, tasks.y_query, tasks.x_support)
    return jnp.mean(per_task)


@dataclass(frozen=True)
class IMAMLModel(Model):
    """A model meta-trained by iMAML with λ = ``regularization``, N = ``inner_steps`` solver
    iterations (FISTA momentum when ``acceleration``) and ``cg_maxiter`` CG iterations for the
    hypergradient (a job: :class:`i2o.chapters.meta.model.Model`)."""

    method = "imaml"

    regularization: float = 2.0  # λ
    cg_maxiter: int = 5
    acceleration: bool = False  # jaxopt's FISTA momentum in the inner solver

    def config(self) -> IMAMLConfig:
        return IMAMLConfig(regularization=self.regularization, inner_steps=self.inner_steps,
                           cg_maxiter=self.cg_maxiter, acceleration=self.acceleration,
                           normalization=self.normalization)

    def meta_loss(self) -> outer.MetaLoss:
        config = self.config()
        return lambda params, tasks: meta_loss(params, tasks, config)

    def tag(self) -> str:
        return f"-lam{self.regularization:g}{'-fista' if self.acceleration else ''}"
