"""Every chapter of the book executed in one run: the data preflight, one job pool for every
chapter's missing jobs, the notebooks one after the other, failures kept going past and reported,
and, when asked, the timings and job costs recorded."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from i2o.base import locations
from i2o.book import execute, stamps
from i2o.book.execute import first_error_line, record_failure
from i2o.book.stamps import executed_path, recorded_stamp
from i2o.compute import door, job_costs, plan, pool, profiles, timings
from i2o.data import preflight


def run_all(profile: str = "quick", force: bool = False, workers: int | None = None,
            record_timing: bool = False) -> dict[str, str]:
    """Run every figure that can run; return ``{figure: one-line reason}`` for the others.

    A preflight first makes every data set ready (:mod:`i2o.data.preflight`): a figure whose data is
    missing is not started. Then the missing jobs of every chapter to execute (not up to date,
    or ``force``) are computed in one pool of ``workers`` local processes
    (:func:`i2o.compute.pool.run`; ``None``: the cores this process may use, capped by memory), and
    the notebooks run one after the other, reading them. A figure whose notebook fails does not stop
    the others. Each failure is recorded beside the executed notebooks (``<name>.notbuilt.txt``) for
    the HTML build. With ``record_timing``, each executed notebook's timing, and the whole run's
    when every chapter was built, are appended to ``published/timings.json`` at the end
    (:mod:`i2o.compute.timings`).
    """

    figures = profiles.figures()
    for figure in figures:  # the schema first: no chapter is imported for a bad value
        profiles.resolve(figure, profile)
    # every parameter error stops everything, before any compute; a chapter that cannot be
    # entered (its code fails to import) is reported and the others still run
    chapters, broken = {}, {}
    for figure in figures:
        try:
            chapters[figure] = door.enter(figure, profile)
        except profiles.ParameterError:
            raise
        except Exception as error:
            broken[figure] = first_error_line(error)
    print("[i2o] preflight: data sets of " + ", ".join(
        f for f in figures if preflight.needs(f)), flush=True)
    failures = {figure: reason for figure, reason in preflight.check(figures).items() if reason}
    failures.update(broken)
    for figure, reason in failures.items():
        print(f"[i2o] {figure}: not started: {reason}", flush=True)
        record_failure(figure, reason)
    runnable = [figure for figure in figures if figure not in failures]
    forecast = forecast_seconds([chapters[figure] for figure in runnable], profile, workers) \
        if record_timing else None
    timer = start_timer([chapters[figure] for figure in runnable], profile, record_timing)
    if timer is not None:
        timer.forecast_seconds = forecast
    try:
        done = pool.run([chapters[figure] for figure in runnable
                         if force or not stamps.up_to_date(figure, chapters[figure].params)],
                        workers)
    except Exception as error:  # the notebooks still compute what they miss, one by one
        print(f"[i2o] job pool: FAILED ({first_error_line(error)}); each notebook computes "
              f"its own missing jobs", flush=True)
        done = pool.PoolRun(0)
    executed = []
    with pool.told(done):
        for figure in runnable:
            try:
                before = file_identity(executed_path(figure)) if timer is not None else None
                execute.run(figure, profile, force=force, chapter=chapters[figure])
                if timer is not None and (entry := notebook_timing(timer, figure, before, done)):
                    executed.append(entry)
            except profiles.ParameterError:
                raise
            except Exception as error:  # keep going: the others still run, the reason is said
                failures[figure] = first_error_line(error)
                print(f"[i2o] {figure}: FAILED: {failures[figure]} (notebook: "
                      f"{executed_path(figure).with_suffix('.failed.ipynb')})", flush=True)
                record_failure(figure, failures[figure])
    if timer is not None:
        _append_timings(timer, executed, done, failures)
        _publish_job_costs([chapters[figure] for figure in runnable])
    return failures


def forecast_seconds(chapters: list[door.Chapter], profile: str,
                     workers: int | None) -> float | None:
    """What ``python -m i2o.results plan --cores W`` forecasts for ``chapters`` from an empty
    cache, W the pool's processes (``workers``, else the cores this process may use), said in
    one line; ``None`` (said) when it cannot be made."""
    cores = workers or pool.affinity_cores()
    try:
        result = plan.forecast([plan.plan_chapter(chapter, profile) for chapter in chapters],
                               cores)
    except Exception as error:  # the build goes on: only the forecast is lost, and said so
        print(f"[i2o] forecast: not made ({first_error_line(error)})", flush=True)
        return None
    print(f"[i2o] forecast (python -m i2o.results plan, from an empty cache): "
          f"{plan.line(result).strip()}", flush=True)
    return result.seconds


def _publish_job_costs(chapters: list[door.Chapter]) -> None:
    """The recorded cost of every job of ``chapters`` into ``published/job-costs.json``."""
    try:
        jobs = [job for chapter in chapters for job in chapter.jobs()]
        target, written = job_costs.publish(jobs)
    except Exception as error:  # the build succeeded: only the costs are lost, and said so
        print(f"[i2o] job costs: not recorded ({first_error_line(error)})", flush=True)
        return
    print(f"[i2o] job costs: {written} jobs' recorded costs written to "
          f"{target.relative_to(locations.repo_root())}", flush=True)


def start_timer(chapters: list[door.Chapter], profile: str,
                 asked: bool) -> timings.TimedRun | None:
    """The timed run's start (load, clock, each chapter's missing jobs) when ``asked``; a
    chapter whose jobs cannot be listed leaves the run untimed (said in one line)."""
    if not asked:
        return None
    try:
        return timings.start(chapters, profile)
    except Exception as error:
        print(f"[i2o] timings: not recorded ({first_error_line(error)})", flush=True)
        return None


def file_identity(path: Path) -> tuple[int, int] | None:
    """``path``'s inode and modification time (``None`` if absent): an executed notebook is
    renamed into place, so an execution changes it."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns


def notebook_timing(timer: timings.TimedRun, figure: str, before: tuple[int, int] | None,
           done: pool.PoolRun) -> dict[str, Any] | None:
    """The timing record of ``figure``'s notebook if it was executed since its file had the
    identity ``before`` (an up-to-date notebook was not), from its stamp's seconds."""
    path = executed_path(figure)
    seconds = recorded_stamp(path).get("seconds")
    if seconds is None or file_identity(path) in (None, before):
        return None
    pooled = sum(name.startswith(f"{figure}/") for name in done.computed)
    try:
        return timer.notebook(figure, float(seconds), timings.load_average(), pooled,
                              done.workers)
    except Exception as error:  # the notebook ran: its timing alone is lost, and said so
        print(f"[i2o] timings: {figure}: not recorded ({first_error_line(error)})", flush=True)
        return None


def _append_timings(timer: timings.TimedRun, executed: list[dict[str, Any]],
                    done: pool.PoolRun, failures: dict[str, str]) -> None:
    """Append the executed notebooks' records, and the whole run's when no chapter failed."""
    entries = list(executed)
    if executed and not failures:
        entries.append(timer.book(executed, done.workers))
    elif failures:
        print(f"[i2o] timings: the whole book's time is not recorded ({len(failures)} "
              f"chapter(s) not built)", flush=True)
    timings.append_all(entries)


def report(failures: dict[str, str]) -> None:
    """One line per chapter that was not built, on stderr, after everything else."""
    for figure, reason in failures.items():
        print(f"[i2o] not built: {figure}: {reason}", file=sys.stderr, flush=True)

