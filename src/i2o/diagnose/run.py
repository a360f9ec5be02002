r"""The diagnosis: a trained implicit model evaluated at every test-time count ``N'`` of a grid,
its gap ``D(N, ΔN) = M(N + ΔN) − M(N)`` with intervals, the verdicts and the recommended ``N'``.

Everything a user can get wrong is checked **before any compute** (:func:`check_inputs`): a model
with no iteration control, a grid without the training ``N``, ``N`` or a count beyond its cap
(:data:`MAX_TRAIN_ITERS`, :data:`MAX_COUNT`), an empty loader, a ``limit`` below 1, inputs or
targets that are not finite, a metric that is unknown, has no direction, or returns NaN on the
first examples, a margin, level or fit threshold out of range (an accuracy's are fractions: 0.9 for
90 %), a fit threshold without training data. The command reads its options by the same specs
(:func:`fit_spec`, :func:`margin_spec`, :data:`LEVEL_SPEC`, :mod:`i2o.compute.inputs`). Then each
model is swept once over the test data (and the training data when given) with one solve per batch
(``shared=True``) or one per ``N'`` (:mod:`i2o.diagnose.measure`), and the verdicts are decided
from the swept arrays (:func:`from_curves`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from i2o.compute import inputs as reader
from i2o.diagnose.data import Batches
from i2o.diagnose.measure import check_measurement, preflight_check, sweep_checked
from i2o.diagnose.metrics import Metric
from i2o.diagnose.result import Diagnosis
from i2o.verdicts import gates, intervals
from i2o.verdicts.curves import Curves, stack
from i2o.verdicts.recommendation import recommend
from i2o.verdicts.rule import decide

#: Default margin δ per named metric, in its units (1 accuracy point, 0.1 dB, …).
DEFAULT_MARGINS = {"accuracy": 0.01, "error": 0.01, "loss": 0.01, "mse": 1e-3, "psnr": 0.1}
#: The largest training ``N``: published DEQs train with tens of solver steps (the MDEQ 18,
#: torchdeq's default 40); ten times more still fits, and the default grid then runs 3N steps per
#: batch. A larger ``N`` is a typo (an extra zero) more often than a model.
MAX_TRAIN_ITERS = 1000
#: The largest test-time count ``N'`` of a grid (ten times :data:`MAX_TRAIN_ITERS`).
MAX_COUNT = 10 * MAX_TRAIN_ITERS
#: Metrics whose values are fractions (their margin and fit threshold too).
FRACTION_METRICS = ("accuracy", "error")
LEVEL_SPEC = reader.Spec("float", 0.5, 1.0, max_open=True, fraction=True,
                         help="confidence level of every interval")
LIMIT_SPEC = reader.Spec("int", 1, help="at most this many examples of each data set")
TRAIN_ITERS_SPEC = reader.Spec("int", 1, MAX_TRAIN_ITERS,
                               help="N, the forward iterations used in training")


def fit_spec(metric: str | None) -> reader.Spec:
    """What a fit threshold on the training ``metric`` at ``N`` may be: a fraction for accuracy
    (``(0, 1]``) and error (``[0, 1)``), else any finite number."""
    if metric == "accuracy":
        return reader.Spec("float", 0.0, 1.0, min_open=True, fraction=True,
                           help="a threshold on the training accuracy at N")
    if metric == "error":
        return reader.Spec("float", 0.0, 1.0, max_open=True, fraction=True,
                           help="a threshold on the training error at N")
    return reader.Spec("float", help=f"a threshold on the training {metric or 'metric'} at N")


def margin_spec(metric: str | None) -> reader.Spec:
    """What the margin δ may be: a number > 0, at most 1 for a fraction metric (0.01 = 1 point)."""
    if metric in FRACTION_METRICS:
        return reader.Spec("float", 0.0, 1.0, min_open=True,
                           help=f"in {metric} units: 0.01 for 1 point")
    return reader.Spec("float", 0.0, min_open=True, help="in the metric's units")


def _count_values(x: Any) -> tuple[int, int]:
    """(non-finite values, values) of the floating-point tensors in ``x`` (nested tuples too)."""
    if isinstance(x, torch.Tensor):
        if not (x.is_floating_point() or x.is_complex()):
            return 0, x.numel()
        return int((~torch.isfinite(x)).sum()), x.numel()
    if isinstance(x, list | tuple):
        counts = [_count_values(part) for part in x]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)
    return 0, 0


def check_finite_data(data: Batches) -> None:
    """Refuse data whose inputs or targets hold NaN or ±inf (a model cannot be diagnosed on
    them, and an accuracy read from NaN outputs is a number): every row of a pair of tensors,
    the first batch of a loader."""
    source = data.source
    whole = (isinstance(source, tuple) and len(source) == 2
             and all(isinstance(t, torch.Tensor) for t in source))
    x, y = (source if data.limit is None else (source[0][:data.limit], source[1][:data.limit])) \
        if whole else data.first()
    for part, what in ((x, "inputs"), (y, "targets")):
        bad, total = _count_values(part)
        if bad:
            where = "" if whole else " of its first batch"
            raise ValueError(f"the {data.name} data's {what}{where} hold {bad} non-finite "
                             f"value(s) (NaN or ±inf) of {total}: a model cannot be diagnosed "
                             "on them")


def check_inputs(model: Any, test: Any, train_iters: int | None = None, train: Any = None,
                 metric: Any = "accuracy", higher_is_better: bool | None = None,
                 grid: Sequence[int] | None = None, margin: float | None = None,
                 fit: float | bool | None = None, level: float = intervals.LEVEL,
                 batch_size: int = 250, limit: int | None = None, preflight: bool = True
                 ) -> dict[str, Any]:
    """Every check of the module docstring; returns the resolved inputs of :func:`diagnose`
    (the measurement's, :func:`i2o.diagnose.measure.check_measurement`, and the verdicts')."""
    if limit is not None:
        limit = reader.read(limit, LIMIT_SPEC, "limit")
    if train_iters is not None:
        if isinstance(train_iters, np.integer):
            train_iters = int(train_iters)
        reader.read(train_iters, TRAIN_ITERS_SPEC, "train_iters")
    if grid is not None:
        _check_grid_size(grid)
    inputs = check_measurement(model, test, train_iters, train, metric, higher_is_better, grid,
                               batch_size, limit, preflight=False)
    reader.read(inputs["train_iters"], TRAIN_ITERS_SPEC, "train_iters")
    _check_grid_size(inputs["grid"])
    resolved = inputs["metric"]
    if margin is None:
        if resolved.name not in DEFAULT_MARGINS:
            raise ValueError(f"state the margin δ (a difference of {resolved.name!r} that "
                             "matters): a custom metric has no default")
        margin = DEFAULT_MARGINS[resolved.name]
    margin = reader.read(margin, margin_spec(resolved.name), "the margin δ")
    level = reader.read(level, LEVEL_SPEC, "level")
    if fit is False:
        raise ValueError("fit=False: give a threshold on the training metric, True (stated), or "
                         "None (no fit gate)")
    if fit is not None and fit is not True:
        fit = reader.read(fit, fit_spec(resolved.name), "fit")
    if fit is not None and not isinstance(fit, bool) and inputs["train"] is None:
        raise ValueError("a fit threshold is measured on the training data: give train=...")
    for data in (inputs["test"], inputs["train"]):
        if data is not None:
            check_finite_data(data)
    if preflight:
        for adapter in inputs["adapters"]:
            preflight_check(adapter, inputs["test"], inputs["grid"], resolved)
    return {**inputs, "margin": float(margin), "fit": fit, "level": float(level)}


def _check_grid_size(grid: Sequence[int]) -> None:
    values = list(grid)
    if len(values) > reader.MAX_ITEMS:
        raise ValueError(f"the grid of N' has {len(values):,} counts; at most "
                         f"{reader.MAX_ITEMS:,}")
    too_large = [n for n in values if isinstance(n, int | np.integer) and n > MAX_COUNT]
    if too_large:
        raise ValueError(f"the grid of N' must be counts ≤ {MAX_COUNT:,} (10 × the largest N, "
                         f"{MAX_TRAIN_ITERS:,}); got {too_large[0]}")


def _fit_gate(fit: float | bool | None, train: Curves | None, train_iters: int,
              metric: Metric) -> tuple[gates.Decision, float | None]:
    if fit is None:
        return gates.Decision(True, "no fit criterion given"), None
    if fit is True:
        return gates.Decision(True, "fit stated by the user"), None
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
             fit: float | bool | None = None, level: float = intervals.LEVEL, shared: bool = True,
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
    measured = sweep_checked(inputs, shared, progress)
    sign = measured.metric.sign
    test_curves = stack([(s.values, s.residual) for s in measured.test], measured.grid, sign)
    train_curves = (stack([(s.values, s.residual) for s in measured.train], measured.grid, sign)
                    if measured.train else None)
    return from_curves(test_curves, train_curves, name=measured.name, metric=measured.metric,
                       train_iters=measured.train_iters, margin=inputs["margin"],
                       fit=inputs["fit"], level=inputs["level"], shared=shared,
                       solves=measured.solves, seconds=measured.seconds)


def from_curves(test: Curves, train: Curves | None, *, name: str, metric: Metric,
                train_iters: int, margin: float, fit: float | bool | None = None,
                level: float = intervals.LEVEL, shared: bool = True, solves: int = 0,
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
