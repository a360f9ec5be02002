"""What every chapter's ``runs.collect(params)`` returns: its results, their parameters, their cost.

A chapter's results type is a frozen dataclass deriving from :class:`ChapterResults`, which adds
the parameters that produced them (so ``claims.claims(results)``, ``claims.numbers(results)`` and
the figures need nothing else), the run's :class:`Cost` and its provenance
(:func:`i2o.base.lineage.provenance`). :func:`run_jobs` is how a chapter computes or reads its jobs
and measures what that cost; every chapter reports its cost through :meth:`Cost.text`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from i2o.base import lineage
from i2o.base.progress import Progress
from i2o.compute import pool, sweep
from i2o.compute.door import Task
from i2o.compute.job import Job
from i2o.compute.profiles import Params


@dataclasses.dataclass(frozen=True)
class Cost:
    """What collecting a chapter's results cost in this process."""

    seconds: float  # wall time, computing what was missing and reading the rest
    jobs: int  # jobs read or computed
    computed: int  # of which computed (missing from the results cache when asked)
    pooled: int = 0  # of those read, computed just before by the book's job pool (i2o.compute.pool)
    pool_workers: int = 0  # that pool's processes (0: no job of this chapter came from it)

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.seconds + other.seconds, self.jobs + other.jobs,
                    self.computed + other.computed, self.pooled + other.pooled,
                    max(self.pool_workers, other.pool_workers))

    def text(self) -> str:
        """One sentence, the same in every chapter."""
        read = self.jobs - self.computed - self.pooled
        by_pool = (f"{self.pooled} computed by the job pool of make book in {self.pool_workers} "
                   f"process{'es' if self.pool_workers != 1 else ''} before this notebook ran, "
                   if self.pooled else "")
        return (f"{self.jobs} job{'s' if self.jobs != 1 else ''}: {by_pool}{self.computed} "
                f"computed, {read} read from the results cache, in {_duration(self.seconds)}")


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChapterResults:
    """The base of every chapter's results (its fields come after the chapter's own)."""

    params: Params
    cost: Cost
    provenance: dict[str, Any] = dataclasses.field(default_factory=lineage.provenance,
                                                   repr=False, compare=False)


def run_jobs(figure: str, work: Sequence[Job | Task], workers: int = 1, label: str | None = None,
             progress: bool | None = None) -> tuple[list[dict[str, Any]], Cost]:
    """Every job's result, in order, and what it cost: the missing ones computed first in
    ``workers`` local processes (:func:`i2o.compute.sweep.run_missing`; with one worker each is
    computed here as it is read), then everything read from the results cache. ``work`` holds jobs,
    or tasks (:data:`i2o.compute.door.Task`: small jobs a worker computes in one process), whose
    results come in their place, one per job. Under ``make book`` the book's job pool computed the
    missing jobs before the notebook started; the cost counts those it did, and its size
    (:func:`i2o.compute.pool.pooled`)."""
    start = time.perf_counter()
    tasks = [item if isinstance(item, tuple) else (item,) for item in work]
    jobs = [job for task in tasks for job in task]
    missing = sweep.run_missing(figure, tasks, workers)
    found = [job.run(progress) for job in Progress.over(
        jobs, label or f"{figure} jobs", unit="job")]
    computed = {id(job) for job in missing}
    count, pool_workers = pool.pooled([job for job in jobs if id(job) not in computed])
    return found, Cost(time.perf_counter() - start, len(jobs), len(missing), count,
                       pool_workers)
