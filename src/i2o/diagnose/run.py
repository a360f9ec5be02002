r"""The diagnosis: a trained implicit model evaluated at every test-time count ``N'`` of a grid,
its gap ``D(N, ΔN) = M(N + ΔN) − M(N)`` with intervals, the verdicts and the recommended ``N'``.

Everything a user can get wrong is checked **before any compute** (:func:`check_inputs`): a model
with no iteration control, a grid without the training ``N``, an empty loader, a metric that is
unknown, has no direction, or returns NaN on the first examples, a margin or level out of range, a
fit threshold without training data. Then each model is swept once over the test data (and the
training data when given) with one solve per batch (``shared=True``) or one per ``N'``
(:mod:`i2o.diagnose.measure`), and the verdicts are decided from the swept arrays
(:func:`from_curves`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from i2o.diagnose.measure import check_measurement, preflight_check, sweep_checked
from i2o.diagnose.metrics import Metric
from i2o.diagnose.result import Diagnosis
from i2o.verdicts import gates, intervals
from i2o.verdicts.curves import Curves, stack
from i2o.verdicts.recommendation import recommend
from i2o.verdicts.rule import decide

#: Default margin δ per named metric, in its units (1 accuracy point, 0.1 dB, …).
DEFAULT_MARGINS = {"accuracy": 0.01, "error": 0.01, "loss": 0.01, "mse": 1e-3, "psnr": 0.1}


def check_inputs(model: Any, test: Any, train_iters: int | None = None, train: Any = None,
                 metric: Any = "accuracy", higher_is_better: bool | None = None,
                 grid: Sequence[int] | None = None, margin: float | None = None,
                 fit: float | bool | None = None, level: float = intervals.LEVEL,
                 batch_size: int = 250, limit: int | None = None, preflight: bool = True
                 ) -> dict[str, Any]:
    """Every check of the module docstring; returns the resolved inputs of :func:`diagnose`
    (the measurement's, :func:`i2o.diagnose.measure.check_measurement`, and the verdicts')."""
    inputs = check_measurement(model, test, train_iters, train, metric, higher_is_better, grid,
                               batch_size, limit, preflight=False)
    resolved = inputs["metric"]
    if margin is None:
        if resolved.name not in DEFAULT_MARGINS:
            raise ValueError(f"state the margin δ (a difference of {resolved.name!r} that "
                             "matters): a custom metric has no default")
        margin = DEFAULT_MARGINS[resolved.name]
    if not (isinstance(margin, int | float) and np.isfinite(margin) and margin > 0):
        raise ValueError(f"the margin δ must be a finite number > 0; got {margin!r}")
    if not 0.5 <= level < 1:
        raise ValueError(f"level must be in [0.5, 1); got {level!r}")
    if fit is not None and not isinstance(fit, bool) and inputs["train"] is None:
        raise ValueError("a fit threshold is measured on the training data: give train=...")
    if fit is False:
        raise ValueError("fit=False: give a threshold on the training metric, True (stated), or "
                         "None (no fit gate)")
    if preflight:
        for adapter in inputs["adapters"]:
            preflight_check(adapter, inputs["test"], inputs["grid"], resolved)
    return {**inputs, "margin": float(margin), "fit": fit, "level": float(level)}


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
