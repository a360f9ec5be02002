"""The toy chapter's figure, drawn from the results of :func:`.runs.collect`."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from i2o.book import plotting

from .runs import ToyResults


def residual_figure(results: ToyResults) -> Figure:
    """Relative residual against the number of iterations n: every seed (thin) and their mean
    (thick), the training number of iterations marked."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for curve in results.residuals:
        ax.plot(curve, color="grey", alpha=0.4, linewidth=0.8)
    ax.plot(results.residuals.mean(axis=0), color="C0", linewidth=2.2, label="seed mean")
    ax.axvline(results.params["train_iters"], **plotting.TRAIN_N_LINE)
    ax.set_yscale("log")
    ax.set(xlabel="iterations n", ylabel=r"$\|z_n - z^*\| / \|z_0 - z^*\|$",
           title=f"contraction {results.params['contraction']:g}, dim {results.params['dim']}")
    ax.legend()
    return fig
