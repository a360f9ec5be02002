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
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from i2o.deq import SolverSpec
from i2o.models.mdeq import MDEQClassifier, config
from i2o.train.classifier import TrainSettings, build_and_train

#: evaluation batch of the fit check, the sweep's (:func:`i2o.train.evaluate.
#: classification_probes`), so that the check measures what the chapter's fit criterion reads
FIT_BATCH = 250


@dataclass(frozen=True)
class ClassificationJob:
    """Everything that determines one trained classifier (besides the data subset)."""

    architecture: str = "cpu_small"   # a configuration of i2o.models.mdeq
    train_iters: int = 8              # N: Broyden steps in training (F_THRES)
    backward_iter: int = 8            # adjoint Broyden steps (B_THRES)
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

    def __post_init__(self) -> None:
        config(self.architecture)  # validates the name
        if self.train_size < 10:
            raise ValueError(f"train_size must be ≥ 10 (one image per class); got "
                             f"{self.train_size}")

    def steps(self) -> int:
        return self.epochs * math.ceil(self.train_size / self.batch_size)

    def settings(self) -> TrainSettings:
        """The training run: IFT gradients, Broyden with ``tol = 0`` both ways, a checkpoint
        every 100 steps."""
        return TrainSettings(arm="ift", train_iter=self.train_iters,
                             backward_iter=self.backward_iter,
                             solver="broyden", stop_mode="rel", tol=0.0, epochs=self.epochs,
                             batch_size=self.batch_size, lr=self.lr, lr_min=1e-6,
                             weight_decay=self.weight_decay, pretrain_steps=self.pretrain_steps,
                             clip=self.clip, seed=self.seed, checkpoint_every=100,
                             fit_every=self.fit_every, extra_epochs=self.extra_epochs,
                             fit_accuracy=self.fit_accuracy, fit_batch=FIT_BATCH)

    def sweep_spec(self) -> SolverSpec:
        """Broyden, relative residual, the lowest-residual iterate (the DEQ code's rule)."""
        return SolverSpec(method="broyden", max_iter=self.train_iters, tol=0.0, stop_mode="rel")

    def as_dict(self) -> dict:
        return asdict(self)


def train_mdeq(job: ClassificationJob, images: torch.Tensor, labels: torch.Tensor,
               checkpoint_dir: Path | str | None = None,
               progress: bool | None = None) -> tuple[MDEQClassifier, dict[str, list[float]]]:
    """Seed, build and train (or resume) the MDEQ of ``job`` on standardised ``images``."""
    return build_and_train(config(job.architecture), images, labels, job.settings(),
                           checkpoint_dir, progress)
