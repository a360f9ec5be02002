"""A meta-trained model as a job (:class:`i2o.compute.job.Job`): what every model of the chapter
shares.

A *model* is one meta-training run, MAML (:class:`i2o.chapters.meta.maml.MAMLModel`) or iMAML
(:class:`i2o.chapters.meta.imaml.IMAMLModel`), on tasks drawn on the fly (Figure 3) or on a fixed
training set of B meta-batches (Figure 4). Its fields are every hyperparameter that determines its
meta-parameters; each method's class lives in its method's module, so a model's cache key hashes
its own method's code and not the other's (editing iMAML does not retrain the MAML models), nor
the evaluation's or the plots'. Training checkpoints go to the job's checkpoint directory
(:meth:`i2o.compute.job.Job.checkpoints`), and a restarted run resumes there.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import numpy as np

from i2o.chapters.meta import FIGURE, outer
from i2o.chapters.meta.mlp import Params, init_mlp
from i2o.chapters.meta.tasks import TaskBatch, fixed_training_set
from i2o.compute import results
from i2o.compute.job import Job


def seed_keys(seed: int) -> tuple[jax.Array, jax.Array]:
    """(initialization key, task key) of a model's seed."""
    init_key, task_key = jax.random.split(jax.random.PRNGKey(seed))
    return init_key, task_key


@dataclasses.dataclass(frozen=True)
class Model(Job):
    """Everything that determines a meta-trained model, common to both methods.

    ``n_meta_batches=None``: tasks drawn on the fly (Figure 3), the model is the last point of
    its training; an integer B: a fixed training set of B meta-batches drawn once from the seed
    (Figure 4), cycled through in order, the model is the best point of its training: the
    checkpoint with the lowest training loss over the whole set (θ*,N of problem (P); see
    :mod:`.outer`).

    ``checkpoint_every`` (outer steps per compiled chunk and checkpoint) is part of the key of a
    model on a fixed training set only: its best point is chosen among the checkpoints. A model
    on tasks drawn on the fly ends with the same parameters at any interval (:mod:`.outer`).
    """

    figure: ClassVar[str] = FIGURE
    #: ``"maml"`` or ``"imaml"``: set by each method's class
    method: ClassVar[str]

    inner_steps: int
    outer_steps: int
    n_meta_batches: int | None = None
    meta_batch_size: int = 25
    learning_rate: float = 1e-3
    hidden: tuple[int, ...] = (40, 40)
    normalization: str = "none"
    seed: int = 0
    checkpoint_every: int = 1000

    def __post_init__(self) -> None:
        if self.n_meta_batches is not None and (
                not isinstance(self.n_meta_batches, int) or self.n_meta_batches < 1):
            raise ValueError(f"n_meta_batches must be None or an integer ≥ 1; "
                             f"got {self.n_meta_batches!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer ≥ 0; got {self.seed!r}")
        self.config()  # validates N, λ, α, CG iterations
        outer.OuterConfig(self.outer_steps, self.learning_rate, self.checkpoint_every)

    # -- what each method defines --------------------------------------------------------------

    @abc.abstractmethod
    def config(self) -> Any:
        """The method's configuration (``MAMLConfig`` or ``IMAMLConfig``)."""

    @abc.abstractmethod
    def meta_loss(self) -> outer.MetaLoss:
        """The meta-loss of a meta-batch, as a function of the meta-parameters and the tasks."""

    def tag(self) -> str:
        """The method's hyperparameters in the model's label (after N)."""
        return ""

    # -- the job ---------------------------------------------------------------------------------

    @property
    def label(self) -> str:
        """The model's name in the chapter's tables: ``maml-N1-online-seed0``."""
        data = "online" if self.n_meta_batches is None else f"set{self.n_meta_batches}"
        norm = "" if self.normalization == "none" else f"-{self.normalization}"
        return f"{self.method}-N{self.inner_steps}{self.tag()}{norm}-{data}-seed{self.seed}"

    @property
    def name(self) -> str:
        return f"train-{self.label}"

    def key(self) -> dict[str, Any]:
        key = super().key()
        if self.n_meta_batches is None:
            del key["checkpoint_every"]
        return key

    def random_keys(self) -> tuple[jax.Array, jax.Array]:
        """(initialization key, task key), both derived from the seed."""
        return seed_keys(self.seed)

    def training_set(self) -> TaskBatch | None:
        """The fixed training set of Figure 4 (``None`` for tasks drawn on the fly)."""
        if self.n_meta_batches is None:
            return None
        return fixed_training_set(self.random_keys()[1], self.n_meta_batches, self.meta_batch_size)

    def train(self, checkpoint_dir=None, log: Callable[[str], None] | None = None,
              stop_at: int | None = None) -> outer.TrainResult:
        """Meta-train the model (resuming from ``checkpoint_dir`` if it holds a checkpoint); on a
        fixed training set, keep the best point of the training loss over that set."""
        init_key, task_key = self.random_keys()
        training_set = self.training_set()
        meta_loss = self.meta_loss()
        if training_set is None:
            source, training_loss = outer.online_tasks(task_key, self.meta_batch_size), None
        else:
            source = outer.cycled_tasks(training_set)
            training_loss = outer.fixed_set_loss(meta_loss, training_set)
        config = outer.OuterConfig(self.outer_steps, self.learning_rate, self.checkpoint_every)
        return outer.train(meta_loss, source, init_mlp(init_key, self.hidden), config,
                           checkpoint_dir=checkpoint_dir, log=log, stop_at=stop_at,
                           training_loss=training_loss)

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        """``{"params": {...}, "final_params": {...}, "losses", "seconds", "seconds_per_step",
        "cpu_seconds_per_step", "resumed_from"}`` and the best point (:func:`best_point`).

        ``params`` are the parameters the model is evaluated with (the best point on a fixed
        training set, the last point otherwise), ``final_params`` those after the last outer
        step. Times are those of the run that computed it: ``seconds_per_step`` is wall time with
        compilation, ``cpu_seconds_per_step`` the CPU time of an outer step once compiled, NaN
        when every chunk compiled."""
        results.jax_compilation_cache()
        directory = self.checkpoints()
        start = time.perf_counter()
        result = self.train(directory)
        seconds = time.perf_counter() - start
        steps_run = result.steps_done - result.resumed_from
        return {"params": _as_numpy(result.params), "final_params": _as_numpy(result.final_params),
                "losses": result.losses, "seconds": seconds,
                "seconds_per_step": seconds / max(steps_run, 1),
                "cpu_seconds_per_step": (result.steady_cpu_seconds / result.steady_steps
                                         if result.steady_steps else float("nan")),
                "resumed_from": result.resumed_from, **best_point(result)}


