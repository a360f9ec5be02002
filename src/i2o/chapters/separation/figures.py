"""The separation chapter's figures: each reads :func:`runs.collect`'s results (and their
parameters), never computes."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from i2o.book import plotting
from i2o.chapters.separation.runs import SeparationResults
from i2o.compute.profiles import Params

_KIND_COLOURS = {"deq_lower": "#0173b2", "deq_contractive": "#0173b2", "fnn": "#de8f05",
                 "linear_deq": "#029e73", "dln": "#cc78bc"}
_KIND_LABELS = {"deq_lower": "ReLU DEQ (lower-triangular W)", "deq_contractive": "ReLU DEQ",
                "fnn": "FNN", "linear_deq": "linear DEQ (+ bias)", "dln": "diagonal linear net"}


def _mean_se(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray(values, dtype=float)
    n = values.shape[-1]
    se = values.std(axis=-1, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(values.shape[:-1])
    return values.mean(axis=-1), se


def figure_sawtooth(results: SeparationResults) -> plt.Figure:
    """Left: pieces of the exact construction against m. Then, per target Δ^k: test MSE of every
    trained DEQ and FNN against its number of parameters (mean ± SE over seeds)."""
    plotting.use_style()
    params = results.params
    saw = results.sawtooth
    ks = list(params["saw_exponents"])
    fig, axes = plt.subplots(1, 1 + len(ks), figsize=(4.2 * (1 + len(ks)), 3.6))
    c = saw["construction"]
    axes[0].semilogy(c["m"], c["pieces"], "o", label="counted (exact grid)")
    axes[0].semilogy(c["m"], 2.0 ** np.asarray(c["m"]), "k--", lw=1, label="$2^m$")
    axes[0].set(xlabel="width m of the DEQ", ylabel="linear pieces", title="Theorem 1 construction")
    axes[0].legend()
    models = saw["models"]
    for ax, k in zip(axes[1:], ks, strict=True):
        runs = saw[f"k{k}"]
        mean, se = _mean_se(runs["test_mse"])
        params_count = runs["parameters"][:, 0]
        groups = [("deq_lower", 1)] + [("fnn", int(L)) for L in params["fnn_depths"]]
        for kind, depth in groups:
            idx = [i for i in range(len(models["kind"])) if models["kind"][i] == kind
                   and int(models["depth"][i]) == depth
                   and (kind != "fnn" or int(models["width"][i]) in params["fnn_widths"])]
            if not idx:
                continue
            idx = sorted(idx, key=lambda i: params_count[i])
            label = _KIND_LABELS[kind] if kind != "fnn" else f"FNN, depth {depth}"
            ax.errorbar(params_count[idx], mean[idx], se[idx], marker="o", capsize=2,
                        label=label, linestyle="-" if kind != "fnn" else "--")
        variance = float(np.mean(runs["target_variance"]))
        ax.axhline(variance, color="grey", lw=1, ls=":", label="target variance")
        ax.axhline(params["fit_fraction"] * variance, **plotting.ZERO_LINE, label="fit threshold")
        ax.set(xscale="log", yscale="log", xlabel="parameters", ylabel="test MSE",
               title=f"sawtooth $\\Delta^{{{k}}}$ ({2 ** k} pieces)")
    axes[-1].legend(fontsize=7)
    fig.suptitle(plotting.profile_caption(params), fontsize=8, y=0.02)
    fig.tight_layout()
    return fig


def flops_table(results: SeparationResults) -> pd.DataFrame:
    """The rebuttal's Table 1 regenerated: the width-``flops_deq_width`` DEQ and the FNNs of
    closest forward cost, test MSE (mean ± SE over seeds) on each sawtooth target: after Adam,
    and after ``saw_restarts`` float64 L-BFGS restarts (the restart of lowest training MSE, and
    the median over restarts)."""
    params = results.params
    saw = results.sawtooth
    models = saw["models"]
    rows = []
    wanted = [("deq_lower", params["flops_deq_width"], 1)] + [
        ("fnn", int(w), int(L.removeprefix("depth"))) for L, w in saw["flops_matched"].items()]
    for kind, width, depth in wanted:
        i = next(j for j in range(len(models["kind"])) if models["kind"][j] == kind
                 and int(models["width"][j]) == width and int(models["depth"][j]) == depth)
        row = {"model": f"{'DEQ' if kind != 'fnn' else 'FNN'} width {width}"
                        + (f", depth {depth}" if kind == "fnn" else ""),
               "forward FLOPs": int(saw[f"k{params['saw_exponents'][0]}"]["flops"][i, 0]),
               "parameters": int(saw[f"k{params['saw_exponents'][0]}"]["parameters"][i, 0])}
        for k in params["saw_exponents"]:
            mean, se = _mean_se(saw[f"k{k}"]["test_mse"][i])
            train = float(np.mean(saw[f"k{k}"]["train_mse"][i]))
            row[f"test MSE, 2^{k} pieces (Adam)"] = f"{mean:.4f} ± {se:.4f}"
            row[f"train MSE, 2^{k} (Adam)"] = f"{train:.4f}"
            fitted = saw[f"k{k}"]["lbfgs"]
            best, best_se = _mean_se(fitted["best_test_mse"][len(rows)])
            median = float(np.mean(fitted["median_test_mse"][len(rows)]))
            row[f"test MSE, 2^{k} (L-BFGS best of R)"] = f"{best:.4f} ± {best_se:.4f}"
            row[f"test MSE, 2^{k} (L-BFGS median)"] = f"{median:.4f}"
        rows.append(row)
    rows.append(_implicit_row(saw, params))
    return pd.DataFrame(rows)


def _implicit_row(saw: dict[str, Any], params: Params) -> dict[str, Any]:
    """The contractive (genuinely implicit) DEQ of the FLOPs-matched width, Adam only; its FLOPs
    are those of its solver's iteration cap."""
    models = saw["models"]
    i = next(j for j in range(len(models["kind"])) if models["kind"][j] == "deq_contractive")
    first = saw[f"k{params['saw_exponents'][0]}"]
    row = {"model": f"implicit DEQ width {int(models['width'][i])} (contractive W)",
           "forward FLOPs": int(first["flops"][i, 0]),
           "parameters": int(first["parameters"][i, 0])}
    for k in params["saw_exponents"]:
        mean, se = _mean_se(saw[f"k{k}"]["test_mse"][i])
        row[f"test MSE, 2^{k} pieces (Adam)"] = f"{mean:.4f} ± {se:.4f}"
        row[f"train MSE, 2^{k} (Adam)"] = f"{float(np.mean(saw[f'k{k}']['train_mse'][i])):.4f}"
        row[f"test MSE, 2^{k} (L-BFGS best of R)"] = "—"
        row[f"test MSE, 2^{k} (L-BFGS median)"] = "—"
    return row


