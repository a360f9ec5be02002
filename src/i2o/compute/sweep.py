"""Run a figure's training jobs with submitit, into the results cache.

A chapter's jobs are the values ``<package>.runs.jobs(params)`` returns
(:class:`i2o.compute.job.Job`): ``affine`` one per figure or check; ``stability`` one per (seed,
arm, training N); ``deq_gaps`` one per trained DEQ (the three tasks, the two inverse-problem
variants, the overparametrization subsets); ``meta`` one per meta-learned and evaluated model
(Figures 3 and 4, the ablation); ``separation`` one per trained stack of small networks or small
model; ``diagnose`` one per model checked. A chapter is entered through :mod:`i2o.compute.door`,
which validates every parameter before a job is listed, so a bad value is refused before anything is
submitted. What is submitted is a task (:meth:`i2o.compute.door.Chapter.tasks`): one job, or several
small ones computed in order in one process (separation's models of a second each). Each job is
pickled as it is and computes one result with :meth:`i2o.compute.job.Job.run`, under the key the
figure's notebook uses, resuming from its checkpoint directory when a previous attempt was
interrupted; jobs whose result is already cached are not submitted. The notebook, run afterwards
with the same profile and parameters, then only reads and plots.

Executors: ``local`` (subprocesses on this machine, ``--max-parallel`` at a time), ``slurm`` (one
array job; ``--partition``, ``--time`` in minutes, ``--gpus`` and ``--cpus`` per job,
``--max-parallel`` = array parallelism, ``--slurm-arg KEY=VALUE`` for anything else), ``debug``
(submitit's in-process executor, for tests). Logs go to ``<results>/_submitit/<figure>/``:
submitit's, per job, and ``sweep.log``, a line per job submitted and finished (never a page).

GPUs. submitit's local executor sets ``CUDA_VISIBLE_DEVICES`` of each job to its ``gpus_per_node``
first visible GPUs — the empty string when that is 0, which would hide the GPUs from the job. So a
local job is given **one GPU of those this process sees** (:func:`local_gpus`), one job per GPU at
a time (``--max-parallel`` is capped by the GPU count), and the CPU only when there is none.
SLURM jobs are :class:`ResumableJob` (``submitit.helpers.Checkpointable``): at a timeout or
preemption SLURM requeues them and they resume from their training checkpoints.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import submitit
import submitit.helpers

from i2o.base import lineage, runtime
from i2o.base.progress import Eta, Progress, TaskBoard
from i2o.compute import cache_entries, door, profiles, schedule, worker_watch
from i2o.compute.door import Task
from i2o.compute.job import Job

EXECUTORS = ("local", "slurm", "debug")


def run_one(task: Task, env: dict[str, str]) -> str:
    """What a submitted task runs: set the caller's results/data paths and threads, compute its
    jobs in order; returns the task's name (:func:`task_name`).

    The environment is restored afterwards, so a task run in the caller's process (the debug
    executor) leaves no numerics pins behind for the processes the caller spawns later. A local
    task is given its sweep's identity (:mod:`i2o.compute.worker_watch`) and ends when the sweep
    is gone.
    """
    if worker_watch.ENV in env:  # a local task ends with the sweep that started it
        worker_watch.watch(env[worker_watch.ENV])
    with runtime.environment(env):
        runtime.jax_single_thread()
        runtime.set_threads()
        for job in task:
            job.run()
    return task_name(task)


def task_name(task: Task) -> str:
    """A task's name in the logs: its job's, or the first's with the count of the others."""
    return task[0].name if len(task) == 1 else f"{task[0].name} and {len(task) - 1} more"


class ResumableJob(submitit.helpers.Checkpointable):
    """:func:`run_one` as a requeueable submitit job: on timeout or preemption submitit calls
    :meth:`checkpoint`, which resubmits the same call; the task then skips its cached jobs and
    resumes from the training checkpoints it wrote under the results cache (nothing else needs
    saving)."""

    def __call__(self, task: Task, env: dict[str, str]) -> str:
        return run_one(task, env)


def local_gpus(device_count: int | None = None, visible: str | None = None) -> list[int]:
    """The GPUs this process sees, as indices submitit's local executor can hand to a job.

    ``device_count`` defaults to ``torch.cuda.device_count()``; ``visible`` to this process's
    ``CUDA_VISIBLE_DEVICES``. When that variable lists integer ids, those ids are returned (a job
    given id ``k`` sees the same physical GPU as this process); otherwise ``0 … count − 1``.
    """
    if device_count is None:
        import torch  # lazy: the sweep's command line starts without loading torch

        device_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device_count <= 0:
        return []
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [item.strip() for item in visible.split(",") if item.strip()]
        if all(item.isdigit() for item in ids) and len(ids) >= device_count:
            return [int(item) for item in ids[:device_count]]
    return list(range(device_count))


