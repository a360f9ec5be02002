"""One pool of local processes for the missing jobs of every chapter (``make book``).

:func:`i2o.book.all_chapters.run_all` lists, before any notebook runs, the missing tasks of every
chapter it will execute (:meth:`i2o.compute.door.Chapter.tasks` reduced by
:func:`i2o.compute.sweep.missing_tasks`) and computes them here, all in one local pool
(:func:`i2o.compute.sweep.submit`: submitit's processes in a sliding window, one torch thread each
as the portable pins require), the longest first, so that the last task does not run alone while
other cores wait. The notebooks then read every job from the results cache.

What it shows (:class:`i2o.base.progress.TaskBoard`): before it starts, one line with its size, the
compute and the wall time it expects (:func:`expected_wall_seconds`); while it runs, the jobs
done of the total, the tasks running and the time left, the longest-first schedule of what
remains on the pool's processes from the tasks' expected costs (:func:`i2o.compute.sweep.eta`),
redrawn on one line in a terminal and written once per finished task in a log; at the end, the wall
time beside that forecast. The notebooks then print their line each (:func:`i2o.book.execute.run`).

Expected costs (:func:`estimate_tasks`). A job's expected wall time is its recorded one
(:func:`i2o.compute.cache_costs.recorded_costs`: the most recent entry of its name computed with its
parameters, under any key); without one, the cost published for its name and parameters
(:mod:`i2o.compute.job_costs`, measured where ``make book RECORD=1`` last ran it: what a fresh
clone's first build orders and forecasts by); without either, the median of those of its chapter's
jobs; without any, :data:`DEFAULT_JOB_SECONDS`. A task's is the sum of its jobs'.

Pool size (:func:`pool_size`). ``make book WORKERS=N`` (``python -m i2o.book book --workers N``)
is taken as given. Otherwise it is the cores this process may run on (``os.sched_getaffinity``),
capped so that the largest recorded peak memories of the pool's tasks, one per process, fit in
the memory available (:func:`available_memory_mb`: psutil's ``virtual_memory().available`` when
psutil is installed, else ``MemAvailable`` of ``/proc/meminfo``), and never more than the tasks.

Submitit's logs and the pool's ``sweep.log`` go to one folder, ``<results>/_submitit/book/``
(:data:`LOG_FOLDER`), whatever the chapter of a task. The notebooks are told what the pool
computed through ``I2O_POOL`` (:data:`POOL_ENV`), the path of a small JSON file (:func:`told`),
which :func:`i2o.compute.chapter.run_jobs` reads (:func:`pooled`) so that a chapter's cost line says
how many of its jobs the pool computed and in how many processes. A notebook run alone
(``make fig-*``) has no ``I2O_POOL`` and computes its missing jobs itself, as before.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from i2o.base import lineage, locations
from i2o.compute import cache_costs, cache_entries, door, job_costs, schedule, sweep
from i2o.compute.door import Task
from i2o.compute.job import Job

#: A job's expected wall time when neither it nor any job of its chapter has a recorded cost.
DEFAULT_JOB_SECONDS = 60.0
#: The log folder of the pool (``<results>/_submitit/book``) and its submitit job name.
LOG_FOLDER = "book"
#: The environment variable naming the pool's record for the notebooks (:func:`told`).
POOL_ENV = "I2O_POOL"
#: submitit's time limit of a pool task, in minutes: a week, so that no job a notebook would
#: compute in its own process without a limit (a paper-profile training) is killed in the pool.
TIMEOUT_MIN = 7 * 24 * 60


@dataclass(frozen=True)
class Estimate:
    """A job's expected cost: its recorded wall time, or the estimate that stands in for it."""

    seconds: float
    recorded: bool  # recorded by this results cache
    peak_rss_mb: float | None  # the recorded (or published) peak (None without either)
    published: bool = False  # not recorded here, published (i2o.compute.job_costs)


@dataclass(frozen=True)
class PoolTask:
    """A task of the pool with its expected cost (the sum of its jobs')."""

    figure: str
    task: Task
    seconds: float
    estimated: int  # jobs of the task without a recorded cost
    peak_rss_mb: float | None  # the largest recorded peak of its jobs (None: none recorded)
    published: int = 0  # of the estimated, those whose cost is a published one

    @property
    def name(self) -> str:
        return f"{self.figure}: {sweep.task_name(self.task)}"


@dataclass(frozen=True)
class PoolRun:
    """What the pool did: its size (0 when it ran nothing), the entries it computed
    (``<figure>/<entry folder>``) and the tasks that failed (their chapters' notebooks compute
    those jobs again and report the error)."""

    workers: int
    computed: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


def entry_name(job: Job) -> str:
    """``<figure>/<entry folder>`` of ``job`` under the current code's key."""
    entry = cache_entries.entry_dir(job.figure, job.name, job.key(), job.module)
    return f"{job.figure}/{entry.name}"


