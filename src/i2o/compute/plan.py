"""A forecast of ``make book``'s wall time on K cores, from the costs the results cache records.

``python -m i2o.results plan [FIG ...] --profile P --cores K [K ...]`` enters each chapter at the
profile (:func:`i2o.compute.door.enter`), lists its tasks (:meth:`i2o.compute.door.Chapter.tasks`,
every one, as from an empty cache) and gives each its expected wall time as the book's job pool does
(:func:`i2o.compute.pool.estimate_tasks`: each job's most recent recorded wall time for its name and
parameters; a job without a record is counted as estimated and given its chapter's median, else
:data:`i2o.compute.pool.DEFAULT_JOB_SECONDS`). On K cores the tasks are scheduled as the pool runs
them, the longest first, each on the core that frees first (:func:`i2o.compute.schedule.lpt`), each
task taking its jobs' times plus the start of its process
(:data:`i2o.compute.schedule.TASK_START_SECONDS`: the local pool starts a process per task); the
notebooks then run one after the other, as
:func:`i2o.book.all_chapters.run_all` runs them, each taking its own time: the executed notebook's
(:func:`notebook_seconds`), else, in a fresh clone, the latest time of that notebook alone
recorded in ``published/timings.json`` for its chapter and profile (:func:`published_seconds`).
Printed per K: the wall time (jobs + notebooks), the task that bounds it from below (the
longest: no number of cores finishes before it does) and how many jobs were estimated.

A list schedule is within a factor ``4/3 − 1/(3K)`` of the best possible on K cores (Graham's
bound for the longest processing time first rule); the forecast assumes each job takes on any
core the wall time it took when it was recorded, one thread per process.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from i2o.base import locations
from i2o.compute import cache_costs, door, pool, profiles, timing_records
from i2o.compute.job import Job
from i2o.compute.schedule import TASK_START_SECONDS, lpt, task_seconds

#: The cores of the forecast when ``--cores`` is not given.
DEFAULT_CORES = (2, 8, 16, 64)


@dataclass(frozen=True)
class ChapterPlan:
    """A chapter's tasks with their expected costs, and its notebook's own time (``None``:
    unknown, counted as 0) with, when it comes from ``published/timings.json``, the date of the
    record it was read from (``published_on``; ``""`` when that record has none)."""

    figure: str
    tasks: tuple[pool.PoolTask, ...]
    notebook_seconds: float | None
    published_on: str | None = None


@dataclass(frozen=True)
class Forecast:
    """The forecast on ``cores`` cores."""

    cores: int
    jobs_seconds: float  # the makespan of every chapter's tasks
    notebooks_seconds: float  # the notebooks' own times, one after the other
    longest: pool.PoolTask | None  # the task that bounds the makespan from below
    jobs: int
    estimated: int  # jobs without a recorded cost
    compute_seconds: float = 0.0  # the tasks' times summed (process starts included)
    longest_seconds: float = 0.0  # the longest task's time (its process's start included)

    @property
    def bound_seconds(self) -> float:
        """No schedule on :attr:`cores` cores is shorter: the longest task, or the compute
        spread evenly over the cores, whichever is longer, then the notebooks."""
        return max(self.longest_seconds, self.compute_seconds / self.cores) \
            + self.notebooks_seconds

    @property
    def seconds(self) -> float:
        return self.jobs_seconds + self.notebooks_seconds


def forecast(chapters: Sequence[ChapterPlan], cores: int,
             start_seconds: float | None = None) -> Forecast:
    """The wall time of ``chapters`` on ``cores`` cores: their tasks scheduled by :func:`lpt`,
    each taking its jobs' expected times plus its process's start (``start_seconds``, default
    :data:`i2o.compute.schedule.TASK_START_SECONDS`), then their notebooks' own times added (they
    run one after the other, after the jobs)."""
    start = TASK_START_SECONDS if start_seconds is None else start_seconds
    tasks = [task for chapter in chapters for task in chapter.tasks]
    times = [task_seconds(task.seconds, start) for task in tasks]
    schedule = lpt(times, cores)
    return Forecast(cores=cores, jobs_seconds=schedule.makespan, compute_seconds=sum(times),
                    longest_seconds=max(times, default=0.0),
                    notebooks_seconds=sum(c.notebook_seconds or 0.0 for c in chapters),
                    longest=max(tasks, key=lambda task: task.seconds, default=None),
                    jobs=sum(len(task.task) for task in tasks),
                    estimated=sum(task.estimated for task in tasks))


def notebook_path(figure: str) -> Path:
    """The executed notebook of ``figure`` (``_build/notebooks/<notebook>``)."""
    return locations.build_dir() / "notebooks" / Path(profiles.entry(figure)["notebook"]).name


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON stores them (tuples and lists alike)."""
    def canonical(value: Any) -> str:
        return json.dumps(value, sort_keys=True, default=repr)

    return canonical(a) == canonical(b)


