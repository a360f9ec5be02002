"""What the DEQ chapter's notebook computes and draws, so that its cells stay a few lines long.

From the validated parameters of figure ``deq-gaps`` (:func:`i2o.profiles.resolve`):
:func:`build_jobs` makes the jobs, :func:`run` trains and sweeps them through the results cache,
:func:`curves` turns the sweeps into :class:`.curves.GapCurve`s (test or training data,
task metric or training loss), :func:`gap_figure`, :func:`overparam_figure` and
:func:`authors_figure` draw. The claims are decided in :mod:`i2o.chapters.deq_gaps.claims`
(gated on each model's fit, with margins) and the conclusions written by
:mod:`i2o.chapters.deq_gaps.prose`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from i2o import runtime
from i2o.chapters.deq_gaps import jobs as job_runner
from i2o.chapters.deq_gaps.classification import ClassificationJob
from i2o.chapters.deq_gaps.curves import GapCurve, curve_from_sweep, plot_gap
from i2o.chapters.deq_gaps.inverse import InverseJob
from i2o.chapters.deq_gaps.language import LanguageJob
from i2o.deq import iteration_grid

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
#: file names of the authors' README commands, by kind of :mod:`i2o.chapters.deq_gaps.authors_csv`
AUTHORS_FILES = {"imagenet": "imagenet_n_iter_results.csv",
                 "cityscapes": "cityscapes_n_iter_results.csv",
                 "wikitext": "transformer_results.csv",
                 "sintel": "optical_flow_results.csv"}


@dataclass(frozen=True)
class Jobs:
    classification: ClassificationJob
    language: LanguageJob
    deq: InverseJob
    elder: InverseJob
    overparam: tuple[ClassificationJob, ...]
    grids: Mapping[str, list[int]]


def build_jobs(params: Mapping[str, Any]) -> Jobs:
    """The chapter's jobs from the parameters of figure ``deq-gaps``."""
    p = params
    classification = ClassificationJob(
        architecture=p["cls_architecture"], n_train=p["cls_n_train"],
        backward_iter=p["cls_backward_iter"], train_size=p["cls_train_size"],
        epochs=p["cls_epochs"], batch_size=p["cls_batch_size"],
        pretrain_steps=p["cls_pretrain_steps"], clip=p["cls_clip"], seed=p["seed"])
    language = LanguageJob(
        context=p["lm_context"], width=p["lm_width"], heads=p["lm_heads"],
        ffn_width=p["lm_ffn_width"], n_train=p["lm_n_train"], method=p["lm_method"],
        backward=p["lm_backward"], jac_weight=p["lm_jac_weight"], steps=p["lm_steps"],
        batch_size=p["lm_batch_size"], seed=p["seed"])
    inverse = {variant: InverseJob(
        variant=variant, operator=p["inv_operator"], noise=p["inv_noise"], width=p["inv_width"],
        depth=p["inv_depth"], n_train=p["inv_n_train"], backward_iter=p["inv_backward_iter"],
        steps=p["inv_steps"], batch_size=p["inv_batch_size"], crop=p["inv_crop"],
        seed=p["seed"]) for variant in ("deq", "elder")}
    steps = classification.steps()
    overparam = tuple(
        ClassificationJob(**{**classification.as_dict(), "train_size": size,
                             "epochs": job_runner.epochs_for_steps(
                                 steps, size, classification.batch_size)})
        for size in sorted(set(p["op_sizes"])))

    def grid(n: int) -> list[int]:
        return iteration_grid(n, p["grid_factor"], p["grid_points"])

    grids = {"classification": grid(classification.n_train), "language": grid(language.n_train),
             "deq": grid(inverse["deq"].n_train), "elder": grid(inverse["elder"].n_train)}
    return Jobs(classification, language, inverse["deq"], inverse["elder"], overparam, grids)


