"""The training loop of every chapter that trains a torch model: one step-based loop, written once.

Each step ``t`` asks ``step_loss(t)`` for a loss (and a few numbers to log); the batch of step ``t``
must be a function of ``(seed, t)`` only, so that a run killed and resumed from its last checkpoint
sees the same batches. Adam with coupled weight decay and a cosine learning rate stepped per batch
(the MDEQ recipe, :mod:`i2o.train.schedule`); checkpoints hold the run's identity, the model, the
optimiser, the step, torch's RNG state and the history, written atomically
(:mod:`i2o.train.checkpoint`). A recipe is a step loss: the MDEQ classifier's is
:func:`i2o.train.classifier.classifier_step_loss`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from i2o import runtime
from i2o.train.checkpoint import restore_training_state, save_training_state
from i2o.train.schedule import cosine_lr, make_optimizer, set_lr

#: ``step_loss(t)`` → ``(loss, logs)``: the loss of step ``t`` and numbers to record for it
StepLoss = Callable[[int], tuple[torch.Tensor, dict[str, float]]]
#: ``on_step(done)``, called after every completed step with the number of steps done
OnStep = Callable[[int], None]


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
                checkpoint_dir: Path | str | None = None, progress: bool | None = None,
                description: str = "train", *, run: Mapping[str, Any] | None = None,
                on_step: OnStep | None = None) -> dict[str, list[float]]:
    """Train ``model`` in place for ``plan.steps`` steps (resuming from ``checkpoint_dir``).

    Returns the history: per step ``loss``, ``lr``, ``seconds`` (wall clock of the step, batch
    included) and every key ``step_loss`` logs (as floats). A non-finite loss stops training at
    once, without an optimiser step: it is the last ``loss`` and ``nonfinite_step`` holds
    ``[step]``, so that :mod:`i2o.train.health` flags the run and the chapter's claims on this
    model are undecided (nothing is silently skipped).

    - ``run``: the run's identity written into its checkpoints (default ``plan.as_dict()``); a
      checkpoint in ``checkpoint_dir`` written under another identity raises ``ValueError``
      rather than being continued. A finished run's checkpoint returns its history at once.
    - ``progress``: the progress bar (showing the last loss) is shown when ``True``, hidden when
      ``False``, and left to ``I2O_PROGRESS`` (:func:`i2o.runtime.progress_enabled`) when ``None``.
    - ``on_step(done)`` runs after every completed step and its checkpoint (a test's hook: pause,
      count, kill).
    """
    identity = plan.as_dict() if run is None else dict(run)
    optimizer = make_optimizer(model, plan.lr, plan.weight_decay)
    history: dict[str, list[float]] = {"loss": [], "lr": [], "seconds": []}
    step = 0
    restored = restore_training_state(checkpoint_dir, identity, model, optimizer)
    if restored is not None:
        step, history = restored

    model.train()
    bar = runtime.Progress(plan.steps, description, unit="step", initial=step, enabled=progress)
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
        bar.note(loss=f"{history['loss'][-1]:.3f}")
        if step % plan.checkpoint_every == 0 or step == plan.steps:
            save_training_state(checkpoint_dir, identity, step, model, optimizer, history)
        if on_step is not None:
            on_step(step)
    bar.close()
    model.eval()
    return history
