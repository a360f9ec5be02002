"""Sinusoid regression tasks of Finn et al. (2017), as used in the paper's Figures 3 and 4.

A task is y = A sin(x − φ) with amplitude A ~ U[0.1, 5] and phase φ ~ U[0, π]; its support set
(the inner problem's data) and query set (the outer loss's data) are points x ~ U[−5, 5].
Tasks are drawn from a JAX key, so that the same key always gives the same tasks, inside or
outside ``jit``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

AMPLITUDE_RANGE = (0.1, 5.0)
PHASE_RANGE = (0.0, float(jnp.pi))
INPUT_RANGE = (-5.0, 5.0)


class TaskBatch(NamedTuple):
    """A batch of tasks; the leading axis indexes tasks (further leading axes index batches).

    ``x_*``/``y_*`` have shape ``(..., n_tasks, n_points, 1)``; ``amplitude``/``phase`` have
    shape ``(..., n_tasks)``.
    """

    x_support: jax.Array
    y_support: jax.Array
    x_query: jax.Array
    y_query: jax.Array
    amplitude: jax.Array
    phase: jax.Array

    @property
    def n_tasks(self) -> int:
        return self.amplitude.shape[-1]


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer ≥ 1; got {value!r}")


def sample_tasks(key: jax.Array, n_tasks: int, n_support: int = 10,
                 n_query: int = 10) -> TaskBatch:
    """Draw ``n_tasks`` sinusoid tasks with ``n_support`` and ``n_query`` points each (float64)."""
    _check_positive("n_tasks", n_tasks)
    _check_positive("n_support", n_support)
    _check_positive("n_query", n_query)
    k_amp, k_phase, k_support, k_query = jax.random.split(key, 4)
    dtype = jnp.float64
    amplitude = jax.random.uniform(k_amp, (n_tasks,), dtype, *AMPLITUDE_RANGE)
    phase = jax.random.uniform(k_phase, (n_tasks,), dtype, *PHASE_RANGE)
    x_support = jax.random.uniform(k_support, (n_tasks, n_support, 1), dtype, *INPUT_RANGE)
    x_query = jax.random.uniform(k_query, (n_tasks, n_query, 1), dtype, *INPUT_RANGE)

    def target(x: jax.Array) -> jax.Array:
        return amplitude[:, None, None] * jnp.sin(x - phase[:, None, None])

    return TaskBatch(x_support, target(x_support), x_query, target(x_query), amplitude, phase)


def fixed_training_set(key: jax.Array, n_meta_batches: int, meta_batch_size: int = 25,
                       n_support: int = 10, n_query: int = 10) -> TaskBatch:
    """``n_meta_batches`` meta-batches drawn once (Figure 4): leading axes (batch, task)."""
    _check_positive("n_meta_batches", n_meta_batches)
    _check_positive("meta_batch_size", meta_batch_size)
    flat = sample_tasks(key, n_meta_batches * meta_batch_size, n_support, n_query)
    return jax.tree_util.tree_map(
        lambda a: a.reshape((n_meta_batches, meta_batch_size) + a.shape[1:]), flat)


def flatten_batches(tasks: TaskBatch) -> TaskBatch:
    """Merge the (batch, task) axes of a fixed training set into one task axis."""
    return jax.tree_util.tree_map(lambda a: a.reshape((-1,) + a.shape[2:]), tasks)
