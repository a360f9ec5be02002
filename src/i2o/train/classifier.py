"""Training a DEQ classifier with implicit (IFT) or unrolled gradients; checkpoint and resume.

One training step on a batch (the recipe of the paper's Figure 5, Appendix F.2):

- during the first ``pretrain_steps`` steps, a weight-tied network of ``pretrain_layers`` explicit
  applications of ``f_θ`` from ``z = 0`` is trained (the MDEQ warm-up, ``PRETRAIN_STEPS``);
- afterwards ``z*`` solves ``z = f_θ(z, x)`` with the ``forward`` solver, N = ``train_iter`` Broyden
  steps (no line search), and the head classifies ``f_θ(z*, x)``. The two arms differ only in the
  gradient:
  * ``"ift"``: implicit differentiation, the adjoint ``u = (∂f/∂z)ᵀ u + ∂ℓ/∂z`` solved with
    the ``backward`` solver, ``backward_iter`` Broyden steps (the paper's Eq. 3; Bai et al. 2019);
  * ``"unrolled"``: backpropagation through every Broyden iterate and low-rank update.

The loss is the cross-entropy (:func:`mdeq_loss`, the step written once: the stability and
deq_gaps chapters train with it, :mod:`i2o.chapters.stability.stepcost` times it). Training is
:func:`i2o.train.loop.train_steps` with :func:`classifier_step_loss`: Adam with coupled weight
decay, cosine learning rate per batch (:mod:`i2o.train.schedule`). The data order of each epoch is
a function of (seed, epoch) (:func:`i2o.train.seeding.epoch_order`), the dropout masks come from
torch's global generator whose state is checkpointed, so a run killed and resumed from its last
checkpoint ends with the same numbers as an uninterrupted one.

**Until it fits** (``fit_every > 0``): every ``fit_every`` epochs the model's accuracy on its whole
training set at its training ``N`` (evaluation mode, batches of ``fit_batch``: the measurement the
chapters' fit criterion uses) is compared with ``fit_accuracy``; at the first check that meets it,
training goes on for ``extra_epochs`` epochs and stops, ``epochs`` being the cap
(:class:`i2o.train.loop.UntilFit`). ``fit_every = 0`` trains exactly ``epochs`` epochs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from i2o.base import runtime
from i2o.base.allocator import keep_freed_memory
from i2o.deq import DEQ, DEQStats, SolverSpec
from i2o.models.mdeq import MDEQClassifier
from i2o.train.evaluate import evaluate_iterations
from i2o.train.loop import OnStep, Plan, StepLoss, UntilFit, train_steps
from i2o.train.seeding import epoch_order, seed_everything

ARMS = ("ift", "unrolled")


@dataclass(frozen=True)
class TrainSettings:
    """Hyper-parameters of one training run (defaults: ``cls_mdeq_TINY.yaml`` and the paper)."""

    arm: str = "ift"                 # "ift" (implicit gradient) or "unrolled"
    #: the forward solver during training: N = ``max_iter`` (F_THRES) Broyden steps, the DEQ
    #: code's default eps 1e-3 on the relative residual
    forward: SolverSpec = SolverSpec(method="broyden", max_iter=18, tol=1e-3, stop_mode="rel")
    #: the adjoint solver of the IFT arm: ``max_iter`` = B_THRES
    backward: SolverSpec = SolverSpec(method="broyden", max_iter=20, tol=1e-3, stop_mode="rel")
    epochs: int = 50                 # the budget; with fit_every > 0, the cap
    batch_size: int = 128
    lr: float = 1e-3
    lr_min: float = 1e-6
    weight_decay: float = 2.5e-6
    pretrain_steps: int = 3000
    clip: float = 0.0                # gradient-norm clipping (0: none, as in the MDEQ recipe)
    seed: int = 0
    checkpoint_every: int = 200      # steps between checkpoints (and one at the end)
    fit_every: int = 0               # epochs between fit checks (0: train exactly `epochs`)
    extra_epochs: int = 0            # epochs trained after the first check that fits
    fit_accuracy: float = 0.0        # the fit criterion: training accuracy at train_iter
    fit_batch: int = 100             # evaluation batch of the fit check

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ValueError(f"arm must be one of {', '.join(map(repr, ARMS))}; got {self.arm!r}")
        for name, value in (("forward.max_iter", self.forward.max_iter),
                            ("backward.max_iter", self.backward.max_iter),
                            *((name, getattr(self, name))
                              for name in ("epochs", "batch_size", "checkpoint_every"))):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer ≥ 1; got {value!r}")
        for name in ("pretrain_steps", "fit_every", "extra_epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer ≥ 0; got {value!r}")
        if self.fit_every > 0 and not 0 < self.fit_accuracy <= 1:
            raise ValueError(f"fit_accuracy must be in (0, 1] when fit_every > 0; got "
                             f"{self.fit_accuracy!r}")
        if isinstance(self.fit_batch, bool) or not isinstance(self.fit_batch, int) \
                or self.fit_batch < 1:
            raise ValueError(f"fit_batch must be an integer ≥ 1; got {self.fit_batch!r}")
        if not self.clip >= 0:
            raise ValueError(f"clip must be ≥ 0 (0: no clipping); got {self.clip!r}")
        if not (self.lr > 0 and 0 <= self.lr_min <= self.lr and self.weight_decay >= 0):
            raise ValueError(f"need lr > 0, 0 ≤ lr_min ≤ lr, weight_decay ≥ 0; got lr={self.lr}, "
                             f"lr_min={self.lr_min}, weight_decay={self.weight_decay}")

    @property
    def train_iter(self) -> int:
        """``N``: the forward solver's steps in training."""
        return self.forward.max_iter

    def steps(self, n: int) -> int:
        """Training steps on ``n`` examples: ``epochs`` × ⌈n / batch_size⌉."""
        return self.epochs * -(-n // self.batch_size)

    def plan(self, n: int) -> Plan:
        """The optimisation of the run on ``n`` examples, for :func:`i2o.train.loop.train_steps`."""
        return Plan(steps=self.steps(n), lr=self.lr, lr_min=self.lr_min,
                    weight_decay=self.weight_decay, clip=self.clip,
                    checkpoint_every=self.checkpoint_every, seed=self.seed)

    def until(self, model: MDEQClassifier, images: torch.Tensor, labels: torch.Tensor,
              ) -> UntilFit | None:
        """The fit rule of the run on ``(images, labels)`` (``None`` for a fixed budget)."""
        if self.fit_every == 0:
            return None
        per_epoch = -(-images.shape[0] // self.batch_size)
        return UntilFit(accuracy_criterion(model, images, labels, self.train_iter,
                                           self.fit_accuracy, self.fit_batch),
                        check_every=self.fit_every * per_epoch,
                        extra_steps=self.extra_epochs * per_epoch)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def accuracy_criterion(model: MDEQClassifier, images: torch.Tensor, labels: torch.Tensor,
                       train_iter: int, threshold: float, batch_size: int):
    """``criterion()`` → ``(accuracy ≥ threshold, accuracy)``: the model's accuracy on
    ``(images, labels)`` with ``train_iter`` Broyden steps (:func:`i2o.train.evaluate.
    evaluate_iterations`, the measurement of the chapters' fit criterion)."""

    def criterion() -> tuple[bool, float]:
        accuracy = float(evaluate_iterations(model, images, labels, [train_iter],
                                             batch_size=batch_size)["accuracy"][0])
        return accuracy >= threshold, accuracy

    return criterion


def epochs_used(history: dict[str, Any], steps_per_epoch: int) -> float:
    """Training epochs a run took (steps done / steps per epoch; the cap when it never fitted)."""
    return len(history.get("lr", [])) / steps_per_epoch


def make_deq(settings: TrainSettings) -> DEQ:
    return DEQ(forward=settings.forward, backward=settings.arm, backward_spec=settings.backward)


def mdeq_loss(model: MDEQClassifier, deq: DEQ, images: torch.Tensor, labels: torch.Tensor,
              pretraining: bool) -> tuple[torch.Tensor, torch.Tensor, DEQStats | None]:
    """One training batch's cross-entropy, its logits and the DEQ's statistics (``None`` when
    pretraining): the MDEQ step (prepare → unrolled state or DEQ solve → classify → loss).

    The head sees ``f_θ(z*)`` (the DEQ's output ``"fz"`` in training mode), as in the MDEQ code.
    """
    f, x, z0 = model.prepare(images)
    if pretraining:
        logits, stats = model.classify(model.unrolled_state(x)), None
    else:
        z_out, stats = deq(f, x, z0, output="fz")
        logits = model.classify(z_out)
    return F.cross_entropy(logits, labels), logits, stats


def classifier_step_loss(model: MDEQClassifier, deq: DEQ, images: torch.Tensor,
                         labels: torch.Tensor, batch_size: int, seed: int,
                         pretrain_steps: int) -> StepLoss:
    """The step loss of :func:`i2o.train.loop.train_steps` for an MDEQ classifier.

    Step ``t`` takes batch ``t mod ⌈n / batch_size⌉`` of the order
    :func:`i2o.train.seeding.epoch_order` gives epoch ``t div ⌈n / batch_size⌉`` (moved to the
    model's device) and pretrains during the first ``pretrain_steps`` steps. It logs ``correct``
    (images right in the batch), ``accuracy`` (the batch's fraction right) and ``residual_rel``
    (the forward solve's returned relative residual; NaN while pretraining).
    """
    device = next(model.parameters()).device
    n = images.shape[0]
    per_epoch = -(-n // batch_size)

    def step_loss(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        epoch, position = divmod(step, per_epoch)
        index = epoch_order(n, seed, epoch)[position * batch_size:(position + 1) * batch_size]
        x, y = images[index].to(device), labels[index].to(device)
        loss, logits, stats = mdeq_loss(model, deq, x, y, pretraining=step < pretrain_steps)
        right = logits.detach().argmax(1) == y
        return loss, {"correct": int(right.sum()), "accuracy": float(right.float().mean()),
                      "residual_rel": math.nan if stats is None else stats.forward.residual_rel}

    return step_loss


def add_epoch_means(history: dict[str, list], steps_per_epoch: int, n: int) -> None:
    """Add ``epoch_loss`` and ``epoch_accuracy`` (over ``n`` examples) for every whole epoch of
    completed steps in ``history`` (a diverged step is not one)."""
    epochs = len(history.get("correct", [])) // steps_per_epoch
    parts = [slice(e * steps_per_epoch, (e + 1) * steps_per_epoch) for e in range(epochs)]
    history["epoch_loss"] = [sum(history["loss"][part]) / steps_per_epoch for part in parts]
    history["epoch_accuracy"] = [sum(history["correct"][part]) / n for part in parts]


def train_classifier(
    model: MDEQClassifier,
    images: torch.Tensor,
    labels: torch.Tensor,
    settings: TrainSettings,
    checkpoint_dir: Path | str | None = None,
    progress: bool | None = None,
    on_step: OnStep | None = None,
) -> dict[str, list]:
    """Train ``model`` in place on ``(images, labels)``; return the history of the whole run.

    ``images`` (n, 3, H, W) float and ``labels`` (n,) int64 stay on their device; batches are moved
    to the model's device. When ``checkpoint_dir`` holds a checkpoint of this run (identified by
    ``settings``), training resumes from it (model, optimiser, step, RNG state, history); a
    finished run returns at once. Set the seed through ``settings.seed`` only: the model's initial
    weights must be drawn after :func:`i2o.train.seeding.seed_everything` (see
    :func:`build_and_train`). ``progress`` and ``on_step``: :func:`i2o.train.loop.train_steps`.

    History: per step ``loss``, ``lr``, ``seconds`` (wall clock; differs between runs) and the logs
    of :func:`classifier_step_loss` (``correct``, ``accuracy``, ``residual_rel``); per epoch
    ``epoch_loss`` and ``epoch_accuracy``. A non-finite loss stops training at once (no optimiser
    step is taken with it): its value is the last ``loss`` and ``nonfinite_step`` holds ``[step]``
    (:mod:`i2o.train.health` flags the run).
    """
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{images.shape[0]} images but {labels.shape[0]} labels")
    if next(model.parameters()).device.type == "cpu":
        keep_freed_memory()
    n = images.shape[0]
    step_loss = classifier_step_loss(model, make_deq(settings), images, labels,
                                     settings.batch_size, settings.seed, settings.pretrain_steps)
    history = train_steps(model, step_loss, settings.plan(n), checkpoint_dir, progress,
                          f"train {settings.arm} seed {settings.seed}", run=settings.as_dict(),
                          on_step=on_step, until=settings.until(model, images, labels))
    add_epoch_means(history, -(-n // settings.batch_size), n)
    return history


def build_and_train(config, images: torch.Tensor, labels: torch.Tensor,
                    settings: TrainSettings, checkpoint_dir: Path | str | None = None,
                    progress: bool | None = None, device: str | None = None,
                    on_step: OnStep | None = None) -> tuple[MDEQClassifier, dict[str, list]]:
    """Seed, build an :class:`MDEQClassifier` of ``config``, train it (resuming if possible)."""

    seed_everything(settings.seed)
    model = MDEQClassifier(config).to(device or runtime.device())
    history = train_classifier(model, images, labels, settings, checkpoint_dir, progress, on_step)
    return model, history
