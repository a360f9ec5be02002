"""The signs of :mod:`.mechanism` at the onsets of the rises only: a description beside the rule,
which decides nothing.

:func:`.mechanism.name` counts a sign at the start of every rise interval, including intervals
that start after the loss has already risen (a cascade of doublings is several rise intervals).
A sign present only there may follow the rise rather than precede it. An *onset* is a rise
interval whose starting loss L(s_i) is at most :data:`.mechanism.RISE_FACTOR` times the model's
lowest finite loss at the checkpoints up to s_i, so the loss had not yet risen when it started.

This reading was added after the paper-profile probes were read (issue 49, session 27), where
the sign the rule named, (a′), was absent at most onsets. It is reported beside the rule's
verdict and never changes it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from i2o.chapters.meta import mechanism
from i2o.chapters.meta.mechanism import LETTERS, RISE_FACTOR, SIGNS, intervals, sign_present

__all__ = ["Onsets", "onsets", "describe", "report"]


@dataclass(frozen=True)
class Onsets:
    """At how many of the ``count`` onsets each sign of :data:`.mechanism.SIGNS` was present
    (``signs``), −ĝ descended (``descending``) and Adam's step descended (``adam_descending``)."""

    count: int
    signs: dict[str, int]
    descending: int
    adam_descending: int


def _lowest_so_far(run: Mapping[str, Any]) -> dict[int, float]:
    """Each checkpoint's step → the lowest finite loss at that checkpoint or before it."""
    steps = np.asarray(run["steps"], dtype=np.int64)
    loss = np.asarray(run["loss"], dtype=float)
    lowest, found = math.inf, {}
    for step, value in zip(steps, loss, strict=True):
        if math.isfinite(value):
            lowest = min(lowest, float(value))
        found[int(step)] = lowest
    return found


def onsets(runs: Iterable[Mapping[str, Any]]) -> Onsets:
    """The signs at the onsets of the rises of the probed models ``runs`` (results of
    :class:`.mechanism.MechanismRun`)."""
    starts = []
    for run in runs:
        lowest = _lowest_so_far(run)
        starts += [i.probe for i in intervals(run)
                   if i.rise and i.loss_start <= RISE_FACTOR * lowest[i.start]]
    return Onsets(len(starts),
                  {sign: sum(sign_present(sign, probe) for probe in starts) for sign in SIGNS},
                  sum(probe.get("descent_fd", math.nan) == 1.0 for probe in starts),
                  sum(probe.get("adam_descent_fd", math.nan) == 1.0 for probe in starts))


def describe(found: Onsets) -> str:
    """The onsets' counts as a sentence for the chapter page."""
    if not found.count:
        return "No rise started from a loss that had not already risen."
    signs = "; ".join(f"({LETTERS[sign]}) {SIGNS[sign]} at {k}"
                      for sign, k in found.signs.items())
    return (f"At the {found.count} onsets of the rises (rise intervals starting from a loss at "
            f"most {RISE_FACTOR:g} times the model's lowest so far; a description added after "
            f"the probes were read, which does not change the verdict): {signs}; −ĝ descended "
            f"at {found.descending} and Adam's step at {found.adam_descending}.")


def report(runs: Iterable[Mapping[str, Any]]) -> str:
    """The chapter's text on the probed models ``runs``: the rule's verdict
    (:func:`.mechanism.describe`), then the onsets' counts (:func:`describe`)."""
    runs = list(runs)
    return f"{mechanism.describe(mechanism.name(runs))}\n{describe(onsets(runs))}"
