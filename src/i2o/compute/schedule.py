"""List schedules of tasks on identical cores: the forecast of ``make book``
(:mod:`i2o.compute.plan`) and the ETA of its job pool (:mod:`i2o.compute.pool`, the display of
:func:`i2o.compute.sweep.submit`).

A task of the pool costs its jobs' wall times plus :data:`TASK_START_SECONDS`, the time its
process takes before its first job starts. :func:`lpt` places tasks longest first, each on the
core that frees first; :func:`remaining_seconds` is the makespan of what a running pool has left:
the tasks not started yet scheduled by :func:`lpt` on cores that are busy until their running
tasks end, each running task ending when its expected time has elapsed since it was submitted.
This module imports nothing of the package, so that the pool and the forecast share it.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

#: The wall time a task of the local pool takes besides its jobs' recorded times, on cores it has
#: to itself: submitit starts a controller process and the task's process, which unpickles the
#: task (importing its jobs' modules and torch), pins its threads and computes its jobs' cache
#: keys; the pool sees it end within 0.5 s. Measured as the CPU time of the pool's processes
#: beyond their jobs' (``resource.getrusage``, so that other work on the cores does not count):
#: 3.7 s per task for affine's smoke tasks and 4.2 s for two of separation's, on a 2-core AMD
#: EPYC, plus the pool's polling. Where other processes take the cores, the wall time grows
#: (10.5 and 11.3 s per task there at a load average of 4 to 5).
TASK_START_SECONDS = 4.0


@dataclass(frozen=True)
class Schedule:
    """A list schedule: each job's core (in the order the durations were given), each core's
    busy time, and the makespan (the busiest core's time)."""

    cores: tuple[int, ...]
    loads: tuple[float, ...]

    @property
    def makespan(self) -> float:
        return max(self.loads, default=0.0)


def lpt(durations: Sequence[float], cores: int, busy: Sequence[float] = ()) -> Schedule:
    """The longest-processing-time-first list schedule of ``durations`` on ``cores`` identical
    cores: the jobs in decreasing duration (ties in the given order), each started on the core
    that frees first (the lowest-numbered among equals). Core ``k`` is busy until ``busy[k]``
    before it takes a job (``busy`` lists at most ``cores`` times; the other cores are free at
    time 0); its load includes that time."""
    if cores < 1:
        raise ValueError(f"cores must be ≥ 1; got {cores}")
    if any(duration < 0 for duration in durations):
        raise ValueError("durations must be ≥ 0")
    if len(busy) > cores or any(time < 0 for time in busy):
        raise ValueError(f"busy lists at most {cores} times ≥ 0; got {list(busy)}")
    free = [(float(busy[core]) if core < len(busy) else 0.0, core) for core in range(cores)]
    heapq.heapify(free)
    assigned = [0] * len(durations)
    for index in sorted(range(len(durations)), key=lambda i: (-durations[i], i)):
        load, core = heapq.heappop(free)
        assigned[index] = core
        heapq.heappush(free, (load + durations[index], core))
    loads = [0.0] * cores
    for load, core in free:
        loads[core] = load
    return Schedule(tuple(assigned), tuple(loads))


def task_seconds(jobs_seconds: float, start_seconds: float | None = None) -> float:
    """A pool task's expected wall time: its jobs' expected times plus its process's start
    (``start_seconds``, default :data:`TASK_START_SECONDS`)."""
    return jobs_seconds + (TASK_START_SECONDS if start_seconds is None else start_seconds)


def remaining_seconds(pending: Sequence[float], running: Sequence[tuple[float, float]],
                      cores: int) -> float:
    """The expected wall time until a pool of ``cores`` processes has run everything: the
    makespan of :func:`lpt` of the ``pending`` tasks' expected times on cores busy with the
    ``running`` tasks, each given as (expected time, seconds since it was submitted) and busy
    for what remains of its expected time (0 once overdue). Times of tasks include their start
    (:func:`task_seconds`)."""
    left = [max(expected - elapsed, 0.0) for expected, elapsed in running]
    if len(left) > cores:
        raise ValueError(f"{len(left)} running tasks on {cores} cores")
    return lpt(pending, cores, busy=left).makespan
