"""The chapter's training job (Figure 5): one MDEQ classifier per (seed, arm, training N).

A :class:`TrainJob` trains an MDEQ classifier on CIFAR-10 with ``N = train_iter`` Broyden steps
and either IFT or unrolled gradients, then measures its test accuracy for every test-time
iteration count (:func:`i2o.train.evaluate.evaluate_iterations`) and, with ``reference_iters > 0``,
its test images solved once more by the training solver until the relative residual is at most
1e-4 or ``reference_iters`` steps (:func:`i2o.deq.reference.reference_solve`: the book's own
near-equilibrium row). With ``fit_every > 0`` it
trains *to the regime*: every ``fit_every`` epochs its accuracy on its own training images at
``N`` is checked against ``fit_accuracy``; ``extra_epochs`` after the first check that meets it,
training stops, ``epochs`` being the cap (:class:`i2o.train.loop.UntilFit`). The result records
the epochs used and whether the model reached the cap without fitting.

The job is a value (:class:`i2o.compute.job.Job`): its fields are its cache key, and its code is the
import closure of this module, which imports what trains and evaluates the network and nothing
of the chapter's ``runs``, ``claims``, ``figures`` or ``prose``. The notebook
``book/stability.ipynb`` and the sweep (``python -m i2o.sweep stability``) build the same jobs
from the same figure parameters (:func:`i2o.chapters.stability.runs.jobs`), so whatever the sweep
computed the notebook only reads. Training checkpoints live in
:meth:`i2o.compute.job.Job.checkpoints` of the same key: an interrupted job resumes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from i2o.base import lineage, replicates, runtime
from i2o.chapters.stability import FIGURE
from i2o.compute import job
from i2o.data.cifar10 import load_split
from i2o.deq import SolverSpec
from i2o.deq.reference import reference_solve
from i2o.models.mdeq import config
from i2o.models.parameters import count_parameters
from i2o.train import health
from i2o.train.classifier import ARMS, TrainSettings, build_and_train, epochs_used
from i2o.train.evaluate import classification_probes, evaluate_iterations

#: Figure parameters that shape every job (the rest select which jobs run): the fields of
#: :class:`TrainJob` besides its solvers, ``seed``, ``arm``, ``replicate`` and ``reference_iters``
#: (``reference_factor`` × N, set per job from its own N).
SHARED = ("model", "train_size", "test_size", "epochs", "batch_size", "lr", "lr_min",
          "weight_decay", "pretrain_steps", "test_iters", "eval_batch", "clip", "fit_every",
          "extra_epochs", "fit_accuracy")
NUM_CLASSES = 10


def check_reference(reference_iters: int, train_iter: int) -> None:
    """``reference_iters`` (the reference solve's cap, :mod:`i2o.deq.reference`) is 0 (none) or
    an integer above ``N``; a clear error otherwise. (deq_gaps' jobs have the same check: it
    moves to :mod:`i2o.deq.reference` with the content-keyed cache of issue 64, when moving it
    no longer recomputes deq_gaps' models.)"""
    if isinstance(reference_iters, bool) or not isinstance(reference_iters, int) or (
            reference_iters != 0 and reference_iters <= train_iter):
        raise ValueError(f"reference_iters must be 0 (no reference solve) or an integer above "
                         f"N = {train_iter}; got {reference_iters!r}")


def job_name(seed: int, arm: str, train_iter: int, replicate: int = 0) -> str:
    """The entry's readable name, e.g. ``ift-N18-seed0`` (``-r1`` … for replicates)."""
    return f"{arm}-N{train_iter}-seed{seed}{replicates.suffix(replicate)}"


@dataclasses.dataclass(frozen=True)
class TrainJob(job.Job):
    """Train and evaluate one (seed, arm, N) network: the fields are the cache key."""

    figure: ClassVar[str] = FIGURE
    #: the reference solve's cap changes only what is evaluated after training: a finished
    #: training is read back from its checkpoints when it changes
    #: (:meth:`i2o.compute.job.Job.checkpoints`)
    evaluation_fields: ClassVar[tuple[str, ...]] = ("reference_iters",)

    model: str
    train_size: int
    test_size: int
    epochs: int
    batch_size: int
    lr: float
    lr_min: float
    weight_decay: float
    pretrain_steps: int
    test_iters: tuple[int, ...]
    eval_batch: int
    clip: float
    fit_every: int
    extra_epochs: int
    fit_accuracy: float
    seed: int
    arm: str
    forward: SolverSpec  # training's forward solver: N = max_iter Broyden steps
    backward: SolverSpec  # the adjoint solver of the IFT arm: backward_iter steps
    replicate: int
    reference_iters: int = 0  # cap of the converged reference solve on test images (0: none)

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ValueError(f"arm must be one of {', '.join(map(repr, ARMS))}; got {self.arm!r}")
        check_reference(self.reference_iters, self.train_iter)

    @classmethod
    def of(cls, params: Mapping[str, Any], seed: int, arm: str, train_iter: int) -> TrainJob:
        """The job of one (seed, arm, N), from the figure's parameters; its reference solve's cap
        is ``reference_factor`` × this job's N."""
        shared = {name: params[name] for name in SHARED}
        shared["test_iters"] = tuple(int(n) for n in shared["test_iters"])
        forward = SolverSpec(method="broyden", max_iter=int(train_iter), tol=params["tol"],
                             stop_mode="rel")  # where N becomes max_iter, once
        return cls(**shared, seed=int(seed), arm=arm, forward=forward,
                   backward=dataclasses.replace(forward, max_iter=int(params["backward_iter"])),
                   replicate=int(params["replicate"]),
                   reference_iters=int(params["reference_factor"]) * int(train_iter))

    @property
    def train_iter(self) -> int:
        """``N``: the forward solver's steps in training."""
        return self.forward.max_iter

    @property
    def name(self) -> str:
        return job_name(self.seed, self.arm, self.train_iter, self.replicate)

    def settings(self, checkpoint_every: int = 50) -> TrainSettings:
        """The training loop's settings (the seed is the replicate's)."""
        return TrainSettings(
            arm=self.arm, forward=self.forward, backward=self.backward, epochs=self.epochs,
            batch_size=self.batch_size, lr=self.lr,
            lr_min=self.lr_min, weight_decay=self.weight_decay,
            pretrain_steps=self.pretrain_steps, clip=self.clip,
            seed=replicates.seed(self.seed, self.replicate),
            checkpoint_every=checkpoint_every, fit_every=self.fit_every,
            extra_epochs=self.extra_epochs, fit_accuracy=self.fit_accuracy,
            fit_batch=self.eval_batch)

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        """Train and evaluate the network; resume from its checkpoint if there is one.

        Besides the test sweep, the result holds ``train_accuracy`` (accuracy on the job's own
        training images at its training N, in evaluation mode, after training: the fit
        criterion), ``diverged`` (:func:`i2o.train.health.classifier_flag`; ``""`` for a healthy
        run), ``epochs_used``, ``fit_epoch`` (the epoch of the first check that met the
        criterion; NaN when none did) and ``cap_reached`` (trained to the cap ``epochs`` without
        meeting it); with ``reference_iters > 0``, ``test_reference``
        (:func:`i2o.deq.reference.reference_solve` on the same test images and batches as the
        sweep, with the training solver ``forward``: per-image ``metrics`` ``error`` and
        ``loss``, residuals, steps and ``converged`` per batch), timed apart in
        ``reference_seconds``.
        """
        runtime.set_threads()
        settings = self.settings()
        train_x, train_y = load_split("train", self.train_size, self.replicate)
        test_x, test_y = load_split("test", self.test_size, self.replicate)
        ckpt = self.checkpoints()
        start = time.perf_counter()
        model, history = build_and_train(config(self.model), train_x, train_y, settings, ckpt,
                                         progress=progress)
        train_seconds = time.perf_counter() - start
        start = time.perf_counter()
        test = evaluate_iterations(model, test_x, test_y, list(self.test_iters),
                                   batch_size=self.eval_batch)
        # the fit criterion and the divergence flag: the model's own training set, at its
        # training N
        fit = evaluate_iterations(model, train_x, train_y, [self.train_iter],
                                  batch_size=self.eval_batch)
        eval_seconds = time.perf_counter() - start
        train_accuracy = float(fit["accuracy"][0])
        reference, reference_seconds = None, 0.0
        if self.reference_iters:
            start = time.perf_counter()
            reference = reference_solve(
                classification_probes(model, test_x, test_y, self.eval_batch), self.forward,
                self.reference_iters)
            reference_seconds = time.perf_counter() - start
        per_epoch = -(-self.train_size // self.batch_size)
        fitted = history.get("fit_step") or []
        deq_steps = np.asarray(history["seconds"][self.pretrain_steps:])
        return {
            "test": test,
            "train_accuracy": train_accuracy,
            "train_residual": float(fit["residual_rel"][0]),
            "diverged": health.classifier_flag(history, train_accuracy, NUM_CLASSES) or "",
            "history": {k: np.asarray(v, dtype=float) for k, v in history.items()},
            "epochs_used": epochs_used(history, per_epoch),
            "fit_epoch": float(fitted[0]) / per_epoch if len(fitted) else float("nan"),
            "cap_reached": bool(self.fit_every > 0 and not len(fitted)),
            "parameters": count_parameters(model),
            "train_seconds": train_seconds,
            "eval_seconds": eval_seconds,
            "deq_step_seconds": float(np.median(deq_steps)) if deq_steps.size else float("nan"),
            "device": lineage.device_name(),
        } | ({"test_reference": reference, "reference_seconds": reference_seconds}
             if reference is not None else {})
