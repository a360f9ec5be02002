"""The outer (meta-training) loop: Adam on the meta-loss, checkpointed and resumable.

Step t (0-based) draws its meta-batch from ``task_source(t)`` (a pure function of t: a key folded
with t for tasks drawn on the fly, or meta-batch t mod B of a fixed training set), computes the
meta-gradient of ``meta_loss`` (MAML: unrolled; iMAML: implicit) and applies one optax Adam update
(lr 10⁻³ and optax's defaults otherwise, as in Appendix F.3).

Steps run in jit-compiled chunks of ``checkpoint_every`` steps (a ``lax.scan``); after each chunk
the state (meta-parameters, Adam state, step, loss trace) is checkpointed atomically. A run
restarted after an interruption resumes from the last checkpoint and, since every step depends
only on the state and t, ends with the same final parameters as an uninterrupted run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from i2o.chapters.meta import checkpoint
from i2o.chapters.meta.mlp import Params
from i2o.chapters.meta.tasks import TaskBatch, sample_tasks
from i2o.progress import Progress

MetaLoss = Callable[[Params, TaskBatch], jax.Array]
TaskSource = Callable[[jax.Array], TaskBatch]


@dataclass(frozen=True)
class OuterConfig:
    """``n_steps`` outer steps of Adam(``learning_rate``), checkpoint every ``checkpoint_every``."""

    n_steps: int
    learning_rate: float = 1e-3
    checkpoint_every: int = 1000

    def __post_init__(self) -> None:
        for name in ("n_steps", "checkpoint_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer ≥ 1; got {value!r}")
        lr = self.learning_rate
        if not (isinstance(lr, int | float) and not isinstance(lr, bool) and lr > 0):
            raise ValueError(f"learning_rate must be a number > 0; got {lr!r}")


class TrainResult(NamedTuple):
    params: Params
    losses: np.ndarray  # meta-loss of every outer step (the meta-batch's mean query loss)
    steps_done: int
    resumed_from: int  # the step the run started from (0 for a fresh run)
    seconds: float  # wall time of the steps run in this call (compilation included)
    steady_cpu_seconds: float = 0.0  # CPU time of the chunks that did not compile (this call)
    steady_steps: int = 0  # outer steps of those chunks


def online_tasks(key: jax.Array, meta_batch_size: int = 25, n_support: int = 10,
                 n_query: int = 10) -> TaskSource:
    """Meta-batch t = ``meta_batch_size`` fresh tasks drawn from ``fold_in(key, t)``."""

    def source(step: jax.Array) -> TaskBatch:
        return sample_tasks(jax.random.fold_in(key, step), meta_batch_size, n_support, n_query)

    return source


def cycled_tasks(training_set: TaskBatch) -> TaskSource:
    """Meta-batch t = meta-batch t mod B of a fixed training set with leading axes (B, tasks)."""
    n_batches = training_set.amplitude.shape[0]

    def source(step: jax.Array) -> TaskBatch:
        index = jnp.mod(step, n_batches)
        return jax.tree_util.tree_map(lambda a: a[index], training_set)

    return source


def _chunk_fn(meta_loss: MetaLoss, task_source: TaskSource,
              optimizer: optax.GradientTransformation, length: int) -> Callable:
    def one_step(carry: tuple[Params, Any], step: jax.Array) -> tuple[tuple[Params, Any], Any]:
        params, opt_state = carry
        loss, grads = jax.value_and_grad(meta_loss)(params, task_source(step))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    @jax.jit
    def chunk(params: Params, opt_state: Any, start: jax.Array) -> tuple[Params, Any, jax.Array]:
        steps = start + jnp.arange(length)
        (params, opt_state), losses = jax.lax.scan(one_step, (params, opt_state), steps)
        return params, opt_state, losses

    return chunk


def train(meta_loss: MetaLoss, task_source: TaskSource, init_params: Params,
          config: OuterConfig, checkpoint_dir: Path | None = None,
          log: Callable[[str], None] | None = None, stop_at: int | None = None) -> TrainResult:
    """Run (or resume) ``config.n_steps`` outer steps; return the final meta-parameters.

    ``checkpoint_dir=None`` trains without checkpoints. ``stop_at`` stops at the first checkpoint
    at or after that step (to simulate an interruption); the result then has
    ``steps_done < n_steps``.
    """
    optimizer = optax.adam(config.learning_rate)
    state = {"params": init_params, "opt_state": optimizer.init(init_params),
             "step": np.zeros((), np.int64), "losses": np.zeros(config.n_steps)}
    if checkpoint_dir is not None:
        restored = checkpoint.load(checkpoint_dir, state)
        if restored is not None:
            state = restored
    params, opt_state = state["params"], state["opt_state"]
    losses = np.array(state["losses"])
    step = resumed_from = int(state["step"])
    chunks: dict[int, Callable] = {}
    start_time = time.perf_counter()
    bar = Progress(config.n_steps, "meta outer steps", unit="step", initial=step)
    steady_cpu, steady_steps = 0.0, 0
    while step < config.n_steps and (stop_at is None or step < stop_at):
        length = min(config.checkpoint_every, config.n_steps - step)
        compiles = length not in chunks
        if compiles:
            chunks[length] = _chunk_fn(meta_loss, task_source, optimizer, length)
        cpu = time.process_time()
        params, opt_state, chunk_losses = chunks[length](params, opt_state, jnp.asarray(step))
        losses[step:step + length] = np.asarray(chunk_losses)  # waits for the chunk
        if not compiles:
            steady_cpu += time.process_time() - cpu
            steady_steps += length
        step += length
        bar.update(length)
        if checkpoint_dir is not None:
            checkpoint.save(checkpoint_dir, {"params": params, "opt_state": opt_state,
                                             "step": np.asarray(step, np.int64),
                                             "losses": losses})
        if log is not None:
            elapsed = time.perf_counter() - start_time
            log(f"step {step}/{config.n_steps}  meta-loss (last chunk) "
                f"{float(np.mean(chunk_losses)):.4f}  {elapsed:.0f} s")
    bar.close()
    seconds = time.perf_counter() - start_time
    return TrainResult(params, losses, step, resumed_from, seconds, steady_cpu, steady_steps)