def described(jobs: Jobs, params: Mapping[str, Any]) -> dict[str, Any]:
    """Every job as its ``(name, params)`` pair (:func:`.jobs.describe`), by role."""
    p = params
    inverse_sizes = {"train_size": p["inv_train_size"], "eval_size": p["inv_eval_size"]}
    return {
        "classification": job_runner.describe(jobs.classification, jobs.grids["classification"],
                                              eval_size=p["cls_eval_size"]),
        "language": job_runner.describe(jobs.language, jobs.grids["language"],
                                        eval_windows=p["lm_eval_windows"]),
        "deq": job_runner.describe(jobs.deq, jobs.grids["deq"], **inverse_sizes),
        "elder": job_runner.describe(jobs.elder, jobs.grids["elder"], **inverse_sizes),
        "overparam": [job_runner.describe(job, jobs.grids["classification"],
                                          eval_size=p["cls_eval_size"])
                      for job in jobs.overparam],
    }


def all_jobs(params: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The distinct ``(name, params)`` jobs of a run, for :mod:`i2o.sweep` (submitit)."""
    roles = described(build_jobs(params), params)
    pairs = [roles[r] for r in ("classification", "language", "deq", "elder")] + roles["overparam"]
    unique: list[tuple[str, dict[str, Any]]] = []
    for pair in pairs:
        if pair not in unique:
            unique.append(pair)
    return unique


def run(jobs: Jobs, params: Mapping[str, Any], progress: bool | None = None) -> dict[str, Any]:
    """Train and sweep every job (each a results-cache entry; cached ones are only read)."""
    roles = described(jobs, params)
    todo = [(role, *roles[role]) for role in ("classification", "language", "deq", "elder")]
    todo += [("overparam", name, job) for name, job in roles["overparam"]]
    out: dict[str, Any] = {"overparam": []}
    for role, name, job in runtime.Progress.over(todo, "deq-gaps jobs", unit="job"):
        result = job_runner.compute(name, job, progress=progress)
        if role == "overparam":
            out["overparam"].append(result)
        else:
            out[role] = result
    return out


def _n_train(jobs: Jobs, task: str) -> int:
    return getattr(jobs, task).n_train


def curves(results: Mapping[str, Any], jobs: Jobs, split: str = "test",
           loss: bool = False) -> dict[str, GapCurve]:
    """One curve per task on ``split`` data: the task metric, or (``loss=True``) the training
    loss."""
    out = {}
    for task in TASKS:
        metric, transform, label, loss_metric, loss_label, title = _METRICS[task]
        if loss:
            metric, transform, label = loss_metric, "mean", loss_label
        where = "test" if split == "test" else "training"
        out[task] = curve_from_sweep(results[task][split], metric, _n_train(jobs, task),
                                     f"{title}\n{where} data", transform, label)
    return out


def gap_figure(panels: Sequence[GapCurve], columns: int | None = None, width: float = 4.3):
    """Figure 2's layout: one panel per curve, gap on the left axis, residual on the right."""
    import matplotlib.pyplot as plt

    columns = columns or len(panels)
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, 3.3 * rows), squeeze=False)
    for ax, curve in zip(axes.flat, panels, strict=False):
        plot_gap(ax, curve)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def overparam_rows(results: Sequence[Mapping[str, Any]], jobs: Jobs) -> list[dict[str, Any]]:
    """Per training-set size: training-loss and test-error curves and the training loss at N."""
    rows = []
    for job, result in zip(jobs.overparam, results, strict=True):
        train_loss = curve_from_sweep(result["train"], "loss", job.n_train,
                                      f"{job.train_size} images", "mean", "training loss")
        test_error = curve_from_sweep(result["test"], "error", job.n_train,
                                      f"{job.train_size} images", "percent", "test error (%)")
        train_error = curve_from_sweep(result["train"], "error", job.n_train,
                                       f"{job.train_size} images", "percent",
                                       "training error (%)")
        rows.append({"size": job.train_size, "epochs": job.epochs, "train_loss": train_loss,
                     "test_error": test_error, "train_error": train_error,
                     "loss_at_n": train_loss.summary()["value_at_n"]})
    return rows


