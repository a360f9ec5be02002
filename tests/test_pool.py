"""The book's job pool (:mod:`i2o.compute.pool`) and the costs the results cache records for it
(:func:`i2o.compute.cache_costs.recorded_cost`). The toy chapter's jobs, in two chapters (``toy``,
``toy-b``), computed in this process by submitit's debug executor (a few seconds in all)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from types import SimpleNamespace

import pytest
from toy_jobs import ResidualJob, other, toy

from i2o.book import all_chapters, execute, stamps
from i2o.compute import (
    cache_costs,
    cache_entries,
    cache_key,
    door,
    job_costs,
    pool,
    profiles,
    sweep,
)
from i2o.compute.chapter import run_jobs
from i2o.compute.door import Task
from i2o.compute.job import Job
from i2o.data import preflight


@dataclasses.dataclass(frozen=True)
class _Broken(ResidualJob):
    """The toy chapter's job broken on purpose: a failing task must not stop the pool."""

    def compute(self, progress=None):
        raise RuntimeError(f"{self.name} fails")


def _chapter(figure: str, tasks: list[Task]) -> door.Chapter:
    """A fake entered chapter whose sweep submits ``tasks``."""
    runs = SimpleNamespace(jobs=lambda params: [job for task in tasks for job in task],
                           tasks=lambda params: tasks)
    return door.Chapter(figure, None, runs)  # type: ignore[arg-type]


def _record(job: Job, seconds: float, peak_mb: float = 100.0, key: str = "0" * 20) -> None:
    """A cost record for ``job``'s name and parameters under another key (as after a code
    change): the job itself stays missing."""
    entry = cache_entries.results_dir() / job.figure / f"{job.name}-{key}"
    cache_entries.store(entry, {"x": 0.0}, {"figure": job.figure, "name": job.name,
                                      "params": job.key(), cache_costs.COST: {
                                          "seconds": seconds, "cpu_seconds": seconds,
                                          "peak_rss_mb": peak_mb}})


def _meta(job: Job) -> dict:
    entry = cache_entries.entry_dir(job.figure, job.name, job.key(), job.module)
    return json.loads((entry / "meta.json").read_text())


# --- recorded costs ------------------------------------------------------------------------------

def test_the_cost_is_recorded_outside_the_key_and_read_back_under_a_changed_key(monkeypatch):
    job = toy(1, test_iters=500)  # long enough to take a measurable CPU time
    key = cache_key.key(job.figure, job.name, job.key(), job.module)
    job.run()
    cost = _meta(job)[cache_costs.COST]
    assert set(cost) == {"seconds", "cpu_seconds", "peak_rss_mb"}
    assert cost["seconds"] >= 0 and cost["cpu_seconds"] > 0 and cost["peak_rss_mb"] > 10
    assert cache_key.key(job.figure, job.name, job.key(), job.module) == key  # not in the key
    first = cache_costs.recorded_cost("toy", job.name, job.key())
    assert first is not None and first.seconds == cost["seconds"]
    assert first.peak_rss_mb == cost["peak_rss_mb"] and first.created

    monkeypatch.setattr(cache_key, "module_source_hash", lambda *args, **kwargs: "changed code")
    assert not job.is_cached()  # another key, the same name
    assert cache_costs.recorded_cost("toy", job.name, job.key()) == first
    assert cache_costs.recorded_cost("toy", job.name) == first
    assert cache_costs.recorded_cost("toy", job.name, toy(1).key()) is None
    assert cache_costs.recorded_cost("toy", "residuals-seed") is None  # a name is matched whole
    job.run()  # computed again under the new key: its record is now the most recent
    again = cache_costs.recorded_cost("toy", job.name, job.key())
    assert again is not None and again.seconds == _meta(job)[cache_costs.COST]["seconds"]
    assert len(list((cache_entries.results_dir() / "toy").glob("residuals-seed1-*[0-9a-f]"))) == 2


# --- the pool -----------------------------------------------------------------------------------

def test_the_pool_computes_every_missing_task_of_two_chapters_once(toy_computations):
    a = _chapter("toy", [(toy(1),), (toy(2), toy(3))])
    b = _chapter("toy-b", [(other(1),), (other(2),)])
    other(1).run()  # already in the cache
    toy_computations.clear()
    done = pool.run([a, b], requested=2, executor="debug")
    assert toy_computations == Counter({"toy/residuals-seed1": 1, "toy/residuals-seed2": 1,
                                        "toy/residuals-seed3": 1, "toy-b/residuals-seed2": 1})
    assert done.workers == 2 and not done.failed
    assert set(done.computed) == {pool.entry_name(job) for job in
                                  (toy(1), toy(2), toy(3), other(2))}
    log = sweep.log_path(pool.LOG_FOLDER).read_text()
    assert "finished residuals-seed2 and 1 more" in log

    again = pool.run([a, b], requested=2, executor="debug")
    assert again == pool.PoolRun(0) and sum(toy_computations.values()) == 4

    # the notebooks read them, told what the pool computed
    jobs = [toy(1), toy(2), toy(3)]
    with pool.told(done):
        _, cost = run_jobs("toy", jobs)
    assert (cost.jobs, cost.computed, cost.pooled, cost.pool_workers) == (3, 0, 3, 2)
    assert "3 computed by the job pool of make book in 2 processes" in cost.text()
    _, alone = run_jobs("toy", jobs)  # a notebook run alone: no pool
    assert (alone.pooled, alone.pool_workers) == (0, 0)
    assert "0 computed, 3 read from the results cache" in alone.text()
    assert sum(toy_computations.values()) == 4


