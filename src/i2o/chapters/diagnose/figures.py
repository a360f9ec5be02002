"""One figure per diagnosed model (:func:`i2o.diagnose.plot.figure`), read from
:func:`.runs.collect` (nothing here computes)."""

from __future__ import annotations

from matplotlib.figure import Figure

from i2o.chapters.diagnose import LABELS
from i2o.chapters.diagnose.runs import DiagnoseResults
from i2o.diagnose.plot import figure


def figure_model(results: DiagnoseResults, model: str) -> Figure:
    """Left: ``D(N, ΔN)`` of test accuracy with its 90 % interval over test images and ``±δ``;
    right: test and training accuracy against ``N'`` and the relative residual. Dashed: the
    training ``N``; dotted green: the recommended ``N'``."""
    d, params = results.diagnoses[model], results.params
    record = results.records[model]
    return figure(d, title=f"{LABELS[model]} ({int(record['parameters']):,} parameters), "
                           f"{params['train_size']} training / {params['test_size']} test "
                           f"CIFAR-10 images, N = {d.train_iters}: more iterations "
                           f"{d.verdicts.more}; recommended N' = {d.recommendation.n} — profile "
                           f"{params.profile!r}")
