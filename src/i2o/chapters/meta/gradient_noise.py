"""Signal and noise of a meta-gradient: why iMAML can sit on the zero-predictor plateau.

Over K meta-batches with meta-gradients g_1, …, g_K (restricted to a group of parameters),

    ḡ = (1/K) Σ_k g_k,   s² = (1/K) Σ_k ‖g_k − ḡ‖²,   ratio = ‖ḡ‖ / s.

An outer step of Adam uses one meta-batch, so ``ratio`` compares the direction the steps share
with the spread of one step's direction. With no common direction (E g = 0) the mean of K
independent batches still has ‖ḡ‖ ≈ s/√K: ratios near :func:`noise_level` = 1/√K are noise.

At Finn et al.'s initialization (weights of order 10⁻²) the network predicts about 0, and only
the output bias gets a large first-order gradient. iMAML's hypergradient of one task is

    λ (∇²ℓ_s(θ*) + λ I)⁻¹ ∇ℓ_q(θ*),

and the support Hessian ∇²ℓ_s couples each output weight with its hidden unit's bias through the
task's residuals, entries of the order of the amplitude A (up to 5) with a sign set by the phase.
The inverse passes the output layer's gradient (also of order A) to the hidden layers with a
weight of order A/λ. These task-specific terms cancel across tasks but not within one meta-batch:
the hidden layers' meta-gradient is mostly noise when λ is small against A. MAML's single step of
α = 0.01 weights the same coupling by α instead. :func:`measure` puts numbers on this.

:class:`MetaGradientNoise` is the job that measures it at the chapter's initialization.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from i2o.chapters.meta import FIGURE, outer
from i2o.chapters.meta.imaml import IMAMLModel
from i2o.chapters.meta.maml import MAMLModel
from i2o.chapters.meta.mlp import Params, init_mlp, mse
from i2o.chapters.meta.model import seed_keys
from i2o.chapters.meta.tasks import TaskBatch
from i2o.compute import results
from i2o.compute.job import Job

HIDDEN = ("w0", "b0", "w1", "b1")  # the 1-40-40-1 MLP's hidden layers


class GradientNoise(NamedTuple):
    """``signal`` ‖ḡ‖, ``noise`` s, ``ratio`` ‖ḡ‖ / s over ``n_batches`` meta-batches."""

    signal: float
    noise: float
    ratio: float
    n_batches: int


def imaml_row(regularization: float) -> str:
    """The name of iMAML's row at λ = ``regularization`` in a table of measurements."""
    return f"imaml-lam{float(regularization):g}"


def noise_level(n_batches: int) -> float:
    """The ratio of pure noise: E‖ḡ‖ / s ≈ 1/√K for K meta-batches of a zero-mean gradient."""
    if not isinstance(n_batches, int) or n_batches < 2:
        raise ValueError(f"n_batches must be an integer ≥ 2; got {n_batches!r}")
    return 1.0 / math.sqrt(n_batches)


def summarize(gradients: np.ndarray) -> GradientNoise:
    """Signal, noise and their ratio from the rows of ``gradients`` (one flat gradient each)."""
    g = np.asarray(gradients, dtype=float)
    if g.ndim != 2 or g.shape[0] < 2:
        raise ValueError(f"gradients must be a (batches ≥ 2) × (parameters) array; got {g.shape}")
    mean = g.mean(axis=0)
    spread = math.sqrt(float(np.mean(np.sum(np.square(g - mean), axis=1))))
    signal = float(np.linalg.norm(mean))
    return GradientNoise(signal, spread, signal / spread if spread > 0 else math.inf, g.shape[0])


def measure(meta_loss: Callable[[Params, TaskBatch], jax.Array], params: Params,
            batches: Sequence[TaskBatch], group: Sequence[str] = HIDDEN) -> GradientNoise:
    """:class:`GradientNoise` of ``meta_loss``'s gradient at ``params`` over ``batches``,
    restricted to the parameters named in ``group``."""
    missing = sorted(set(group) - set(params))
    if missing:
        raise ValueError(f"group names parameters the model does not have: {missing}")
    gradient = jax.jit(jax.grad(meta_loss))
    rows = []
    for batch in batches:
        g = gradient(params, batch)
        rows.append(np.concatenate([np.ravel(np.asarray(g[name])) for name in group]))
    return summarize(np.stack(rows))


def first_order_loss(meta_params: Params, tasks: TaskBatch) -> jax.Array:
    """The query loss at θ_meta itself, without adaptation: the reference whose gradient has no
    term from the inner problem."""
    return jnp.mean(jax.vmap(lambda x, y: mse(meta_params, x, y))(tasks.x_query, tasks.y_query))


@dataclasses.dataclass(frozen=True)
class MetaGradientNoise(Job):
    """:func:`measure` of the hidden layers' meta-gradient at the initialization of ``seed``,
    over the first ``n_batches`` meta-batches an online model of that seed trains on:
    ``{row: {"signal", "noise", "ratio", "n_batches"}}`` for the query loss without adaptation
    (``first-order``), MAML with ``maml_inner_steps`` steps of ``maml_step_size``, and iMAML at
    each λ of ``regularizations`` (:func:`imaml_row`) with ``imaml_inner_steps``,
    ``cg_maxiter`` and ``acceleration``."""

    figure: ClassVar[str] = FIGURE

    seed: int
    n_batches: int
    meta_batch_size: int
    hidden: tuple[int, ...]
    normalization: str
    maml_inner_steps: int
    maml_step_size: float
    imaml_inner_steps: int
    cg_maxiter: int
    acceleration: bool
    regularizations: tuple[float, ...]

    @property
    def name(self) -> str:
        return "gradient-noise"

    def compute(self, progress: bool | None = None) -> dict[str, dict[str, Any]]:
        results.jax_compilation_cache()
        init_key, task_key = seed_keys(self.seed)
        params = init_mlp(init_key, self.hidden)
        source = outer.online_tasks(task_key, self.meta_batch_size)
        batches = [source(jnp.asarray(k)) for k in range(self.n_batches)]
        # the meta-losses of the chapter's models, which need only these of their fields
        common = {"outer_steps": 1, "meta_batch_size": self.meta_batch_size,
                 "hidden": self.hidden, "normalization": self.normalization, "seed": self.seed}
        losses = {"first-order": first_order_loss,
                  f"maml-N{self.maml_inner_steps}": MAMLModel(
                      self.maml_inner_steps, step_size=self.maml_step_size, **common).meta_loss()}
        for lam in self.regularizations:
            losses[imaml_row(lam)] = IMAMLModel(
                self.imaml_inner_steps, regularization=lam, cg_maxiter=self.cg_maxiter,
                acceleration=self.acceleration, **common).meta_loss()
        return {row: measure(loss, params, batches)._asdict() for row, loss in losses.items()}
