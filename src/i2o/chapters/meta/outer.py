"""The outer (meta-training) loop: Adam on the meta-loss, checkpointed and resumable, keeping the
best point of a model trained on a fixed training set.

Step t (0-based) draws its meta-batch from ``task_source(t)`` (a pure function of t: a key folded
with t for tasks drawn on the fly, or meta-batch t mod B of a fixed training set), computes the
meta-gradient of ``meta_loss`` (MAML: unrolled; iMAML: implicit) and applies one optax Adam update
(lr 10⁻³ and optax's defaults otherwise, as in Appendix F.3).

Steps run in jit-compiled chunks of ``checkpoint_every`` steps (a ``lax.scan``); after each chunk
the state (meta-parameters, Adam state, step, loss trace, best point) is checkpointed atomically.
A run restarted after an interruption resumes from the last checkpoint and, since every step
depends only on the state and t, ends with the same parameters and the same best point as an
uninterrupted run.

**The best point.** Problem (P) of the paper defines θ*,N as an argmin of the outer training loss.
On a fixed training set of B meta-batches (Figure 4) that loss is a deterministic function of the
meta-parameters,

    L(θ) = (1/B) Σ_b meta_loss(θ, meta-batch b)        (:func:`fixed_set_loss`),

the mean query loss over every training task. After each chunk, L is evaluated at the chunk's
last parameters θ_s (s = the outer steps done); the checkpoint with the lowest finite L so far is
kept (:func:`keep_lowest`; a non-finite L is never kept), and the model is the parameters there.
L is evaluated at the kept parameters themselves rather than smoothed over a chunk's per-step
losses, which are taken at the chunk's successive parameters (a spike in a chunk's last steps
would leave the chunk's mean low while its last parameters sit in the spike); the chunk length
is the window over which the best point is resolved. Rises of L after the best point are
recorded (:attr:`TrainResult.rise_after_best`), not used to select.

Models trained on tasks drawn on the fly (Figure 3) have no such L: each step's loss is that of a
fresh random meta-batch, and the population loss is not evaluated during training. They keep
their last point, as before (``training_loss=None``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from i2o.base.progress import Progress
from i2o.chapters.meta import checkpoint
from i2o.chapters.meta.mlp import Params
from i2o.chapters.meta.tasks import TaskBatch, sample_tasks

MetaLoss = Callable[[Params, TaskBatch], jax.Array]
TaskSource = Callable[[jax.Array], TaskBatch]
TrainingLoss = Callable[[Params], jax.Array]


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

    @property
    def n_checkpoints(self) -> int:
        """Checkpoints of a full run: one after each chunk, the last at ``n_steps``."""
        return -(-self.n_steps // self.checkpoint_every)

    def checkpoint_index(self, step: int) -> int:
        """The index of the checkpoint written after ``step`` outer steps (a chunk's end)."""
        return -(-step // self.checkpoint_every) - 1


class BestPoint(NamedTuple):
    """The checkpoint with the lowest finite training loss so far: its parameters, its loss and
    its outer step. Before any finite loss: the initial parameters, loss +∞ and step −1."""

    params: Params
    loss: float
    step: int


def no_best_point(params: Params) -> BestPoint:
    """The tracker's state before any checkpoint (``params``: a placeholder of the right shape)."""
    return BestPoint(params, math.inf, -1)


def keep_lowest(best: BestPoint, params: Params, loss: float, step: int) -> BestPoint:
    """``(params, loss, step)`` when ``loss`` is finite and strictly below ``best.loss``;
    ``best`` otherwise (a tie keeps the earlier point; NaN and ±∞ are never kept)."""
    if math.isfinite(loss) and loss < best.loss:
        return BestPoint(params, float(loss), int(step))
    return best


def largest_rise_after(losses: np.ndarray, index: int) -> tuple[float, float]:
    """``(peak, rise)`` of a checkpoint-loss trace after checkpoint ``index``: the highest later
    loss (+∞ if a later loss is not finite) and its excess over ``losses[index]``; ``(loss at
    index, 0)`` when ``index`` is the last checkpoint, ``(nan, nan)`` when ``index < 0``."""
    values = np.asarray(losses, dtype=float)
    if index < 0 or index >= len(values):
        return math.nan, math.nan
    best, later = float(values[index]), values[index + 1:]
    if later.size == 0:
        return best, 0.0
    peak = float(np.max(later)) if np.all(np.isfinite(later)) else math.inf
    return peak, max(peak - best, 0.0)


@dataclass(frozen=True)
class TrainResult:
    """An outer loop's outcome. ``params`` are the parameters the model is used with: those of
    the best point when a training loss was tracked and one was finite, the last ones
    otherwise (``final_params``)."""

    params: Params
    losses: np.ndarray  # meta-loss of every outer step (the meta-batch's mean query loss)
    steps_done: int
    resumed_from: int  # the step the run started from (0 for a fresh run)
    seconds: float  # wall time of the steps run in this call (compilation included)
    steady_cpu_seconds: float = 0.0  # CPU time of the chunks that did not compile (this call)
    steady_steps: int = 0  # outer steps of those chunks
    final_params: Params | None = None  # after the last step done
    tracked: bool = False  # a training loss was evaluated at every checkpoint
    best_step: int = -1  # outer steps done at the kept checkpoint (−1: none kept)
    best_loss: float = math.nan  # the training loss L there
    checkpoint_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    checkpoint_losses: np.ndarray = field(default_factory=lambda: np.zeros(0))  # L at each

    @property
    def final_loss(self) -> float:
        """L at the last checkpoint done (NaN without tracking or checkpoint)."""
        return float(self.checkpoint_losses[-1]) if len(self.checkpoint_losses) else math.nan

    @property
    def peak_after_best(self) -> float:
        """The highest L at a checkpoint after the best one (:func:`largest_rise_after`)."""
        return largest_rise_after(self.checkpoint_losses, self._best_index())[0]

    @property
    def rise_after_best(self) -> float:
        """How far L rose above the best point's later on (0 when the best is the last
        checkpoint, +∞ when L became non-finite, NaN when no point was kept)."""
        return largest_rise_after(self.checkpoint_losses, self._best_index())[1]

    def _best_index(self) -> int:
        found = np.flatnonzero(self.checkpoint_steps == self.best_step)
        return int(found[0]) if self.best_step >= 0 and found.size else -1


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


def fixed_set_loss(meta_loss: MetaLoss, training_set: TaskBatch) -> TrainingLoss:
    """L(θ) = mean over the B meta-batches b of ``meta_loss(θ, b)`` of a fixed training set with
    leading axes (B, tasks): the outer training loss of problem (P), jit-compiled."""

    @jax.jit
    def loss(params: Params) -> jax.Array:
        return jnp.mean(jax.lax.map(lambda batch: meta_loss(params, batch), training_set))

    return loss


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


def _initial_state(init_params: Params, optimizer: optax.GradientTransformation,
                   config: OuterConfig, tracked: bool) -> dict[str, Any]:
    """The checkpointed state of a fresh run (also the template a checkpoint is loaded into).
    Without tracking it holds no checkpoint losses, so that it does not depend on the interval
    (such a run may resume with another one)."""
    return {"params": init_params, "opt_state": optimizer.init(init_params),
            "step": np.zeros((), np.int64), "losses": np.zeros(config.n_steps),
            "checkpoint_every": np.asarray(config.checkpoint_every, np.int64),
            "checkpoint_losses": np.full(config.n_checkpoints if tracked else 0, np.nan),
            "best": {"params": init_params, "loss": np.asarray(math.inf),
                     "step": np.asarray(-1, np.int64)}}


def _restore(checkpoint_dir: Path, template: dict[str, Any], config: OuterConfig,
             tracked: bool) -> dict[str, Any]:
    """The checkpointed state in ``checkpoint_dir``, or ``template`` when there is none.

    A run that tracks its best point refuses a checkpoint written with another interval (its
    candidates, the chunk ends, would differ from an uninterrupted run's)."""
    restored = checkpoint.load(checkpoint_dir, template)
    if restored is None:
        return template
    written_every = int(restored["checkpoint_every"])
    if tracked and written_every != config.checkpoint_every:
        raise ValueError(f"{checkpoint_dir}: checkpoint written every {written_every} outer "
                         f"steps, this run checkpoints every {config.checkpoint_every}; the "
                         "best point is chosen among checkpoints, so the interval must match")
    return restored


def train(meta_loss: MetaLoss, task_source: TaskSource, init_params: Params,
          config: OuterConfig, checkpoint_dir: Path | None = None,
          log: Callable[[str], None] | None = None, stop_at: int | None = None,
          training_loss: TrainingLoss | None = None) -> TrainResult:
    """Run (or resume) ``config.n_steps`` outer steps; return the meta-parameters to use.

    ``training_loss`` (a fixed training set's L, :func:`fixed_set_loss`): evaluated after every
    chunk, the parameters at its lowest finite value are kept and returned (the best point; see
    the module docstring); ``None`` (tasks drawn on the fly): the last parameters are returned.
    ``checkpoint_dir=None`` trains without checkpoints. ``stop_at`` stops at the first
    checkpoint at or after that step (to simulate an interruption); the result then has
    ``steps_done < n_steps``.
    """
    tracked = training_loss is not None
    optimizer = optax.adam(config.learning_rate)
    state = _initial_state(init_params, optimizer, config, tracked)
    if checkpoint_dir is not None:
        state = _restore(checkpoint_dir, state, config, tracked)
    params, opt_state = state["params"], state["opt_state"]
    losses = np.array(state["losses"])
    checkpoint_losses = np.array(state["checkpoint_losses"])
    best = BestPoint(state["best"]["params"], float(state["best"]["loss"]),
                     int(state["best"]["step"]))
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
        if tracked:
            at_checkpoint = float(training_loss(params))
            checkpoint_losses[config.checkpoint_index(step)] = at_checkpoint
            best = keep_lowest(best, params, at_checkpoint, step)
        bar.update(length)
        if checkpoint_dir is not None:
            checkpoint.save(checkpoint_dir, {
                "params": params, "opt_state": opt_state, "step": np.asarray(step, np.int64),
                "losses": losses,
                "checkpoint_every": np.asarray(config.checkpoint_every, np.int64),
                "checkpoint_losses": checkpoint_losses,
                "best": {"params": best.params, "loss": np.asarray(best.loss),
                         "step": np.asarray(best.step, np.int64)}})
        if log is not None:
            elapsed = time.perf_counter() - start_time
            tracking = (f"  training loss {checkpoint_losses[config.checkpoint_index(step)]:.4g}"
                        f" (best {best.loss:.4g} at step {best.step})" if tracked else "")
            log(f"step {step}/{config.n_steps}  meta-loss (last chunk) "
                f"{float(np.mean(chunk_losses)):.4f}{tracking}  {elapsed:.0f} s")
    bar.close()
    seconds = time.perf_counter() - start_time
    done = config.checkpoint_index(step) + 1 if tracked and step > 0 else 0
    steps_at = np.minimum((np.arange(done) + 1) * config.checkpoint_every, config.n_steps)
    kept = tracked and best.step >= 0
    return TrainResult(best.params if kept else params, losses, step, resumed_from, seconds,
                       steady_cpu, steady_steps, final_params=params, tracked=tracked,
                       best_step=best.step if kept else -1,
                       best_loss=best.loss if kept else math.nan,
                       checkpoint_steps=steps_at.astype(np.int64),
                       checkpoint_losses=checkpoint_losses[:done])