def test_a_failing_task_does_not_stop_the_pool(toy_computations):
    bad = _Broken(**toy(9).key())
    chapter = _chapter("toy", [(bad,), (toy(1),)])
    done = pool.run([chapter], requested=1, executor="debug")
    assert toy_computations["toy/residuals-seed1"] == 1 and toy(1).is_cached()
    assert done.failed == (pool.entry_name(bad),)
    assert ("failed residuals-seed9: RuntimeError: residuals-seed9 fails"
            in sweep.log_path(pool.LOG_FOLDER).read_text())


def _submitted(monkeypatch) -> list[dict]:
    """Replace :func:`i2o.compute.sweep.submit` by a recorder of what the pool asks (nothing
    runs)."""
    calls: list[dict] = []

    def record(folder, todo, executor="local", max_parallel=2, **options):
        calls.append({"folder": folder, "todo": list(todo), "workers": max_parallel})
        return []

    monkeypatch.setattr(sweep, "submit", record)
    return calls


def test_the_pool_runs_the_longest_first_by_recorded_cost(monkeypatch):
    a1, a2, a3 = toy(1), toy(2), toy(3)
    b1, b2 = other(1), other(2)
    for job, seconds in ((a1, 10.0), (a2, 50.0), (b1, 20.0)):
        _record(job, seconds)
    calls = _submitted(monkeypatch)
    pool.run([_chapter("toy", [(a1,), (a2,), (a3,)]), _chapter("toy-b", [(b1,), (b2,)])],
             requested=1)
    (call,) = calls
    # a3 has no record: its chapter's median (30 s); b2 likewise (20 s, after b1: ties keep order)
    assert [task[0] for task in call["todo"]] == [a2, a3, b1, b2, a1]
    assert call["folder"] == pool.LOG_FOLDER and call["workers"] == 1
    estimated = pool.estimate_tasks("toy", [(a1, a3)], [a1, a2, a3])
    assert estimated == [pool.PoolTask("toy", (a1, a3), 40.0, 1, 100.0)]
    # no record in the chapter at all: the constant
    lone = pool.estimate_jobs([toy(26)])
    assert lone == [pool.Estimate(pool.DEFAULT_JOB_SECONDS, False, None)]


def test_jobs_of_one_name_with_other_parameters_are_costed_apart(monkeypatch, tmp_path):
    """Three seeds of one language model share a name: each keeps its own record, in the
    cache, in ``published/job-costs.json`` and in the estimates (they collapsed to one record
    per name before, so two of three were forecast at another job's cost)."""
    published = tmp_path / "job-costs.json"
    monkeypatch.setattr(job_costs, "path", lambda: published)
    short, long = toy(1), toy(1, test_iters=13)
    assert short.name == long.name and short.key() != long.key()
    _record(short, 10.0)
    _record(long, 300.0, key="1" * 20)
    assert [e.seconds for e in pool.estimate_jobs([short, long])] == [10.0, 300.0]
    assert cache_costs.recorded_cost("toy", long.name, long.key()).seconds == 300.0
    assert job_costs.publish([short, long])[1] == 2
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "fresh-clone-results"))
    found = pool.estimate_jobs([long, short])
    assert [(e.seconds, e.published) for e in found] == [(300.0, True), (10.0, True)]


def test_a_fresh_clone_orders_and_forecasts_by_the_published_costs(monkeypatch, tmp_path):
    """``make book RECORD=1`` publishes what the cache recorded; a cache that records nothing
    (a fresh clone) estimates each job by its published cost (same name and parameters), its
    own record when it has one, and the median of the chapter's published costs otherwise."""
    published = tmp_path / "job-costs.json"
    monkeypatch.setattr(job_costs, "path", lambda: published)
    a1, a2, a3 = toy(1), toy(2), toy(3)
    for job, seconds in ((a1, 10.0), (a2, 50.0), (a3, 5.0)):
        _record(job, seconds, peak_mb=200.0)
    assert job_costs.publish([a1, a2, a3, toy(4)])[1] == 3  # toy(4) never ran
    _record(a1, 12.0, key="1" * 20)  # measured again: its published record is replaced
    assert job_costs.publish([a1])[1] == 1
    chapters = json.loads(published.read_text())["chapters"]
    assert sorted(chapters["toy"]) == sorted(job_costs.record_key(j) for j in (a1, a2, a3))
    assert chapters["toy"][job_costs.record_key(a1)]["seconds"] == 12.0
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "fresh-clone-results"))
    elsewhere = toy(1, test_iters=13)  # the same name with other parameters: not a1's record
    found = pool.estimate_jobs([a1, a2, a3, elsewhere])
    assert [(e.seconds, e.recorded, e.published) for e in found] == [
        (12.0, False, True), (50.0, False, True), (5.0, False, True), (12.0, False, False)]
    assert found[1].peak_rss_mb == 200.0
    _record(a2, 7.0)  # this machine's own record wins
    assert pool.estimate_jobs([a2])[0] == pool.Estimate(7.0, True, 100.0)
    estimated = pool.estimate_tasks("toy", [(a1, a3)], [a1, a2, a3])
    assert (estimated[0].seconds, estimated[0].estimated, estimated[0].published) == (17.0, 2, 2)
    published.unlink()
    assert pool.estimate_jobs([a3], [a2, a3]) == [pool.Estimate(7.0, False, None)]