def estimate_jobs(jobs: Sequence[Job], chapter_jobs: Sequence[Job] | None = None
                  ) -> list[Estimate]:
    """Each of ``jobs``' expected cost, in order: its recorded wall time (the most recent entry
    of its name and parameters, under any key), else its published one
    (:mod:`i2o.compute.job_costs`), else the median of those of ``chapter_jobs`` (default ``jobs``),
    else
    :data:`DEFAULT_JOB_SECONDS`."""
    among = list(chapter_jobs if chapter_jobs is not None else jobs)
    wanted: dict[str, list[tuple[str, dict]]] = {}
    for job in [*among, *jobs]:
        wanted.setdefault(job.figure, []).append((job.name, job.key()))
    records = {figure: cache_costs.recorded_costs(figure, mine)
               for figure, mine in wanted.items()}
    elsewhere = job_costs.lookup([*among, *jobs])

    def record(job: Job) -> cache_costs.JobCost | None:
        return records[job.figure].get(cache_costs.cost_key(job.name, job.key()))

    known = [cost.seconds for job, published in zip(among, elsewhere[:len(among)], strict=True)
             if (cost := record(job) or published) is not None]
    fallback = statistics.median(known) if known else DEFAULT_JOB_SECONDS
    out = []
    for job, published in zip(jobs, elsewhere[len(among):], strict=True):
        if (cost := record(job)) is not None:
            out.append(Estimate(cost.seconds, True, cost.peak_rss_mb))
        elif published is not None:
            out.append(Estimate(published.seconds, False, published.peak_rss_mb, published=True))
        else:
            out.append(Estimate(fallback, False, None))
    return out


def estimate_tasks(figure: str, tasks: Sequence[Task], chapter_jobs: Sequence[Job]
                   ) -> list[PoolTask]:
    """``tasks`` of ``figure``'s chapter with their expected costs (:func:`estimate_jobs`, the
    median taken over ``chapter_jobs``, every job of the chapter)."""
    flat = [job for task in tasks for job in task]
    estimates = iter(estimate_jobs(flat, chapter_jobs))
    out = []
    for task in tasks:
        mine = [next(estimates) for _ in task]
        peaks = [e.peak_rss_mb for e in mine if e.peak_rss_mb is not None]
        out.append(PoolTask(figure, tuple(task), sum(e.seconds for e in mine),
                            sum(not e.recorded for e in mine), max(peaks) if peaks else None,
                            sum(e.published for e in mine)))
    return out


def longest_first(tasks: Sequence[PoolTask]) -> list[PoolTask]:
    """``tasks`` by expected cost, the longest first (ties keep their order)."""
    return sorted(tasks, key=lambda task: -task.seconds)