def overparam_figure(rows: Sequence[Mapping[str, Any]]):
    """Figure 4's layout for DEQs: D(N, ΔN) on the training loss (left) and the test-error gap
    (right) against ΔN, one line per training-set size, coloured by the training loss at N."""
    import matplotlib.pyplot as plt
    from matplotlib import cm, colors
    from matplotlib.ticker import FuncFormatter

    from i2o.plotting import TRAIN_N_LINE, ZERO_LINE

    losses = np.asarray([r["loss_at_n"] for r in rows])
    norm = colors.LogNorm(vmin=max(losses.min(), 1e-4), vmax=max(losses.max(), 2e-4))
    cmap = plt.get_cmap("viridis")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for row in rows:
        colour = cmap(norm(max(row["loss_at_n"], 1e-4)))
        for ax, key in zip(axes, ("train_loss", "test_error"), strict=True):
            curve = row[key]
            ax.plot(curve.delta, curve.gap, "-o", markersize=3, color=colour,
                    label=f"{row['size']} images")
            ax.fill_between(curve.delta, curve.gap - curve.gap_se, curve.gap + curve.gap_se,
                            color=colour, alpha=0.15, linewidth=0)
    titles = ("training-loss increase D(N, ΔN)", "test-error gap (%)")
    for ax, title in zip(axes, titles, strict=True):
        ax.axvline(0, **TRAIN_N_LINE)
        ax.axhline(0, **ZERO_LINE)
        ax.set_xlabel(r"$\Delta N$")
        ax.set_title(title)
        ax.set_yscale("symlog", linthresh=0.01 if "loss" in title else 1.0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.2g}"))
    axes[1].legend(fontsize=8)
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes,
                 label=r"training loss $\ell(z_N(\theta^{*,N}))$")
    return fig


def authors_figure(folder: str | Path):
    """The paper's own Figure 2 from the authors' CSV files in ``folder`` (those present), drawn
    with the same panel code; ``None`` when the folder holds none of them."""
    from i2o.chapters.deq_gaps.authors_csv import read_curve

    if not folder:
        return None
    found = {kind: Path(folder) / name for kind, name in AUTHORS_FILES.items()
             if (Path(folder) / name).is_file()}
    if not found:
        return None
    return gap_figure([read_curve(path, kind) for kind, path in found.items()], columns=2)


def sizes_table(results: Mapping[str, Any], jobs: Jobs, params: Mapping[str, Any]) -> str:
    """A plain-text table of what was trained, on what, and at what cost."""
    def seconds(history: Mapping[str, Any]) -> float:
        return float(np.sum(history["seconds"])) if "seconds" in history else float("nan")

    lines = [f"{'task':<16}{'parameters':>11}{'N':>5}{'steps':>7}{'train data':>30}"
             f"{'train s':>9}"]
    cls, lm = jobs.classification, jobs.language
    cls_steps = cls.steps()
    entries = [
        ("classification", results["classification"], cls.n_train, cls_steps,
         f"{cls.train_size} CIFAR-10 images"),
        ("language", results["language"], lm.n_train, lm.steps,
         f"{int(results['language']['n_characters'][0])} characters"),
        ("inverse DEQ", results["deq"], jobs.deq.n_train, jobs.deq.steps,
         f"{jobs.deq.crop}² patches of {params['inv_train_size']}"),
        ("inverse ELDER", results["elder"], jobs.elder.n_train, jobs.elder.steps,
         f"{jobs.elder.crop}² patches of {params['inv_train_size']}"),
    ]
    for job, result in zip(jobs.overparam, results["overparam"], strict=True):
        steps = job.steps()
        entries.append((f"overparam {job.train_size}", result, job.n_train, steps,
                        f"{job.train_size} CIFAR-10 images"))
    for name, result, n, steps, data in entries:
        lines.append(f"{name:<16}{int(result['n_parameters']):>11}{n:>5}{steps:>7}{data:>30}"
                     f"{seconds(result['history']):>9.0f}")
    return "\n".join(lines)
