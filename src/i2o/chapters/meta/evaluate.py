"""Test-time sweeps over the number of inner steps (Figures 3 and 4) and their statistics.

For meta-parameters θ_meta and a set of tasks, each task is adapted with k = 1, 2, … inner steps
(MAML: gradient steps of size α on the support loss from θ_meta; iMAML: jaxopt iterations on
F(·; θ_meta) continued past the training N, step size and momentum carried along) and at every k
of a grid we record, per task,

- ``query``: the query MSE ℓ(θ_k, query) (Figure 3's test MSE; Figure 4's training loss when the
  tasks are the training set);
- ``support``: the support MSE ℓ(θ_k, support);
- ``grad_norm``: ‖∇ of the inner objective‖ at θ_k (support MSE for MAML, F for iMAML), which shows
  how far the inner problem is from convergence; ``grad_norm_0`` is its value at θ_meta (k = 0);
- ``objective``: the inner objective at θ_k (the support MSE for MAML; F(θ_k; θ_meta) for iMAML);
- ``objective_reference`` (iMAML): the value of F reached by a convergent solver (jaxopt's L-BFGS,
  float64, ``reference_iters`` iterations) started from the sweep's last iterate, so in the same
  basin. F has ReLU kinks at its minimizers, where no gradient tolerance is ever met; its value
  does settle, and ``(F_k − F_ref) / |F_ref|`` says how far iterate k is from convergence, telling
  a stalled line search (far above F_ref) from a converged one. NaN for MAML;
- ``query_reference`` (iMAML): the query MSE at that convergent solver's solution (of the two
  points, the one with the lower F), the test MSE of the converged inner problem that "best
  before convergence" compares the sweep against. NaN for MAML.

The grid is swept with one scan over its segments, so a long sweep costs one pass of k_max steps.

:class:`Evaluation` is the job of one trained model's sweep (Figures 3 and 4): it reads the model
through the model's own job, so its key holds the model's, and its code is the model's and this
module's.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import jaxopt
import numpy as np
from jax.flatten_util import ravel_pytree

from i2o.chapters.meta import FIGURE, imaml, maml
from i2o.chapters.meta.mlp import Params, mse
from i2o.chapters.meta.model import Model, params_of
from i2o.chapters.meta.tasks import TaskBatch, flatten_batches, sample_tasks
from i2o.compute import results
from i2o.compute.job import Job


def step_grid(max_steps: int, points_per_decade: int = 8,
              include: Sequence[int] = ()) -> np.ndarray:
    """Sorted unique integers in [1, max_steps], roughly log-spaced, plus ``include``."""
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an integer ≥ 1; got {max_steps!r}")
    if points_per_decade < 1:
        raise ValueError(f"points_per_decade must be ≥ 1; got {points_per_decade!r}")
    n = int(np.ceil(np.log10(max_steps) * points_per_decade)) + 1
    grid = np.unique(np.round(np.logspace(0, np.log10(max_steps), max(n, 2))).astype(int))
    extra = [k for k in include if 1 <= k <= max_steps]
    return np.unique(np.concatenate([grid, np.asarray(extra, int), [max_steps]]))


def _sweep(state0: Any, advance: Callable[[Any], Any], readout: Callable[[Any], jax.Array],
           grid: jax.Array) -> tuple[Any, jax.Array]:
    """``readout`` after grid[0], grid[1], … applications of ``advance`` (one task), and the
    state after the last."""
    segments = jnp.diff(grid, prepend=0)

    def segment(state: Any, length: jax.Array) -> tuple[Any, jax.Array]:
        state = jax.lax.fori_loop(0, length, lambda _, s: advance(s), state)
        return state, readout(state)

    return jax.lax.scan(segment, state0, segments)


#: columns of one task's readout
COLUMNS = ("query", "support", "grad_norm", "objective", "objective_reference", "query_reference")


def _readout(params: Params, objective: Callable[[Params], jax.Array], x_s: jax.Array,
             y_s: jax.Array, x_q: jax.Array, y_q: jax.Array, normalization: str) -> jax.Array:
    value, grads = jax.value_and_grad(objective)(params)
    grad_norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree_util.tree_leaves(grads)))
    return jnp.stack([mse(params, x_q, y_q, normalization, x_s),
                      mse(params, x_s, y_s, normalization, x_q), grad_norm, value,
                      jnp.nan, jnp.nan])


def _maml_task(meta_params: Params, x_s: jax.Array, y_s: jax.Array, x_q: jax.Array,
               y_q: jax.Array, grid: jax.Array, config: maml.MAMLConfig) -> jax.Array:
    norm = config.normalization

    def objective(p: Params) -> jax.Array:
        return mse(p, x_s, y_s, norm, x_q)

    _, out = _sweep(meta_params,
                    lambda p: maml.inner_step(p, x_s, y_s, config.step_size, norm, x_q),
                    lambda p: _readout(p, objective, x_s, y_s, x_q, y_q, norm), grid)
    return out


def _imaml_task(meta_params: Params, x_s: jax.Array, y_s: jax.Array, x_q: jax.Array,
                y_q: jax.Array, grid: jax.Array, config: imaml.IMAMLConfig,
                reference_iters: int = 0) -> jax.Array:
    theta_meta, unravel = ravel_pytree(meta_params)
    solver = imaml.inner_solver(config, unravel)

    norm = config.normalization

    def objective(p: Params) -> jax.Array:
        return imaml.regularized_loss(p, meta_params, x_s, y_s, config.regularization, norm, x_q)

    def advance(carry: tuple[jax.Array, Any]) -> tuple[jax.Array, Any]:
        theta, state = carry
        step = solver.update(theta, state, theta_meta, x_s, y_s, x_q)
        return step.params, step.state

    state0 = (theta_meta, solver.init_state(theta_meta, theta_meta, x_s, y_s, x_q))
    (last, _), out = _sweep(state0, advance,
                            lambda c: _readout(unravel(c[0]), objective, x_s, y_s, x_q, y_q,
                                               norm), grid)
    if reference_iters == 0:
        return out
    reference = jaxopt.LBFGS(fun=lambda theta: objective(unravel(theta)),
                             maxiter=reference_iters, tol=1e-12)
    theta_ref = reference.run(last).params
    f_ref, f_last = objective(unravel(theta_ref)), objective(unravel(last))
    solution = jnp.where(f_ref <= f_last, theta_ref, last)
    out = out.at[:, COLUMNS.index("objective_reference")].set(jnp.minimum(f_ref, f_last))
    return out.at[:, COLUMNS.index("query_reference")].set(
        mse(unravel(solution), x_q, y_q, norm, x_s))


@functools.partial(jax.jit, static_argnames=("method", "config", "reference_iters"))
def _curves_chunk(meta_params: Params, x_s: jax.Array, y_s: jax.Array, x_q: jax.Array,
                  y_q: jax.Array, grid: jax.Array, method: str,
                  config: maml.MAMLConfig | imaml.IMAMLConfig,
                  reference_iters: int = 0) -> jax.Array:
    """Curves of a chunk of tasks; compiled once per (method, config, chunk shape, grid length)."""
    one_task = (functools.partial(_maml_task, config=config) if method == "maml" else
                functools.partial(_imaml_task, config=config, reference_iters=reference_iters))
    def run(a: jax.Array, b: jax.Array, c: jax.Array, d: jax.Array) -> jax.Array:
        return one_task(meta_params, a, b, c, d, grid)

    if method == "maml":
        return jax.vmap(run)(x_s, y_s, x_q, y_q)
    # one task after the other: a vmapped line search runs every task in lockstep (see
    # imaml.adapt_tasks)
    return jax.lax.map(lambda args: run(*args), (x_s, y_s, x_q, y_q))


def adaptation_curves(method: str, meta_params: Params, tasks: TaskBatch, grid: Sequence[int],
                      config: maml.MAMLConfig | imaml.IMAMLConfig,
                      chunk_size: int = 25, reference_iters: int = 0) -> dict[str, np.ndarray]:
    """Per-task curves over ``grid``: ``{"query", "support", "grad_norm", "objective",
    "objective_reference", "query_reference"}``, each (tasks, grid), and ``grad_norm_0``
    (tasks,), the gradient norm at θ_meta (see the module docstring).

    ``method`` is ``"maml"`` (uses ``config.step_size``) or ``"imaml"`` (uses the jaxopt solver
    of ``config``; ``reference_iters`` L-BFGS iterations give ``objective_reference`` and
    ``query_reference``, 0: none).
    Tasks are processed ``chunk_size`` at a time (the last chunk padded by repeating tasks, whose
    rows are dropped), so every chunk shares one compiled program.
    """
    if method not in ("maml", "imaml"):
        raise ValueError(f"method must be 'maml' or 'imaml'; got {method!r}")
    grid_array = np.asarray(grid)
    if grid_array.ndim != 1 or len(grid_array) == 0 or np.any(np.diff(grid_array) <= 0) \
            or grid_array[0] < 0:
        raise ValueError(f"grid must be a non-empty increasing sequence of integers ≥ 0; "
                         f"got {grid!r}")
    with_start = grid_array[0] != 0
    if with_start:  # read out θ_meta too (k = 0), for grad_norm_0
        grid_array = np.concatenate([[0], grid_array])
    n_tasks = tasks.x_support.shape[0]
    chunk_size = min(chunk_size, n_tasks)
    outputs = []
    for start in range(0, n_tasks, chunk_size):
        index = np.minimum(np.arange(start, start + chunk_size), n_tasks - 1)
        chunk = _curves_chunk(meta_params, tasks.x_support[index], tasks.y_support[index],
                              tasks.x_query[index], tasks.y_query[index],
                              jnp.asarray(grid_array), method=method, config=config,
                              reference_iters=reference_iters if method == "imaml" else 0)
        outputs.append(np.asarray(chunk)[: min(chunk_size, n_tasks - start)])
    stacked = np.concatenate(outputs, axis=0)
    curves = {name: stacked[:, int(with_start):, i] for i, name in enumerate(COLUMNS)}
    curves["grad_norm_0"] = stacked[:, 0, COLUMNS.index("grad_norm")]
    return curves


def mean_and_standard_error(per_task: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over tasks (axis 0) and its standard error s/√n."""
    n = per_task.shape[0]
    return per_task.mean(axis=0), per_task.std(axis=0, ddof=1) / np.sqrt(n)


