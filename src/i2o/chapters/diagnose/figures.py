"""One figure per diagnosed model (:func:`i2o.diagnose.plot.figure`), read from
:func:`.runs.collect` (nothing here computes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from i2o.chapters.diagnose.runs import LABELS, DiagnoseResults
from i2o.diagnose.plot import figure


def figure_model(results: DiagnoseResults, params: Mapping[str, Any], model: str) -> Figure:
    """Left: ``D(N, ΔN)`` of test accuracy with its 90 % interval over test images and ``±δ``;
    right: test and training accuracy against ``N'`` and the relative residual. Dashed: the
    training ``N``; dotted green: the recommended ``N'``."""
    d = results.diagnoses[model]
    record = results.records[model]
    return figure(d, title=f"{LABELS[model]} ({int(record['parameters']):,} parameters), "
                           f"{params['train_size']} training / {params['test_size']} test "
                           f"CIFAR-10 images, N = {d.train_iters}: more iterations "
                           f"{d.verdicts.more}; recommended N' = {d.recommendation.n} — profile "
                           f"{getattr(params, 'profile', '')!r}")
