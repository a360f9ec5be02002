"""The deq_gaps chapter's figures (2, G.1, G.2, G.4, the overparametrization sweep, the authors'
Figure 2) and printed summaries, from :func:`.runs.collect` (nothing here computes a result)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import cm, colors
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from i2o.book.plotting import TRAIN_N_LINE, ZERO_LINE
from i2o.chapters.deq_gaps.authors_csv import read_figure2
from i2o.chapters.deq_gaps.calibration import calibration_report
from i2o.chapters.deq_gaps.curves import GapCurve, plot_gap
from i2o.chapters.deq_gaps.runs import ChapterJobs, GapsResults
from i2o.compute import profiles

PANELS = ("classification", "language", "deq")
#: file names of the authors' README commands, by kind of :mod:`i2o.chapters.deq_gaps.authors_csv`
AUTHORS_FILES = {"imagenet": "imagenet_n_iter_results.csv",
                 "cityscapes": "cityscapes_n_iter_results.csv",
                 "wikitext": "transformer_results.csv",
                 "sintel": "optical_flow_results.csv"}


def _titled(fig: Figure, title: str, p: Mapping[str, Any]) -> Figure:
    fig.suptitle(f"{title} — profile {getattr(p, 'profile', '')!r}", y=1.02)
    return fig


def figure_2(r: GapsResults) -> Figure:
    """Test-performance gap of the three tasks."""
    return _titled(gap_figure([r.test[t] for t in PANELS]), "Test-performance gap", r.params)


def figure_g1(r: GapsResults) -> Figure:
    """Training-performance gap of the three tasks."""
    return _titled(gap_figure([r.train[t] for t in PANELS]),
                   "Training-performance gap", r.params)


def figure_g2(r: GapsResults) -> Figure:
    """Loss gap on test (top row) and training data (bottom row)."""
    fig = gap_figure([r.test_loss[t] for t in PANELS] + [r.train_loss[t] for t in PANELS],
                     columns=3)
    return _titled(fig, "Loss gap, test (top) and training data (bottom)", r.params)


def figure_g4(r: GapsResults) -> Figure:
    """The inverse problem's DEQ and ELDER on test data."""
    return _titled(gap_figure([r.test["deq"], r.test["elder"]]),
                   "Inverse problem, test data", r.params)


def overparam_figure(r: GapsResults) -> Figure:
    """D(N, ΔN) of the MDEQ classifier trained on subsets of growing size."""
    return _titled(_overparam_panels(r.overparam),
                   "Overparametrization sweep, CIFAR-10 MDEQ", r.params)


def authors_figure(p: Mapping[str, Any]) -> Figure | None:
    """The paper's own Figure 2 from the authors' CSVs in ``authors_results`` (None: none)."""
    return _authors_panels(p["authors_results"])


def run_report(r: GapsResults) -> str:
    """Sizes and costs of the trained DEQs, then each task's value at N, at the largest count,
    its most negative gap and its residuals."""
    lines = [sizes_table(r.results, r.jobs, r.params), "",
             f"{r.cost.text()}; 'train s' is the wall time of the training steps when the job "
             "was computed"]
    for task, curve in r.test.items():
        s = curve.summary()
        lines.append(
            f"{task:>14}: {curve.metric} at N = {curve.train_iters}: {s['value_at_n']:.3f}; "
            f"at {int(s['n_max'])}: {s['value_at_max']:.3f}; most negative gap for ΔN > 0: "
            f"{s['best_gap']:+.3f} ± {s['best_gap_se']:.3f} at {int(s['best_gap_n'])}; "
            f"residual {s['residual_at_n']:.2g} → {s['residual_at_max']:.2g}")
    return "\n".join(lines)


def baseline_report(r: GapsResults) -> str:
    """−PSNR of the inverse problem's initial guess, per variant."""
    return "\n".join(f"{variant}: −PSNR of the initial guess A⁺y (nearest upsampling): "
                     f"{r.results[variant]['test_baseline_neg_psnr']:.2f} dB"
                     for variant in ("deq", "elder"))


