"""The deq-gaps chapter's computations: its sweep jobs (one per trained DEQ, for
:mod:`i2o.sweep`) and :func:`collect`, everything the notebook shows."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from i2o.chapters.deq_gaps import chapter, jobs
from i2o.chapters.deq_gaps.chapter import Jobs, all_jobs
from i2o.chapters.deq_gaps.curves import GapCurve
from i2o.chapters.deq_gaps.jobs import is_cached

__all__ = ["GapsResults", "all_jobs", "collect", "is_cached", "run_job"]


def run_job(name: str, job: Mapping[str, Any]) -> None:
    """Train and sweep one DEQ of the chapter into the results cache."""
    jobs.compute(name, dict(job))


@dataclass(frozen=True)
class GapsResults:
    """The trained DEQs' sweeps and the curves drawn from them (task → :class:`GapCurve`)."""

    jobs: Jobs
    results: dict[str, Any]  # :func:`.chapter.run`
    seconds: float  # to compute or read them
    test: dict[str, GapCurve]
    train: dict[str, GapCurve]
    test_loss: dict[str, GapCurve]
    train_loss: dict[str, GapCurve]
    overparam: list[dict[str, Any]]  # :func:`.chapter.overparam_rows`


def collect(params: Mapping[str, Any]) -> GapsResults:
    """Every DEQ of the chapter trained and swept (or read from the cache), and its curves."""
    start = time.perf_counter()
    built = chapter.build_jobs(params)
    results = chapter.run(built, params)
    seconds = time.perf_counter() - start
    return GapsResults(
        jobs=built, results=results, seconds=seconds,
        test=chapter.curves(results, built, "test"),
        train=chapter.curves(results, built, "train"),
        test_loss=chapter.curves(results, built, "test", loss=True),
        train_loss=chapter.curves(results, built, "train", loss=True),
        overparam=chapter.overparam_rows(results["overparam"], built))
