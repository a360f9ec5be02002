"""The deq_gaps chapter's computations: the jobs of its parameters (one trained and swept DEQ
each, for :mod:`i2o.sweep`), :func:`collect` (everything the notebook shows) and the curves drawn
from the sweeps. The only module of the chapter that calls the results cache (through
:mod:`.jobs`).

The classifier and the language model are trained once per seed of ``seeds`` (their claims are
decided over seeds); the two reconstruction networks and the overparametrization sweep once, with
the first seed. The classifier trains until it fits (``cls_fit_every``, ``cls_extra_epochs``,
``cls_epochs`` the cap); the overparametrization sweep trains a fixed budget, the cap's number of
optimiser steps, on every size (its point is to let the fit vary with the size)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from i2o import replicates, runtime
from i2o.chapters.deq_gaps import FIGURE
from i2o.chapters.deq_gaps import jobs as job_runner
from i2o.chapters.deq_gaps.classification import ClassificationJob
from i2o.chapters.deq_gaps.curves import GapCurve, curve_from_sweep, pool_seeds
from i2o.chapters.deq_gaps.inverse import InverseJob
from i2o.chapters.deq_gaps.jobs import is_cached
from i2o.chapters.deq_gaps.language import LanguageJob
from i2o.deq import iteration_grid

__all__ = ["GapsResults", "Jobs", "all_jobs", "build_jobs", "check_params", "collect",
           "is_cached", "run_job"]

TASKS = ("classification", "language", "deq", "elder")
#: task → (metric, transform, metric label, loss metric, loss label, title)
_METRICS = {
    "classification": ("error", "percent", "top-1 error (%)", "loss", "cross-entropy",
                       "CIFAR-10 classification (MDEQ)"),
    "language": ("nll", "exp_mean", "perplexity", "nll", "NLL (nats/char)",
                 "Tiny Shakespeare (DEQ transformer)"),
    "deq": ("neg_psnr", "mean", "−PSNR (dB)", "mse", "MSE", "×2 super-resolution (DEQ)"),
    "elder": ("neg_psnr", "mean", "−PSNR (dB)", "mse", "MSE", "×2 super-resolution (ELDER)"),
}


def check_params(params: Mapping[str, Any]) -> None:
    """What the manifest's per-parameter schema cannot say; raises ``ParameterError`` naming the
    parameter before any compute."""
    from i2o.models.mdeq import config
    from i2o.profiles import require

    p = params
    config(p["cls_architecture"])
    cls_steps = p["cls_epochs"] * -(-p["cls_train_size"] // p["cls_batch_size"])
    sizes = list(p["op_sizes"])
    require(FIGURE, p, [
        ("cls_pretrain_steps", p["cls_pretrain_steps"] < cls_steps,
         f"smaller than the classifier's training steps, cls_epochs × ⌈cls_train_size / "
         f"cls_batch_size⌉ = {cls_steps} (or no DEQ is ever trained)"),
        ("lm_pretrain_steps", p["lm_pretrain_steps"] < p["lm_steps"],
         f"smaller than lm_steps = {p['lm_steps']} (or no DEQ is ever trained)"),
        ("lm_train_chars", p["lm_train_chars"] == 0 or p["lm_train_chars"] > p["lm_context"],
         f"0 (the whole training split) or more than lm_context = {p['lm_context']}"),
        ("lm_heads", p["lm_width"] % p["lm_heads"] == 0,
         f"a divisor of lm_width = {p['lm_width']}"),
        ("inv_crop", p["inv_crop"] % 2 == 0, "even (×2 super-resolution of a patch)"),
        ("op_sizes", len(set(sizes)) == len(sizes) >= 2, "at least 2 distinct training-set sizes"),
        ("seeds", len(set(p["seeds"])) == len(p["seeds"]), "a list of distinct seeds"),
        ("fit_quorum", p["fit_quorum"] <= len(p["seeds"]),
         f"at most the number of seeds, {len(p['seeds'])}"),
        ("cls_fit_every", p["cls_fit_every"] <= p["cls_epochs"],
         f"at most cls_epochs = {p['cls_epochs']} (0: train exactly cls_epochs)"),
    ])


@dataclass(frozen=True)
class Jobs:
    classification: tuple[ClassificationJob, ...]  # one per seed
    language: tuple[LanguageJob, ...]  # one per seed
    deq: InverseJob
    elder: InverseJob
    overparam: tuple[ClassificationJob, ...]
    grids: Mapping[str, list[int]]


def build_jobs(params: Mapping[str, Any]) -> Jobs:
    """The chapter's jobs from the parameters of figure ``deq_gaps`` (checked first)."""
    check_params(params)
    p = params
    seeds = [replicates.seed(s, p["replicate"]) for s in p["seeds"]]
    seed = seeds[0]
    classification = tuple(ClassificationJob(
        architecture=p["cls_architecture"], train_iters=p["cls_train_iters"],
        backward_iter=p["cls_backward_iter"], train_size=p["cls_train_size"],
        epochs=p["cls_epochs"], batch_size=p["cls_batch_size"],
        pretrain_steps=p["cls_pretrain_steps"], clip=p["cls_clip"], seed=s,
        fit_every=p["cls_fit_every"], extra_epochs=p["cls_extra_epochs"],
        fit_accuracy=p["cls_fit_accuracy"]) for s in seeds)
    language = tuple(LanguageJob(
        context=p["lm_context"], width=p["lm_width"], heads=p["lm_heads"],
        ffn_width=p["lm_ffn_width"], train_iters=p["lm_train_iters"], method=p["lm_method"],
        backward=p["lm_backward"], jac_weight=p["lm_jac_weight"], steps=p["lm_steps"],
        pretrain_steps=p["lm_pretrain_steps"], train_chars=p["lm_train_chars"],
        batch_size=p["lm_batch_size"], lr=p["lm_lr"], seed=s) for s in seeds)
    inverse = {variant: InverseJob(
        variant=variant, operator=p["inv_operator"], noise=p["inv_noise"], width=p["inv_width"],
        depth=p["inv_depth"], train_iters=p["inv_train_iters"],
        backward_iter=p["inv_backward_iter"], steps=p["inv_steps"],
        batch_size=p["inv_batch_size"], crop=p["inv_crop"], seed=seed)
        for variant in ("deq", "elder")}
    main = classification[0]
    steps = main.steps()  # the cap's steps, trained on every size (a fixed budget)
    overparam = tuple(
        ClassificationJob(**{**main.as_dict(), "train_size": size, "fit_every": 0,
                             "extra_epochs": 0, "fit_accuracy": 0.0,
                             "epochs": job_runner.epochs_for_steps(steps, size,
                                                                   main.batch_size)})
        for size in sorted(set(p["op_sizes"])))

    def grid(n: int) -> list[int]:
        return iteration_grid(n, p["grid_factor"], p["grid_points"])

    grids = {"classification": grid(main.train_iters),
             "language": grid(language[0].train_iters),
             "deq": grid(inverse["deq"].train_iters),
             "elder": grid(inverse["elder"].train_iters)}
    return Jobs(classification, language, inverse["deq"], inverse["elder"], overparam, grids)


