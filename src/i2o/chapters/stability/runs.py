"""The experiment of the paper's Figure 5 (Section 5, Appendix F.2), one job per (seed, arm, N).

A job trains an MDEQ classifier on CIFAR-10 with ``N = train_iter`` Broyden steps and either IFT or
unrolled gradients, then measures its test accuracy for every test-time iteration count
(:func:`i2o.train.evaluate.evaluate_iterations`). With ``fit_every > 0`` it trains *to the
regime*: every ``fit_every`` epochs its accuracy on its own training images at ``N`` is checked
against ``fit_accuracy``; ``extra_epochs`` after the first check that meets it, training stops,
``epochs`` being the cap (:class:`i2o.train.loop.UntilFit`). The result records the epochs used
and whether the model reached the cap without fitting. Its result is stored in the results cache
under the key built by :func:`job_params` and :func:`job_name`: the notebook
``book/stability.ipynb`` and the sweep (``python -m i2o.sweep stability``) build the same keys
from the same figure parameters, so whatever the sweep computed the notebook only reads. Training
checkpoints live in :func:`i2o.results.checkpoint_dir` of the same key: an interrupted job
resumes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from i2o import replicates, results, runtime
from i2o.chapters.stability import FIGURE
from i2o.data import balanced_subset, load_cifar10, to_tensor
from i2o.models import config, count_parameters
from i2o.train import health
from i2o.train.classifier import ARMS, TrainSettings, build_and_train, epochs_used
from i2o.train.evaluate import evaluate_iterations

#: The modules a job's result depends on (the cache key hashes only these, so that work on other
#: chapters' models or on this module's plotting helpers does not discard trained networks).
SOURCES = ("deq", "models.mdeq", "data.cifar10", "train.classifier", "train.loop",
           "train.evaluate", "train.allocator", "train.checkpoint", "train.schedule",
           "train.seeding", "chapters.stability.runs", "train.health")
#: Figure parameters that shape every job (the rest select which jobs run).
SHARED = ("model", "train_size", "test_size", "epochs", "batch_size", "lr", "lr_min",
          "weight_decay", "pretrain_steps", "backward_iter", "tol", "test_iters", "eval_batch",
          "clip", "fit_every", "extra_epochs", "fit_accuracy")
#: Data subsets are drawn with this seed whatever the training seed, so seeds differ only in the
#: network's initialisation, dropout masks and batch order; a replicate redraws it too
#: (:func:`i2o.replicates.seed`), so replicate r > 0 also trains and tests on other images.
DATA_SEED = 0
NUM_CLASSES = 10


def job_name(seed: int, arm: str, train_iter: int, replicate: int = 0) -> str:
    return f"{arm}-N{train_iter}-seed{seed}{replicates.suffix(replicate)}"


def job_params(params: Mapping[str, Any], seed: int, arm: str, train_iter: int) -> dict[str, Any]:
    """The cache key's parameters of one job, from the figure's parameters."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {', '.join(map(repr, ARMS))}; got {arm!r}")
    job = {name: params[name] for name in SHARED}
    job["test_iters"] = [int(n) for n in job["test_iters"]]
    job.update(seed=int(seed), arm=arm, train_iter=int(train_iter),
               replicate=int(params["replicate"]))
    return job


