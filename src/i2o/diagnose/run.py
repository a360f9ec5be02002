r"""The diagnosis: a trained implicit model evaluated at every test-time count ``N'`` of a grid,
its gap ``D(N, ΔN) = M(N + ΔN) − M(N)`` with intervals, the verdicts and the recommended ``N'``.

Everything a user can get wrong is checked **before any compute** (:func:`check_inputs`): a model
with no iteration control, a grid without the training ``N``, an empty loader, a metric that is
unknown, has no direction, or returns NaN on the first examples, a fit threshold without training
data. Then each model is swept once over the test data (and the training data when given) with one
solve per batch (``shared=True``) or one per ``N'``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from i2o import gates, runtime
from i2o.deq import iteration_grid
from i2o.diagnose.adapters import Adapter, BookMDEQ, Swept
from i2o.diagnose.curves import Curves, stack
from i2o.diagnose.data import Batches, batches
from i2o.diagnose.metrics import Metric, check_finite, resolve
from i2o.diagnose.result import Diagnosis
from i2o.diagnose.verdicts import decide, recommend

#: Default margin δ per named metric, in its units (1 accuracy point, 0.1 dB, …).
DEFAULT_MARGINS = {"accuracy": 0.01, "error": 0.01, "loss": 0.01, "mse": 1e-3, "psnr": 0.1}


def adapt(model: Any, name: str | None = None) -> Adapter:
    """An :class:`Adapter` for ``model``: itself when it is one, the book's MDEQ adapter for an
    :class:`i2o.models.MDEQClassifier`, the torchdeq adapter for a module holding a torchdeq DEQ;
    anything else is refused ("no iteration control found")."""
    if isinstance(model, Adapter) and not isinstance(model, torch.nn.Module):
        return model
    if isinstance(model, torch.nn.Module):
        if callable(getattr(model, "prepare", None)) and callable(getattr(model, "classify", None)):
            return BookMDEQ(model, name=name or "MDEQ (i2o.models)")
        from i2o.diagnose.torchdeq_model import TorchDEQModel  # lazy: torchdeq is optional

        return TorchDEQModel(model, name=name or type(model).__name__)
    raise ValueError(
        f"no iteration control found for a {type(model).__name__}: pass a torch module holding a "
        "torchdeq DEQ, an i2o.models.MDEQClassifier, or an adapter (i2o.diagnose.PlainDEQ(f, z0, "
        "readout) for a hand-written layer, i2o.diagnose.from_book_deq for an i2o.deq.DEQ)")


def default_grid(train_iters: int) -> list[int]:
    """``1 … 3N``: every count when ``3N ≤ 40``, else 20 roughly log-spaced ones with ``N`` and
    ``N ± 1``."""
    top = 3 * train_iters
    if top <= 40:
        return list(range(1, top + 1))
    extra = [n for n in (train_iters - 1, train_iters + 1) if n >= 1]
    return iteration_grid(train_iters, factor=3.0, points=20, extra=extra)


def check_grid(grid: Sequence[int], train_iters: int) -> list[int]:
    """The grid, sorted; refused unless it holds distinct integers ≥ 1, ``N`` and another count."""
    values = list(grid)
    if not values or any(isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1
                         for n in values):
        raise ValueError(f"the grid of N' must be integers ≥ 1; got {values}")
    if len(set(values)) != len(values):
        raise ValueError(f"the grid of N' has repeated counts: {values}")
    if train_iters not in values:
        raise ValueError(f"the grid of N' {sorted(values)} does not include the training "
                         f"N = {train_iters}: every gap D(N, ΔN) is measured from it")
    if len(values) < 2:
        raise ValueError("the grid of N' needs at least one count besides N")
    return sorted(int(n) for n in values)


def _train_iters(adapters: Sequence[Adapter], train_iters: int | None) -> int:
    if train_iters is None:
        known = {getattr(a, "train_iters", None) for a in adapters}
        if len(known) != 1 or None in known:
            raise ValueError("give train_iters (N, the forward iterations used in training): "
                             "the model does not say it")
        train_iters = known.pop()
    if isinstance(train_iters, bool) or not isinstance(train_iters, int | np.integer) \
            or train_iters < 1:
        raise ValueError(f"train_iters (N) must be an integer ≥ 1; got {train_iters!r}")
    return int(train_iters)


def _preflight(adapter: Adapter, data: Batches, grid: list[int], metric: Metric) -> None:
    """The metric on the first two examples at the smallest count: refuse NaN before the sweep."""
    x, y = data.first()
    take = min(2, int(y.shape[0]))
    few = Batches(f"first {take} {data.name} examples",
                  [(_rows(x, take), y[:take])])
    swept = adapter.sweep(few, [grid[0]], metric, shared=True)
    check_finite(torch.as_tensor(swept.values), metric,
                 f"({few.name}, N' = {grid[0]}, checked before the sweep)")


def _rows(x: Any, n: int) -> Any:
    if isinstance(x, torch.Tensor):
        return x[:n]
    return type(x)(_rows(part, n) for part in x)


def check_inputs(model: Any, test: Any, train_iters: int | None = None, train: Any = None,
                 metric: Any = "accuracy", higher_is_better: bool | None = None,
                 grid: Sequence[int] | None = None, margin: float | None = None,
                 fit: float | bool | None = None, level: float = gates.LEVEL,
                 batch_size: int = 250, limit: int | None = None, preflight: bool = True
                 ) -> dict[str, Any]:
    """Every check of the module docstring; returns the resolved inputs of :func:`diagnose`."""
    models = list(model) if isinstance(model, list | tuple) else [model]
    if not models:
        raise ValueError("no model given")
    adapters = [adapt(m) for m in models]
    n = _train_iters(adapters, train_iters)
    full_grid = check_grid(default_grid(n) if grid is None else grid, n)
    resolved = resolve(metric, higher_is_better)
    if margin is None:
        if resolved.name not in DEFAULT_MARGINS:
            raise ValueError(f"state the margin δ (a difference of {resolved.name!r} that "
                             "matters): a custom metric has no default")
        margin = DEFAULT_MARGINS[resolved.name]
    if not (isinstance(margin, int | float) and np.isfinite(margin) and margin > 0):
        raise ValueError(f"the margin δ must be a finite number > 0; got {margin!r}")
    if not 0.5 <= level < 1:
        raise ValueError(f"level must be in [0.5, 1); got {level!r}")
    test_data = batches(test, "test", batch_size, limit)
    train_data = batches(train, "training", batch_size, limit) if train is not None else None
    if fit is not None and not isinstance(fit, bool) and train_data is None:
        raise ValueError("a fit threshold is measured on the training data: give train=...")
    if fit is False:
        raise ValueError("fit=False: give a threshold on the training metric, True (stated), or "
                         "None (no fit gate)")
    if preflight:
        for adapter in adapters:
            _preflight(adapter, test_data, full_grid, resolved)
    return {"adapters": adapters, "train_iters": n, "grid": full_grid, "metric": resolved,
            "margin": float(margin), "test": test_data, "train": train_data, "fit": fit,
            "level": float(level)}


def _sweep(adapter: Adapter, data: Batches, grid: list[int], metric: Metric, shared: bool,
           progress: bool | None) -> Swept:
    def counted() -> Iterable:
        yield from runtime.Progress.over(data, f"diagnose {adapter.name} ({data.name})",
                                         unit="batch", enabled=progress)

    swept = adapter.sweep(counted(), grid, metric, shared)
    values = np.asarray(swept.values, dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        column = int(np.flatnonzero(bad.any(axis=0))[0])
        raise ValueError(f"metric {metric.name!r} returned a non-finite value for "
                         f"{int(bad[:, column].sum())} {data.name} examples at N' = "
                         f"{grid[column]} ({adapter.name}): the output is not finite there (a "
                         "diverging solve?); use a smaller grid, or a bounded metric such as "
                         "accuracy")
    return swept


def _fit_gate(fit: float | bool | None, train: Curves | None, train_iters: int,
              metric: Metric) -> tuple[gates.Decision, float | None]:
    if fit is None:
        return (True, "no fit criterion given"), None
    if fit is True:
        return (True, "fit stated by the user"), None
    assert train is not None
    scores = train.per_model()[:, train.at(train_iters)]
    percent = metric.name in ("accuracy", "error")
    gate = gates.fit_gate({"model": scores.tolist()}, float(fit), f"training {metric.name}",
                          higher_is_better=metric.higher_is_better,
                          unit=" %" if percent else "", scale=100.0 if percent else 1.0)
    return gate, float(scores.mean())


def diagnose(model: Any, test: Any, *, train_iters: int | None = None, train: Any = None,
             metric: Any = "accuracy", higher_is_better: bool | None = None,
             grid: Sequence[int] | None = None, margin: float | None = None,
             fit: float | bool | None = None, level: float = gates.LEVEL, shared: bool = True,
             batch_size: int = 250, limit: int | None = None,
             progress: bool | None = None) -> Diagnosis:
    """Is ``model`` overfitting its inner iterations, and which test-time ``N'`` should it use?

    Args:
        model: a torch module holding a torchdeq DEQ, an :class:`i2o.models.MDEQClassifier`, an
            adapter (:class:`i2o.diagnose.PlainDEQ`, :func:`i2o.diagnose.from_book_deq`, …), or a
            list of them (several trained seeds: intervals over seeds).
        test: the test data: a loader of ``(x, y)`` batches, or a pair of tensors.
        train_iters: ``N``, the forward iterations used in training (a torchdeq model's
            ``f_max_iter`` when omitted).
        train: the training data (optional): its curve is shown and the fit criterion read on it.
        metric: ``"accuracy"``, ``"error"``, ``"loss"``, ``"mse"``, ``"psnr"`` or a callable
            ``(y_hat, y) -> Tensor(B,)`` with ``higher_is_better``.
        grid: the counts ``N'`` (must include ``N``); default :func:`default_grid`, 1 … 3N.
        margin: δ, the smallest difference of the metric that matters (default per named metric:
            :data:`DEFAULT_MARGINS`).
        fit: a threshold on the training metric at ``N`` (the gate of the verdicts), ``True``
            when the user states that the model fits, ``None`` for no gate.
        level: of every confidence interval (two one-sided tests at ``(1 − level) / 2``).
        shared: one solve of ``max N'`` iterations per batch, reading every iterate (the default);
            ``False``: one solve per ``N'``.
        batch_size: rows per batch when ``test``/``train`` are tensors; ``limit``: at most this
            many examples of each set.
        progress: a progress bar on the terminal (``None``: unless ``I2O_PROGRESS=0``).
    """
    inputs = check_inputs(model, test, train_iters, train, metric, higher_is_better, grid,
                          margin, fit, level, batch_size, limit)
    adapters, n, full_grid = inputs["adapters"], inputs["train_iters"], inputs["grid"]
    resolved, margin_, level_ = inputs["metric"], inputs["margin"], inputs["level"]
    start = time.perf_counter()
    test_swept = [_sweep(a, inputs["test"], full_grid, resolved, shared, progress)
                  for a in adapters]
    train_swept = ([_sweep(a, inputs["train"], full_grid, resolved, shared, progress)
                    for a in adapters] if inputs["train"] is not None else None)
    seconds = time.perf_counter() - start
    test_curves = stack([(s.values, s.residual) for s in test_swept], full_grid, resolved.sign)
    train_curves = (stack([(s.values, s.residual) for s in train_swept], full_grid,
                          resolved.sign) if train_swept else None)
    names = [a.name for a in adapters]
    solves = sum(s.solves for s in test_swept) + sum(s.solves for s in train_swept or [])
    return from_curves(test_curves, train_curves, name=names[0] if len(set(names)) == 1
                       else " + ".join(names), metric=resolved, train_iters=n, margin=margin_,
                       fit=inputs["fit"], level=level_, shared=shared, solves=solves,
                       seconds=seconds)


def from_curves(test: Curves, train: Curves | None, *, name: str, metric: Metric,
                train_iters: int, margin: float, fit: float | bool | None = None,
                level: float = gates.LEVEL, shared: bool = True, solves: int = 0,
                seconds: float = float("nan")) -> Diagnosis:
    """The verdicts and the recommendation of already swept curves (e.g. read back from a
    cache): what :func:`diagnose` does after its sweeps."""
    if fit is not None and not isinstance(fit, bool) and train is None:
        raise ValueError("a fit threshold is measured on the training data: give its curves")
    gate, train_at_n = _fit_gate(fit, train, train_iters, metric)
    verdicts, intervals = decide(test, train_iters, margin, gate, level)
    recommendation = recommend(test, train_iters, margin, level)
    fit_value = "stated" if fit is True else None if fit is None else float(fit)
    return Diagnosis(model=name, metric=metric.name, higher_is_better=metric.higher_is_better,
                     train_iters=train_iters, margin=float(margin), level=level, test=test,
                     train=train, verdicts=verdicts, recommendation=recommendation,
                     intervals=intervals, shared=shared, solves=solves, seconds=seconds,
                     fit=fit_value, train_at_n=train_at_n)
