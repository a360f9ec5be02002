r"""Is the language model's test curve a calibration effect? Temperature scaling at N, held out.

A model can get worse on test data with more iterations only because it grows over-confident: the
logits scale up, which costs NLL on characters it gets wrong while its ranking of characters
does not change. Temperature scaling separates the two (Guo et al., 2017): the test windows are
split in two halves (even and odd positions); on the even half the temperature
``T̂ = argmin_T NLL(logits / T)`` at ``N`` is chosen among the sweep's temperatures
(:data:`.language.TEMPERATURES`), and on the odd half the NLL at every ``N'`` is reported raw
(``T = 1``) and at ``T̂``. Beside them the top-1 character error at every ``N'`` (all windows),
which no temperature changes. This is a description printed beside the rows; it decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from i2o.chapters.deq_gaps.language import TEMPERATURES, temperature_metric


@dataclass(frozen=True)
class Calibration:
    """One model's temperature check (module docstring).

    Attributes:
        grid: the counts ``N'``.
        train_iters: ``N``.
        temperature: ``T̂``, fitted at N on the even windows.
        at_edge: ``T̂`` is the smallest or largest temperature scored (the optimum may lie beyond).
        raw: ``(K,)`` mean NLL per character at ``T = 1`` on the odd windows.
        calibrated: ``(K,)`` the same at ``T̂``.
        top1_error: ``(K,)`` fraction of test characters mispredicted (all windows).
    """

    grid: np.ndarray
    train_iters: int
    temperature: float
    at_edge: bool
    raw: np.ndarray
    calibrated: np.ndarray
    top1_error: np.ndarray

    def best(self, curve: np.ndarray) -> int:
        """The count of ``curve``'s lowest value."""
        return int(np.asarray(self.grid)[int(np.nanargmin(curve))])


def calibrate(sweep: Mapping[str, Any], train_iters: int) -> Calibration:
    """:class:`Calibration` of one model's test sweep (:func:`i2o.deq.sweep_iterations` of
    :func:`.language.language_probes`); needs at least 2 windows and the temperature metrics."""
    grid = np.asarray(sweep["iterations"])
    metrics = sweep["metrics"]
    missing = [temperature_metric(t) for t in TEMPERATURES if temperature_metric(t) not in metrics]
    if missing or "top1_error" not in metrics:
        raise KeyError(f"the sweep has no temperature or top-1 metrics (missing "
                       f"{missing or ['top1_error']}): it predates them")
    at_n = list(grid.tolist()).index(int(train_iters))
    windows = np.asarray(metrics["nll"]).shape[0]
    if windows < 2:
        raise ValueError(f"a held-out half needs at least 2 windows; got {windows}")
    fit, held = np.arange(0, windows, 2), np.arange(1, windows, 2)
    scored = np.asarray([np.asarray(metrics[temperature_metric(t)], dtype=float)[fit, at_n].mean()
                         for t in TEMPERATURES])
    k = int(np.argmin(scored))
    chosen = TEMPERATURES[k]
    return Calibration(
        grid=grid, train_iters=int(train_iters), temperature=float(chosen),
        at_edge=k in (0, len(TEMPERATURES) - 1),
        raw=np.asarray(metrics["nll"], dtype=float)[held].mean(axis=0),
        calibrated=np.asarray(metrics[temperature_metric(chosen)], dtype=float)[held].mean(axis=0),
        top1_error=np.asarray(metrics["top1_error"], dtype=float).mean(axis=0))


def calibration_report(sweeps: list[Mapping[str, Any]], seeds: list[int], train_iters: int
                       ) -> str:
    """Per seed: ``T̂``, the held-out NLL at N raw and at ``T̂``, the count where each curve is
    lowest, and the top-1 error at N and at its lowest count."""
    lines = [f"language model, test windows: temperature T̂ fitted at N = {train_iters} on the "
             "even windows; NLL (nats/char) on the odd windows; top-1 character error on all"]
    for seed, sweep in zip(seeds, sweeps, strict=True):
        try:
            found = calibrate(sweep, train_iters)
        except KeyError as missing:
            lines.append(f"  seed {seed}: not computed ({missing.args[0]})")
            continue
        at_n = list(found.grid.tolist()).index(train_iters)
        edge = " (at the edge of the temperatures scored)" if found.at_edge else ""
        top = found.best(found.top1_error)
        lines.append(
            f"  seed {seed}: T̂ = {found.temperature:g}{edge}; NLL at N raw "
            f"{found.raw[at_n]:.3f}, at T̂ {found.calibrated[at_n]:.3f}; lowest at N' = "
            f"{found.best(found.raw)} raw ({np.nanmin(found.raw):.3f}), N' = "
            f"{found.best(found.calibrated)} at T̂ ({np.nanmin(found.calibrated):.3f}); top-1 "
            f"error at N {100 * found.top1_error[at_n]:.1f} %, lowest at N' = {top} "
            f"({100 * np.nanmin(found.top1_error):.1f} %)")
    return "\n".join(lines)
