"""The image-classification task: a multiscale DEQ (MDEQ) on CIFAR-10, IFT-trained.

Training follows the recipe of the stability chapter (:mod:`i2o.train.classifier`, the paper's
Figure 5: Broyden without line search, implicit gradients, the head on ``f(z*)``, Adam with coupled
weight decay, cosine learning rate per batch, an optional weight-tied unrolled warm-up) with a
fixed number ``N`` of forward iterations and no early stop (``tol = 0``), on a class-balanced
subset of the training images, one permutation per epoch, in the step loop
:func:`i2o.train.loop.train_steps`. The sweep uses the stability chapter's probes
(:func:`i2o.train.evaluate.classification_probes`): ``head(z)`` of the solver's iterate, as the
authors' evaluation does, with the 0/1 error and the cross-entropy of every image.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from i2o import runtime
from i2o.deq import DEQ, SolverSpec
from i2o.models.mdeq import MDEQClassifier, config
from i2o.train.loop import Plan, train_steps
from i2o.train.seeding import epoch_order, seed_everything


@dataclass(frozen=True)
class ClassificationJob:
    """Everything that determines one trained classifier (besides the data subset)."""

    architecture: str = "cpu_small"   # a configuration of i2o.models.mdeq
    train_iters: int = 8                  # N: Broyden steps in training (F_THRES)
    backward_iter: int = 8            # adjoint Broyden steps (B_THRES)
    train_size: int = 4000            # class-balanced subset of the 50,000 training images
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 2.5e-6
    pretrain_steps: int = 0
    clip: float = 0.0                 # gradient-norm clipping (0: none)
    seed: int = 0

    def __post_init__(self) -> None:
        config(self.architecture)  # validates the name
        if self.train_size < 10:
            raise ValueError(f"train_size must be ≥ 10 (one image per class); got "
                             f"{self.train_size}")

    def steps(self) -> int:
        return self.epochs * math.ceil(self.train_size / self.batch_size)

    def deq(self) -> DEQ:
        forward = SolverSpec(method="broyden", max_iter=self.train_iters, tol=0.0, stop_mode="rel")
        backward = SolverSpec(method="broyden", max_iter=self.backward_iter, tol=0.0,
                              stop_mode="rel")
        return DEQ(forward=forward, backward="ift", backward_spec=backward, output="fz")

    def sweep_spec(self) -> SolverSpec:
        """Broyden, relative residual, the lowest-residual iterate (the DEQ code's rule)."""
        return SolverSpec(method="broyden", max_iter=self.train_iters, tol=0.0, stop_mode="rel")

    def as_dict(self) -> dict:
        return asdict(self)


def train_mdeq(job: ClassificationJob, images: torch.Tensor, labels: torch.Tensor,
               checkpoint_dir: Path | str | None = None,
               progress: bool = False) -> tuple[MDEQClassifier, dict[str, list[float]]]:
    """Seed, build and train (or resume) the MDEQ of ``job`` on standardised ``images``."""
    seed_everything(job.seed)
    device = runtime.device()
    model = MDEQClassifier(config(job.architecture)).to(device)
    deq = job.deq()
    n = images.shape[0]
    per_epoch = math.ceil(n / job.batch_size)

    def step_loss(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        epoch, position = divmod(step, per_epoch)
        index = epoch_order(n, job.seed, epoch)[position * job.batch_size:
                                                (position + 1) * job.batch_size]
        x_images, y = images[index].to(device), labels[index].to(device)
        f, x, z0 = model.prepare(x_images)
        if step < job.pretrain_steps:
            logits, residual = model.classify(model.unrolled_state(x)), math.nan
        else:
            out, stats = deq(f, x, z0)
            logits, residual = model.classify(out), stats.forward.residual_rel
        loss = F.cross_entropy(logits, y)
        correct = float((logits.detach().argmax(1) == y).float().mean())
        return loss, {"accuracy": correct, "residual_rel": residual}

    plan = Plan(steps=job.steps(), lr=job.lr, lr_min=1e-6, weight_decay=job.weight_decay,
                clip=job.clip, seed=job.seed)
    history = train_steps(model, step_loss, plan, checkpoint_dir, progress, "MDEQ")
    return model, history