def best_point(result: outer.TrainResult) -> dict[str, Any]:
    """What a training result says of its selected point, for the cache and the chapter:

    - ``selection``: ``"best"`` (a training loss L over a fixed set was tracked) or ``"last"``;
    - ``best_step``: outer steps done at the kept checkpoint (the last step for ``"last"``; −1
      when L was never finite, the last parameters are then used);
    - ``best_loss``, ``final_loss``: L at the kept and at the last checkpoint (NaN for ``"last"``);
    - ``peak_after_best``, ``rise_after_best``: the highest L at a later checkpoint and its excess
      over ``best_loss`` (0 when the best is the last; +∞ when L became non-finite);
    - ``checkpoint_steps``, ``checkpoint_losses``: L at every checkpoint (empty for ``"last"``).
    """
    if not result.tracked:
        nan = float("nan")
        return {"selection": "last", "best_step": result.steps_done, "best_loss": nan,
                "final_loss": nan, "peak_after_best": nan, "rise_after_best": nan,
                "checkpoint_steps": np.zeros(0, np.int64), "checkpoint_losses": np.zeros(0)}
    return {"selection": "best", "best_step": result.best_step, "best_loss": result.best_loss,
            "final_loss": result.final_loss, "peak_after_best": result.peak_after_best,
            "rise_after_best": result.rise_after_best,
            "checkpoint_steps": result.checkpoint_steps,
            "checkpoint_losses": result.checkpoint_losses}


def _as_numpy(params: Params | None) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in (params or {}).items()}


def params_of(trained: dict[str, Any]) -> Params:
    """The meta-parameters of a trained model's result as JAX arrays."""
    return {k: jax.numpy.asarray(v) for k, v in trained["params"].items()}
