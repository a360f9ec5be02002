"""Timed runs recorded: the load, the clock and each chapter's missing jobs at the start, turned
into timing records (:mod:`i2o.compute.timing_records`) of each executed notebook and of the
whole book at the end.

A timed run appends only when asked: ``python -m i2o.book book --record-timing`` (``make book
RECORD=1``, :func:`i2o.book.all_chapters.run_all`) or ``python -m i2o.book run FIG --record-timing``
(``make fig-FIG RECORD=1``), so tests, CI and casual builds never write to ``published/``. A
notebook run inside ``make book`` finds its jobs computed by the book's pool
(:mod:`i2o.compute.pool`): its record's ``seconds`` are the notebook's alone, ``pool_jobs`` says how
many of its jobs the pool computed, and the whole-book record carries the pool's time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from i2o.base import lineage
from i2o.compute import profiles
from i2o.compute.timing_records import WHOLE_BOOK, check_timing, record

if TYPE_CHECKING:
    from i2o.compute.door import Chapter

#: Load (1-minute average) that counts as idle: below half a core busy besides the run's own.
IDLE_LOAD = 0.5


def load_average() -> float | None:
    """The 1-minute load average (``os.getloadavg``), ``None`` where the OS has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def is_idle(load_start: float | None, load_end: float | None, own: int) -> bool | None:
    """Whether the machine was otherwise idle during a run that kept ``own`` processes busy:
    the 1-minute load average below :data:`IDLE_LOAD` when it started (before any of its
    processes) and below ``own`` + :data:`IDLE_LOAD` when it ended; ``None`` without both."""
    if load_start is None or load_end is None:
        return None
    return load_start < IDLE_LOAD and load_end < max(own, 1) + IDLE_LOAD


def timing(chapter: str, profile: str, *, seconds: float | None, cache: str,
           jobs_computed: int | None, replicate: int | None = None, pool_jobs: int | None = None,
           workers: int | None = None, load_start: float | None = None,
           load_end: float | None = None, own: int = 1, cpu_seconds: float | None = None,
           note: str = "", forecast_seconds: float | None = None) -> dict[str, Any]:
    """A timing record of this machine now: its CPU (:func:`i2o.base.lineage.machine_facts`), the
    commit (:func:`i2o.base.lineage.git_sha`), the date, and whether it was idle
    (:func:`is_idle` with ``own`` processes of the run)."""
    facts = lineage.machine_facts()
    return check_timing({
        "chapter": chapter, "profile": profile, "replicate": replicate,
        "seconds": None if seconds is None else round(seconds, 1),
        "cpu_seconds": cpu_seconds, "cache": cache, "jobs_computed": jobs_computed,
        "pool_jobs": pool_jobs, "workers": workers, "cpu": facts["cpu"],
        "vendor": facts["vendor"], "cores": facts["cores"], "commit": lineage.git_sha(),
        "load_start": load_start, "load_end": load_end,
        "idle": is_idle(load_start, load_end, own), "date": lineage.now_iso(), "note": note,
        "forecast_seconds": None if forecast_seconds is None else round(forecast_seconds, 1)})


@dataclass(frozen=True)
class JobCount:
    """A chapter's jobs: how many of them were missing from the results cache, of how many."""

    missing: int
    total: int

    @property
    def cache(self) -> str:
        """``empty`` when every job was missing (a chapter without jobs computes everything
        in its notebook), else ``warm``."""
        return "empty" if self.missing == self.total else "warm"


def count_jobs(chapter: Chapter) -> JobCount:
    """``chapter``'s (a :class:`i2o.compute.door.Chapter`) jobs missing from the results cache
    now."""
    jobs = [job for task in chapter.tasks() for job in task]
    return JobCount(sum(not job.is_cached() for job in jobs), len(jobs))


@dataclass
class TimedRun:
    """What a timed run knows from its start: the load before any of its processes, the clock,
    and each chapter's missing jobs (:func:`start`); :meth:`notebook` and :meth:`book` turn it
    into records at the end."""

    profile: str
    load_start: float | None
    started: float
    before: dict[str, JobCount]
    chapters: dict[str, Chapter]
    forecast_seconds: float | None = None  # the plan's wall time for the run, at its start

    def notebook(self, figure: str, seconds: float, load_end: float | None,
                 pool_jobs: int = 0, pool_workers: int = 0, note: str = "") -> dict[str, Any]:
        """The record of ``figure``'s executed notebook (``seconds``: its stamp's), with the
        jobs this run computed (missing at the start, cached now), ``pool_jobs`` of which by the
        book's pool of ``pool_workers`` processes; ``workers``: the pool's when it computed some,
        else the chapter's ``workers`` parameter."""
        chapter, before = self.chapters[figure], self.before[figure]
        computed = max(before.missing - count_jobs(chapter).missing, 0)
        own = chapter.params.as_dict().get("workers")
        workers = pool_workers if pool_jobs else own
        return timing(figure, self.profile, seconds=seconds, cache=before.cache,
                      jobs_computed=computed, replicate=_replicate(chapter),
                      pool_jobs=min(pool_jobs, computed), workers=workers,
                      load_start=self.load_start, load_end=load_end,
                      own=max(workers or 1, pool_workers, 1), note=note)

    def book(self, executed: Sequence[dict[str, Any]], pool_workers: int) -> dict[str, Any]:
        """The record of a whole ``make book`` from :func:`start` (after the data check, before
        the job pool) to now, the HTML build left out: ``empty`` when every chapter of the
        manifest started with none of its jobs cached and was executed; then with the forecast
        made at the start (:attr:`forecast_seconds`), which is for an empty cache."""
        done = {entry["chapter"] for entry in executed}
        whole = set(profiles.figures()) <= done and all(
            self.before[figure].cache == "empty" for figure in done)
        replicates = {entry["replicate"] for entry in executed}
        owns = [entry["workers"] or 1 for entry in executed]
        load_end = load_average()
        return timing(WHOLE_BOOK, self.profile, seconds=time.perf_counter() - self.started,
                      cache="empty" if whole else "warm",
                      jobs_computed=sum(entry["jobs_computed"] or 0 for entry in executed),
                      replicate=replicates.pop() if len(replicates) == 1 else None,
                      pool_jobs=sum(entry["pool_jobs"] or 0 for entry in executed),
                      workers=pool_workers or None, load_start=self.load_start,
                      load_end=load_end, own=max([pool_workers, *owns, 1]),
                      forecast_seconds=self.forecast_seconds if whole else None,
                      note="make book: the job pool and the notebooks, not the data check or "
                           f"the HTML build; chapters executed: {', '.join(sorted(done))}")


def _replicate(chapter: Chapter) -> int | None:
    value = chapter.params.as_dict().get("replicate")
    return value if isinstance(value, int) else None


def start(chapters: Sequence[Chapter], profile: str) -> TimedRun:
    """A timed run starting now: the load average first (before this run adds to it), then each
    chapter's missing jobs."""
    load = load_average()
    began = time.perf_counter()
    return TimedRun(profile, load, began, {c.figure: count_jobs(c) for c in chapters},
                    {c.figure: c for c in chapters})


def append_all(entries: Sequence[Mapping[str, Any]]) -> Path | None:
    """Append ``entries`` in order (:func:`record`) and say where, in one line."""
    target = None
    for entry in entries:
        target = record(entry)
    if target is None:
        print("[i2o] timings: no notebook was executed; nothing recorded", flush=True)
    else:
        print(f"[i2o] timings: {len(entries)} record(s) appended to {target}", flush=True)
    return target

