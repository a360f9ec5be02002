"""Figure 5 and the chapter's printed summaries, drawn from :func:`.runs.collect` (nothing here
computes a result; the parameters are the results')."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from i2o.base import lineage
from i2o.book import plotting
from i2o.chapters.stability import FIGURE
from i2o.chapters.stability.claims import LABELS, resolution_points
from i2o.chapters.stability.runs import StabilityResults
from i2o.compute import profiles


def figure_5(results: StabilityResults) -> Figure:
    """Left: test accuracy against test-time Broyden iterations N' (mean ± sd over seeds) per
    arm; right: the relative residual of the returned iterate. Dashed: the training N."""
    p = results.params
    its = np.asarray(p["test_iters"])
    fig, (ax, ax_res) = plt.subplots(1, 2, figsize=(10.5, 4.0),
                                     gridspec_kw={"width_ratios": [1.4, 1]})
    for arm, s in results.summary.items():
        colour = plotting.ARM_COLOURS[arm]
        mean, sd = 100 * s["mean"], 100 * s["sd"]
        seeds = len(s["at_train"])
        ax.plot(its, mean, marker="o", markersize=4, color=colour,
                label=f"{LABELS[arm]} ({seeds} seed{'s' if seeds > 1 else ''})")
        ax.fill_between(its, mean - sd, mean + sd, color=colour, alpha=0.2, linewidth=0)
        ax_res.plot(its, s["residual_mean"], marker="o", markersize=4, color=colour,
                    label=LABELS[arm])
    for axis in (ax, ax_res):
        axis.axvline(results.train_n, **plotting.TRAIN_N_LINE)
        axis.set_xlabel("test-time Broyden iterations $N'$")
    ax.set_ylabel("test accuracy (%)")
    ax.legend(title=f"trained with N = {results.train_n}", loc="lower right", framealpha=0.9,
              frameon=True)
    ax_res.set_yscale("log")
    ax_res.set_ylabel(r"relative residual $\|f(z)-z\| / \|f(z)\|$")
    fig.suptitle(f"CIFAR-10, MDEQ {p['model']} ({results.n_parameters:,} parameters), "
                 f"{p['train_size']:,} training / {p['test_size']:,} test images, {p['epochs']} "
                 f"epoch{'s' if p['epochs'] > 1 else ''} — profile "
                 f"{getattr(p, 'profile', '')!r}", fontsize=10)
    fig.tight_layout()
    return fig


def run_report(results: StabilityResults) -> str:
    """Accuracy at N, deviation and training time per arm; what collecting them cost; devices;
    fit and divergence per seed."""
    p = results.params
    lines = [f"model {p['model']!r}: {results.n_parameters:,} parameters (the paper's TINY: "
             f"{results.n_parameters_tiny:,})"]
    for arm, s in results.summary.items():
        sd = 100 * s["at_train"].std(ddof=1) if len(s["at_train"]) > 1 else 0
        lines.append(f"{arm:>9}: accuracy at N={results.train_n}: "
                     f"{100 * s['at_train'].mean():.1f} ± {sd:.1f} %, mean |acc(N') - acc(N)| "
                     f"{100 * s['deviation'].mean():.2f} points, training "
                     f"{results.train_seconds[arm]:.0f} s per seed")
    lines.append(results.cost.text())
    devices = sorted({str(r.get("device", "?")) for rs in results.runs.values() for r in rs})
    lines.append(f"jobs trained on: {', '.join(devices)}; this notebook runs on "
                 f"{lineage.device_name()}")
    rule = (f"trained until the training accuracy at N reaches {100 * p['fit_accuracy']:g} % "
            f"(checked every {p['fit_every']} epochs) plus {p['extra_epochs']} epochs, at most "
            f"{p['epochs']}" if p["fit_every"] > 0 else f"trained {p['epochs']} epochs")
    lines.append(f"models {rule}; per seed: training accuracy, epochs used:")
    for arm, rs in results.runs.items():
        lines.append(f"{arm:>9}: " + ", ".join(
            f"seed {seed} {100 * float(r['train_accuracy']):.1f} % after "
            f"{float(r.get('epochs_used', p['epochs'])):g} epochs"
            + (" (cap, did not fit)" if r.get("cap_reached") else "")
            for seed, r in zip(p["seeds"], rs, strict=False)))
        for seed, r in zip(p["seeds"], rs, strict=False):
            if r["diverged"]:
                lines.append(f"  WARNING: {arm} seed {seed} diverged: {r['diverged']}")
    return "\n".join(lines)


def margins_report(results: StabilityResults) -> str:
    """The pre-registered margin rule, its reason (from the manifest) and the resolution floor."""
    p = results.params
    schema = profiles.entry(FIGURE)["parameters"]["margin_fraction"]
    return (f"margin_fraction = {p['margin_fraction']:g}: {schema['help']}.\nReason: "
            f"{schema['reason']}.\nA claim with a margin is decided only when δ is at least the "
            "resolution of an accuracy change: the standard error of a paired difference "
            f"acc(N') − acc(N) on the same {p['test_size']:,} test images (at most "
            f"{resolution_points(p['test_size'])[0]:.2f} points); the claims table gives each δ "
            "and the resolution it was compared with.")


def cost_report(results: StabilityResults) -> str:
    """Time and peak memory of one training step per arm, or why they were not measured."""
    if results.costs is None:
        return "cost_steps = 0: not measured"
    return "\n".join(
        f"{LABELS[arm]:>9}: {c['seconds']:.3f} s per step (CPU time {c['cpu_seconds']:.3f} s), "
        f"peak memory +{c['peak_mb']:.0f} MB (batch {c['batch']}, N = {c['train_iter']}, "
        f"backward {c['backward_iter']}, {c['device']}, {c['threads']} thread(s))"
        for arm, c in results.costs.items())
