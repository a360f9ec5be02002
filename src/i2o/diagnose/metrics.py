"""Per-example metrics of a model's output ``y_hat`` against the target ``y``.

A :class:`Metric` maps a batch ``(y_hat, y)`` to one value per example, shape ``(B,)``, and says
which direction is better. The diagnosis averages these values over the evaluation set, so every
named metric is a per-example quantity whose mean is the usual summary:

- ``accuracy``: ``1[argmax y_hat = y]`` (higher is better);
- ``error``: ``1[argmax y_hat ≠ y]`` (lower is better);
- ``loss``: the cross-entropy ``−log softmax(y_hat)_y`` (lower is better);
- ``mse``: ``mean_j (y_hat_j − y_j)²`` over the features of one example (lower is better);
- ``psnr``: ``10 log10(peak² / mse)`` per example, ``peak = 1`` (higher is better).

Any callable ``(y_hat, y) -> Tensor(B,)`` becomes a metric with :func:`custom`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

MetricFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Metric:
    """A per-example metric and its direction.

    Attributes:
        name: shown in tables and figures, e.g. ``"accuracy"``.
        fn: ``(y_hat, y) -> Tensor(B,)``.
        higher_is_better: the direction of improvement; the diagnosis turns a gap ``D`` into an
            improvement ``s · D`` with ``s = +1`` (higher is better) or ``−1``.
    """

    name: str
    fn: MetricFn
    higher_is_better: bool

    @property
    def sign(self) -> float:
        """``+1`` when higher is better, ``−1`` otherwise."""
        return 1.0 if self.higher_is_better else -1.0

    def __call__(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        values = self.fn(output, target)
        if not isinstance(values, torch.Tensor):
            raise TypeError(f"metric {self.name!r} must return a tensor; got "
                            f"{type(values).__name__}")
        batch = target.shape[0] if isinstance(target, torch.Tensor) and target.ndim else None
        if values.ndim != 1 or (batch is not None and values.shape[0] != batch):
            raise ValueError(f"metric {self.name!r} must return one value per example, shape "
                             f"({batch},); got shape {tuple(values.shape)}")
        return values.detach().double()


def _accuracy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (output.argmax(dim=1) == target).double()


def _error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (output.argmax(dim=1) != target).double()


def _loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.double(), target, reduction="none")


def _mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (output.double() - target.double()).flatten(1).square().mean(dim=1)


def _psnr(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 10.0 * torch.log10(1.0 / _mse(output, target).clamp_min(1e-20))


NAMED: dict[str, Metric] = {
    "accuracy": Metric("accuracy", _accuracy, True),
    "error": Metric("error", _error, False),
    "loss": Metric("loss", _loss, False),
    "mse": Metric("mse", _mse, False),
    "psnr": Metric("psnr", _psnr, True),
}


def custom(fn: MetricFn, higher_is_better: bool, name: str | None = None) -> Metric:
    """A metric from any callable ``(y_hat, y) -> Tensor(B,)``."""
    if not callable(fn):
        raise TypeError(f"a metric must be callable; got {type(fn).__name__}")
    return Metric(name or getattr(fn, "__name__", "metric"), fn, bool(higher_is_better))


def resolve(metric: str | Metric | MetricFn, higher_is_better: bool | None = None) -> Metric:
    """A :class:`Metric` from a name of :data:`NAMED`, a :class:`Metric`, or a callable (then
    ``higher_is_better`` is required: a callable does not say its direction)."""
    if isinstance(metric, Metric):
        return metric
    if isinstance(metric, str):
        if metric not in NAMED:
            raise ValueError(f"unknown metric {metric!r}; named metrics: {', '.join(NAMED)} "
                             "(or pass a callable (y_hat, y) -> Tensor(B,))")
        return NAMED[metric]
    if callable(metric):
        if higher_is_better is None:
            raise ValueError("a callable metric needs higher_is_better=True or False")
        return custom(metric, higher_is_better)
    raise TypeError(f"metric must be a name, a Metric or a callable; got {type(metric).__name__}")


def check_finite(values: torch.Tensor, metric: Metric, where: str) -> None:
    """Refuse NaN/inf metric values with a message naming the metric and where they appeared."""
    bad = ~torch.isfinite(values)
    if bool(bad.any()):
        first = float(values[bad][0])
        raise ValueError(f"metric {metric.name!r} returned a non-finite value ({first}) for "
                         f"{int(bad.sum())} of {values.numel()} examples {where}"
                         + (": a NaN cannot be averaged into a curve" if math.isnan(first) else ""))
