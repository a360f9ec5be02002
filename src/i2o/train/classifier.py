"""Training a DEQ classifier with implicit (IFT) or unrolled gradients; checkpoint and resume.

One training step on a batch (the recipe of the paper's Figure 5, Appendix F.2):

- during the first ``pretrain_steps`` steps, a weight-tied network of ``pretrain_layers`` explicit
  applications of ``f_θ`` from ``z = 0`` is trained (the MDEQ warm-up, ``PRETRAIN_STEPS``);
- afterwards ``z*`` solves ``z = f_θ(z, x)`` with ``train_iter`` Broyden steps (no line search) and
  the head classifies ``f_θ(z*, x)``. The two arms differ only in the gradient:

  * ``"ift"``: implicit differentiation, the adjoint ``u = (∂f/∂z)ᵀ u + ∂ℓ/∂z`` solved with
    ``backward_iter`` Broyden steps (the paper's Eq. 3; Bai et al. 2019);
  * ``"unrolled"``: backpropagation through every Broyden iterate and low-rank update.

The loss is the cross-entropy; Adam with coupled weight decay; cosine learning rate per batch
(:mod:`i2o.train.schedule`). The data order of each epoch is a function of (seed, epoch)
(:func:`i2o.train.seeding.epoch_order`), the dropout masks come from torch's global generator whose
state is checkpointed, so a run killed and resumed from its last checkpoint ends with the same
numbers as an uninterrupted one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from i2o import runtime
from i2o.deq import DEQ, DEQStats, SolverSpec
from i2o.models.mdeq import MDEQClassifier
from i2o.train.allocator import keep_freed_memory
from i2o.train.checkpoint import restore_training_state, save_training_state
from i2o.train.schedule import cosine_lr, make_optimizer, set_lr
from i2o.train.seeding import epoch_order, seed_everything

ARMS = ("ift", "unrolled")


@dataclass(frozen=True)
class TrainSettings:
    """Hyper-parameters of one training run (defaults: ``cls_mdeq_TINY.yaml`` and the paper)."""

    arm: str = "ift"                 # "ift" (implicit gradient) or "unrolled"
    train_iter: int = 18             # F_THRES: forward solver steps during training
    backward_iter: int = 20          # B_THRES: adjoint solver steps (IFT arm)
    solver: str = "broyden"
    stop_mode: str = "rel"
    tol: float = 1e-3                # the DEQ code's default eps for training solves
    epochs: int = 50
    batch_size: int = 128
    lr: float = 1e-3
    lr_min: float = 1e-6
    weight_decay: float = 2.5e-6
    pretrain_steps: int = 3000
    clip: float = 0.0                # gradient-norm clipping (0: none, as in the MDEQ recipe)
    seed: int = 0
    checkpoint_every: int = 200      # steps between checkpoints (and one at the end)

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ValueError(f"arm must be one of {', '.join(map(repr, ARMS))}; got {self.arm!r}")
        for name in ("train_iter", "backward_iter", "epochs", "batch_size", "checkpoint_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer ≥ 1; got {value!r}")
        if isinstance(self.pretrain_steps, bool) or not isinstance(self.pretrain_steps, int) \
                or self.pretrain_steps < 0:
            raise ValueError(f"pretrain_steps must be an integer ≥ 0; got {self.pretrain_steps!r}")
        if not self.clip >= 0:
            raise ValueError(f"clip must be ≥ 0 (0: no clipping); got {self.clip!r}")
        if not (self.lr > 0 and 0 <= self.lr_min <= self.lr and self.weight_decay >= 0):
            raise ValueError(f"need lr > 0, 0 ≤ lr_min ≤ lr, weight_decay ≥ 0; got lr={self.lr}, "
                             f"lr_min={self.lr_min}, weight_decay={self.weight_decay}")

    def forward_spec(self) -> SolverSpec:
        return SolverSpec(method=self.solver, max_iter=self.train_iter, tol=self.tol,
                          stop_mode=self.stop_mode)

    def backward_spec(self) -> SolverSpec:
        return SolverSpec(method=self.solver, max_iter=self.backward_iter, tol=self.tol,
                          stop_mode=self.stop_mode)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_deq(settings: TrainSettings) -> DEQ:
    return DEQ(forward=settings.forward_spec(), backward=settings.arm,
               backward_spec=settings.backward_spec())


def training_logits(model: MDEQClassifier, deq: DEQ, images: torch.Tensor,
                    pretraining: bool) -> tuple[torch.Tensor, DEQStats | None]:
    """Logits of one training batch, and the DEQ's statistics (``None`` when pretraining).

    The head sees ``f_θ(z*)`` (the DEQ's output in training mode), as in the MDEQ code.
    """
    f, x, z0 = model.prepare(images)
    if pretraining:
        return model.classify(model.unrolled_state(x)), None
    z_out, stats = deq(f, x, z0, output="fz")
    return model.classify(z_out), stats


def _fresh_history() -> dict[str, list]:
    return {"loss": [], "correct": [], "lr": [], "residual_rel": [], "step_seconds": [],
            "epoch_accuracy": [], "epoch_loss": []}


def train_classifier(
    model: MDEQClassifier,
    images: torch.Tensor,
    labels: torch.Tensor,
    settings: TrainSettings,
    checkpoint_dir: Path | str | None = None,
    progress: bool = True,
    on_step: Callable[[int], None] | None = None,
) -> dict[str, list]:
    """Train ``model`` in place on ``(images, labels)``; return the history of the whole run.

    ``images`` (n, 3, H, W) float and ``labels`` (n,) int64 stay on their device; batches are moved
    to the model's device. When ``checkpoint_dir`` holds a checkpoint of this run, training resumes
    from it (model, optimiser, step, RNG state, history); a finished run returns at once. Set the
    seed through ``settings.seed`` only: the model's initial weights must be drawn after
    :func:`i2o.train.seeding.seed_everything` (see :func:`build_and_train`).

    History: per step ``loss``, ``correct`` (number right in the batch), ``lr``, ``residual_rel``
    (the forward solve's returned relative residual; NaN while pretraining), ``step_seconds``
    (wall clock; differs between runs); per epoch ``epoch_loss`` and ``epoch_accuracy``. A
    non-finite loss stops training at once (no optimiser step is taken with it): its value is the
    last ``loss`` and ``nonfinite_step`` holds ``[step]`` (:mod:`i2o.train.health` flags the run).
    """
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{images.shape[0]} images but {labels.shape[0]} labels")
    device = next(model.parameters()).device
    if device.type == "cpu":
        keep_freed_memory()
    n = images.shape[0]
    steps_per_epoch = -(-n // settings.batch_size)
    total_steps = steps_per_epoch * settings.epochs
    optimizer = make_optimizer(model, settings.lr, settings.weight_decay)
    deq = make_deq(settings)

    step, history = 0, _fresh_history()
    restored = restore_training_state(checkpoint_dir, settings.as_dict(), model, optimizer)
    if restored is not None:
        step, history = restored

    bar = runtime.Progress(total_steps, f"train {settings.arm} seed {settings.seed}", unit="step",
                           initial=step, enabled=None if progress else False)
    model.train()
    while step < total_steps:
        epoch, position = divmod(step, steps_per_epoch)
        order = epoch_order(n, settings.seed, epoch)
        index = order[position * settings.batch_size:(position + 1) * settings.batch_size]
        x = images[index].to(device)
        y = labels[index].to(device)
        lr = cosine_lr(step, total_steps, settings.lr, settings.lr_min)
        set_lr(optimizer, lr)

        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        logits, stats = training_logits(model, deq, x, pretraining=step < settings.pretrain_steps)
        loss = F.cross_entropy(logits, y)
        if not torch.isfinite(loss.detach()):
            # diverged: stop before the step poisons the weights (i2o.train.health flags it)
            history["loss"].append(float(loss.detach()))
            history["nonfinite_step"] = [step]
            break
        loss.backward()
        if settings.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
        optimizer.step()
        seconds = time.perf_counter() - start

        history["loss"].append(float(loss.detach()))
        history["correct"].append(int((logits.detach().argmax(1) == y).sum()))
        history["lr"].append(lr)
        history["residual_rel"].append(
            stats.forward.residual_rel if stats is not None else float("nan"))
        history["step_seconds"].append(seconds)
        step += 1
        if step % steps_per_epoch == 0:  # total_steps is a whole number of epochs
            history["epoch_loss"].append(sum(history["loss"][-steps_per_epoch:]) / steps_per_epoch)
            history["epoch_accuracy"].append(sum(history["correct"][-steps_per_epoch:]) / n)
        bar.update(1)
        bar.note(loss=f"{history['loss'][-1]:.3f}")
        if step % settings.checkpoint_every == 0 or step == total_steps:
            save_training_state(checkpoint_dir, settings.as_dict(), step, model, optimizer,
                                history)
        if on_step is not None:
            on_step(step)
    bar.close()
    model.eval()
    return history


def build_and_train(config, images: torch.Tensor, labels: torch.Tensor,
                    settings: TrainSettings, checkpoint_dir: Path | str | None = None,
                    progress: bool = True, device: str | None = None,
                    on_step: Callable[[int], None] | None = None
                    ) -> tuple[MDEQClassifier, dict[str, list]]:
    """Seed, build an :class:`MDEQClassifier` of ``config``, train it (resuming if possible)."""
    from i2o import runtime

    seed_everything(settings.seed)
    model = MDEQClassifier(config).to(device or runtime.device())
    history = train_classifier(model, images, labels, settings, checkpoint_dir, progress, on_step)
    return model, history