def figure_diagonal(results: SeparationResults) -> plt.Figure:
    """First problem: the gradient flow's β against the argmin of Q₊ (and Q₋ where it exists),
    and the interpolants of the DEQ and of the diagonal linear network, entry by entry."""
    plotting.use_style()
    params = results.params
    diag = results.diagonal
    seed = sorted(k for k in diag if k.startswith("s") and k[1:].isdigit())[0]
    run = diag[seed]
    flow = np.asarray(run["flow"]["beta"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    a.plot(run["plus"]["beta"], flow, "o", label="argmin $Q_+$ (sign +)")
    if bool(run["minus"]["found"]):
        a.plot(run["minus"]["beta"], flow, "x", label="argmin $Q_-$ (sign −)")
    lo, hi = float(flow.min()), float(flow.max())
    a.plot([lo, hi], [lo, hi], "k--", lw=1)
    a.set(xlabel="convex solver's minimizer $\\beta_i$", ylabel="gradient-flow limit $\\beta_i$",
          title=f"diagonal linear DEQ ({seed})")
    a.legend()
    order = np.argsort(-np.abs(flow))
    a_idx = np.arange(len(flow))
    b.bar(a_idx - 0.2, flow[order], 0.4, color=_KIND_COLOURS["deq_lower"],
          label=f"diagonal linear DEQ (density {float(run['density_deq']):.2f})")
    b.bar(a_idx + 0.2, np.asarray(run["dln"]["beta"])[order], 0.4, color=_KIND_COLOURS["dln"],
          label=f"diagonal linear net (density {float(run['density_dln']):.2f})")
    b.set(xlabel="coordinate (sorted by the DEQ's |β|)", ylabel="$\\beta_i$",
          title="interpolants of the same data")
    b.legend(fontsize=8)
    fig.suptitle(plotting.profile_caption(params), fontsize=8, y=0.02)
    fig.tight_layout()
    return fig


def figure_features(results: SeparationResults, target: str = "f2") -> plt.Figure:
    """Rebuttal Figure 2: |features| (training points × neurons) of the first seed's linear DEQ,
    ReLU DEQ and FNN on GOTU target ``target``, each scaled by its largest entry."""
    plotting.use_style()
    params = results.params
    entry = results.gotu[target]
    kinds = ("linear_deq", "deq_contractive", "fnn")
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), layout="constrained")
    for ax, kind in zip(axes, kinds, strict=True):
        features = np.abs(np.asarray(entry[kind]["features"]))
        scaled = features / max(float(features.max()), 1e-300)
        image = ax.imshow(scaled, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        mean, _ = _mean_se(entry[kind]["feature_density"])
        ax.set(title=f"{_KIND_LABELS[kind]}\nparticipation ratio {mean:.2f}",
               xlabel="neuron", ylabel="training point" if kind == kinds[0] else "")
        ax.grid(False)
    fig.colorbar(image, ax=axes, shrink=0.8, label="|feature| / max")
    fig.suptitle(plotting.profile_caption(params), fontsize=8)
    return fig


def figure_gotu(results: SeparationResults) -> plt.Figure:
    """Unseen MSE of every model on both targets (mean ± SE over seeds; hollow: does not fit the
    seen part) with the unseen MSE of the affine interpolant where it exists."""
    plotting.use_style()
    params = results.params
    gotu = results.gotu
    kinds = ("linear_deq", "dln", "deq_contractive", "fnn")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, target in zip(axes, ("f1", "f2"), strict=True):
        entry = gotu[target]
        for i, kind in enumerate(kinds):
            mean, se = _mean_se(entry[kind]["unseen_mse"])
            fitted = (float(np.mean(entry[kind]["train_mse"]))
                      <= params["fit_fraction"] * float(np.mean(entry[kind]["seen_variance"])))
            ax.bar(i, mean, yerr=se, capsize=3, color=_KIND_COLOURS[kind] if fitted else "none",
                   edgecolor=_KIND_COLOURS[kind], hatch=None if fitted else "//")
        for bias, style in (("bias", "-"), ("no_bias", ":")):
            pred = entry["prediction"][bias]
            if bool(pred["interpolates"]):
                ax.axhline(float(pred["unseen_mse"]), color="k", ls=style, lw=1,
                           label=f"affine interpolant{' with bias' if bias == 'bias' else ''}")
        ax.set_xticks(range(len(kinds)), [_KIND_LABELS[k] for k in kinds], rotation=20,
                      fontsize=8)
        ax.set(ylabel="MSE on the unseen part", title=f"GOTU {target}")
        ax.legend(fontsize=7)
    fig.suptitle(plotting.profile_caption(params) + " · hatched: does not fit the seen part",
                 fontsize=8, y=0.01)
    fig.tight_layout()
    return fig


def figure_steep(results: SeparationResults) -> plt.Figure:
    """Max |weight| at the common training-loss level against d, with δ = 2^-d (mean ± SE over
    seeds; hollow markers: some seed never reached the level, its last value is shown)."""
    plotting.use_style()
    params = results.params
    steep = results.steep
    dims = np.asarray(steep["dims"])
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for kind in ("deq_lower", "fnn"):
        run = steep[kind]
        mean, se = _mean_se(run["max_weight"])
        reached = np.all(run["reached"] == 1, axis=1)
        colour = _KIND_COLOURS[kind]
        ax.errorbar(dims, mean, se, color=colour, capsize=2, label=_KIND_LABELS[kind])
        ax.scatter(dims[reached], mean[reached], color=colour, zorder=3)
        ax.scatter(dims[~reached], mean[~reached], facecolors="none", edgecolors=colour,
                   zorder=3)
    ax.set(yscale="log", xlabel="input dimension d (steepness δ = $2^{-d}$)",
           ylabel="max |weight| at equal loss", title="steep target δ/(x₁ + δ)")
    ax.legend(fontsize=8)
    fig.suptitle(plotting.profile_caption(params) + " · hollow: level not reached", fontsize=8,
                 y=0.01)
    fig.tight_layout()
    return fig


def frozen_table(results: SeparationResults) -> pd.DataFrame:
    """The frozen-coordinate task of Section 4, one row per ``f̂(∅)``: the flow's predictions and
    what gradient descent reached (mean over seeds), β₀ and the unseen MSE of both linear models,
    the steps taken and the drift of the conserved ``β₀⁻³ + 3b``."""
    rows = []
    for entry in sorted(results.frozen.values(), key=lambda e: e["mean"]):
        pred, deq, dln = entry["prediction"], entry["linear_deq"], entry["dln"]
        rows.append({
            "f̂(∅)": f"{entry['mean']:g}",
            "β₀* predicted": f"{pred['beta0']:.4f}",
            "β₀ trained (linear DEQ)": f"{np.mean(deq['beta0']):.4f}",
            "unseen MSE, linear DEQ (predicted)": f"{np.mean(deq['unseen_mse']):.4f} "
                                                  f"({pred['linear_deq']:.4f})",
            "unseen MSE, diagonal network (predicted)": f"{np.mean(dln['unseen_mse']):.4f} "
                                                        f"({pred['dln']:.4f})",
            "steps (DEQ / network)": f"{np.mean(deq['steps']):.0f} / {np.mean(dln['steps']):.0f}",
            "max drift of β₀⁻³ + 3b": f"{np.max(deq['conserved_drift']):.2g}"})
    return pd.DataFrame(rows)