def overparam_report(r: GapsResults) -> str:
    """Per subset size: training loss and error at N, D at the largest count, test-error gap."""
    lines = []
    for row in r.overparam:
        s, e = row["train_loss"].summary(), row["test_error"].summary()
        lines.append(
            f"{row['size']:>6} images ({row['epochs']} epochs): training loss at N "
            f"{s['value_at_n']:.3f}, training error "
            f"{row['train_error'].summary()['value_at_n']:.1f} %; D at {int(s['n_max'])}: "
            f"{s['gap_at_max']:+.3f} ± {s['gap_se_at_max']:.3f}; test-error gap at "
            f"{int(e['n_max'])}: {e['gap_at_max']:+.2f} ± {e['gap_se_at_max']:.2f}")
    return "\n".join(lines)


def authors_missing_report() -> str:
    return ("authors_results is empty or holds none of "
            f"{', '.join(AUTHORS_FILES.values())}: nothing to redraw")


def gap_figure(panels: Sequence[GapCurve], columns: int | None = None, width: float = 4.3):
    """Figure 2's layout: one panel per curve, gap on the left axis, residual on the right."""
    columns = columns or len(panels)
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, 3.3 * rows), squeeze=False)
    for ax, curve in zip(axes.flat, panels, strict=False):
        plot_gap(ax, curve)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def _overparam_panels(rows: Sequence[Mapping[str, Any]]):
    """Figure 4's layout for DEQs: D(N, ΔN) on the training loss (left) and the test-error gap
    (right) against ΔN, one line per training-set size, coloured by the training loss at N."""
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


def _authors_panels(folder: str | Path):
    """The paper's own Figure 2 from the authors' CSV files in ``folder`` (those present), drawn
    with the same panel code; ``None`` when the folder holds none of them."""
    if not folder:
        return None
    found = {kind: Path(folder) / name for kind, name in AUTHORS_FILES.items()
             if (Path(folder) / name).is_file()}
    if not found:
        return None
    return gap_figure(read_figure2(found), columns=2)


def sizes_table(results: Mapping[str, Any], jobs: ChapterJobs, params: Mapping[str, Any]
                ) -> str:
    """A plain-text table of what was trained, on what, and at what cost."""
    def seconds(history: Mapping[str, Any]) -> float:
        return float(np.sum(history["seconds"])) if "seconds" in history else float("nan")

    lines = [f"{'task':<20}{'parameters':>11}{'N':>5}{'steps':>7}{'train data':>30}"
             f"{'train s':>9}"]
    entries = []
    for job, result in zip(jobs.classification, results["classification"], strict=True):
        steps = len(result["history"].get("lr", [])) or job.steps()
        entries.append((f"classification s{job.seed}", result, job.train_iters, steps,
                        f"{job.train_size} CIFAR-10 images"))
    for job, result in zip(jobs.language, results["language"], strict=True):
        entries.append((f"language s{job.seed}", result, job.train_iters, job.steps,
                        f"{int(result['n_characters'][0])} characters"))
    entries += [
        ("inverse DEQ", results["deq"], jobs.deq.train_iters, jobs.deq.steps,
         f"{jobs.deq.crop}² patches of {params['inv_train_size']}"),
        ("inverse ELDER", results["elder"], jobs.elder.train_iters, jobs.elder.steps,
         f"{jobs.elder.crop}² patches of {params['inv_train_size']}"),
    ]
    for job, result in zip(jobs.overparam, results["overparam"], strict=True):
        entries.append((f"overparam {job.train_size}", result, job.train_iters, job.steps(),
                        f"{job.train_size} CIFAR-10 images"))
    for name, result, n, steps, data in entries:
        lines.append(f"{name:<20}{int(result['n_parameters']):>11}{n:>5}{steps:>7}{data:>30}"
                     f"{seconds(result['history']):>9.0f}")
    return "\n".join(lines)