def _environment() -> dict[str, str]:
    """What a job needs of this process's environment: paths, and threads and numerics pins
    (:func:`i2o.base.runtime.numerics_env`; :func:`submit` also puts them into this process's
    environment, which submitit's workers start with, so they are in place before torch loads)."""
    keep = ("I2O_RESULTS_DIR", "I2O_DATA_DIR", "I2O_CACHE_DIR", "I2O_ROOT")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.setdefault("I2O_RESULTS_DIR", str(cache_entries.results_dir().resolve()))
    return {**env, **runtime.numerics_env()}


def sweep(figure: str, profile: str = "quick", executor: str = "local",
          overrides: Mapping[str, Any] | None = None, partition: str | None = None,
          time_min: int = 240, gpus: int = 0, cpus: int = 1, max_parallel: int = 2,
          slurm_args: Mapping[str, str] | None = None, dry_run: bool = False) -> list[str]:
    """Submit every job of ``figure`` not yet cached; wait for them; return the tasks run.

    Raises :class:`i2o.compute.profiles.ParameterError` (bad figure parameter,
    :mod:`i2o.compute.door`) or ``ValueError`` (bad executor option) before anything is listed or
    submitted.
    """
    if figure not in profiles.load_manifest():
        raise ValueError(f"figure {figure!r} is not in the manifest; allowed: "
                         f"{', '.join(profiles.figures())}")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    for label, value, low in (("time", time_min, 1), ("gpus", gpus, 0), ("cpus", cpus, 1),
                              ("max-parallel", max_parallel, 1)):
        if value < low:
            raise ValueError(f"--{label} must be ≥ {low}; got {value}")
    if executor == "slurm" and not partition:
        raise ValueError("--executor slurm needs --partition (the SLURM partition to submit to)")
    chapter = door.enter(figure, profile, **dict(overrides or {}))
    with runtime.environment({"I2O_THREADS": str(cpus)}):  # the keys the jobs will store under
        tasks = missing_tasks(chapter.tasks())
    listing = chapter.jobs()
    todo = sum(len(task) for task in tasks)
    print(f"{figure} ({profile}): {len(listing)} jobs, {len(listing) - todo} cached, "
          f"{todo} to run in {len(tasks)} task(s) with the {executor} executor "
          f"(log: {log_path(figure)})", flush=True)
    if dry_run or not tasks:
        for task in tasks:
            for job in task:
                print(f"  would run {job.name}")
        return []
    return submit(figure, tasks, executor, max_parallel, partition, time_min, gpus, cpus,
                  slurm_args)


def missing_tasks(tasks: Sequence[Task]) -> list[Task]:
    """The tasks with a job missing from the results cache, each reduced to its missing jobs."""
    found = [tuple(job for job in task if not job.is_cached()) for task in tasks]
    return [task for task in found if task]


def run_missing(figure: str, tasks: Sequence[Task], workers: int) -> list[Job]:
    """Before a notebook reads ``figure``'s jobs (given as tasks): say how many are cached, and
    compute the missing ones in ``workers`` local processes (with one worker the caller computes
    each one as it reads it, in its own process). Returns the jobs that were missing."""
    missing = missing_tasks(tasks)
    count = sum(len(task) for task in tasks)
    jobs = [job for task in missing for job in task]
    print(f"{figure}: {count} jobs, {count - len(jobs)} in the results cache, "
          f"{len(jobs)} to compute", flush=True)
    if missing and workers > 1:
        submit(figure, missing, "local", max_parallel=workers)
    return jobs


