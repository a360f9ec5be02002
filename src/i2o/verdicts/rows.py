"""The book's one rule written as claim rows: every chapter that decides by
:func:`i2o.verdicts.rule.decide` (stability, deq_gaps, diagnose and ``python -m
i2o.diagnose``) records its verdicts with :func:`write`.

A chapter says which verdicts it shows and in what words (a :class:`Row` each: the claim, the
measured value); the writer takes each verdict from :class:`~i2o.verdicts.rule.Verdicts`
with its reason and typed facts, shows the margin δ the rule decided with, and records the row
by id (``prefix`` + key) in the chapter's ``section``. :func:`largest` finds the count a row's
value quotes: the interval of the largest (or smallest) mean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from i2o.verdicts.claims import Claims
from i2o.verdicts.decision import Decision
from i2o.verdicts.intervals import Interval
from i2o.verdicts.rule import Verdicts

#: the verdicts of :class:`~i2o.verdicts.rule.Verdicts` a row can show
VERDICTS = ("gate", "help", "hurt", "same", "no_gain", "fewer", "fewer_help", "more_help",
            "residual", "tenfold", "near")


@dataclass(frozen=True)
class Row:
    """One claim row of the rule's ``verdict`` (one of :data:`VERDICTS`), recorded as ``key``
    (after the writer's prefix) with the chapter's ``claim`` and measured ``value``; ``margin``:
    whether the row shows δ (the rows about iterations do, the gate and the residual check do
    not)."""

    verdict: str
    key: str
    claim: str
    value: str
    margin: bool = True

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"{self.verdict!r} is not a verdict of the rule: one of "
                             f"{', '.join(VERDICTS)}")

    def decision(self, verdicts: Verdicts) -> Decision:
        """The rule's verdict this row shows, with its reason and facts."""
        found: Decision = getattr(verdicts, self.verdict)
        return found


def write(table: Claims, verdicts: Verdicts, rows: Iterable[Row], prefix: str = "",
          section: str = "") -> None:
    """Record ``rows`` of ``verdicts`` in ``table``, in order, each as ``prefix + key`` in
    ``section``, with δ as the rule stated it (:attr:`Verdicts.margin`) where the row shows
    it."""
    for row in rows:
        table.decide(row.claim, row.decision(verdicts), row.value,
                     verdicts.margin.text if row.margin else "", id=prefix + row.key,
                     section=section)


def largest(intervals: Sequence[Interval], counts: Sequence[int]
            ) -> tuple[int, Interval] | None:
    """The count whose interval has the largest mean, with that interval (the first of equal
    means); ``None`` when there are none."""
    return _extreme(intervals, counts, np.argmax)


def smallest(intervals: Sequence[Interval], counts: Sequence[int]
             ) -> tuple[int, Interval] | None:
    """The count whose interval has the smallest mean, with that interval (the first of equal
    means); ``None`` when there are none."""
    return _extreme(intervals, counts, np.argmin)


def _extreme(intervals: Sequence[Interval], counts: Sequence[int],
             pick: Callable[[list[float]], Any]) -> tuple[int, Interval] | None:
    if not intervals:
        return None
    k = int(pick([ci.mean for ci in intervals]))
    return int(counts[k]), intervals[k]