def _when(text: str) -> float:
    """A UTC ISO 8601 time (``2026-01-02T03:04:05Z``) as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def notebook_seconds(chapter: door.Chapter, jobs: Sequence[Job]) -> float | None:
    """The chapter's notebook's own time: the seconds its executed notebook records (metadata
    ``i2o``; only when it ran with the chapter's profile and parameters) less the time its jobs
    computed during that run took there (the jobs whose entries were created between its start
    and end, scheduled by :func:`lpt` on the notebook's ``workers`` processes), at least 0.
    ``None`` when no such notebook is recorded."""
    try:
        stamp = json.loads(notebook_path(chapter.figure).read_text())["metadata"]["i2o"]
        if stamp.get("profile") != chapter.params.profile or \
                not _same(stamp.get("params"), chapter.params.as_dict()):
            return None
        seconds, end = float(stamp["seconds"]), _when(stamp["date"])
    except (OSError, ValueError, KeyError, TypeError, profiles.ParameterError):
        return None
    start = end - seconds
    recorded: dict[str, cache_costs.JobCost] = {}
    for job in jobs:
        recorded.update(cache_costs.recorded_costs(job.figure, [(job.name, job.key())]))
    during = []
    for cost in recorded.values():
        try:
            created = _when(cost.created)
        except ValueError:
            continue
        if start - 1 <= created <= end + 1:  # times are recorded to the second
            during.append(cost.seconds)
    workers = int(chapter.params.as_dict().get("workers", 1))
    return max(0.0, seconds - lpt(during, workers).makespan)


def published_seconds(figure: str, profile: str,
                      records: Sequence[Mapping[str, Any]] | None = None
                      ) -> tuple[float, str] | None:
    """The seconds of ``figure``'s notebook alone at ``profile`` in the latest record of
    ``records`` (default ``published/timings.json``,
    :func:`i2o.compute.timing_records.read_timings`) that measured it alone, with that record's
    date (``""`` when not recorded): a record whose jobs were all computed before the notebook
    ran, by the book's pool (``pool_jobs``) or earlier (``jobs_computed`` 0). ``None`` when there
    is none."""
    found = None
    for record in timing_records.read_timings() if records is None else records:
        computed = record.get("jobs_computed")
        alone = computed is not None and (record.get("pool_jobs") or 0) >= computed
        if (record.get("chapter"), record.get("profile")) == (figure, profile) and alone \
                and record.get("seconds") is not None:
            found = (float(record["seconds"]), record.get("date") or "")
    return found


def plan_chapter(chapter: door.Chapter, profile: str | None = None) -> ChapterPlan:
    """Every task of ``chapter`` with its expected cost, and its notebook's own time: the
    executed notebook's, else the published one at ``profile`` (default the chapter's)."""
    tasks = chapter.tasks()
    jobs = [job for task in tasks for job in task]
    estimated = tuple(pool.estimate_tasks(chapter.figure, tasks, jobs))
    seconds = notebook_seconds(chapter, jobs)
    if seconds is not None:
        return ChapterPlan(chapter.figure, estimated, seconds)
    published = published_seconds(chapter.figure, profile or chapter.params.profile)
    if published is None:
        return ChapterPlan(chapter.figure, estimated, None)
    return ChapterPlan(chapter.figure, estimated, published[0], published_on=published[1])


@dataclass(frozen=True)
class ChapterCost:
    """What one chapter costs from an empty cache at ``profile``, alone on ``cores`` cores: the
    :func:`forecast` of its :func:`plan_chapter` (``seconds``: its jobs scheduled as the pool
    runs them, then its notebook), the sum of its jobs' expected times (``job_seconds``: the
    compute, about its CPU time at one thread per job), and how many of its ``jobs`` had no cost
    recorded in the cache (``published``: of those, how many a published one) — ``unknown``,
    the others, were guessed (their chapter's median), so the forecast is not a measurement."""

    figure: str
    profile: str
    cores: int
    seconds: float
    job_seconds: float
    jobs: int
    published: int
    unknown: int

    def text(self) -> str:
        """``≈ 18.2 min on 2 cores (34.1 min of compute)``, saying where the costs came from."""
        if self.jobs and self.unknown == self.jobs:
            return f"not measured ({self.jobs} jobs, none run yet)"
        said = (f"≈ {duration(self.seconds)} on {self.cores} cores from an empty cache "
                f"({duration(self.job_seconds)} of compute)")
        if self.unknown:
            return said + f"; {self.unknown} of {self.jobs} jobs guessed"
        if self.published:
            return said + f"; {self.published} of {self.jobs} jobs from published costs"
        return said


def cost_of(plans: Sequence[ChapterPlan], profile: str, cores: int = 2) -> ChapterCost:
    """:class:`ChapterCost` of ``plans`` together (one chapter's, or the book's: ``figure``
    then names them all) at ``profile`` on ``cores`` cores."""
    result = forecast(plans, cores)
    tasks = [task for plan in plans for task in plan.tasks]
    published = sum(task.published for task in tasks)
    return ChapterCost(", ".join(plan.figure for plan in plans), profile, cores, result.seconds,
                       sum(task.seconds for task in tasks), result.jobs, published,
                       result.estimated - published)


def chapter_cost(figure: str, profile: str, cores: int = 2) -> ChapterCost:
    """:class:`ChapterCost` of ``figure`` at ``profile`` (entering it: a bad profile raises
    :class:`i2o.compute.profiles.ParameterError`)."""
    return cost_of([plan_chapter(door.enter(figure, profile), profile)], profile, cores)


def duration(seconds: float) -> str:
    """``0.4 s``, ``42 s``, ``12.5 min`` or ``3.2 h``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def describe(plans: Sequence[ChapterPlan], profile: str) -> str:
    """The line before the forecasts: what is planned and from what."""
    tasks = [task for chapter in plans for task in chapter.tasks]
    jobs = sum(len(task.task) for task in tasks)
    unknown = [chapter.figure for chapter in plans if chapter.notebook_seconds is None]
    published = [chapter for chapter in plans if chapter.published_on is not None]
    days = sorted({chapter.published_on[:10] for chapter in published if chapter.published_on})
    notebooks = sum(chapter.notebook_seconds or 0.0 for chapter in plans)
    when = f" ({', '.join(days)})" if days else ""
    sources = ([f"from the latest record of each notebook alone in published/timings.json{when} "
                f"for {', '.join(chapter.figure for chapter in published)}"] if published else []) \
        + ([f"unknown, counted 0, for {', '.join(unknown)}"] if unknown else [])
    return (f"plan at profile {profile} for {', '.join(c.figure for c in plans)}: {jobs} jobs "
            f"in {len(tasks)} tasks, {sum(t.estimated for t in tasks)} without a recorded cost "
            f"({sum(t.published for t in tasks)} with a published one, published/job-costs.json;"
            f" the others their chapter's median, else {pool.DEFAULT_JOB_SECONDS:.0f} s), "
            f"each task "
            f"{duration(TASK_START_SECONDS)} more for its process's start; then the "
            f"notebooks one after the other, {duration(notebooks)}"
            + (f" ({'; '.join(sources)})" if sources else ""))


def line(result: Forecast) -> str:
    """One forecast as a line: the schedule's wall time, the bound no schedule beats (the
    longest task or the compute over the cores, then the notebooks) and the compute."""
    longest = ("no job" if result.longest is None else
               f"{result.longest.name} {duration(result.longest.seconds)}")
    return (f"{result.cores:>4} core{'s' if result.cores != 1 else ' '}: "
            f"{duration(result.seconds):>9} = jobs {duration(result.jobs_seconds)} + notebooks "
            f"{duration(result.notebooks_seconds)}; at least {duration(result.bound_seconds)} "
            f"(the longest task, {longest}, or the compute, "
            f"{duration(result.compute_seconds)}, over {result.cores}; then the notebooks); "
            f"{result.estimated} of {result.jobs} jobs estimated")


def forecast_errors(records: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """One line per whole book recorded in ``published/timings.json`` (default) with the
    forecast made at its start: when, where, the forecast, the measured wall time and the
    forecast's error relative to the measurement."""
    found = []
    for record in timing_records.read_timings() if records is None else records:
        forecast, seconds = record.get("forecast_seconds"), record.get("seconds")
        if record.get("chapter") != timing_records.WHOLE_BOOK or not forecast or not seconds:
            continue
        error = 100 * (forecast - seconds) / seconds
        found.append(f"  {(record.get('date') or '')[:10]} {record.get('cpu')} "
                     f"({record.get('workers')} processes, {record.get('profile')}, commit "
                     f"{record.get('commit')}): forecast {duration(forecast)}, measured "
                     f"{duration(seconds)}, error {error:+.0f} %")
    return found


