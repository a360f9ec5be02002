"""The affine chapter's figures, drawn from the results of :func:`.runs.collect`.

- :func:`figure_1_left`: D(N, ΔN) against ΔN for each training N (Figure 1 left, Corollary 1);
- :func:`lower_bound_figure`: Theorem 1's negative lower bound against d_θ at one N, and against
  N for a few d_θ (Figure 1 right via :func:`figure_1_right`, Figure G.3 via :func:`figure_g3`).

Each returns a Matplotlib figure; styling (:func:`i2o.book.plotting.use_style`) and saving are the
caller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from i2o.book import plotting


def figure_1_left(left: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    """D(N, ΔN) = ℓ(z_{N+ΔN}(θ^{*,N})) − ℓ(z_N(θ^{*,N})) against ΔN, one curve per N, from a
    :func:`.sweeps.corollary1_sweep` result. The vertical axis is linear near 0 and logarithmic
    beyond, so that curves of very different scales are all visible."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for n, increase in zip(left["n_list"], left["loss_increase"], strict=True):
        ax.plot(left["delta_n"], increase, label=f"N = {n}")
    ax.axvline(0, **plotting.TRAIN_N_LINE)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(bottom=-3e-4)  # a margin below 0 so that D = 0 stays visible
    ax.set_xlabel(r"$\Delta N$")
    ax.set_ylabel(r"$D(N, \Delta N)$")
    ax.set_title(rf"Corollary 1: $d_z$={params['left_d_z']}, $d_\theta$={params['left_d_theta']}, "
                 rf"$d_x$={left['d_x']}, rank $K_{{out}}$={params['left_rank_out']}", fontsize=10)
    ax.legend(title="training N", fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def lower_bound_figure(sweep: Mapping[str, Any], d_theta_panel: Sequence[int],
                       title: str) -> Figure:
    """Two panels from a :func:`.sweeps.lower_bound_sweep` result.

    Left: the bound ½‖(P(C) − P(C E_N U))(K_out r_N − ω)‖² (Theorem 1) at N = n_reference per seed
    (dots) and its seed mean (line) against d_θ, the dotted line at d_θ = rank C; when Corollary
    2's constant is finite (K_in invertible) also the value Lemma A.4 would give if C E_N U were
    Gaussian (dashed). Right: the bound against N for each d_θ of ``d_theta_panel``, every seed
    (thin) and the seed mean (thick).
    """
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    k = int(np.searchsorted(sweep["n"], sweep["n_reference"]))
    at_reference = sweep["nlb"][:, :, k]
    for values in at_reference:
        ax0.scatter(sweep["d_theta"], values, s=6, color="grey", alpha=0.35)
    ax0.plot(sweep["d_theta"], at_reference.mean(axis=0), "o-", color="C0", label="seed mean")
    if np.isfinite(sweep["corollary2_bound"]).all():
        ax0.plot(sweep["d_theta"], sweep["isotropic_prediction"], "--", color="C2",
                 label="Lemma A.4 if $CE_NU$ were Gaussian")
    ax0.axvline(sweep["rank_C"], color="black", linewidth=0.8, linestyle=":")
    ax0.set(xlabel=r"$d_\theta$", ylabel="negative lower bound",
            title=rf"$N$ = {sweep['n_reference']}; dotted: rank $C$ = {sweep['rank_C']}")
    ax0.legend(fontsize=8)
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(d_theta_panel)))
    for d_theta, colour in zip(d_theta_panel, colours, strict=True):
        curves = sweep["nlb"][:, d_theta - 1, :]
        for curve in curves:
            ax1.plot(sweep["n"], curve, color=colour, alpha=0.25, linewidth=0.7)
        ax1.plot(sweep["n"], curves.mean(axis=0), color=colour, linewidth=2.2,
                 label=rf"$d_\theta$ = {d_theta}")
    ax1.set_xscale("log")
    ax1.set_yscale("symlog", linthresh=1e-2)
    ax1.set_ylim(bottom=-3e-3)  # a margin below 0 so that a zero bound stays visible
    ax1.set(xlabel="N", ylabel="negative lower bound", title="all seeds, all N")
    ax1.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title, fontsize=11)
    return fig


def figure_1_right(right: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    """Figure 1 (right): :func:`lower_bound_figure` in the strongly convex setting."""
    return lower_bound_figure(
        right, params["right_d_theta_panel"],
        rf"Corollary 2 (strongly convex): $d_z = d_x$ = {params['right_d_z']}, "
        f"{params['n_seeds']} seeds")


def figure_g3(g3: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    """Figure G.3: :func:`lower_bound_figure` with neither problem strongly convex."""
    return lower_bound_figure(
        g3, params["g3_d_theta_panel"],
        rf"Not strongly convex: $d_z$ = {params['g3_d_z']}, $d_x$ = {params['g3_d_x']}, "
        rf"rank $K_{{out}}$ = {params['g3_rank_out']}, {params['n_seeds']} seeds")