def test_workers_default_to_the_affinity_count_and_are_capped_by_memory(monkeypatch):
    monkeypatch.setattr(pool.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert pool.affinity_cores() == 8
    assert pool.pool_size(None, tasks=20, cores=8, cap=None) == 8
    assert pool.pool_size(None, tasks=20, cores=8, cap=3) == 3
    assert pool.pool_size(5, tasks=20, cores=8, cap=3) == 5  # WORKERS=5 is taken as given
    assert pool.pool_size(None, tasks=2, cores=8, cap=None) == 2  # never more than the tasks
    assert pool.memory_cap([300.0] * 10, 1000.0) == 3
    assert pool.memory_cap([900.0, 100.0, 100.0], 1000.0) == 2  # the largest peaks count
    assert pool.memory_cap([300.0] * 3, 1000.0) is None  # everything fits
    assert pool.memory_cap([2000.0], 1000.0) == 1  # one process runs whatever it needs
    assert pool.memory_cap([], 1000.0) is None and pool.memory_cap([300.0], None) is None

    jobs = [toy(seed) for seed in range(6)]
    for job in jobs:
        _record(job, 5.0, peak_mb=300.0)
    monkeypatch.setattr(pool, "available_memory_mb", lambda: (1000.0, "a test's reading"))
    calls = _submitted(monkeypatch)
    pool.run([_chapter("toy", [(job,) for job in jobs])])
    assert calls[-1]["workers"] == 3
    pool.run([_chapter("toy", [(job,) for job in jobs])], requested=6)
    assert calls[-1]["workers"] == 6
    monkeypatch.setattr(pool, "available_memory_mb", lambda: (10_000.0, "a test's reading"))
    pool.run([_chapter("toy", [(job,) for job in jobs])])
    assert calls[-1]["workers"] == 6  # min(8 cores, 6 tasks)


def test_available_memory_is_read_from_psutil_else_proc_meminfo(monkeypatch):
    pytest.importorskip("psutil")
    found, source = pool.available_memory_mb()
    assert source == "psutil" and found > 0
    monkeypatch.setitem(sys.modules, "psutil", None)  # as if psutil were not installed
    found, source = pool.available_memory_mb()
    if sys.platform.startswith("linux"):
        assert source == "/proc/meminfo MemAvailable" and found > 0
    else:
        assert (found, source) == (None, "unknown")


def test_make_book_pools_the_chapters_it_will_execute_then_runs_the_notebooks(monkeypatch,
                                                                             toy_computations):
    """``run_all`` wiring: the pool gets the chapters not up to date, with ``--workers``; every
    notebook then runs with ``I2O_POOL`` naming the pool's record, and without it afterwards."""
    chapters = {"toy": _chapter("toy", [(toy(1),), (toy(2),)]),
                "toy-b": _chapter("toy-b", [(other(1),)])}
    monkeypatch.setattr(profiles, "figures", lambda: list(chapters))
    monkeypatch.setattr(profiles, "resolve", lambda figure, profile, **given: None)
    monkeypatch.setattr(door, "enter", lambda figure, profile, **given: chapters[figure])
    monkeypatch.setattr(preflight, "needs", lambda figure: False)
    monkeypatch.setattr(preflight, "check", lambda figures, **_: dict.fromkeys(figures))
    monkeypatch.setattr(stamps, "up_to_date", lambda figure, params: figure == "toy-b")
    real = sweep.submit
    asked = []

    def in_process(folder, todo, executor="local", max_parallel=2, **options):
        asked.append(max_parallel)
        return real(folder, todo, "debug", max_parallel=max_parallel, **options)

    monkeypatch.setattr(sweep, "submit", in_process)
    seen = {}

    def notebook(figure, profile="quick", overrides=None, force=False, chapter=None):
        seen[figure] = pool.pooled(chapters["toy"].jobs())

    monkeypatch.setattr(execute, "run", notebook)
    assert all_chapters.run_all("quick", workers=2) == {}
    assert asked == [2] and toy_computations == Counter({"toy/residuals-seed1": 1,
                                                         "toy/residuals-seed2": 1})
    assert seen == {"toy": (2, 2), "toy-b": (2, 2)}
    assert pool.POOL_ENV not in pool.os.environ
