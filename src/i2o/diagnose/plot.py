"""The figure of a diagnosis: left, the gap ``D(N, ΔN)`` with its pointwise interval and the
band ``±δ``; right, the metric against ``N'`` (test, and training when measured) with the relative
residual of the returned iterate on a second, logarithmic axis. Dashed black: the training ``N``;
green dotted: the recommended ``N'``. Nothing here computes a result."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from i2o.book.plotting import TRAIN_N_LINE, ZERO_LINE

RECOMMENDED_LINE = {"color": "#029e73", "linestyle": ":", "linewidth": 1.6}


def figure(d: Any, title: str | None = None) -> Figure:
    """The figure of ``d``, an :class:`i2o.diagnose.Diagnosis` (not imported here: the result
    module draws itself through this one)."""
    grid = np.asarray(d.grid)
    cis = d.gap_intervals()
    fig, (ax_gap, ax_metric) = plt.subplots(1, 2, figsize=(10.5, 3.8))
    mean = np.array([ci.mean for ci in cis])
    ax_gap.plot(grid, mean, "-o", markersize=3, color="C0", label="test")
    ax_gap.fill_between(grid, [ci.lo for ci in cis], [ci.hi for ci in cis], color="C0",
                        alpha=0.2, linewidth=0,
                        label=f"{100 * d.level:.0f} % CI over {cis[0].over}")
    ax_gap.axhspan(-d.margin, d.margin, color="grey", alpha=0.12, linewidth=0,
                   label=f"±δ = {d.margin:g}")
    ax_gap.axhline(0.0, **ZERO_LINE)
    ax_gap.set_ylabel(f"D(N, ΔN) in {d.metric} ({'↑' if d.higher_is_better else '↓'} better)")
    ax_gap.legend(loc="best", fontsize=8)
    ax_metric.plot(grid, d.test.mean(), "-o", markersize=3, color="C0", label="test")
    if d.train is not None:
        ax_metric.plot(grid, d.train.mean(), "-s", markersize=3, color="C1", label="training")
    ax_metric.set_ylabel(d.metric)
    ax_metric.legend(loc="center right", fontsize=8)
    twin = ax_metric.twinx()
    residual = d.test.residual_mean()
    twin.plot(grid, residual, "-", color="C2", alpha=0.8)
    if np.all(residual > 0):
        twin.set_yscale("log")
    twin.set_ylabel("relative residual", color="C2")
    twin.tick_params(axis="y", which="both", colors="C2")
    twin.grid(False)
    for ax in (ax_gap, ax_metric):
        ax.axvline(d.train_iters, **TRAIN_N_LINE)
        ax.axvline(d.recommendation.n, **RECOMMENDED_LINE)
        ax.set_xlabel("test-time iterations $N' = N + \\Delta N$")
    fig.suptitle(title or f"{d.model}: trained with N = {d.train_iters}; more iterations: "
                 f"{d.verdicts.more}; recommended N' = {d.recommendation.n}", fontsize=10)
    fig.tight_layout()
    return fig
