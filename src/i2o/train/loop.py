"""The training loop of every chapter that trains a torch model: one step-based loop, written once.

Each step ``t`` asks ``step_loss(t)`` for a loss (and a few numbers to log); the batch of step ``t``
must be a function of ``(seed, t)`` only, so that a run killed and resumed from its last checkpoint
sees the same batches. Adam with coupled weight decay and a cosine learning rate stepped per batch
(the MDEQ recipe, :mod:`i2o.train.schedule`); checkpoints hold the run's identity, the model, the
optimiser, the step, torch's RNG state and the history, written atomically
(:mod:`i2o.train.checkpoint`). A recipe is a step loss: the MDEQ classifier's is
:func:`i2o.train.classifier.classifier_step_loss`.

**Training to the regime** (:class:`UntilFit`). The paper's claims are about models that fit their
training set; a fixed budget leaves that to chance (seeds of one recipe end anywhere between
"fits" and "does not"). With ``until``, the loop checks a fit criterion on the training set every
``check_every`` steps and, at the first check it meets (step ``t_f``), trains ``extra_steps``
more steps and stops: the run ends at ``min(t_f + extra_steps, plan.steps)``, ``plan.steps``
being the cap. A run that never meets it trains to the cap and is reported as not fitting. The
learning rate follows the plan's cosine over the cap until ``t_f``, then anneals from its value at
``t_f`` to ``lr_min`` over the extra steps (:func:`i2o.train.schedule.annealed_lr`).
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

from i2o.base.progress import Progress
from i2o.train.checkpoint import restore_training_state, save_training_state
from i2o.train.schedule import annealed_lr, cosine_lr, make_optimizer, set_lr

#: ``step_loss(t)`` → ``(loss, logs)``: the loss of step ``t`` and numbers to record for it
StepLoss = Callable[[int], tuple[torch.Tensor, dict[str, float]]]
#: ``on_step(done)``, called after every completed step with the number of steps done
OnStep = Callable[[int], None]
#: ``criterion()`` → ``(met, score)``: does the model fit now, and the score it was judged on
FitCriterion = Callable[[], tuple[bool, float]]


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


@dataclass(frozen=True)
class UntilFit:
    """Train until ``criterion`` holds, then ``extra_steps`` more (module docstring).

    ``criterion`` is called every ``check_every`` completed steps, the model in evaluation mode and
    torch's random state restored afterwards, so that checking does not change the batches, the
    dropout masks or any number of the run (a run whose criterion is never met is step for step
    the fixed-budget run of the same plan). It should measure the training set, not a batch.
    """

    criterion: FitCriterion
    check_every: int
    extra_steps: int

    def __post_init__(self) -> None:
        for name, least in (("check_every", 1), ("extra_steps", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"UntilFit.{name} must be an integer ≥ {least}; got {value!r}")


def check_fit(until: UntilFit, model: nn.Module) -> tuple[bool, float]:
    """One call of ``until.criterion`` in evaluation mode, leaving torch's RNG as it was."""
    model.eval()
    with torch.random.fork_rng():
        met, score = until.criterion()
    model.train()
    return bool(met), float(score)


def fit_end(history: Mapping[str, Any], until: UntilFit | None, cap: int) -> int:
    """The step the run ends at: ``cap``, or ``min(t_f + extra_steps, cap)`` once it fitted."""
    fitted = history.get("fit_step") or []
    if until is None or not len(fitted):
        return cap
    return min(cap, int(fitted[0]) + until.extra_steps)


def learning_rate(step: int, plan: Plan, history: Mapping[str, Any],
                  until: UntilFit | None) -> float:
    """The plan's cosine over its cap; after a fit at ``t_f``, the anneal over the extra steps."""
    fitted = history.get("fit_step") or []
    if until is None or not len(fitted):
        return cosine_lr(step, plan.steps, plan.lr, plan.lr_min)
    start = int(fitted[0])
    end = fit_end(history, until, plan.steps)
    if end <= start:
        return plan.lr_min
    return annealed_lr(step, start, end - start, cosine_lr(start, plan.steps, plan.lr, plan.lr_min),
                       plan.lr_min)


def train_steps(model: nn.Module, step_loss: StepLoss, plan: Plan,
                checkpoint_dir: Path | str | None = None, progress: bool | None = None,
                description: str = "train", *, run: Mapping[str, Any] | None = None,
                on_step: OnStep | None = None, until: UntilFit | None = None
                ) -> dict[str, list[float]]:
    """Train ``model`` in place for ``plan.steps`` steps (resuming from ``checkpoint_dir``), or,
    with ``until``, until it fits and ``until.extra_steps`` more, within ``plan.steps``.

    Returns the history: per step ``loss``, ``lr``, ``seconds`` (wall clock of the step, batch
    included) and every key ``step_loss`` logs (as floats). A non-finite loss stops training at
    once, without an optimiser step: it is the last ``loss`` and ``nonfinite_step`` holds
    ``[step]``, so that :mod:`i2o.train.health` flags the run and the chapter's claims on this
    model are undecided (nothing is silently skipped).

    - ``run``: the run's identity written into its checkpoints (default ``plan.as_dict()``); a
      checkpoint in ``checkpoint_dir`` written under another identity raises ``ValueError``
      rather than being continued. A finished run's checkpoint returns its history at once.
    - ``progress``: the progress bar (showing the last loss) is shown when ``True``, hidden when
      ``False``, and left to ``I2O_PROGRESS`` (:func:`i2o.base.progress.progress_enabled`) when
      ``None``.
    - ``on_step(done)`` runs after every completed step and its checkpoint (a test's hook: pause,
      count, kill).
    - ``until``: :class:`UntilFit`; the history then also holds ``fit_check_step`` and
      ``fit_check_score`` (every check) and, once the criterion is met, ``fit_step`` = ``[t_f]``.
      The run's identity (``run``) should include ``check_every`` and ``extra_steps``.
    """
    identity = plan.as_dict() if run is None else dict(run)
    optimizer = make_optimizer(model, plan.lr, plan.weight_decay)
    history: dict[str, list[float]] = {"loss": [], "lr": [], "seconds": []}
    step = 0
    restored = restore_training_state(checkpoint_dir, identity, model, optimizer)
    if restored is not None:
        step, history = restored

    model.train()
    bar = Progress(plan.steps, description, unit="step", initial=step, enabled=progress)
    end = fit_end(history, until, plan.steps)
    while step < end:
        lr = learning_rate(step, plan, history, until)
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
        if until is not None and not history.get("fit_step") and step % until.check_every == 0:
            met, score = check_fit(until, model)
            history.setdefault("fit_check_step", []).append(step)
            history.setdefault("fit_check_score", []).append(score)
            if met:
                history["fit_step"] = [step]
                end = fit_end(history, until, plan.steps)
        if step % plan.checkpoint_every == 0 or step == end:
            save_training_state(checkpoint_dir, identity, step, model, optimizer, history)
        if on_step is not None:
            on_step(step)
    bar.close()
    model.eval()
    return history
