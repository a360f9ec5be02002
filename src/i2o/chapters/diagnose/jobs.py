"""The chapter's two cached jobs, one per model (:class:`i2o.compute.job.Job`): train the model on a
CIFAR-10 subset, then sweep it with :func:`i2o.diagnose.measure` (the sweeps of
:func:`i2o.diagnose.diagnose`, without its verdicts: the key covers no verdict code) on the test
subset and on its own training images.

- :class:`TorchDEQJob` (``torchdeq``): :class:`.torchdeq_net.ConvDEQ`, trained with
  ``td_train_iters`` torchdeq forward iterations by :func:`i2o.train.loop.train_steps`; diagnosed
  through torchdeq's own iteration control (:class:`i2o.diagnose.TorchDEQModel`);
- :class:`MDEQJob` (``mdeq``): the book's :class:`i2o.models.MDEQClassifier` (configuration
  ``mdeq_model``), trained by the book's recipe (:func:`i2o.train.classifier.build_and_train`,
  IFT, Broyden) with ``mdeq_train_iters`` iterations; diagnosed with :class:`i2o.diagnose.BookMDEQ`.

A job's fields are the chapter parameters it depends on (same names) and its grid of ``N'``; it
stores the per-example sweep arrays only (the verdicts are decided from them at every run,
:func:`.runs.diagnosis_of`).
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from i2o.base import replicates, runtime
from i2o.chapters.diagnose import FIGURE, LABELS
from i2o.chapters.diagnose.torchdeq_net import ConvDEQ, step_loss
from i2o.compute.job import Job
from i2o.data.cifar10 import load_split
from i2o.deq import SolverSpec
from i2o.diagnose.adapters import BookMDEQ
from i2o.diagnose.measure import measure
from i2o.diagnose.torchdeq_model import TorchDEQModel
from i2o.models.mdeq import config
from i2o.models.parameters import count_parameters
from i2o.train.classifier import TrainSettings, build_and_train
from i2o.train.loop import Plan, train_steps


@dataclass(frozen=True)
class DiagnoseJob(Job):
    """Train one model, then sweep it on the test and training subsets (arrays only). The data,
    the seed and the grid are common to both models; a subclass adds its training and says
    how it trains (:meth:`train`)."""

    figure: ClassVar[str] = FIGURE
    #: the model's key in :data:`i2o.chapters.diagnose.MODELS`
    model: ClassVar[str]

    seed: int
    replicate: int
    train_size: int
    test_size: int
    eval_batch: int
    grid: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.model}{replicates.suffix(self.replicate)}"

    @property
    @abc.abstractmethod
    def train_iters(self) -> int:
        """``N``: the model's forward iterations in training."""

    @abc.abstractmethod
    def train(self, x: torch.Tensor, y: torch.Tensor, seed: int) -> tuple[Any, dict[str, Any]]:
        """The trained model as an :mod:`i2o.diagnose` adapter, and its training history."""

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        runtime.set_threads()
        seed = replicates.seed(self.seed, self.replicate)
        train_x, train_y = load_split("train", self.train_size, self.replicate)
        test_x, test_y = load_split("test", self.test_size, self.replicate)
        start = time.perf_counter()
        adapter, history = self.train(train_x, train_y, seed)
        train_seconds = time.perf_counter() - start
        swept = measure(adapter, (test_x, test_y), train=(train_x, train_y),
                        train_iters=self.train_iters, grid=list(self.grid), metric="accuracy",
                        batch_size=self.eval_batch)
        test, train = swept.test[0], swept.train[0]
        parameters = count_parameters(adapter.model, trainable_only=False)
        return {"test": {"values": test.values, "residual": test.residual},
                "train": {"values": train.values, "residual": train.residual},
                "grid": np.asarray(list(self.grid)), "train_seconds": train_seconds,
                "sweep_seconds": swept.seconds, "solves": swept.solves, "parameters": parameters,
                "loss": np.asarray(history["loss"], dtype=float),
                "nonfinite": int(bool(history.get("nonfinite_step")))}


@dataclass(frozen=True)
class TorchDEQJob(DiagnoseJob):
    """The torchdeq ConvDEQ: ``td_channels`` channels, torchdeq's ``td_solver``, ``td_epochs``
    epochs of Adam (``td_lr``, cosine to lr/100) in batches of ``td_batch_size``."""

    model: ClassVar[str] = "torchdeq"

    td_channels: int
    td_solver: str
    td_train_iters: int
    td_epochs: int
    td_batch_size: int
    td_lr: float

    @property
    def train_iters(self) -> int:
        return self.td_train_iters

    def train(self, x: torch.Tensor, y: torch.Tensor, seed: int) -> tuple[Any, dict[str, Any]]:
        torch.manual_seed(seed)
        model = ConvDEQ(self.td_channels, self.td_train_iters, self.td_solver)
        steps = self.td_epochs * -(-x.shape[0] // self.td_batch_size)
        plan = Plan(steps=steps, lr=self.td_lr, lr_min=self.td_lr / 100, clip=1.0, seed=seed,
                    checkpoint_every=steps)
        history = train_steps(model, step_loss(model, x, y, self.td_batch_size, seed), plan,
                              description="train torchdeq ConvDEQ")
        return TorchDEQModel(model, name=LABELS[self.model]), history


@dataclass(frozen=True)
class MDEQJob(DiagnoseJob):
    """The book's MDEQ (configuration ``mdeq_model``), trained by the book's recipe."""

    model: ClassVar[str] = "mdeq"

    mdeq_model: str
    mdeq_train_iters: int
    mdeq_epochs: int
    mdeq_batch_size: int
    mdeq_lr: float
    mdeq_pretrain_steps: int
    mdeq_clip: float

    @property
    def train_iters(self) -> int:
        return self.mdeq_train_iters

    def train(self, x: torch.Tensor, y: torch.Tensor, seed: int) -> tuple[Any, dict[str, Any]]:
        solver = SolverSpec(method="broyden", max_iter=self.mdeq_train_iters, tol=1e-3,
                            stop_mode="rel")  # both ways, the MDEQ recipe's eps
        settings = TrainSettings(arm="ift", forward=solver, backward=solver,
                                 epochs=self.mdeq_epochs,
                                 batch_size=self.mdeq_batch_size, lr=self.mdeq_lr,
                                 pretrain_steps=self.mdeq_pretrain_steps, clip=self.mdeq_clip,
                                 seed=seed, checkpoint_every=10_000)
        model, history = build_and_train(config(self.mdeq_model), x, y, settings)
        return BookMDEQ(model, name=LABELS[self.model]), history
