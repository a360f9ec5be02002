"""Figures 3 and 4 of the paper, drawn from the curves of :mod:`i2o.meta.experiment`."""

from __future__ import annotations

from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from i2o import plotting
from i2o.meta import evaluate, verdicts


def figure_3(curves: dict[str, dict[str, Any]]) -> plt.Figure:
    """Test MSE against N + ΔN (log x) with ± one standard error over test tasks; one panel per
    method, a dashed line at each training N."""
    methods = [m for m in ("maml", "imaml") if any(c["method"] == m for c in curves.values())]
    fig, axes = plt.subplots(1, len(methods), figsize=(5.2 * len(methods), 3.8), squeeze=False)
    for ax, method in zip(axes[0], methods, strict=True):
        chosen = [c for c in curves.values() if c["method"] == method]
        shades = plt.cm.viridis(np.linspace(0.1, 0.75, len(chosen))) if len(chosen) > 1 \
            else [plotting.ARM_COLOURS[method]]
        for c, colour in zip(chosen, shades, strict=True):
            finite = verdicts.finite_tasks(c)
            mean, se = evaluate.mean_and_standard_error(c["query"][finite])
            label = f"N = {c['inner_steps']}"
            if not finite.all():
                label += f" ({int((~finite).sum())} diverged tasks excluded)"
            ax.plot(c["grid"], mean, color=colour, label=label)
            ax.fill_between(c["grid"], mean - se, mean + se, color=colour, alpha=0.25, lw=0)
            ax.axvline(c["inner_steps"], color=colour, linestyle="--", linewidth=1.0)
            best = int(np.argmin(mean))
            ax.plot(c["grid"][best], mean[best], marker="v", color=colour, markersize=7)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("inner steps at test time  N + ΔN")
        ax.set_ylabel("test MSE")
        name = "MAML (gradient steps, α = 0.01)" if method == "maml" else \
            "iMAML (jaxopt iterations)"
        ax.set_title(name)
        ax.legend(title="trained with")
    fig.tight_layout()
    return fig


def figure_4(per_set: dict[str, dict[str, Any]]) -> plt.Figure:
    """D(N, ΔN) against ΔN, one curve per training-set size, coloured by ℓ(z_N(θ^{*,N}))."""
    rows = sorted(per_set.values(), key=lambda c: c["n_meta_batches"])
    losses = np.array([c["loss_at_n"] for c in rows])
    norm = mpl.colors.LogNorm(vmin=losses.min(), vmax=max(losses.max(), losses.min() * 1.01))
    cmap = plt.cm.plasma
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for c in rows:
        delta = c["grid"] - c["inner_steps"]
        plural = "es" if c["n_meta_batches"] > 1 else ""
        ax.plot(delta, c["increase"], color=cmap(norm(c["loss_at_n"])), marker=".",
                label=f"{c['n_meta_batches']} meta-batch{plural}")
    ax.axvline(0, **plotting.TRAIN_N_LINE)
    ax.axhline(0, **plotting.ZERO_LINE)
    ax.set_xscale("symlog", linthresh=max(rows[0]["inner_steps"], 1))
    scale = np.nanmax(np.abs(np.concatenate([c["increase"] for c in rows])))
    ax.set_yscale("symlog", linthresh=max(scale * 1e-2, 1e-12))
    ax.set_xlabel("ΔN (jaxopt iterations beyond the training N)")
    ax.set_ylabel("training-loss increase  D(N, ΔN)")
    colourbar = fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax)
    colourbar.set_label("training loss  ℓ(z_N(θ*,N))")
    ax.legend(fontsize="small", ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    return fig
