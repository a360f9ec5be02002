"""The gates of a claim about one meta-trained model (Figures 3 and its ablation), and their
values, :class:`Thresholds`. In the order they are checked:

- *trained*: the model's outer training loss has settled — its fall between the last two windows
  of ``plateau_window`` × its outer steps is at most ``plateau_rtol`` of its level or of its
  whole fall (:func:`plateau`) — and it was meta-trained for at least ``min_outer_steps`` outer
  steps and has learned to use the support set — its test MSE at its training N is below
  ``baseline_mse``, the MSE of the best predictor that ignores the support set
  (:func:`i2o.chapters.meta.floor.task_agnostic_mse`, 3.006; predicting 0 scores 4.25);
- *diverged tasks*: tasks whose MSE became non-finite at some step count are counted; above
  ``max_diverged_fraction`` of the tasks the verdict is ``None`` (no silent exclusion that
  flatters a curve); below it they are excluded at every step count and reported
  (:func:`excluded_note`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from i2o.compute.profiles import Params
from i2o.verdicts import gates
from i2o.verdicts.decision import Decision


@dataclass(frozen=True)
class Thresholds:
    """What a model and its sweep must satisfy before a claim about it is decided: the values of
    its gates."""

    min_outer_steps: int = 0
    fig4_min_outer_steps: int = 0
    baseline_mse: float = 3.0057  # floor.task_agnostic_mse()
    max_diverged_fraction: float = 0.05
    plateau_window: float = 0.1
    plateau_rtol: float = float("inf")


def thresholds_of(p: Params, floor: dict[str, float]) -> Thresholds:
    """The gates' values of a parameter set ``p`` (the ``meta`` chapter.yaml)."""
    return Thresholds(min_outer_steps=p["min_outer_steps_to_decide"],
                      fig4_min_outer_steps=p["fig4_min_outer_steps_to_decide"],
                      baseline_mse=floor["task_agnostic"],
                      max_diverged_fraction=p["max_diverged_fraction"],
                      plateau_window=p["plateau_window"], plateau_rtol=p["plateau_rtol"])


def finite_tasks(curves: dict[str, Any]) -> np.ndarray:
    """Tasks whose query MSE stayed finite at every step count of the sweep."""
    return np.all(np.isfinite(curves["query"]), axis=1)


def model_name(curves: dict[str, Any]) -> str:
    norm = curves.get("normalization", "none")
    suffix = "" if norm == "none" else f", {norm}"
    method = {"maml": "MAML", "imaml": "iMAML"}[curves["method"]]
    return f"{method} (N = {curves['inner_steps']}{suffix})"


def plateau(losses: Any, window: float) -> float:
    """How far the outer training loss is from settled: its fall between the last two windows of
    ``window`` × the steps, as a fraction of the previous window's loss or of its whole fall from
    the first window to the last, whichever is smaller (0 when the last window did not fall).

    A model is mid-transition only when its loss still falls fast on both scales. The second
    scale serves a model that drives its loss towards 0 (a fixed training set it can
    interpolate): along a power law t^(−a) it loses the same fraction of its current value in
    every tenth of its training, so the first measure alone could never be met, while what it has
    left to fall becomes a vanishing share of what it has fallen."""
    values = np.asarray(losses, dtype=float)
    width = max(1, int(round(window * len(values))))
    if len(values) < 2 * width:
        return float("nan")
    first = values[:width].mean()
    previous, last = values[-2 * width:-width].mean(), values[-width:].mean()
    fall, whole = previous - last, first - last
    if fall <= 0:
        return 0.0
    of_whole = fall / whole if whole > 0 else float("inf")
    return float(min(fall / abs(previous), of_whole))


def plateau_gate(curves: dict[str, Any], limits: Thresholds) -> Decision:
    """Open when the model's outer loss has settled: its fall between the last two windows of
    ``plateau_window`` × its outer steps must be at most ``plateau_rtol`` of its level or of its
    whole fall (:func:`plateau`; a model still mid-transition would be judged on a passing
    state)."""
    if not np.isfinite(limits.plateau_rtol):
        return gates.condition(True, "")
    fall = plateau(curves.get("train_losses", ()), limits.plateau_window)
    return gates.condition(
        np.isfinite(fall) and fall <= limits.plateau_rtol,
        f"the outer training loss has not settled: over the last "
        f"{limits.plateau_window:.0%} of the {int(curves['outer_steps']):,} outer steps it "
        f"fell by {fall:.1%} of its level or of its whole fall (the smaller), more than "
        f"{limits.plateau_rtol:.0%}; more outer steps would decide it")


def model_gates(curves: dict[str, Any], limits: Thresholds) -> Iterator[Decision]:
    """The gates of a claim about one model, in order (each evaluated only when the ones before
    are open): trained long enough, settled, learned to use the support set, few diverged
    tasks."""
    steps = int(curves["outer_steps"])
    yield gates.condition(steps >= limits.min_outer_steps,
                          f"trained {steps} outer steps, fewer than the {limits.min_outer_steps} "
                          f"needed to decide")
    yield plateau_gate(curves, limits)
    finite = finite_tasks(curves)
    grid = list(curves["grid"])
    at_n = float(np.mean(curves["query"][finite, grid.index(curves["inner_steps"])]))
    yield gates.condition(not at_n >= limits.baseline_mse,  # a NaN level is the next gate's
                          f"the model has not learned to use the support set: test MSE "
                          f"{at_n:.3f} at N, not below {limits.baseline_mse:.3f} (the best "
                          f"predictor ignoring the support)")
    n_bad, n = int((~finite).sum()), len(finite)
    yield gates.condition(n_bad <= limits.max_diverged_fraction * n,
                          f"{n_bad} of {n} tasks diverged (non-finite MSE), more than "
                          f"{limits.max_diverged_fraction:.0%}")


def excluded_note(curves: dict[str, Any]) -> str:
    """The note a decided claim carries on the diverged tasks it excluded."""
    finite = finite_tasks(curves)
    n_bad, n = int((~finite).sum()), len(finite)
    return "" if n_bad == 0 else f"; {n_bad} of {n} tasks diverged and are excluded"
