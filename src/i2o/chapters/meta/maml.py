"""MAML (Finn et al. 2017; the paper's Eq. 4 with N inner steps).

The task-adapted parameters are N steps of gradient descent on the support loss started from the
meta-parameters,

    θ_0 = θ_meta,   θ_{n+1} = θ_n − α ∇ℓ(θ_n, support),   n = 0, …, N − 1,

and the meta-loss is the query loss ℓ(θ_N, query), averaged over a meta-batch of tasks. Its
gradient is taken by differentiating through the N unrolled steps (second order: the Hessians of
the support loss enter through ∂θ_{n+1}/∂θ_n = I − α ∇²ℓ(θ_n)).

:class:`MAMLModel` is a model meta-trained this way (a job, :mod:`.model`).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from i2o.chapters.meta import outer
from i2o.chapters.meta.mlp import Params, check_normalization, mse
from i2o.chapters.meta.model import Model
from i2o.chapters.meta.tasks import TaskBatch


@dataclass(frozen=True)
class MAMLConfig:
    """``inner_steps`` = N (training), ``step_size`` = α, ``normalization`` of the MLP
    (:data:`i2o.chapters.meta.mlp.NORMALIZATIONS`)."""

    inner_steps: int = 1
    step_size: float = 0.01
    normalization: str = "none"

    def __post_init__(self) -> None:
        n = self.inner_steps
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"inner_steps must be an integer ≥ 1; got {n!r}")
        if not (isinstance(self.step_size, int | float) and self.step_size > 0):
            raise ValueError(f"step_size must be a number > 0; got {self.step_size!r}")
        check_normalization(self.normalization)


def inner_step(params: Params, x: jax.Array, y: jax.Array, step_size: float,
               normalization: str = "none", context: jax.Array | None = None) -> Params:
    """One gradient step on the support loss: θ ← θ − α ∇ℓ(θ, (x, y)) (``context``: the query
    inputs, used by ``joint_bn`` only)."""
    grads = jax.grad(mse)(params, x, y, normalization, context)
    return jax.tree_util.tree_map(lambda p, g: p - step_size * g, params, grads)


def adapt(meta_params: Params, x: jax.Array, y: jax.Array, n_steps: int,
          step_size: float, normalization: str = "none",
          context: jax.Array | None = None) -> Params:
    """θ_N: ``n_steps`` unrolled gradient steps from the meta-parameters (differentiable)."""

    def body(params: Params, _: None) -> tuple[Params, None]:
        return inner_step(params, x, y, step_size, normalization, context), None

    adapted, _ = jax.lax.scan(body, meta_params, None, length=n_steps)
    return adapted


def task_query_loss(meta_params: Params, x_s: jax.Array, y_s: jax.Array, x_q: jax.Array,
                    y_q: jax.Array, config: MAMLConfig) -> jax.Array:
    """ℓ(θ_N(θ_meta, support), query) for one task."""
    adapted = adapt(meta_params, x_s, y_s, config.inner_steps, config.step_size,
                    config.normalization, context=x_q)
    return mse(adapted, x_q, y_q, config.normalization, context=x_s)


def meta_loss(meta_params: Params, tasks: TaskBatch, config: MAMLConfig) -> jax.Array:
    """Mean query loss over the tasks of a meta-batch (the outer objective of Eq. 4)."""
    def one_task(x_s: jax.Array, y_s: jax.Array, x_q: jax.Array, y_q: jax.Array) -> jax.Array:
        return task_query_loss(meta_params, x_s, y_s, x_q, y_q, config)

    per_task = jax.vmap(one_task)(tasks.x_support, tasks.y_support, tasks.x_query, tasks.y_query)
    return jnp.mean(per_task)


@dataclass(frozen=True)
class MAMLModel(Model):
    """A model meta-trained by MAML with N = ``inner_steps`` inner steps of size α =
    ``step_size`` (a job: :class:`i2o.chapters.meta.model.Model`)."""

    method = "maml"

    step_size: float = 0.01  # α

    def config(self) -> MAMLConfig:
        return MAMLConfig(self.inner_steps, self.step_size, self.normalization)

    def meta_loss(self) -> outer.MetaLoss:
        config = self.config()
        return lambda params, tasks: meta_loss(params, tasks, config)
