"""Figures 3 and 4 of the paper and the normalization ablation, drawn from the curves of
:mod:`i2o.chapters.meta.runs` (plotting only: nothing here computes a result)."""

from __future__ import annotations

from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from i2o import plotting
from i2o.chapters.meta import claims, evaluate


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
            finite = claims.finite_tasks(c)
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
        norm_name = chosen[0].get("normalization", "none")
        ax.set_title(name + ("" if norm_name == "none" else f", {norm_name}"))
        ax.legend(title="trained with")
    fig.tight_layout()
    return fig


def figure_4(per_set: dict[str, dict[str, Any]]) -> plt.Figure:
    """D(N, ΔN) against ΔN, one curve per training-set size (mean over seeds, band ± one standard
    error over seeds), coloured by the seed-mean ℓ(z_N(θ^{*,N}))."""
    rows = claims.figure4_summary(per_set)
    losses = np.array([c["loss_at_n"] for c in rows])
    norm = mpl.colors.LogNorm(vmin=losses.min(), vmax=max(losses.max(), losses.min() * 1.01))
    cmap = plt.cm.plasma
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for c in rows:
        delta = c["grid"] - c["inner_steps"]
        plural = "es" if c["n_meta_batches"] > 1 else ""
        colour = cmap(norm(c["loss_at_n"]))
        ax.plot(delta, c["increase"], color=colour, marker=".",
                label=f"{c['n_meta_batches']} meta-batch{plural} ({c['seeds']} seeds)")
        if c["seeds"] > 1:
            ax.fill_between(delta, c["increase"] - c["increase_se"],
                            c["increase"] + c["increase_se"], color=colour, alpha=0.2, lw=0)
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


def normalization_ablation(ablation: dict[str, dict[str, Any]],
                           reference: dict[str, dict[str, Any]],
                           floor: dict[str, float]) -> plt.Figure:
    """Test MSE against N + ΔN of the ablation model(s) beside the chapter's model with the same
    method and N, with the per-set-BN floor (both bounds) and the MSE of predicting 0."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    colours = plt.cm.tab10(np.arange(10))
    shown = []
    for c in ablation.values():
        same = [r for r in reference.values() if r["method"] == c["method"]
                and r["inner_steps"] == c["inner_steps"]]
        shown += same[:1] + [c]
    for i, c in enumerate(shown):
        finite = claims.finite_tasks(c)
        mean, se = evaluate.mean_and_standard_error(c["query"][finite])
        label = f"{c['method'].upper()} N = {c['inner_steps']}, {c.get('normalization', 'none')}"
        ax.plot(c["grid"], mean, color=colours[i], label=label)
        ax.fill_between(c["grid"], mean - se, mean + se, color=colours[i], alpha=0.25, lw=0)
        best = int(np.argmin(mean))
        ax.plot(c["grid"][best], mean[best], marker="v", color=colours[i], markersize=7)
    ax.axhline(floor["centred"], color="black", linestyle="--", linewidth=1.0,
               label="per-set-BN floor (positions centred)")
    ax.axhline(floor["standardized"], color="black", linestyle=":", linewidth=1.0,
               label="per-set-BN floor (positions standardized)")
    ax.axhline(floor["target_variance"], color="grey", linestyle="-.", linewidth=1.0,
               label="predicting 0")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("inner steps at test time  N + ΔN")
    ax.set_ylabel("test MSE")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.tight_layout()
    return fig
