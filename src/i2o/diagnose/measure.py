r"""The measurement of a diagnosis, before any verdict: each model swept over ``N'`` on its data.

:func:`measure` checks what it needs before any compute (a model with no iteration control, a grid
without the training ``N``, an empty loader, a metric that is unknown, has no direction, or returns
NaN on the first examples), then sweeps each model once over the test data (and the training data
when given) with one solve per batch (``shared=True``) or one per ``N'``. It returns the
per-example arrays (:class:`Measurement`) and decides nothing: :func:`i2o.diagnose.diagnose`
decides from them, and a cached job stores them (its key then covers no verdict code).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from i2o.base.progress import Progress
from i2o.deq.sweep import iteration_grid
from i2o.diagnose.adapters import Adapter, BookMDEQ, Swept
from i2o.diagnose.data import Batches, batches
from i2o.diagnose.metrics import Metric, check_finite, resolve


@dataclass(frozen=True)
class Measurement:
    """Each model's sweep on the test data and, when given, on the training data."""

    test: list[Swept]
    train: list[Swept] | None
    grid: list[int]
    train_iters: int
    metric: Metric
    names: list[str]
    seconds: float  # wall time of the sweeps

    @property
    def solves(self) -> int:
        """Forward solves run, over every model and data set."""
        return sum(s.solves for s in self.test) + sum(s.solves for s in self.train or [])

    @property
    def name(self) -> str:
        """The model's name, or the names of several joined."""
        return self.names[0] if len(set(self.names)) == 1 else " + ".join(self.names)


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


def preflight_check(adapter: Adapter, data: Batches, grid: list[int], metric: Metric) -> None:
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


def check_measurement(model: Any, test: Any, train_iters: int | None = None, train: Any = None,
                      metric: Any = "accuracy", higher_is_better: bool | None = None,
                      grid: Sequence[int] | None = None, batch_size: int = 250,
                      limit: int | None = None, preflight: bool = True) -> dict[str, Any]:
    """The checks made before a sweep; returns the resolved inputs of :func:`measure`
    (``preflight``: also the metric on the first two test examples, refusing NaN)."""
    models = list(model) if isinstance(model, list | tuple) else [model]
    if not models:
        raise ValueError("no model given")
    adapters = [adapt(m) for m in models]
    n = _train_iters(adapters, train_iters)
    full_grid = check_grid(default_grid(n) if grid is None else grid, n)
    resolved = resolve(metric, higher_is_better)
    test_data = batches(test, "test", batch_size, limit)
    train_data = batches(train, "training", batch_size, limit) if train is not None else None
    if preflight:
        for adapter in adapters:
            preflight_check(adapter, test_data, full_grid, resolved)
    return {"adapters": adapters, "train_iters": n, "grid": full_grid, "metric": resolved,
            "test": test_data, "train": train_data}


def measure(model: Any, test: Any, *, train_iters: int | None = None, train: Any = None,
            metric: Any = "accuracy", higher_is_better: bool | None = None,
            grid: Sequence[int] | None = None, shared: bool = True, batch_size: int = 250,
            limit: int | None = None, progress: bool | None = None) -> Measurement:
    """Each model swept over the grid of ``N'`` on ``test`` (and ``train``): the arguments are
    those of :func:`i2o.diagnose.diagnose`, less what only its verdicts use."""
    inputs = check_measurement(model, test, train_iters, train, metric, higher_is_better, grid,
                               batch_size, limit)
    return sweep_checked(inputs, shared, progress)


def sweep_checked(inputs: dict[str, Any], shared: bool = True,
                  progress: bool | None = None) -> Measurement:
    """:func:`measure` on inputs already checked by :func:`check_measurement`."""
    adapters, full_grid, resolved = inputs["adapters"], inputs["grid"], inputs["metric"]
    start = time.perf_counter()
    test_swept = [_sweep(a, inputs["test"], full_grid, resolved, shared, progress)
                  for a in adapters]
    train_swept = ([_sweep(a, inputs["train"], full_grid, resolved, shared, progress)
                    for a in adapters] if inputs["train"] is not None else None)
    return Measurement(test=test_swept, train=train_swept, grid=full_grid,
                       train_iters=inputs["train_iters"], metric=resolved,
                       names=[a.name for a in adapters], seconds=time.perf_counter() - start)


def _sweep(adapter: Adapter, data: Batches, grid: list[int], metric: Metric, shared: bool,
           progress: bool | None) -> Swept:
    def counted() -> Iterable:
        yield from Progress.over(data, f"diagnose {adapter.name} ({data.name})",
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
