"""The image-classification task: a multiscale DEQ (MDEQ) on CIFAR-10, IFT-trained.

Training is the stability chapter's (:func:`i2o.train.classifier.build_and_train`, the paper's
Figure 5: Broyden without line search, implicit gradients, the head on ``f(z*)``, Adam with coupled
weight decay, cosine learning rate per batch, an optional weight-tied unrolled warm-up) with a
fixed number ``N`` of forward iterations and no early stop (``tol = 0``), on a class-balanced
subset of the training images, one permutation per epoch; with ``fit_every > 0`` until its
training accuracy at ``N`` reaches ``fit_accuracy`` and ``extra_epochs`` more, ``epochs`` being
the cap (:class:`i2o.train.loop.UntilFit`; the overparametrization sweep trains a fixed budget).
The sweep uses the stability chapter's probes (:func:`i2o.train.evaluate.classification_probes`):
``head(z)`` of the solver's iterate, as the authors' evaluation does, with the 0/1 error and the
cross-entropy of every image.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from i2o.base import replicates
from i2o.chapters.deq_gaps import FIGURE
from i2o.chapters.deq_gaps.jobs import check_reference, history_arrays
from i2o.compute.job import Job
from i2o.data.cifar10 import balanced_subset, load_cifar10, to_tensor
from i2o.deq import SolverSpec, sweep_iterations
from i2o.deq.reference import reference_solve
from i2o.models.mdeq import MDEQClassifier, config
from i2o.models.parameters import count_parameters
from i2o.train.classifier import TrainSettings, build_and_train
from i2o.train.evaluate import classification_probes

#: the solver of training and of the sweep: Broyden without line search (the MDEQ code's)
METHOD = "broyden"
#: evaluation batch of the fit check, the sweep's (:func:`i2o.train.evaluate.
#: classification_probes`), so that the check measures what the chapter's fit criterion reads
FIT_BATCH = 250


@dataclass(frozen=True, kw_only=True)
class ClassificationJob(Job):
    """One classifier trained on a class-balanced subset and swept on ``eval_size`` test images
    and up to ``eval_size`` of its own training images (the job ``classification``)."""

    figure: ClassVar[str] = FIGURE

    architecture: str = "cpu_small"   # a configuration of i2o.models.mdeq
    #: training's solver: N = ``forward_spec.max_iter`` Broyden steps (F_THRES), ``tol = 0``
    forward_spec: SolverSpec = SolverSpec(method=METHOD, max_iter=8, tol=0.0)
    #: the IFT adjoint's solver (B_THRES steps)
    backward_spec: SolverSpec = SolverSpec(method=METHOD, max_iter=8, tol=0.0)
    train_size: int = 4000            # class-balanced subset of the 50,000 training images
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 2.5e-6
    pretrain_steps: int = 0
    clip: float = 0.0                 # gradient-norm clipping (0: none)
    seed: int = 0
    fit_every: int = 0                # epochs between fit checks (0: train exactly `epochs`)
    extra_epochs: int = 0             # epochs after the first check that fits
    fit_accuracy: float = 0.0         # the fit criterion (training accuracy at N)
    grid: tuple[int, ...]             # the swept counts N + ΔN
    eval_size: int                    # test images evaluated, and as many training images
    reference_iters: int = 0          # cap of the converged reference solve on test data (0: none)
    replicate: int = 0                # redraws the evaluation subsets

    def __post_init__(self) -> None:
        config(self.architecture)  # validates the name
        if self.train_size < 10:
            raise ValueError(f"train_size must be ≥ 10 (one image per class); got "
                             f"{self.train_size}")
        check_reference(self.reference_iters, self.train_iters)

    @property
    def name(self) -> str:
        return "classification"

    @property
    def train_iters(self) -> int:
        """``N``: the forward solver's steps in training."""
        return self.forward_spec.max_iter

    def steps(self) -> int:
        return self.epochs * math.ceil(self.train_size / self.batch_size)

    def settings(self) -> TrainSettings:
        """The training run: IFT gradients with the job's forward and backward solvers, a
        checkpoint every 100 steps."""
        return TrainSettings(arm="ift", forward=self.forward_spec, backward=self.backward_spec,
                             epochs=self.epochs,
                             batch_size=self.batch_size, lr=self.lr, lr_min=1e-6,
                             weight_decay=self.weight_decay, pretrain_steps=self.pretrain_steps,
                             clip=self.clip, seed=self.seed, checkpoint_every=100,
                             fit_every=self.fit_every, extra_epochs=self.extra_epochs,
                             fit_accuracy=self.fit_accuracy, fit_batch=FIT_BATCH)

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        """Train the MDEQ on a class-balanced CIFAR-10 subset; sweep it (the training solver,
        :func:`i2o.deq.sweep_iterations` running each count of the grid exactly) on
        ``eval_size`` test images and up to ``eval_size`` of its own training images."""
        train, test = load_cifar10("train"), load_cifar10("test")
        chosen = balanced_subset(train.labels, self.train_size, seed=self.seed)
        images, labels = to_tensor(train.images[chosen]), torch.from_numpy(train.labels[chosen])
        model, history = train_mdeq(self, images, labels, self.checkpoints(), progress)
        shown = balanced_subset(test.labels, self.eval_size,
                                seed=replicates.seed(0, self.replicate))
        test_images = to_tensor(test.images[shown])
        test_labels = torch.from_numpy(test.labels[shown])
        on_train = balanced_subset(labels.numpy(), min(self.eval_size, len(labels)),
                                   seed=replicates.seed(1, self.replicate))
        out = {
            "test": sweep_iterations(classification_probes(model, test_images, test_labels),
                                     self.grid, self.forward_spec),
            "train": sweep_iterations(classification_probes(model, images[on_train],
                                                            labels[on_train]),
                                      self.grid, self.forward_spec),
            "history": history_arrays(history),
            "n_parameters": count_parameters(model),
        }
        if self.reference_iters:
            out["test_reference"] = reference_solve(
                classification_probes(model, test_images, test_labels), self.forward_spec,
                self.reference_iters)
        return out


def train_mdeq(job: ClassificationJob, images: torch.Tensor, labels: torch.Tensor,
               checkpoint_dir: Path | str | None = None,
               progress: bool | None = None) -> tuple[MDEQClassifier, dict[str, list[float]]]:
    """Seed, build and train (or resume) the MDEQ of ``job`` on standardised ``images``."""
    return build_and_train(config(job.architecture), images, labels, job.settings(),
                           checkpoint_dir, progress)


def epochs_for_steps(steps: int, train_size: int, batch_size: int) -> int:
    """Epochs giving at least ``steps`` optimiser steps on ``train_size`` examples."""
    return max(1, math.ceil(steps / math.ceil(train_size / batch_size)))
