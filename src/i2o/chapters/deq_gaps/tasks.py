"""The chapter's four tasks, one typed :class:`Task` each, in :data:`TASKS` (name → spec; the
table every other module reads, as torchdeq registers its solvers by name).

A task's spec says what its sweep measures and how the figures name it, its margins' units and
absolute floors (:mod:`.claims` gives their reasons), its fit criterion, the parameter of its
evaluation set, and, for the two reconstruction networks, Appendix G.4's own statement. The
name is also the job's role in :class:`.runs.ChapterJobs` and the prefix of its claim ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class FitScore(Enum):
    """What a model's fit score is, at its training N on its training examples."""

    ACCURACY = "training accuracy (1 − the task's error)"
    LOSS = "training loss"
    GAIN = "gain of the task metric over the initial guess A⁺y"


@dataclass(frozen=True)
class Fit:
    """A task's fit criterion: the score, the manifest parameter of its threshold, and how
    :func:`i2o.verdicts.gates.fit_quorum` states it."""

    score: FitScore
    threshold: str
    criterion: str = "training accuracy"
    higher_is_better: bool = True
    unit: str = "%"
    scale: float = 100.0


@dataclass(frozen=True)
class AppendixG4:
    """Appendix G.4's own statement of a reconstruction network: the claim, its row id, the
    verdict of :func:`i2o.verdicts.rule.decide` that tests it, and the side of N whose
    counts its row shows (``"below"`` or ``"above"``)."""

    claim: str
    row_id: str
    verdict: str
    side: str


@dataclass(frozen=True)
class Task:
    """One task of the chapter (module docstring).

    Attributes:
        name: the job role and the claim ids' prefix.
        label: how the claims name it.
        title: the title of its figure panels.
        metric, transform, metric_label: the sweep's test metric, how a curve is drawn from it
            (:data:`i2o.verdicts.curves.TRANSFORMS`), and its label.
        loss, loss_label: the sweep's training loss and its label.
        metric_unit, loss_unit: the units of their margins.
        metric_floor, loss_floor: their margins' absolute floors.
        fit: its fit criterion.
        eval_size: the parameter of its evaluation set (more examples narrow its intervals).
        inverse: a reconstruction network (trained once; a "has learned" gate and the regime as a
            fact).
        chance: the chance-level score below which training counts as diverged (``None``: none).
        appendix_g4: Appendix G.4's statement of it, if any.
        baseline: the trivial baseline fitted on the same training data that its test metric
            must beat for its test-data rows to be read (:mod:`.baselines`; principle 4).
    """

    name: str
    label: str
    title: str
    metric: str
    transform: str
    metric_label: str
    loss: str
    loss_label: str
    metric_unit: str
    loss_unit: str
    metric_floor: float
    loss_floor: float
    fit: Fit
    eval_size: str
    inverse: bool = False
    chance: float | None = None
    appendix_g4: AppendixG4 | None = None
    baseline: str = "the initial guess A⁺y"


_RECONSTRUCTION_FIT = Fit(FitScore.GAIN, "inv_fit_db", "training PSNR gain over A⁺y (has learned)",
                          unit=" dB", scale=1.0)


def _reconstruction(name: str, label: str, title: str, g4: AppendixG4) -> Task:
    return Task(name=name, label=label, title=title, metric="neg_psnr", transform="mean",
                metric_label="−PSNR (dB)", loss="mse", loss_label="MSE", metric_unit="dB",
                loss_unit="MSE", metric_floor=0.01, loss_floor=0.0, fit=_RECONSTRUCTION_FIT,
                eval_size="inv_eval_size", inverse=True, appendix_g4=g4)


#: every task, by name, in the order of the chapter
TASKS: dict[str, Task] = {task.name: task for task in (
    Task(name="classification", label="CIFAR-10 MDEQ", title="CIFAR-10 classification (MDEQ)",
         metric="error", transform="percent", metric_label="top-1 error (%)", loss="loss",
         loss_label="cross-entropy", metric_unit="error points", loss_unit="nats",
         metric_floor=0.1, loss_floor=0.001, fit=Fit(FitScore.ACCURACY, "cls_fit_accuracy"),
         eval_size="cls_eval_size", chance=0.1,
         baseline="a linear classifier on the pixels of its training images"),
    Task(name="language", label="language model", title="Tiny Shakespeare (DEQ transformer)",
         metric="nll", transform="exp_mean", metric_label="perplexity", loss="nll",
         loss_label="NLL (nats/char)", metric_unit="perplexity", loss_unit="nats/char",
         metric_floor=0.1, loss_floor=0.001,
         fit=Fit(FitScore.LOSS, "lm_fit_nll", "training NLL (nats/char)", higher_is_better=False,
                 unit="", scale=1.0),
         eval_size="lm_eval_windows", baseline="the bigram model of its training text"),
    _reconstruction("deq", "super-resolution DEQ", "×2 super-resolution (DEQ)", AppendixG4(
        "it is better to use fewer iterations than in training (some N' < N improves the PSNR "
        "beyond the metric's floor)", "deq_test_fewer_better", "fewer_help", "below")),
    _reconstruction("elder", "super-resolution ELDER", "×2 super-resolution (ELDER)", AppendixG4(
        "it is better to use more iterations than in training (some N' > N improves the PSNR "
        "beyond the metric's floor)", "elder_test_more_better", "more_help", "above")),
)}
