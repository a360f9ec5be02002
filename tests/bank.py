"""A shared bank of doctored results for the claims tests: job results of the stability and
deq_gaps chapters built from a stated curve, so that a test says which picture it draws (the
paper's, its opposite, a noisy one) and every claims test draws it the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from i2o.chapters.deq_gaps import claims as gaps_claims
from i2o.chapters.stability import claims as stability_claims
from i2o.verdicts.claims import Claims
from i2o.verdicts.curves import Curves, from_sweeps

# -- stability ---------------------------------------------------------------------------------

ITERS = [3, 9, 18, 25, 35]
STABILITY_PARAMS = {"profile": "quick", "train_iters": [18], "test_iters": ITERS,
                    "margin_fraction": 0.25, "fit_accuracy": 0.9, "fit_quorum": 4,
                    "test_size": 1000, "seeds": [0, 1, 2, 3, 4], "epochs": 60, "extra_epochs": 4}
PLATEAU = [0.30, 0.50, 0.60, 0.60, 0.60]       # I2O: fewer hurt, more do not help
DROPPING = [0.30, 0.50, 0.60, 0.50, 0.40]      # less stable
IMPROVING = [0.30, 0.50, 0.60, 0.66, 0.70]     # more iterations help
FLAT = [0.59, 0.60, 0.60, 0.60, 0.60]          # accuracy hardly moves with N'


def stability_run(curve: Sequence[float], seed: int, train_accuracy: float = 0.99,
                  diverged: str = "", rising: bool = False, shift: Sequence[float] | None = None,
                  images: int = 1000, independent: bool = False) -> dict[str, Any]:
    """One stability job result: test accuracy ``curve`` (per :data:`ITERS`) plus small seed noise
    and ``shift``, as per-image 0/1 errors (an image right at one count stays right wherever the
    accuracy is at least as high: nested sets, as a converging solver gives; ``independent``:
    each count's wrong images drawn afresh, so changes are noise), and the last-iterate residual
    of every iterate (falling, or rising)."""
    rng = np.random.default_rng(seed)
    accuracy = np.clip(np.asarray(curve, dtype=float) + rng.normal(0, 0.002, len(ITERS))
                       + (np.asarray(shift) if shift is not None else 0.0), 0.0, 1.0)
    rank = (rng.random((images, len(ITERS))) if independent
            else rng.permutation(images)[:, None] / images)
    errors = (rank >= accuracy[None, :]).astype(np.uint8)
    trace = np.geomspace(1.0, 1e-4, max(ITERS) + 1) * np.exp(rng.normal(0, 0.1, max(ITERS) + 1))
    if rising:
        trace = trace[::-1].copy()
    return {"test": {"iterations": np.asarray(ITERS), "accuracy": 1.0 - errors.mean(axis=0),
                     "errors": errors, "trace_rel": trace,
                     "residual_rel": trace[np.asarray(ITERS)]},
            "train_accuracy": train_accuracy, "diverged": diverged, "epochs_used": 20.0,
            "cap_reached": train_accuracy < 0.9}


def stability_seeds(curve: Sequence[float], n: int = 5, **kw: Any) -> list[dict[str, Any]]:
    return [stability_run(curve, s, **kw) for s in range(n)]


def stability_table(ift: Sequence[dict[str, Any]], unrolled: Sequence[dict[str, Any]],
                    params: dict[str, Any] | None = None,
                    costs: dict[str, dict[str, float]] | None = None) -> Claims:
    """The stability claims of two arms' job results (rows read back by id)."""
    return stability_claims.claims_table(params or STABILITY_PARAMS,
                                         {"ift": list(ift), "unrolled": list(unrolled)}, costs)


# -- deq_gaps ----------------------------------------------------------------------------------

GRID = [1, 4, 8, 16, 24]
N_TRAIN = 8
GAPS_PARAMS = {"cls_fit_accuracy": 0.9, "lm_fit_nll": 1.5, "inv_fit_db": 1.0,
               "cls_eval_size": 400, "fit_quorum": 3, "margin_fraction": 0.25}
FITTED = [0.9, 0.3, 0.02, 0.02, 0.02]
FLAT_LOSS = [6.0, 1.0, 0.2, 0.2, 0.2]       # the training loss at N is not improved upon


def gap_sweep(error_rate: Sequence[float], n: int = 400, seed: int = 0, rising: bool = False,
              loss: Sequence[float] | None = None, noise: float = 0.0,
              independent: bool = False, trace: tuple[float, float] = (1.0, 1e-4)
              ) -> dict[str, Any]:
    """A doctored classification sweep (:func:`i2o.deq.sweep_iterations`' form): per example
    0/1 errors with the given rate per count (the same images wrong at every count unless
    ``independent``), a per-example loss around the given level per count (default: the errors),
    and the batch residual of every iterate from ``trace[0]`` to ``trace[1]``."""
    rng = np.random.default_rng(seed)
    base = rng.random(n) + noise * rng.normal(size=n)
    errors = np.stack([((rng.random(n) if independent else base) < rate).astype(float)
                       for rate in error_rate], axis=1)
    losses = errors if loss is None else \
        np.asarray(loss)[None, :] * np.exp(0.05 * rng.normal(size=(n, 1)))
    residual = np.geomspace(*trace, max(GRID) + 1)[None, :].repeat(4, axis=0)
    if rising:
        residual = residual[:, ::-1].copy()
    return {"iterations": np.asarray(GRID), "metrics": {"error": errors, "loss": losses},
            "residual_rel": np.full((n, len(GRID)), 0.01), "trace_rel": residual,
            "batch_sizes": np.full(4, n // 4)}


def gap_results(test_rates: Any, train_rates: Sequence[float], losses: Sequence[float] =
                (2.3, 1.0, 0.2), rising: bool = False, train_loss: Sequence[float] = FLAT_LOSS,
                models: int = 1, shift: Sequence[float] = (), independent: bool = False,
                traces: Sequence[tuple[float, float]] = ()) -> list[dict[str, Any]]:
    """``models`` doctored classification job results (seeds); ``test_rates`` one curve or one
    per model; ``shift[i]`` moves model i's training error rates (to make it not fit);
    ``traces[i]`` its residual's start and end."""
    results = []
    for i in range(models):
        moved = np.clip(np.asarray(train_rates) + (shift[i] if i < len(shift) else 0), 0, 1)
        rates = test_rates[i] if np.ndim(test_rates) == 2 else test_rates
        trace = traces[i] if i < len(traces) else (1.0, 1e-4)
        results.append({"test": gap_sweep(rates, rising=rising, seed=10 * i, noise=0.02 * i,
                                          independent=independent, trace=trace),
                        "train": gap_sweep(moved, seed=10 * i + 1, loss=train_loss),
                        "history": {"loss": list(losses)}})
    return results


#: the test error (%) of the classifiers' trivial baseline in the doctored runs: beaten by them
BASELINE_ERROR = 80.0


def gap_table(results: Sequence[dict[str, Any]], params: dict[str, Any] | None = None,
              task: str = "classification", baseline: Sequence[float] | None = None) -> Claims:
    """One task's rows (read back by id: ``table["classification_gate"]``); ``baseline``: per
    model, its trivial baseline's test value (default: :data:`BASELINE_ERROR` for a classifier,
    the results' ``A⁺y`` for a reconstruction network)."""
    if task == "classification":
        metrics = {"test": ("test", "error", "percent"), "train": ("train", "error", "percent"),
                   "train_loss": ("train", "loss", "mean")}
    else:
        metrics = {"test": ("test", "neg_psnr", "mean"), "train": ("train", "neg_psnr", "mean"),
                   "train_loss": ("train", "mse", "mean")}
    curves = {key: from_sweeps([r[split] for r in results], metric, -1.0, transform)
              for key, (split, metric, transform) in metrics.items()}
    table = Claims("deq_gaps", "quick")
    if baseline is None:
        baseline = ([BASELINE_ERROR] * len(results) if task == "classification"
                    else gaps_claims.baseline_values(task, results, None))
    gaps_claims.task_claims(table, task, list(results), curves, params or GAPS_PARAMS, N_TRAIN,
                            list(range(len(results))) if len(results) > 1 else None, baseline)
    if params is not None and "profile" in params:  # the runs that would decide it, named
        gaps_claims.name_remedies(table, {task: list(results)}, params)
    return table


def gap_rows(test_rates: Any, train_rates: Sequence[float], params: dict[str, Any] | None = None,
             **kw: Any) -> Claims:
    """:func:`gap_table` of :func:`gap_results`."""
    return gap_table(gap_results(test_rates, train_rates, **kw), params)


def inverse_result(train_psnr: float, test_psnr: float, n: int = 200, seed: int = 0
                   ) -> dict[str, Any]:
    """A doctored reconstruction job: per-image −PSNR on each split at every count."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"history": {"loss": [0.1, 0.05, 0.01]},
                           "train_baseline_neg_psnr": -20.0, "test_baseline_neg_psnr": -20.0}
    for split, level in (("train", train_psnr), ("test", test_psnr)):
        per_image = -level + rng.normal(0, 1.0, (n, 1)) + np.zeros((1, len(GRID)))
        per_image[:, 0] += 1.0  # one iteration is worse
        out[split] = {"iterations": np.asarray(GRID),
                      "metrics": {"neg_psnr": per_image, "mse": np.exp(per_image / 10)},
                      "residual_rel": np.full((n, len(GRID)), 0.01),
                      "trace_rel": np.geomspace(1.0, 1e-4, max(GRID) + 1)[None, :].repeat(4, 0)}
    return out


# -- diagnose ----------------------------------------------------------------------------------

DIAGNOSE_GRID = np.arange(1, 13)


def diagnose_curves(shift: float, n: int = 10_000) -> Curves:
    """Test accuracies: 50 % at N = 4, 0 below 3; above N a fraction |shift| of the examples
    turns right (shift > 0) or wrong (shift < 0). Enough examples that the intervals are narrower
    than half the margin (the power gate of :mod:`i2o.verdicts.rule`)."""
    rng = np.random.default_rng(0)
    grid = DIAGNOSE_GRID
    base = np.broadcast_to((rng.uniform(size=(1, n, 1)) < 0.5).astype(float), (1, n, grid.size))
    flip = rng.uniform(size=(1, n, grid.size)) < abs(shift)
    values = np.where(flip & (grid > 4)[None, None, :], float(shift > 0), base)
    values[:, :, grid < 3] = 0.0
    return Curves(grid, values, np.broadcast_to(0.5 ** grid, values.shape).copy(), 1.0)


def diagnose_training(level: float, n: int = 100) -> Curves:
    values = np.full((1, n, DIAGNOSE_GRID.size), 1.0)
    values[:, int(level * n):, :] = 0.0
    return Curves(DIAGNOSE_GRID, values, np.ones_like(values), 1.0)


def diagnose_results(shift: float, fits: bool = True) -> Any:
    """The diagnose chapter's results for both models, from doctored curves (no training)."""
    from i2o.chapters.diagnose import LABELS, MODELS, runs
    from i2o.compute import profiles
    from i2o.compute.chapter import Cost
    from i2o.diagnose import from_curves
    from i2o.diagnose.metrics import resolve

    accuracy = resolve("accuracy")
    diagnoses = {m: from_curves(diagnose_curves(shift),
                                diagnose_training(1.0 if fits else 0.3), name=LABELS[m],
                                metric=accuracy, train_iters=4, margin=0.02, fit=0.9)
                 for m in MODELS}
    record = {"parameters": 10, "train_seconds": 1.0, "sweep_seconds": 1.0, "solves": 2}
    return runs.DiagnoseResults(diagnoses=diagnoses, records={m: record for m in MODELS},
                                params=profiles.resolve("diagnose", "smoke"),
                                cost=Cost(1.0, 2, 0))


# -- meta ---------------------------------------------------------------------------------------

META_GRID = np.array([1, 2, 5, 10, 30, 100, 300, 1000, 3000, 10000])


def meta_curves(mean_query, mean_support=None, n_tasks=200, noise=0.02, outer_steps=5000, seed=0,
            inner_steps=1):
    """Per-task curves whose mean over tasks follows ``mean_query`` (one value per grid point),
    with task-to-task noise shared across step counts (as real tasks are)."""
    rng = np.random.default_rng(seed)
    task_level = rng.normal(0.0, 0.3, (n_tasks, 1))
    jitter = rng.normal(0.0, noise, (n_tasks, len(META_GRID)))
    query = np.asarray(mean_query)[None, :] * np.exp(task_level) + jitter
    if mean_support is None:
        mean_support = np.geomspace(1.0, 1e-6, len(META_GRID))  # converged from k = 300 on
    support = np.asarray(mean_support)[None, :] * np.exp(task_level)
    # the gradient of an interpolating fit: ‖∇ℓ‖ ∝ √ℓ, from 1 at θ_meta
    grad_norm = np.sqrt(support / support[:, :1]) * 0.5
    return {"query": query, "support": support, "grad_norm": grad_norm,
            "grad_norm_0": np.ones(n_tasks), "objective": support,
            "objective_reference": np.full_like(support, np.nan), "grid": META_GRID,
            "method": "maml", "normalization": "none", "inner_steps": inner_steps,
            "outer_steps": outer_steps}




META_U_SHAPE = np.array([0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.2, 0.3, 0.4, 0.45])


def meta_results(shape: Any = META_U_SHAPE, imaml_outer_steps: int = 10,
                 floor: float = 1.7) -> Any:
    """The meta chapter's results from doctored curves (smoke parameters, decided from 1,000
    outer steps): MAML and an iMAML trained ``imaml_outer_steps`` (10: too few to decide), the
    per-set-BN ablation above the ``floor``, and the meta-gradient noise."""
    from i2o.chapters.meta import runs
    from i2o.compute import profiles
    from i2o.compute.chapter import Cost

    params = profiles.resolve("meta", "smoke", min_outer_steps_to_decide=1000)
    maml, imaml = meta_curves(shape), meta_curves(shape, outer_steps=imaml_outer_steps)
    imaml["method"] = "imaml"
    ablation = {**meta_curves(np.asarray(shape) + 2.0), "normalization": "per_set_bn"}
    for curves in (maml, imaml, ablation):
        curves["train_losses"] = np.full(100, 0.5)  # settled
    row = {"signal": 0.02, "ratio": 1.5, "n_batches": 20}
    return runs.MetaResults(
        params=params, cost=Cost(0.0, 0, 0),
        figure3={"maml-N1-online-seed0": maml, "imaml-N1-lam8-online-seed0": imaml},
        figure4={}, ablation={"maml-N1-per_set_bn-online-seed0": ablation},
        floor={"centred": floor, "standard_error": 0.02, "task_agnostic": 3.0},
        noise={"maml-N1": {**row, "noise": 0.01}, "imaml-lam8": {**row, "noise": 0.015}})


def replicate_run(profile: str, replicate: int, figure: str, rows: list[dict],
                  cpu: str = "Test CPU") -> None:
    """A doctored replicate run (:mod:`i2o.provenance.robustness`): the claims a notebook would
    write, and its stamp."""
    import json

    from i2o.provenance import replicate_summary

    folder = replicate_summary.replicate_dir(profile, replicate)
    (folder / "claims").mkdir(parents=True, exist_ok=True)
    (folder / "claims" / f"{figure}.json").write_text(json.dumps(rows))
    notebook = folder / "notebooks" / f"{figure}.ipynb"
    notebook.parent.mkdir(parents=True, exist_ok=True)
    stamp = {"profile": profile, "seconds": 1.0, "git": "abc", "date": "today",
             "provenance": {"cpu": cpu, "cores": 2}}
    notebook.write_text(json.dumps({"metadata": {"i2o": stamp}, "cells": []}))