def submit(figure: str, todo: Sequence[Task], executor: str = "local",
           max_parallel: int = 2, partition: str | None = None, time_min: int = 240,
           gpus: int = 0, cpus: int = 1, slurm_args: Mapping[str, str] | None = None,
           keep_going: bool = False, expected_seconds: Sequence[float] | None = None,
           title: str | None = None) -> list[str]:
    """Run the given tasks of ``figure`` with submitit; return the names of those that finished
    (:func:`task_name`). ``figure`` names the log folder (:func:`log_path`): a chapter's, or
    ``book`` for the book's job pool (:mod:`i2o.compute.pool`), whose tasks come from every chapter.

    A failed task raises its error, unless ``keep_going``: then it is logged and printed (one
    line) and the other tasks go on. Used by :func:`sweep`, by notebooks that compute their
    missing jobs in parallel (:func:`i2o.compute.chapter.run_jobs`) and by the book's job pool.

    Local tasks are shown by one :class:`i2o.base.progress.TaskBoard` (``title``, default
    ``<figure> sweep``); with ``expected_seconds``, each task's jobs' expected wall time in the
    order of ``todo``, it shows the time left (:func:`eta`).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    folder = cache_entries.results_dir() / "_submitit" / figure
    ex = submitit.AutoExecutor(folder=folder, cluster=executor)
    common: dict[str, Any] = {"timeout_min": time_min, "cpus_per_task": cpus,
                              "name": f"i2o-{figure}"}
    if gpus:
        common["gpus_per_node"] = gpus
    if executor == "slurm":
        common.update(slurm_partition=partition, slurm_array_parallelism=max_parallel)
        if slurm_args:
            common["slurm_additional_parameters"] = dict(slurm_args)
    ex.update_parameters(**common)
    env = {**_environment(), "I2O_THREADS": str(cpus)}  # --cpus wins over the Makefile's 1
    if executor == "local":  # SLURM's jobs outlive the submitting shell by design
        env[worker_watch.ENV] = worker_watch.identity()
    with runtime.environment(env):  # submitit's workers (subprocesses, sbatch) start with it
        done = _submit(ex, figure, todo, executor, max_parallel, env, keep_going,
                       expected_seconds, title)
    return [name for name in done if name is not None]


def _submit(ex, figure: str, todo: Sequence[Task], executor: str,
            max_parallel: int, env: dict[str, str], keep_going: bool = False,
            expected_seconds: Sequence[float] | None = None, title: str | None = None
            ) -> list[str | None]:
    """Submit ``todo`` to the configured executor ``ex`` and wait for every task; a failed
    task's name is ``None`` (with ``keep_going``; else its error is raised)."""
    if executor == "slurm":  # one array job; SLURM enforces the parallelism
        jobs = ex.map_array(ResumableJob(), list(todo), [env] * len(todo))
        for submitted, task in zip(jobs, todo, strict=True):
            _log(figure, f"submitted {task_name(task)}: job {submitted.job_id}")
        return [_finish(job, figure, task, keep_going) for job, task in
                zip(Progress.over(jobs, f"{figure} sweep", unit="task"), todo, strict=True)]
    if executor == "debug":  # submitit runs a debug job in this process when asked its result
        return [_finish(ex.submit(run_one, task, env), figure, task, keep_going)
                for task in Progress.over(todo, f"{figure} sweep", unit="task")]
    gpu_ids = local_gpus()
    if gpu_ids:
        max_parallel = min(max_parallel, len(gpu_ids))
        _log(figure, f"local jobs on GPU(s) {gpu_ids}, one job per GPU")
    else:
        _log(figure, "local jobs on the CPU (no GPU visible)")
    board = TaskBoard([task_label(task) for task in todo], [len(task) for task in todo],
                      title or f"{figure} sweep",
                      None if expected_seconds is None else eta(expected_seconds, max_parallel))
    return _sliding_window(ex, figure, todo, env, max_parallel, gpu_ids, keep_going, board)


def task_label(task: Task) -> str:
    """A task's short label on the display: ``<figure>/<its first job>``, ``+k`` for the k
    others."""
    more = f" +{len(task) - 1}" if len(task) > 1 else ""
    return f"{task[0].figure}/{task[0].name}{more}"


def eta(expected_seconds: Sequence[float], workers: int,
        start_seconds: float | None = None) -> Eta:
    """The time a pool of ``workers`` processes still needs, for a :class:`TaskBoard`: task
    ``i`` takes ``expected_seconds[i]`` plus its process's start (``start_seconds``, default
    :data:`i2o.compute.schedule.TASK_START_SECONDS`); the tasks not started are scheduled longest
    first on the processes, each busy until its running task's expected time has elapsed since it
    was submitted (:func:`i2o.compute.schedule.remaining_seconds`). The rate of the tasks finished
    so far plays no part."""
    start = schedule.TASK_START_SECONDS if start_seconds is None else start_seconds
    full = [schedule.task_seconds(seconds, start) for seconds in expected_seconds]

    def remaining(pending: Sequence[int], running: Mapping[int, float]) -> float:
        return schedule.remaining_seconds([full[i] for i in pending],
                                          [(full[i], elapsed) for i, elapsed in running.items()],
                                          workers)

    return remaining


def log_path(figure: str) -> Path:
    """The sweep's job log of ``figure``: beside submitit's own logs of its jobs."""
    return cache_entries.results_dir() / "_submitit" / figure / "sweep.log"


