"""The experiment of the paper's Figure 5 (Section 5, Appendix F.2): its jobs and its results.

One :class:`~i2o.chapters.stability.jobs.TrainJob` per (seed, arm, training N) trains and
evaluates an MDEQ classifier (:mod:`.jobs`); one
:class:`~i2o.chapters.stability.stepcost.StepCostJob` per arm measures the time and peak memory
of one training step (:mod:`.stepcost`). :func:`jobs` lists the training jobs, which the notebook
``book/stability.ipynb`` and the sweep (``python -m i2o.sweep stability``) build alike from the
same figure parameters, so whatever the sweep computed the notebook only reads;
:func:`collect` reads (or computes) them all and summarises them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from i2o.chapters.stability import FIGURE
from i2o.chapters.stability.jobs import TrainJob
from i2o.chapters.stability.stepcost import StepCostJob
from i2o.compute.chapter import ChapterResults, run_jobs
from i2o.compute.job import Job
from i2o.compute.profiles import Params, require
from i2o.models.mdeq import CONFIGS, MDEQClassifier, config
from i2o.models.parameters import count_parameters
from i2o.train.classifier import ARMS


def jobs(params: Params) -> list[Job]:
    """Every training job of a figure run: seeds × arms × training N."""
    return [TrainJob.of(params, seed, arm, n)
            for n in params["train_iters"] for arm in ARMS for seed in params["seeds"]]


def step_cost_jobs(params: Params, train_iter: int) -> list[StepCostJob]:
    """One step measurement per arm at ``train_iter`` (none when ``cost_steps`` is 0)."""
    if params["cost_steps"] <= 0:
        return []
    return [StepCostJob(model=params["model"], batch=params["batch_size"], arm=arm,
                        train_iter=train_iter, backward_iter=params["backward_iter"],
                        tol=params["tol"], steps=params["cost_steps"]) for arm in ARMS]


# -- what the notebook calls ------------------------------------------------------------------

def check_params(params: Params) -> None:
    """Cross-parameter checks, before any compute (single values are checked by the manifest);
    raises :class:`i2o.compute.profiles.ParameterError` naming the parameter."""
    p = params
    missing = [n for n in p["train_iters"] if n not in p["test_iters"]]
    steps = -(-p["train_size"] // p["batch_size"]) * p["epochs"]
    require(FIGURE, p, [
        ("test_iters", not missing, f"a list containing every training N of 'train_iters' "
         f"(missing {missing}): the figure compares against it"),
        ("test_iters", len(set(p["test_iters"])) >= 2,
         "at least two distinct counts (N and another)"),
        ("pretrain_steps", p["pretrain_steps"] < steps,
         f"smaller than the training steps of the cap, epochs × ⌈train_size / batch_size⌉ = "
         f"{steps} (or no DEQ is ever trained)"),
        ("fit_every", p["fit_every"] <= p["epochs"],
         f"at most epochs = {p['epochs']} (0: no check, train exactly `epochs`)"),
        ("fit_quorum", p["fit_quorum"] <= len(p["seeds"]),
         f"at most the number of seeds, {len(p['seeds'])}"),
        ("reference_factor", p["reference_factor"] == 0 or p["reference_factor"] >= 2,
         "0 (no reference solve) or at least 2 (a cap of 2 × N steps or more)"),
        ("model", p["model"] in CONFIGS, f"an MDEQ configuration: {', '.join(CONFIGS)}"),
    ])


@dataclasses.dataclass(frozen=True)
class StabilityResults(ChapterResults):
    """What the chapter shows, for the first training N (``train_n``)."""

    runs: dict[str, list[dict[str, Any]]]  # arm → its seeds' job results at train_n
    summary: dict[str, dict[str, Any]]  # arm → :func:`summarize`
    train_seconds: dict[str, float]  # arm → mean over seeds of the summed training-step times
    costs: dict[str, dict[str, Any]] | None  # arm → its StepCostJob; None when cost_steps = 0
    train_n: int
    n_parameters: int
    n_parameters_tiny: int


def collect(params: Params) -> StabilityResults:
    """Every result of the chapter, computed (missing training jobs in ``params["workers"]``
    processes, then the step costs one at a time) or read back."""
    listed = jobs(params)
    found, cost = run_jobs(FIGURE, listed, params["workers"])
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for job, result in zip(listed, found, strict=True):
        runs.setdefault((job.arm, job.train_iter), []).append(result)
    train_n = int(params["train_iters"][0])
    at_n = {arm: runs[(arm, train_n)] for arm in ARMS}
    costs = None
    if measured := step_cost_jobs(params, train_n):
        found, step_cost = run_jobs(FIGURE, measured, 1, label="stability step costs")
        costs = {job.arm: result for job, result in zip(measured, found, strict=True)}
        cost = cost + step_cost
    return StabilityResults(
        runs=at_n,
        summary={arm: summarize(rs, params["test_iters"], train_n) for arm, rs in at_n.items()},
        # summed over every training step, including those of an interrupted and resumed run
        train_seconds={arm: float(np.mean([np.sum(r["history"]["seconds"]) for r in rs]))
                       for arm, rs in at_n.items()},
        costs=costs, train_n=train_n,
        n_parameters=count_parameters(MDEQClassifier(config(params["model"]))),
        n_parameters_tiny=count_parameters(MDEQClassifier(config("tiny"))),
        params=params, cost=cost)


def summarize(runs: Sequence[Mapping[str, Any]], test_iters: Sequence[int], train_iter: int
              ) -> dict[str, Any]:
    """Mean and sd over seeds of accuracy and residual per test N, and the stability measures.

    - ``deviation``: per seed, mean over test N ≠ N_train of ``|acc(N) − acc(N_train)|``;
    - ``loss_fewer``: per seed, ``acc(N_train) − acc(min N)``.
    """
    its = np.asarray(test_iters)
    at = int(np.flatnonzero(its == train_iter)[0])
    acc = np.stack([np.asarray(r["test"]["accuracy"]) for r in runs])
    res = np.stack([np.asarray(r["test"]["residual_rel"]) for r in runs])
    others = its != train_iter
    sd = acc.std(axis=0, ddof=1) if len(runs) > 1 else np.zeros(len(its))
    return {
        "accuracy": acc, "residual": res,
        "mean": acc.mean(axis=0), "sd": sd,
        "residual_mean": res.mean(axis=0),
        "at_train": acc[:, at],
        "deviation": np.abs(acc[:, others] - acc[:, [at]]).mean(axis=1),
        "loss_fewer": acc[:, at] - acc[:, int(np.argmin(its))],
        "residual_at_train": res[:, at], "residual_at_max": res[:, int(np.argmax(its))],
    }