def affinity_cores() -> int:
    """The cores this process may run on (``os.sched_getaffinity``; ``os.cpu_count()`` where
    the platform has no affinity, as macOS)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def available_memory_mb() -> tuple[float | None, str]:
    """The memory available to new processes, in MB, and where it was read: psutil's
    ``virtual_memory().available`` when psutil is installed, else ``MemAvailable`` of
    ``/proc/meminfo``; ``(None, "unknown")`` when neither can be read."""
    try:
        import psutil
    except ImportError:
        pass
    else:
        return psutil.virtual_memory().available / 2**20, "psutil"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024, "/proc/meminfo MemAvailable"
    except (OSError, ValueError, IndexError):
        pass
    return None, "unknown"


def memory_cap(peaks_mb: Sequence[float], available_mb: float | None) -> int | None:
    """The most processes whose peaks fit in ``available_mb`` at once: the largest n such that
    the n largest of ``peaks_mb`` sum to at most ``available_mb`` (at least 1: one process runs
    whatever it needs). ``None`` (no cap) when no peak is recorded or the memory is unknown, or
    when every peak fits together."""
    if available_mb is None or not peaks_mb:
        return None
    largest = sorted(peaks_mb, reverse=True)
    total, fits = 0.0, 0
    for peak in largest:
        if total + peak > available_mb:
            break
        total, fits = total + peak, fits + 1
    return None if fits == len(largest) else max(fits, 1)


def pool_size(requested: int | None, tasks: int, cores: int, cap: int | None) -> int:
    """The pool's processes: ``requested`` as given, else ``cores`` capped by memory (``cap``,
    :func:`memory_cap`); never more than the ``tasks``, never fewer than one."""
    size = requested if requested is not None else min(cores, cap if cap is not None else cores)
    return max(1, min(size, tasks))


def run(chapters: Sequence[door.Chapter], requested: int | None = None,
        executor: str = "local") -> PoolRun:
    """Compute the missing tasks of every chapter of ``chapters`` in one pool (longest first,
    :func:`pool_size` processes; ``executor`` ``debug`` in tests). A chapter whose jobs cannot be
    listed, and a task that fails, are said in one line each and left to the chapter's notebook,
    which computes them itself and reports the error."""
    todo: list[PoolTask] = []
    for chapter in chapters:
        try:
            tasks = chapter.tasks()
            missing = sweep.missing_tasks(tasks)
        except Exception as error:  # the notebook meets it again and reports it
            print(f"[i2o] job pool: {chapter.figure}: its jobs could not be listed "
                  f"({type(error).__name__}: {error}); its notebook computes them", flush=True)
            continue
        todo += estimate_tasks(chapter.figure, missing, [job for task in tasks for job in task])
    if not todo:
        print("[i2o] job pool: every job of the chapters to execute is in the results cache",
              flush=True)
        return PoolRun(0)
    ordered = longest_first(todo)
    peaks = [task.peak_rss_mb for task in ordered if task.peak_rss_mb is not None]
    available, source = available_memory_mb()
    cap = memory_cap(peaks, available)
    cores = affinity_cores()
    workers = pool_size(requested, len(ordered), cores, cap)
    _announce(ordered, workers, requested, cores, cap, available, source)
    sweep.submit(LOG_FOLDER, [task.task for task in ordered], executor, max_parallel=workers,
                 time_min=TIMEOUT_MIN, keep_going=True,
                 expected_seconds=[task.seconds for task in ordered], title="job pool")
    computed: list[str] = []
    failed: list[str] = []
    for task in ordered:
        for job in task.task:
            (computed if job.is_cached() else failed).append(entry_name(job))
    return PoolRun(workers, tuple(computed), tuple(failed))


def _announce(ordered: Sequence[PoolTask], workers: int, requested: int | None, cores: int,
              cap: int | None, available: float | None, source: str) -> None:
    """One line before the pool starts: what it computes, in how many processes and why."""
    jobs = sum(len(task.task) for task in ordered)
    estimated = sum(task.estimated for task in ordered)
    published = sum(task.published for task in ordered)
    figures = ", ".join(dict.fromkeys(task.figure for task in ordered))
    if requested is not None:
        why = "as asked with WORKERS"
        if cap is not None and requested > cap:
            why += (f"; the recorded peaks of the largest tasks fit only {cap} at once in "
                    f"{available:.0f} MB available ({source})")
    else:
        why = f"{cores} cores this process may use"
        if cap is not None and cap < cores:
            why += (f", capped at {cap} so that the largest recorded peaks fit in "
                    f"{available:.0f} MB available ({source})")
    total = sum(task.seconds for task in ordered)
    wall = expected_wall_seconds(ordered, workers)
    elsewhere = f", {published} of them with a published one" if published else ""
    print(f"[i2o] job pool: {jobs} missing jobs of {figures} in {len(ordered)} tasks, "
          f"{workers} processes ({why}), the longest first; about {total / 60:.1f} min of "
          f"compute expected ({estimated} jobs without a recorded cost{elsewhere}), about "
          f"{wall / 60:.1f} min of wall time; log: {sweep.log_path(LOG_FOLDER)}", flush=True)


def expected_wall_seconds(tasks: Sequence[PoolTask], workers: int) -> float:
    """The pool's expected wall time: ``tasks`` scheduled longest first on ``workers``
    processes (:func:`i2o.compute.schedule.lpt`), each taking its expected cost plus its process's
    start (:data:`i2o.compute.schedule.TASK_START_SECONDS`)."""
    return schedule.lpt([schedule.task_seconds(task.seconds) for task in tasks],
                        workers).makespan


def record_path() -> Path:
    """Where :func:`told` writes the pool's record for the notebooks."""
    return locations.build_dir() / "pool.json"


@contextmanager
def told(done: PoolRun) -> Iterator[None]:
    """While the notebooks run: ``I2O_POOL`` names a file recording the pool's size and the
    entries it computed (nothing is set when it computed none), so that they say so."""
    if not done.computed:
        yield
        return
    path = record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"workers": done.workers, "computed": list(done.computed),
                                "date": lineage.now_iso()}, indent=1))
    saved = os.environ.get(POOL_ENV)
    os.environ[POOL_ENV] = str(path)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(POOL_ENV, None)
        else:
            os.environ[POOL_ENV] = saved


def pooled(jobs: Sequence[Job], env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """How many of ``jobs`` the book's pool computed before this notebook ran, and in how many
    processes: read from the file ``I2O_POOL`` names (:func:`told`); ``(0, 0)`` without one."""
    path = (os.environ if env is None else env).get(POOL_ENV)
    if not path:
        return 0, 0
    try:
        record = json.loads(Path(path).read_text())
        computed, workers = set(record["computed"]), int(record["workers"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, 0
    count = sum(entry_name(job) in computed for job in jobs)
    return count, workers if count else 0