def paired_difference(per_task: np.ndarray, i: int, j: int) -> tuple[float, float]:
    """Mean of (curve[:, i] − curve[:, j]) over tasks and its paired standard error."""
    diff = per_task[:, i] - per_task[:, j]
    return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(len(diff)))


def loss_increase(mean_curve: np.ndarray, grid: Sequence[int], train_iters: int) -> np.ndarray:
    """D(N, ΔN) = L(N + ΔN) − L(N) over the grid (the paper's Eq. 8 on a mean loss curve)."""
    grid = list(grid)
    if train_iters not in grid:
        raise ValueError(f"the training N = {train_iters} must be on the grid {grid}")
    return mean_curve - mean_curve[grid.index(train_iters)]


@dataclasses.dataclass(frozen=True)
class Evaluation(Job):
    """The per-task curves of one trained ``model`` over ``grid``: on ``n_test_tasks`` test tasks
    drawn from ``test_seed`` for a model trained on tasks drawn on the fly (Figure 3), on its own
    training tasks for a model trained on a fixed set (Figure 4; the test fields are then
    ``None``). ``reference_iters`` L-BFGS iterations give iMAML's convergence reference (0:
    none)."""

    figure: ClassVar[str] = FIGURE

    model: Model
    grid: tuple[int, ...]
    test_seed: int | None = None
    n_test_tasks: int | None = None
    reference_iters: int = 0

    def __post_init__(self) -> None:
        online = self.model.n_meta_batches is None
        if online != (self.test_seed is not None and self.n_test_tasks is not None):
            raise ValueError("test_seed and n_test_tasks are given exactly for a model trained on "
                             f"tasks drawn on the fly; got {self.test_seed!r}, "
                             f"{self.n_test_tasks!r} for {self.model.label}")

    @property
    def name(self) -> str:
        return f"eval-{self.model.label}"

    def key(self) -> dict[str, Any]:
        return {**super().key(), "model": self.model.key()}

    def tasks(self) -> TaskBatch:
        """The swept tasks: the test tasks, or the model's training set."""
        if self.model.n_meta_batches is None:
            return sample_tasks(jax.random.PRNGKey(self.test_seed), self.n_test_tasks)
        return flatten_batches(self.model.training_set())

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        """:func:`adaptation_curves` and ``seconds``, the sweep's wall time."""
        trained = self.model.run(progress)
        results.jax_compilation_cache()
        tasks = self.tasks()
        start = time.perf_counter()
        curves = adaptation_curves(self.model.method, params_of(trained), tasks,
                                   np.asarray(self.grid), self.model.config(),
                                   reference_iters=self.reference_iters)
        return {**curves, "seconds": time.perf_counter() - start}