def fit_report(r: GapsResults) -> str:
    """Per classifier: training accuracy at N after training and the epochs it used (to the
    regime: until it fits plus ``cls_extra_epochs``, at most ``cls_epochs``)."""
    p = r.params
    lines = [f"classifiers trained until their training accuracy at N reaches "
             f"{100 * p['cls_fit_accuracy']:g} % (checked every {p['cls_fit_every']} epochs) plus "
             f"{p['cls_extra_epochs']} epochs, at most {p['cls_epochs']}"
             if p["cls_fit_every"] > 0 else f"classifiers trained {p['cls_epochs']} epochs"]
    for job, result, curve in zip(r.jobs.classification, r.results["classification"],
                                  r.by_seed["train"]["classification"], strict=True):
        per_epoch = math.ceil(job.train_size / job.batch_size)
        used = len(result["history"].get("lr", [])) / per_epoch
        fitted = len(result["history"].get("fit_step", [])) > 0
        error = float(curve.value[curve.at(curve.train_iters)])
        lines.append(f"  seed {job.seed}: training accuracy at N {100 - error:.1f} % after "
                     f"{used:g} epochs" + ("" if fitted or p["cls_fit_every"] == 0 else
                                           " (cap reached without fitting)"))
    for job, curve in zip(r.jobs.language, r.by_seed["train_loss"]["language"], strict=True):
        lines.append(f"  language model seed {job.seed}: training NLL at N "
                     f"{float(curve.value[curve.at(curve.train_iters)]):.3f} nats/char after "
                     f"{job.steps} steps (criterion ≤ {p['lm_fit_nll']:g})")
    return "\n".join(lines)


def generalisation_report(r: GapsResults) -> str:
    """Per task, the test metric at N of its models beside the trivial baseline fitted on the
    same training data (:mod:`.baselines`, principle 4), and what the baseline chose."""
    found = r.results.get("baselines", {})
    lines = ["test metric at N against the trivial baseline fitted on the same training data:"]
    pixels = found.get("classification") or []
    for job, curve, fitted in zip(r.jobs.classification, r.by_seed["test"]["classification"],
                                  pixels, strict=False):
        lines.append(f"  classifier seed {job.seed}: top-1 error "
                     f"{float(curve.value[curve.at(curve.train_iters)]):.1f} %, linear classifier "
                     f"on its pixels {100 * float(np.mean(fitted['test_error'])):.1f} % "
                     f"(λ = {float(fitted['penalty']):g}, by 5-fold cross-validation)")
    bigram = found.get("language")
    if bigram is not None:
        for job, curve in zip(r.jobs.language, r.by_seed["test"]["language"], strict=True):
            lines.append(f"  language model seed {job.seed}: test perplexity "
                         f"{float(curve.value[curve.at(curve.train_iters)]):.2f}")
        lines.append(f"  bigram model of the training text: test perplexity "
                     f"{float(np.exp(np.mean(bigram['test_nll']))):.2f} (α = "
                     f"{float(bigram['smoothing']):g}), training "
                     f"{float(np.exp(np.mean(bigram['train_nll']))):.2f}; unigram: test "
                     f"{float(np.exp(np.mean(bigram['test_unigram_nll']))):.2f}")
    for variant in ("deq", "elder"):
        curve = r.test[variant]
        at_n = float(curve.value[curve.at(curve.train_iters)])
        lines.append(f"  {variant}: test −PSNR {at_n:.2f} dB, A⁺y "
                     f"{float(r.results[variant]['test_baseline_neg_psnr']):.2f} dB")
    return "\n".join(lines)


def calibration(r: GapsResults) -> str:
    """The language models' temperature check and top-1 error by N' (:mod:`.calibration`)."""
    return calibration_report([found["test"] for found in r.results["language"]],
                              [job.seed for job in r.jobs.language],
                              r.jobs.language[0].train_iters)


def margins_report(p: Mapping[str, Any]) -> str:
    """The pre-registered margin rule and its reason, from the manifest."""
    schema = profiles.entry("deq_gaps")["parameters"]["margin_fraction"]
    return (f"margin_fraction = {p['margin_fraction']:g}: {schema['help']}.\nReason: "
            f"{schema['reason']}.\nA claim with a margin is decided only when δ is at least the "
            "resolution of one model's change between two counts (its standard error over the "
            "evaluation examples); the claims table gives each δ and its reference.")