def all_jobs(params: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every (name, job parameters) of a figure run: seeds × arms × training N."""
    return [(job_name(seed, arm, n, params["replicate"]), job_params(params, seed, arm, n))
            for n in params["train_iters"] for arm in ARMS for seed in params["seeds"]]


def settings_of(job: Mapping[str, Any], checkpoint_every: int = 50) -> TrainSettings:
    return TrainSettings(
        arm=job["arm"], train_iter=job["train_iter"], backward_iter=job["backward_iter"],
        tol=job["tol"], epochs=job["epochs"], batch_size=job["batch_size"], lr=job["lr"],
        lr_min=job["lr_min"], weight_decay=job["weight_decay"],
        pretrain_steps=job["pretrain_steps"], clip=job["clip"],
        seed=replicates.seed(job["seed"], job["replicate"]),
        checkpoint_every=checkpoint_every, fit_every=job["fit_every"],
        extra_epochs=job["extra_epochs"], fit_accuracy=job["fit_accuracy"],
        fit_batch=job["eval_batch"])


def load_split(split: str, size: int, replicate: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A class-balanced subset of ``size`` images of a CIFAR-10 split, as normalised tensors."""
    data = load_cifar10(split)
    chosen = data.subset(balanced_subset(data.labels, size, replicates.seed(DATA_SEED, replicate)))
    return to_tensor(chosen.images), torch.from_numpy(chosen.labels)


def train_job(job: Mapping[str, Any], progress: bool | None = False) -> dict[str, Any]:
    """Train and evaluate one (seed, arm, N) network; resume from its checkpoint if there is one.

    Besides the test sweep, the result holds ``train_accuracy`` (accuracy on the job's own
    training images at its training N, in evaluation mode, after training: the fit criterion),
    ``diverged`` (:func:`i2o.train.health.classifier_flag`; ``""`` for a healthy run),
    ``epochs_used``, ``fit_epoch`` (the epoch of the first check that met the criterion; NaN when
    none did) and ``cap_reached`` (trained to the cap ``epochs`` without meeting it).
    """
    runtime.set_threads()
    name = job_name(job["seed"], job["arm"], job["train_iter"], job["replicate"])
    settings = settings_of(job)
    train_x, train_y = load_split("train", job["train_size"], job["replicate"])
    test_x, test_y = load_split("test", job["test_size"], job["replicate"])
    ckpt = results.checkpoint_dir(FIGURE, name, job, sources=SOURCES)
    start = time.perf_counter()
    model, history = build_and_train(config(job["model"]), train_x, train_y, settings, ckpt,
                                     progress=progress)
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    test = evaluate_iterations(model, test_x, test_y, job["test_iters"],
                               batch_size=job["eval_batch"])
    # the fit criterion and the divergence flag: the model's own training set, at its training N
    fit = evaluate_iterations(model, train_x, train_y, [job["train_iter"]],
                              batch_size=job["eval_batch"])
    eval_seconds = time.perf_counter() - start
    train_accuracy = float(fit["accuracy"][0])
    per_epoch = -(-job["train_size"] // job["batch_size"])
    fitted = history.get("fit_step") or []
    deq_steps = np.asarray(history["seconds"][job["pretrain_steps"]:])
    return {
        "test": test,
        "train_accuracy": train_accuracy,
        "train_residual": float(fit["residual_rel"][0]),
        "diverged": health.classifier_flag(history, train_accuracy, NUM_CLASSES) or "",
        "history": {k: np.asarray(v, dtype=float) for k, v in history.items()},
        "epochs_used": epochs_used(history, per_epoch),
        "fit_epoch": float(fitted[0]) / per_epoch if len(fitted) else float("nan"),
        "cap_reached": bool(job["fit_every"] > 0 and not len(fitted)),
        "parameters": count_parameters(model),
        "train_seconds": train_seconds,
        "eval_seconds": eval_seconds,
        "deq_step_seconds": float(np.median(deq_steps)) if deq_steps.size else float("nan"),
        "device": runtime.device_name(),
    }


def run_job(name: str, job: Mapping[str, Any], progress: bool | None = False
            ) -> dict[str, Any]:
    """The job's result from the results cache, computed (and stored) if missing."""
    return results.cached(FIGURE, name, job, lambda: train_job(job, progress), sources=SOURCES)


def is_cached(name: str, job: Mapping[str, Any]) -> bool:
    return results.lookup(FIGURE, name, job, sources=SOURCES) is not None


# -- what the notebook calls ------------------------------------------------------------------

def check_params(params: Mapping[str, Any]) -> None:
    """Cross-parameter checks, before any compute (single values are checked by the manifest);
    raises :class:`i2o.profiles.ParameterError` naming the parameter."""
    from i2o.profiles import require

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
    ])
    config(p["model"])


