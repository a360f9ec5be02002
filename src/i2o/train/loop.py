"""A step-based training loop with checkpoint/resume, for the DEQ chapter's models.

Each step ``t`` asks ``step_loss(t)`` for a loss (and a few numbers to log); the batch of step ``t``
must be a function of ``(seed, t)`` only, so that a run killed and resumed from its last checkpoint
sees the same batches. Adam with coupled weight decay and a cosine learning rate stepped per batch
(the MDEQ recipe, :mod:`i2o.train.schedule`); checkpoints hold the model, the optimiser, the step,
torch's RNG state and the history, written atomically (:mod:`i2o.train.checkpoint`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from i2o import runtime
from i2o.train.checkpoint import restore_training_state, save_training_state
from i2o.train.schedule import cosine_lr, make_optimizer, set_lr

StepLoss = Callable[[int], tuple[torch.Tensor, dict[str, float]]]


@dataclass(frozen=True)
class Plan:
    """Optimisation of one run."""

    steps: int
    lr: float = 2e-3
    lr_min: float = 1e-5
    weight_decay: float = 0.0
    clip: float = 1.0                 # gradient-norm clipping (0: none)
    checkpoint_every: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "checkpoint_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Plan.{name} must be an integer ≥ 1; got {value!r}")
        if not (self.lr > 0 and 0 <= self.lr_min <= self.lr and self.weight_decay >= 0
                and self.clip >= 0):
            raise ValueError(f"need lr > 0, 0 ≤ lr_min ≤ lr, weight_decay ≥ 0, clip ≥ 0; got "
                             f"{self.lr}, {self.lr_min}, {self.weight_decay}, {self.clip}")

    def as_dict(self) -> dict:
        return asdict(self)


def train_steps(model: nn.Module, step_loss: StepLoss, plan: Plan,
                checkpoint_dir: Path | str | None = None, progress: bool = False,
                description: str = "train") -> dict[str, list[float]]:
    """Train ``model`` in place for ``plan.steps`` steps (resuming from ``checkpoint_dir``).

    Returns the history: per step ``loss``, ``lr``, ``seconds`` and every key ``step_loss`` logs.
    A non-finite loss stops training at once, without an optimiser step: it is the last ``loss``
    and ``nonfinite_step`` holds ``[step]``, so that :mod:`i2o.train.health` flags the run and the
    chapter's claims on this model are undecided (nothing is silently skipped).
    """
    optimizer = make_optimizer(model, plan.lr, plan.weight_decay)
    history: dict[str, list[float]] = {"loss": [], "lr": [], "seconds": []}
    step = 0
    restored = restore_training_state(checkpoint_dir, plan.as_dict(), model, optimizer)
    if restored is not None:
        step, history = restored

    model.train()
    bar = runtime.Progress(plan.steps, description, unit="step", initial=step,
                           enabled=True if progress else None)
    while step < plan.steps:
        lr = cosine_lr(step, plan.steps, plan.lr, plan.lr_min)
        set_lr(optimizer, lr)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss, logs = step_loss(step)
        if not math.isfinite(float(loss.detach())):
            # diverged: stop before the step poisons the weights; i2o.train.health flags the run
            history["loss"].append(float(loss.detach()))
            history["nonfinite_step"] = [step]
            break
        loss.backward()
        if plan.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), plan.clip)
        optimizer.step()
        history["loss"].append(float(loss.detach()))
        history["lr"].append(lr)
        history["seconds"].append(time.perf_counter() - start)
        for key, value in logs.items():
            history.setdefault(key, []).append(float(value))
        step += 1
        bar.update(1)
        if step % plan.checkpoint_every == 0 or step == plan.steps:
            save_training_state(checkpoint_dir, plan.as_dict(), step, model, optimizer, history)
    bar.close()
    model.eval()
    return history