def described(jobs: Jobs, params: Mapping[str, Any]) -> dict[str, Any]:
    """Every job as its ``(name, params)`` pair (:func:`.jobs.describe`), by role."""
    p = params
    replicate = p["replicate"]
    inverse_sizes = {"train_size": p["inv_train_size"], "eval_size": p["inv_eval_size"]}
    return {
        "classification": [job_runner.describe(job, jobs.grids["classification"], replicate,
                                               eval_size=p["cls_eval_size"])
                           for job in jobs.classification],
        "language": [job_runner.describe(job, jobs.grids["language"], replicate,
                                         eval_windows=p["lm_eval_windows"])
                     for job in jobs.language],
        "deq": job_runner.describe(jobs.deq, jobs.grids["deq"], replicate, **inverse_sizes),
        "elder": job_runner.describe(jobs.elder, jobs.grids["elder"], replicate, **inverse_sizes),
        "overparam": [job_runner.describe(job, jobs.grids["classification"], replicate,
                                          eval_size=p["cls_eval_size"])
                      for job in jobs.overparam],
    }


def all_jobs(params: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The distinct ``(name, params)`` jobs of a run, for :mod:`i2o.sweep` (submitit)."""
    roles = described(build_jobs(params), params)
    # the longest first, so that parallel workers finish together
    pairs = (roles["language"] + [roles["elder"], roles["deq"]] + roles["classification"]
             + roles["overparam"])
    unique: list[tuple[str, dict[str, Any]]] = []
    for pair in pairs:
        if pair not in unique:
            unique.append(pair)
    return unique


def compute_all(jobs: Jobs, params: Mapping[str, Any],
                progress: bool | None = None) -> dict[str, Any]:
    """Train and sweep every job (each a results-cache entry; cached ones are only read)."""
    roles = described(jobs, params)
    todo = [(role, name, job) for role in ("classification", "language", "overparam")
            for name, job in roles[role]]
    todo += [(role, *roles[role]) for role in ("deq", "elder")]
    out: dict[str, Any] = {"classification": [], "language": [], "overparam": []}
    for role, name, job in runtime.Progress.over(todo, "deq_gaps jobs", unit="job"):
        result = job_runner.compute(name, job, progress=progress)
        if isinstance(out.get(role), list):
            out[role].append(result)
        else:
            out[role] = result
    return out


def _train_iters(jobs: Jobs, task: str) -> int:
    job = getattr(jobs, task)
    return (job[0] if isinstance(job, tuple) else job).train_iters


def _task_results(results: Mapping[str, Any], task: str) -> list[Mapping[str, Any]]:
    """A task's results, one per trained model (seed)."""
    found = results[task]
    return list(found) if isinstance(found, list | tuple) else [found]


def seed_curves(results: Mapping[str, Any], jobs: Jobs, split: str = "test",
                loss: bool = False) -> dict[str, list[GapCurve]]:
    """Per task, one curve per trained model (seed) on ``split`` data: the task metric, or
    (``loss=True``) the training loss."""
    out = {}
    for task in TASKS:
        metric, transform, label, loss_metric, loss_label, title = _METRICS[task]
        if loss:
            metric, transform, label = loss_metric, "mean", loss_label
        where = "test" if split == "test" else "training"
        out[task] = [curve_from_sweep(result[split], metric, _train_iters(jobs, task),
                                      f"{title}\n{where} data", transform, label)
                     for result in _task_results(results, task)]
    return out


def pooled(by_seed: Mapping[str, list[GapCurve]]) -> dict[str, GapCurve]:
    """Per task, the mean curve over its seeds (:func:`.curves.pool_seeds`), for the figures."""
    out = {}
    for task, found in by_seed.items():
        label = found[0].label + (f" ({len(found)} seeds)" if len(found) > 1 else "")
        out[task] = pool_seeds(found, label)
    return out


def overparam_rows(results: Sequence[Mapping[str, Any]], jobs: Jobs) -> list[dict[str, Any]]:
    """Per training-set size: training-loss and test-error curves and the training loss at N."""
    rows = []
    for job, result in zip(jobs.overparam, results, strict=True):
        train_loss = curve_from_sweep(result["train"], "loss", job.train_iters,
                                      f"{job.train_size} images", "mean", "training loss")
        test_error = curve_from_sweep(result["test"], "error", job.train_iters,
                                      f"{job.train_size} images", "percent", "test error (%)")
        train_error = curve_from_sweep(result["train"], "error", job.train_iters,
                                       f"{job.train_size} images", "percent",
                                       "training error (%)")
        rows.append({"size": job.train_size, "epochs": job.epochs, "train_loss": train_loss,
                     "test_error": test_error, "train_error": train_error,
                     "loss_at_n": train_loss.summary()["value_at_n"]})
    return rows


def run_job(name: str, job: Mapping[str, Any]) -> None:
    """Train and sweep one DEQ of the chapter into the results cache."""
    job_runner.compute(name, dict(job))


@dataclass(frozen=True)
class GapsResults:
    """The trained DEQs' sweeps and the curves drawn from them (task → :class:`GapCurve`, the
    mean over seeds; ``by_seed``: split → task → one curve per seed, for the claims)."""

    jobs: Jobs
    results: dict[str, Any]  # :func:`compute_all`
    seconds: float  # to compute or read them
    test: dict[str, GapCurve]
    train: dict[str, GapCurve]
    test_loss: dict[str, GapCurve]
    train_loss: dict[str, GapCurve]
    overparam: list[dict[str, Any]]  # :func:`overparam_rows`
    by_seed: dict[str, dict[str, list[GapCurve]]]


def collect(params: Mapping[str, Any]) -> GapsResults:
    """Every DEQ of the chapter trained and swept (or read from the cache), and its curves."""
    from i2o import sweep

    start = time.perf_counter()
    built = build_jobs(params)
    sweep.run_missing(FIGURE, all_jobs(params), is_cached, params["workers"])
    results = compute_all(built, params)
    seconds = time.perf_counter() - start
    by_seed = {"test": seed_curves(results, built, "test"),
               "train": seed_curves(results, built, "train"),
               "test_loss": seed_curves(results, built, "test", loss=True),
               "train_loss": seed_curves(results, built, "train", loss=True)}
    return GapsResults(
        jobs=built, results=results, seconds=seconds,
        test=pooled(by_seed["test"]), train=pooled(by_seed["train"]),
        test_loss=pooled(by_seed["test_loss"]), train_loss=pooled(by_seed["train_loss"]),
        overparam=overparam_rows(results["overparam"], built), by_seed=by_seed)