def collect_runs(params: Mapping[str, Any], workers: int = 1,
                 progress: bool | None = None) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Every job's result, ``{(arm, train N): [result per seed]}``; computes what is missing.

    With ``workers > 1`` the missing jobs run first in that many local processes (submitit's local
    executor, :func:`i2o.sweep.run_jobs`); everything is then read from the cache.
    """
    from i2o import sweep

    jobs = all_jobs(params)
    sweep.run_missing(FIGURE, jobs, is_cached, workers)
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for name, job in runtime.Progress.over(jobs, "stability jobs", unit="job"):
        runs.setdefault((job["arm"], job["train_iter"]), []).append(
            run_job(name, job, progress=progress))
    return runs


@dataclass(frozen=True)
class StabilityResults:
    """What the chapter shows, for the first training N (``train_n``)."""

    runs: dict[str, list[dict[str, Any]]]  # arm → its seeds' job results at train_n
    summary: dict[str, dict[str, Any]]  # arm → :func:`summarize`
    train_seconds: dict[str, float]  # arm → mean over seeds of the summed training-step times
    costs: dict[str, dict[str, Any]] | None  # :func:`step_costs`, None when cost_steps = 0
    collect_seconds: float
    train_n: int
    n_parameters: int
    n_parameters_tiny: int


def collect(params: Mapping[str, Any]) -> StabilityResults:
    """Every result of the chapter, computed (``params.workers`` processes) or read back."""
    from i2o.models import MDEQClassifier

    start = time.perf_counter()
    runs = collect_runs(params, workers=params["workers"])
    collect_seconds = time.perf_counter() - start
    train_n = int(params["train_iters"][0])
    at_n = {arm: runs[(arm, train_n)] for arm in ARMS}
    return StabilityResults(
        runs=at_n,
        summary={arm: summarize(rs, params["test_iters"], train_n) for arm, rs in at_n.items()},
        # summed over every training step, including those of an interrupted and resumed run
        train_seconds={arm: float(np.mean([np.sum(r["history"]["seconds"]) for r in rs]))
                       for arm, rs in at_n.items()},
        costs=step_costs(params, train_n) if params["cost_steps"] > 0 else None,
        collect_seconds=collect_seconds, train_n=train_n,
        n_parameters=count_parameters(MDEQClassifier(config(params["model"]))),
        n_parameters_tiny=count_parameters(MDEQClassifier(config("tiny"))))


def summarize(runs: list[dict[str, Any]], test_iters: list[int], train_iter: int
              ) -> dict[str, Any]:
    """Mean and sd over seeds of accuracy and residual per test N, and the stability measures.

    - ``deviation``: per seed, mean over test N ≠ N_train of ``|acc(N) − acc(N_train)|``;
    - ``gain_more``: per seed, ``max_{N > N_train} acc(N) − acc(N_train)`` (> 0: more iterations
      helped);
    - ``loss_fewer``: per seed, ``acc(N_train) − acc(min N)``.
    """
    its = np.asarray(test_iters)
    at = int(np.flatnonzero(its == train_iter)[0])
    acc = np.stack([np.asarray(r["test"]["accuracy"]) for r in runs])
    res = np.stack([np.asarray(r["test"]["residual_rel"]) for r in runs])
    others = its != train_iter
    above = its > train_iter
    sd = acc.std(axis=0, ddof=1) if len(runs) > 1 else np.zeros(len(its))
    return {
        "accuracy": acc, "residual": res,
        "mean": acc.mean(axis=0), "sd": sd,
        "residual_mean": res.mean(axis=0),
        "at_train": acc[:, at],
        "deviation": np.abs(acc[:, others] - acc[:, [at]]).mean(axis=1),
        "gain_more": (acc[:, above].max(axis=1) - acc[:, at]) if above.any()
        else np.zeros(len(runs)),
        "loss_fewer": acc[:, at] - acc[:, int(np.argmin(its))],
        "residual_at_train": res[:, at], "residual_at_max": res[:, int(np.argmax(its))],
    }


def step_costs(params: Mapping[str, Any], train_iter: int) -> dict[str, dict[str, Any]]:
    """Time and peak memory of one training step per arm (:mod:`.stepcost`), cached."""
    from i2o.chapters.stability.stepcost import measure_step

    costs = {}
    for arm in ARMS:
        key = {"model": params["model"], "batch": params["batch_size"], "arm": arm,
               "train_iter": train_iter, "backward_iter": params["backward_iter"],
               "tol": params["tol"], "steps": params["cost_steps"]}
        costs[arm] = results.cached(
            FIGURE, f"step-cost-{arm}-N{train_iter}", key,
            lambda key=key: {k: v for k, v in measure_step(
                key["model"], arm=key["arm"], train_iter=key["train_iter"],
                backward_iter=key["backward_iter"], batch=key["batch"], steps=key["steps"],
                warmup=1, tol=key["tol"]).items() if v is not None},
            sources=SOURCES)
    return costs