def count_argument(text: str) -> int:
    """A number of cores or worker processes on a command line (``--cores``, ``--workers``): an
    integer ≥ 1, else argparse's error naming the option."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"an integer ≥ 1; got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """``python -m i2o.results plan``: print the forecast for each number of cores."""
    parser = argparse.ArgumentParser(
        prog="python -m i2o.results plan",
        description="The wall time `make book` would take on K cores from an empty cache: every "
                    "chapter's jobs at their recorded costs (the results cache, I2O_RESULTS_DIR), "
                    "the longest first on the core that frees first, then the notebooks.")
    parser.add_argument("figures", nargs="*", metavar="FIG",
                        help=f"chapters (default all): {', '.join(profiles.figures())}")
    parser.add_argument("--profile", default="quick", choices=profiles.PROFILES)
    parser.add_argument("--cores", nargs="+", type=count_argument, default=list(DEFAULT_CORES),
                        metavar="K", help="numbers of cores (default 2 8 16 64)")
    args = parser.parse_args(argv)
    plans, failed = [], []
    try:
        for figure in args.figures or profiles.figures():
            try:
                plans.append(plan_chapter(door.enter(figure, args.profile), args.profile))
            except profiles.ParameterError:
                raise
            except Exception as error:  # a chapter whose code cannot be imported
                failed.append(figure)
                print(f"error: {figure}: {type(error).__name__}: {error}", file=sys.stderr)
    except profiles.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(describe(plans, args.profile))
    for cores in args.cores:
        print(line(forecast(plans, cores)))
    errors = forecast_errors()
    print("whole books recorded with their forecast (published/timings.json):"
          if errors else "no whole book in published/timings.json records its forecast yet "
          "(make book RECORD=1 records it)")
    for said in errors:
        print(said)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
