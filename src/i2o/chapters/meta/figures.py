"""Figures 3 and 4 of the paper and the normalization ablation, drawn from the curves of
:mod:`i2o.chapters.meta.runs` (plotting only: nothing here computes a result)."""

from __future__ import annotations

from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from i2o.book import plotting
from i2o.chapters.meta import claims, evaluate
from i2o.verdicts import ranks


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
    """Left: D(N, ΔN) against ΔN, one curve per model, coloured by its own ℓ(z_N(θ*,N)), marked
    by its training-set size. Right: what the claim tests, each model's D at the largest ΔN
    against its ℓ(z_N) (log x), with Kendall's τ and its exact one-sided p-values when defined
    (:func:`i2o.verdicts.ranks.kendall`)."""
    models = sorted(((claims.figure4_point(name, c), c) for name, c in per_set.items()),
                    key=lambda pair: (pair[0].n_meta_batches, pair[0].label))
    points = [p for p, _ in models]
    losses = np.array([p.loss_at_n for p in points])
    shown = losses[np.isfinite(losses) & (losses > 0)]
    low = shown.min() if shown.size else 1e-3
    high = max(shown.max() if shown.size else 1.0, low * 1.01)
    norm = mpl.colors.LogNorm(vmin=low, vmax=high)
    cmap = plt.cm.plasma
    sizes = sorted({p.n_meta_batches for p in points})
    markers = dict(zip(sizes, "osD^vP*X<>", strict=False))
    fig, (curves_ax, scatter_ax) = plt.subplots(1, 2, figsize=(11.0, 4.2))
    for p, c in models:
        colour = cmap(norm(p.loss_at_n)) if np.isfinite(p.loss_at_n) else "grey"
        delta = np.asarray(c["grid"]) - c["inner_steps"]
        curves_ax.plot(delta, c["increase"], color=colour, marker=markers.get(p.n_meta_batches),
                       markersize=3, linewidth=1.0, label=p.label)
        scatter_ax.scatter([p.loss_at_n], [p.increase_at_max], color=colour,
                           marker=markers.get(p.n_meta_batches, "o"), s=30)
    curves_ax.axvline(0, **plotting.TRAIN_N_LINE)
    curves_ax.axhline(0, **plotting.ZERO_LINE)
    curves_ax.set_xscale("symlog", linthresh=max(int(points[0].delta_near_n), 1))
    increases = np.concatenate([np.asarray(c["increase"], dtype=float) for c in per_set.values()])
    scale = np.nanmax(np.abs(increases[np.isfinite(increases)])) if np.isfinite(
        increases).any() else 1.0
    linthresh = max(scale * 1e-2, 1e-12)
    curves_ax.set_yscale("symlog", linthresh=linthresh)
    curves_ax.set_xlabel("ΔN (jaxopt iterations beyond the training N)")
    curves_ax.set_ylabel("training-loss increase  D(N, ΔN)")
    curves_ax.legend(fontsize="x-small", ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.28))
    scatter_ax.axhline(0, **plotting.ZERO_LINE)
    scatter_ax.set_xscale("log")
    scatter_ax.set_yscale("symlog", linthresh=linthresh)
    scatter_ax.set_xlabel("training loss  ℓ(z_N(θ*,N))")
    scatter_ax.set_ylabel(f"D(N, ΔN = {points[0].delta_max})")
    scatter_ax.set_title(_association_title(points), fontsize="small")
    for size, marker in markers.items():
        scatter_ax.scatter([], [], marker=marker, color="grey", label=f"B = {size}")
    scatter_ax.legend(fontsize="x-small", title="meta-batches", title_fontsize="x-small")
    colourbar = fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=scatter_ax)
    colourbar.set_label("training loss  ℓ(z_N(θ*,N))")
    fig.tight_layout()
    return fig


def _association_title(points: list[claims.Figure4Point]) -> str:
    """Kendall's τ of the points and its exact one-sided p-values, or why it is not defined."""
    x = [p.loss_at_n for p in points]
    y = [p.increase_at_max for p in points]
    if len(points) < 2 or not all(p.is_finite() for p in points):
        return f"{len(points)} models (τ undefined: a non-finite value or too few models)"
    if len(set(x)) < len(x) or len(set(y)) < len(y):
        return f"{len(points)} models (tied values: no exact τ)"
    found = ranks.kendall(x, y)
    return (f"{found.n} models: Kendall τ = {found.tau:+.2f}, one-sided p = "
            f"{found.p_negative:.3g} (negative), {found.p_positive:.3g} (positive)")


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