def _log(figure: str, message: str) -> None:
    """One dated line of the job log (:func:`log_path`). Submissions and completions are for
    whoever follows a sweep (``tail -f``), not for the pages of a notebook that started one: the
    terminal's display (:class:`i2o.base.progress.TaskBoard`) shows the count, the notebook only its
    one-line summary."""
    path = log_path(figure)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as stream:
        stream.write(f"{lineage.now_iso()} {message}\n")


def _wait(job, figure: str) -> str:
    name = job.result()
    _log(figure, f"finished {name}")
    return name


def _finish(job, figure: str, task: Task, keep_going: bool,
            say: Callable[[str], None] | None = None) -> str | None:
    """:func:`_wait` for ``job``; with ``keep_going`` a failure is logged and printed (the last
    line of its message: a failed submitit job's message ends with the task's own error; printed
    by ``say``, default ``print``) and ``None`` returned instead of raised."""
    try:
        return _wait(job, figure)
    except Exception as error:
        if not keep_going:
            raise
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = f"{type(error).__name__}: {lines[-1] if lines else ''}"
        _log(figure, f"failed {task_name(task)}: {reason}")
        message = (f"[i2o] {figure}: task {task_name(task)} failed ({reason}; log: "
                   f"{log_path(figure).parent})")
        if say is None:
            print(message, flush=True)
        else:
            say(message)
        return None


@contextmanager
def _cancelling(running: list[Any], figure: str) -> Iterator[None]:
    """On leaving by an exception (a failed task, Ctrl-C, SIGTERM made an exception by
    :func:`i2o.compute.sweep_command.main`), cancel the local jobs still running (submitit's
    controller interrupts its task, then kills it), so that none is left computing alone."""
    try:
        yield
    except BaseException:
        for job in list(running):
            try:
                job.cancel(check=False)
                _log(figure, f"cancelled job {job.job_id}")
            except Exception:  # a job already gone needs no cancelling
                pass
        raise


#: Where the local controllers' own messages go (in the sweep's log folder), not the terminal.
CONTROLLER_LOG = "controllers.log"


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 pointed at ``path`` while a process is started, which inherits it.
    Submitit's local controller (one process per job, between the sweep and its task) prints a
    ``KeyboardInterrupt`` traceback to its stderr when its job is cancelled: on Ctrl-C or SIGTERM
    the sweep's one line would drown in them. The task's own output has its own log files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "a") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _sliding_window(ex, figure: str, todo: Sequence[Task],
                    env: dict[str, str], max_parallel: int,
                    gpu_ids: list[int] | None = None, keep_going: bool = False,
                    board: TaskBoard | None = None) -> list[str | None]:
    """Keep ``max_parallel`` jobs running, in the order of ``todo``; start the next one as soon
    as one ends. A failed task raises, or with ``keep_going`` gives ``None`` (:func:`_finish`).
    ``board`` (default: one without an ETA) is told each start and end, and redrawn while the
    jobs run.

    With ``gpu_ids``, each running job holds one of them (``gpus_per_node=1``,
    ``visible_gpus=[id]``) and a job starts only when a GPU is free.
    """
    free = list(gpu_ids or [])
    holder: dict[int, int] = {}
    pending = list(enumerate(todo))
    running: list[Any] = []  # submitit's jobs (the library is untyped)
    done: list[str | None] = []
    submitted_task: dict[int, tuple[int, Task]] = {}
    if board is None:
        board = TaskBoard([task_label(task) for task in todo], [len(task) for task in todo],
                          f"{figure} sweep")
    with board, _cancelling(running, figure):  # its last line and no worker left behind,
        while pending or running:              # also when an error or interruption ends the loop
            while pending and len(running) < max_parallel and (free or not gpu_ids):
                index, task = pending.pop(0)
                gpu = None
                if gpu_ids:
                    gpu = free.pop(0)
                    ex.update_parameters(gpus_per_node=1, local_visible_gpus=[gpu])
                with _stderr_to(log_path(figure).with_name(CONTROLLER_LOG)):
                    submitted = ex.submit(ResumableJob(), task, env)
                running.append(submitted)
                submitted_task[id(submitted)] = (index, task)
                board.started(index)
                if gpu is not None:
                    holder[id(submitted)] = gpu
                where = f" on GPU {gpu}" if gpu is not None else ""
                _log(figure, f"submitted {task_name(task)}{where}: job {submitted.job_id}")
            finished = [job for job in running if job.done()]
            for job in finished:
                running.remove(job)
                if id(job) in holder:
                    free.append(holder.pop(id(job)))
                index, task = submitted_task.pop(id(job))
                name = _finish(job, figure, task, keep_going, board.say)
                done.append(name)
                board.finished(index, ok=name is not None)
            if not finished:
                board.tick()
                time.sleep(0.5)
    return done


