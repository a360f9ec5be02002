"""The job pool's display and its forecast: the schedule of what remains
(:mod:`i2o.compute.schedule`), the time left the display shows (:func:`i2o.compute.sweep.eta`,
:class:`i2o.base.progress.TaskBoard`), and the forecast of :mod:`i2o.compute.plan` against the wall
time of the pool measured with 1 and 2 local processes, on tasks that sleep a known time (their
process's start included)."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import resource
import time
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from i2o.base import progress
from i2o.compute import cache_costs, door, plan, pool, schedule, sweep
from i2o.compute.door import Task
from i2o.compute.job import Job

TESTS = Path(__file__).resolve().parent


# --- the schedule of what remains ---------------------------------------------------------------

def test_busy_cores_take_their_next_task_when_they_free():
    # core 0 busy until 5, core 1 free: 4 → core 1 (4), 3 → core 1 (7), 2 → core 0 (7)
    found = schedule.lpt([4.0, 3.0, 2.0], 2, busy=[5.0])
    assert found.cores == (1, 1, 0) and found.loads == (7.0, 7.0) and found.makespan == 7.0
    assert schedule.lpt([], 2, busy=[5.0, 1.0]).makespan == 5.0  # nothing left: the running end
    assert schedule.lpt([4.0, 3.0, 2.0], 2, []) == schedule.lpt([4.0, 3.0, 2.0], 2)
    with pytest.raises(ValueError, match="busy"):
        schedule.lpt([1.0], 1, busy=[1.0, 2.0])
    with pytest.raises(ValueError, match="busy"):
        schedule.lpt([1.0], 2, busy=[-1.0])


def test_the_time_left_is_the_schedule_of_what_remains_not_a_rate():
    # two processes; running: 10 s expected, 4 s elapsed (6 left) and 3 s expected, 5 elapsed
    # (overdue: 0 left); pending 5 and 2: 5 → the free one (5), 2 → the same (7): 7 s
    assert schedule.remaining_seconds([5.0, 2.0], [(10.0, 4.0), (3.0, 5.0)], 2) == 7.0
    assert schedule.remaining_seconds([], [(10.0, 4.0)], 2) == 6.0
    assert schedule.remaining_seconds([], [], 3) == 0.0
    with pytest.raises(ValueError, match="running"):
        schedule.remaining_seconds([], [(1.0, 0.0)] * 3, 2)

    left = sweep.eta([10.0, 5.0, 2.0], workers=2, start_seconds=1.0)  # each task 1 s more
    assert left([0, 1, 2], {}) == 11.0  # 11 | 6 + 3
    assert left([2], {0: 4.0, 1: 0.5}) == 8.5  # 7 left on one, 5.5 on the other, then 3 there
    assert left([], {0: 30.0}) == 0.0  # overdue
    assert sweep.eta([10.0], 1)([0], {}) == 10.0 + schedule.TASK_START_SECONDS


def test_the_forecast_adds_each_task_its_process_start():
    def task(seconds: float) -> pool.PoolTask:
        return pool.PoolTask("plan-x", (), seconds, 0, None)

    chapters = [plan.ChapterPlan("plan-x", (task(10.0), task(6.0), task(4.0)), 2.0)]
    assert plan.forecast(chapters, 2, start_seconds=0.0).jobs_seconds == 10.0
    assert plan.forecast(chapters, 2, start_seconds=1.5).jobs_seconds == 13.0  # 11.5 | 7.5 + 5.5
    assert plan.forecast(chapters, 1, start_seconds=1.5).seconds == 20.0 + 4.5 + 2.0
    default = plan.forecast(chapters, 1).jobs_seconds
    assert default == 20.0 + 3 * schedule.TASK_START_SECONDS
    assert pool.expected_wall_seconds(list(chapters[0].tasks), 1) == default


# --- the display --------------------------------------------------------------------------------

class _Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _board(stream: io.StringIO, clock: _Clock) -> progress.TaskBoard:
    labels = ["stability/ift-N18-seed0", "separation/saw-k2 +4", "affine/checks"]
    return progress.TaskBoard(labels, [1, 5, 1], "job pool",
                              sweep.eta([60.0, 20.0, 5.0], workers=2, start_seconds=0.0),
                              enabled=True, stream=stream, now=clock)


def test_off_a_terminal_the_board_writes_only_its_last_line():
    """A notebook's page or a log gets no line per task (the sweep's log has them); the board's
    status still carries the time left, which a terminal shows."""
    clock, log = _Clock(), io.StringIO()
    board = _board(log, clock)
    assert board.forecast == 60.0  # 60 | 20 + 5
    board.started(0)
    board.started(1)
    clock.now += 25
    board.tick()
    board.finished(1)
    assert board.status() == ("[i2o] job pool: 5/7 jobs done; running stability/ift-N18-seed0 "
                              "(0:25); 0:25 elapsed, ETA 35 s")
    board.started(2)
    clock.now += 10
    board.finished(2, ok=False)
    assert board.status().endswith("0:35 elapsed, ETA 25 s")
    clock.now += 30
    board.finished(0)
    assert log.getvalue() == ""
    board.close()
    assert log.getvalue().splitlines() == [
        "[i2o] job pool: 6/7 jobs done in 65 s (forecast at the start: 60 s); 1 task failed"]


def test_off_a_terminal_the_board_beats_every_few_minutes(monkeypatch):
    """A pool run through a pipe or in CI is seen to be alive: one status line per heartbeat
    (``I2O_HEARTBEAT`` seconds), not one per tick."""
    monkeypatch.setenv("I2O_HEARTBEAT", "60")
    clock, log = _Clock(), io.StringIO()
    board = _board(log, clock)
    board.started(0)
    clock.now += 30
    board.tick()
    assert log.getvalue() == ""
    clock.now += 31
    board.tick()
    board.tick()
    assert log.getvalue().splitlines() == [
        "[i2o] job pool: 0/7 jobs done; running stability/ift-N18-seed0 (1:01); 1:01 elapsed, "
        "ETA 20 s"]
    clock.now += 60
    board.tick()
    assert len(log.getvalue().splitlines()) == 2


def test_on_a_terminal_the_board_redraws_one_line(monkeypatch):
    monkeypatch.setenv("I2O_PROGRESS_INTERVAL", "1")
    monkeypatch.setattr(progress.shutil, "get_terminal_size", lambda fallback: os.terminal_size(
        (200, 24)))
    clock, terminal = _Clock(), _Terminal()
    board = _board(terminal, clock)
    board.started(0)
    board.started(1)
    clock.now += 0.5
    board.tick()  # within the interval: not redrawn
    assert terminal.getvalue().count("\r\x1b[K") == 2
    clock.now += 70  # both running tasks overdue: the pending one's 5 s remain
    board.tick()
    board.say("[i2o] book: task x failed")
    board.finished(0)
    board.finished(1)
    board.started(2)
    clock.now += 10
    board.tick()
    board.finished(2)
    board.close()
    text = terminal.getvalue()
    before, after = text.split("[i2o] book: task x failed\n")
    assert "\n" not in before  # one line, redrawn, until a line of its own is said
    frames = [frame for frame in text.split("\r\x1b[K") if frame]
    assert frames[2] == ("[i2o] job pool: 0/7 jobs done; running stability/ift-N18-seed0 "
                         "(1:10), separation/saw-k2 +4 (1:10); 1:10 elapsed, ETA 5 s")
    assert ("[i2o] job pool: 6/7 jobs done; running affine/checks (0:10); 1:20 elapsed, "
            "ETA overdue") in frames
    assert frames[-1] == "[i2o] job pool: 7/7 jobs done in 80 s (forecast at the start: 60 s)\n"
    assert after.count("\n") == 1  # then only the last line ends with a new line


def test_a_long_line_is_cut_to_the_terminal_width(monkeypatch):
    monkeypatch.setattr(progress.shutil, "get_terminal_size", lambda fallback: os.terminal_size(
        (40, 24)))
    terminal = _Terminal()
    board = _board(terminal, _Clock())
    board.started(0)
    last = terminal.getvalue().split("\r\x1b[K")[-1]
    assert len(last) == 39 and last.endswith("…")


def test_the_board_is_silent_when_progress_is_off(monkeypatch):
    monkeypatch.setenv("I2O_PROGRESS", "0")
    log = io.StringIO()
    board = progress.TaskBoard(["a"], [1], "job pool", stream=log)
    board.started(0)
    board.finished(0)
    board.close()
    assert log.getvalue() == "" and board.remaining() is None
    with pytest.raises(ValueError, match="labels"):
        progress.TaskBoard(["a"], [1, 2], "job pool", enabled=False)


class _Finished:
    """A submitted task that is done at once (the local executor's job, without a process)."""

    def __init__(self, task: Task, number: int) -> None:
        self.task, self.job_id = task, str(number)

    def done(self) -> bool:
        return True

    def result(self) -> str:
        if any(getattr(job, "fails", False) for job in self.task):
            raise RuntimeError("failed on purpose")
        return sweep.task_name(self.task)


class _Executor:
    def __init__(self) -> None:
        self.submitted = 0

    def update_parameters(self, **kwargs) -> None:
        pass

    def submit(self, fn, task, env) -> _Finished:
        self.submitted += 1
        return _Finished(task, self.submitted)


@dataclasses.dataclass(frozen=True)
class _Nap(Job):
    """A job of the fake chapter ``nap``: sleeps ``seconds`` (a known duration), or fails on
    purpose; kept local because the forecast needs durations the toy chapter's jobs do not have."""

    figure: ClassVar[str] = "nap"
    label: str
    seconds: float = 0.0
    fails: bool = False

    @property
    def name(self) -> str:
        return self.label

    def compute(self, progress=None):
        if self.fails:
            raise RuntimeError(f"{self.label} fails")
        time.sleep(self.seconds)
        return {"slept": float(self.seconds)}


def test_the_pool_shows_its_tasks_on_one_board(monkeypatch, capsys):
    """The sliding window tells the board each start and end; the pool gives it the tasks'
    expected costs (the time left a terminal shows); off a terminal only the last line."""
    import submitit

    monkeypatch.setattr(submitit, "AutoExecutor", lambda folder, cluster: _Executor())
    monkeypatch.setattr(sweep, "local_gpus", lambda: [])
    monkeypatch.setattr(schedule, "TASK_START_SECONDS", 0.0)
    a, b, c = _Nap("a"), _Nap("b"), _Nap("c", fails=True)
    tasks = [(a,), (b, _Nap("b2")), (c,)]
    runs = SimpleNamespace(jobs=lambda params: [a, b, _Nap("b2"), c], tasks=lambda params: tasks)
    assert pool.run([door.Chapter("nap", None, runs)], requested=1  # type: ignore[arg-type]
                    ).workers == 1
    captured = capsys.readouterr()
    # no costs recorded: 60 s a job; longest first (b, b2) 120 s, then a, c: 4 min on one process
    assert "about 4.0 min of wall time" in captured.out
    lines = [line for line in captured.err.splitlines() if line.startswith("[i2o] job pool")]
    assert "[i2o] book: task c failed (RuntimeError: failed on purpose" in captured.out
    assert len(lines) == 1 and "finished" not in captured.err  # not a terminal: the last line
    assert re.fullmatch(r"\[i2o\] job pool: 3/4 jobs done in \d s \(forecast at the start: "
                        r"4\.0 min\); 1 task failed", lines[0]), lines[0]


def test_a_sweep_without_costs_shows_no_eta_and_a_failure_still_ends_the_board(monkeypatch,
                                                                             capsys):
    import submitit

    monkeypatch.setattr(submitit, "AutoExecutor", lambda folder, cluster: _Executor())
    monkeypatch.setattr(sweep, "local_gpus", lambda: [])
    assert sweep.submit("nap", [(_Nap("a"),)], "local", max_parallel=2) == ["a"]
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["[i2o] nap sweep: 1/1 jobs done in 0 s"]
    with pytest.raises(RuntimeError, match="failed on purpose"):
        sweep.submit("nap", [(_Nap("b", fails=True),), (_Nap("c"),)], "local", max_parallel=1)
    assert capsys.readouterr().err.splitlines() == ["[i2o] nap sweep: 0/2 jobs done in 0 s"]


# --- the forecast against a measured run --------------------------------------------------------

#: The sleeping tasks of the check (seconds of their jobs): on 1 process 4 s plus 4 starts; on 2,
#: longest first, 1.5 + 0.5 | 1.0 + 1.0, 2 s plus 2 starts on each.
NAPS = ((1.5,), (1.0,), (0.5, 0.5), (0.5,))
#: How far the forecast may be from the measured wall time, as a fraction of the measurement:
#: :data:`i2o.compute.schedule.TASK_START_SECONDS` is one number for every task's start, which
#: varies with the modules a task imports and the files it reads.
TOLERANCE = 0.25
#: The largest share of the machine's cores other processes may use during a run for its wall
#: time to test the forecast: a task's start is CPU work, slower when others take the cores.
MOST_OTHERS = 0.15


@dataclasses.dataclass(frozen=True)
class Measured:
    """A pool run of :data:`NAPS`: its wall time, the forecast from the costs it recorded, the
    recorded wall and CPU times of its jobs, and the CPU time of its processes."""

    workers: int
    wall: float
    forecast: float
    jobs_wall: float
    jobs_cpu: float
    processes_cpu: float
    others: float | None  # the share of the cores other processes used (None: unknown)

    @property
    def start_cpu(self) -> float:
        """The CPU time per task beyond its jobs': its processes' start."""
        return (self.processes_cpu - self.jobs_cpu) / len(NAPS)

    def line(self) -> str:
        others = "unknown" if self.others is None else f"{self.others:.0%}"
        return (f"{self.workers} process(es): measured {self.wall:.1f} s, forecast "
                f"{self.forecast:.1f} s (jobs {self.jobs_wall:.1f} s, start "
                f"{schedule.TASK_START_SECONDS:.1f} s a task); a start took {self.start_cpu:.2f} "
                f"s of CPU; other processes used {others} of the cores")


def _nap_chapter(tag: str) -> door.Chapter:
    tasks = [tuple(_Nap(f"{tag}{i}-{k}", seconds) for k, seconds in enumerate(task))
             for i, task in enumerate(NAPS)]
    runs = SimpleNamespace(jobs=lambda params: [job for task in tasks for job in task],
                           tasks=lambda params: tasks)
    return door.Chapter("nap", None, runs)  # type: ignore[arg-type]


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def machine_cpu() -> tuple[float, float] | None:
    """The CPU time every process of the machine has used since it started (the busy fields of
    ``/proc/stat``'s ``cpu`` line, hypervisor steal included) and the time its cores have
    existed, in the same unit; ``None`` where there is no ``/proc/stat``."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and waiting for I/O
    total = sum(fields[:8])  # guest time is counted in user time already
    tick = os.sysconf("SC_CLK_TCK")
    return (total - idle) / tick, total / tick


def measure(workers: int) -> Measured:
    """Run the sleeping tasks in a pool of ``workers`` local processes into the results cache
    (empty); the forecast is :func:`i2o.compute.plan.forecast` of the costs the run recorded."""
    chapter = _nap_chapter(f"w{workers}-")
    machine, mine = machine_cpu(), time.process_time()
    cpu, start = _children_cpu(), time.perf_counter()
    done = pool.run([chapter], requested=workers, executor="local")
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    mine, after = time.process_time() - mine, machine_cpu()
    others = None
    if machine is not None and after is not None and after[1] > machine[1]:
        others = (after[0] - machine[0] - cpu - mine) / (after[1] - machine[1])
    assert not done.failed and done.workers == workers
    planned = plan.plan_chapter(chapter, "quick")  # a fake chapter: no parameters
    assert sum(task.estimated for task in planned.tasks) == 0  # every cost recorded
    costs = cache_costs.recorded_costs("nap", [(job.name, job.key()) for job in chapter.jobs()])
    return Measured(workers, wall, plan.forecast([planned], workers).jobs_seconds,
                    sum(cost.seconds for cost in costs.values()),
                    sum(cost.cpu_seconds for cost in costs.values()), cpu, others)


@pytest.mark.slow
def test_the_forecast_is_within_its_tolerance_of_the_measured_pool(monkeypatch, tmp_path, capsys):
    """With 1 and 2 local processes on sleeping tasks: :func:`i2o.compute.plan.forecast` from the
    recorded costs is within :data:`TOLERANCE` of the pool's measured wall time, when the pool
    had the cores to itself (other processes used at most :data:`MOST_OTHERS` of them, read
    from ``/proc/stat``; else, or where that cannot be read, the test is skipped with its
    measurements). About 30 s on two idle cores. A timed check, so it runs only when asked
    (``I2O_CHECK_FORECAST=1``): process start-up varies across machines (2.6 s against the 4 s
    the forecast assumes made it fail once in CI), and the suite asserts no timings."""
    if os.environ.get("I2O_CHECK_FORECAST") != "1":
        pytest.skip("a timed check of the forecast: run with I2O_CHECK_FORECAST=1")
    # the worker processes unpickle the sleeping jobs by importing this module
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("I2O_PROGRESS", "0")
    found = []
    for workers in (1, 2):
        monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / f"cache-{workers}"))
        found.append(measure(workers))
    report = "; ".join(run.line() for run in found)
    with capsys.disabled():
        print(f"\n[forecast check] {report}")
    if any(run.others is None or run.others > MOST_OTHERS for run in found):
        pytest.skip(f"the pool did not have the cores to itself: {report}")
    for run in found:
        assert abs(run.forecast - run.wall) <= TOLERANCE * run.wall, report
