"""Is a training run healthy? A divergence flag stored with every trained model's result.

A run is flagged **diverged** when any of these holds (checked in this order):

- its loss became non-finite at some step (the training loops stop there);
- its final loss — the mean of the last ``window`` step losses — is above its initial loss, the
  mean of the first ``window`` (training made the objective worse; checked from ``2 · window``
  steps on);
- the model ends at chance level: its final training score is not better than chance by more than
  ``chance_margin`` (for a classifier with ``K`` balanced classes, accuracy ``≤ 1/K + margin``).

:func:`diverged` returns the reason as a sentence, or ``None`` for a healthy run; chapters store it
in the result (``result["diverged"]``), show a warning row, and make every claim that depends on
a flagged model ``null`` with that reason (:func:`i2o.verdicts.gates.health_gate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Steps averaged at the start and at the end of the loss curve.
WINDOW = 5
#: A classifier within this much of chance accuracy (absolute) is "at chance".
CHANCE_MARGIN = 0.02


def diverged(losses: Sequence[float], final_score: float | None = None,
             chance: float | None = None, window: int = WINDOW,
             chance_margin: float = CHANCE_MARGIN, nonfinite_step: int | None = None
             ) -> str | None:
    """The reason a run diverged, or ``None``.

    ``losses``: the per-step training losses; ``final_score`` and ``chance``: the trained model's
    accuracy (or another higher-is-better score) and the chance level of that score (omit both
    to skip the chance test); ``nonfinite_step``: the step at which the loop met a non-finite
    loss, when it stopped there.
    """
    if nonfinite_step is not None:
        return f"loss became non-finite at step {nonfinite_step}"
    values = np.asarray(list(losses), dtype=float)
    if values.size and not np.all(np.isfinite(values)):
        step = int(np.flatnonzero(~np.isfinite(values))[0])
        return f"loss became non-finite at step {step}"
    if values.size >= 2 * window:  # shorter runs: too few steps to compare start and end
        w = window
        start, end = float(values[:w].mean()), float(values[-w:].mean())
        if end > start:
            return f"loss ended above its start ({end:.3g} > {start:.3g})"
    if final_score is not None and chance is not None:
        if not math.isfinite(final_score):
            return f"final score is {final_score}"
        if final_score <= chance + chance_margin:
            return (f"model ends at chance level ({100 * final_score:.1f} % vs chance "
                    f"{100 * chance:.0f} %)")
    return None


def classifier_flag(history: dict[str, Sequence[float]], train_accuracy: float,
                    num_classes: int) -> str | None:
    """:func:`diverged` for a classifier's training history and its final training accuracy."""
    stopped = np.asarray(history.get("nonfinite_step", []), dtype=float).ravel()
    return diverged(history.get("loss", []), train_accuracy, 1.0 / num_classes,
                    nonfinite_step=int(stopped[0]) if stopped.size else None)
