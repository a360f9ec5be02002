"""The forecast of ``make book`` on K cores (:mod:`i2o.compute.plan`): the list scheduler against
brute force, the notebooks' own time, and ``python -m i2o.results plan`` on a temporary cache."""

from __future__ import annotations

import itertools
import json
import random
import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from toy_jobs import other, toy

from i2o.base import lineage
from i2o.compute import cache_costs, cache_entries, door, plan, pool
from i2o.compute.job import Job
from i2o.compute.schedule import TASK_START_SECONDS
from i2o.provenance import __main__ as commands


def optimum(durations: list[float], cores: int) -> float:
    """The best makespan of ``durations`` on ``cores`` cores, by trying every assignment."""
    best = float("inf")
    for assignment in itertools.product(range(cores), repeat=len(durations)):
        loads = [0.0] * cores
        for duration, core in zip(durations, assignment, strict=True):
            loads[core] += duration
        best = min(best, max(loads))
    return best


@pytest.mark.parametrize(("durations", "cores", "best"), [
    ([7, 5, 4, 3, 1], 2, 10), ([4, 4, 4, 4], 2, 8), ([1] * 6, 3, 2), ([5], 4, 5), ([], 3, 0),
    ([6, 5, 4, 3, 2, 1], 3, 7)])
def test_lpt_reaches_the_optimum_of_small_cases(durations, cores, best):
    schedule = plan.lpt(durations, cores)
    assert schedule.makespan == best == optimum(durations, cores)
    assert sum(schedule.loads) == sum(durations) and len(schedule.loads) == cores
    for core in range(cores):  # each core's load is the sum of its jobs
        assert schedule.loads[core] == sum(d for d, c in zip(durations, schedule.cores,
                                                            strict=True) if c == core)


def test_lpt_stays_within_grahams_bound_and_reaches_it_on_the_tight_case():
    tight = plan.lpt([3, 3, 2, 2, 2], 2).makespan  # LPT 7 against the optimum 6 (3+3 | 2+2+2)
    assert (tight, optimum([3, 3, 2, 2, 2], 2)) == (7, 6)
    assert tight == pytest.approx((4 / 3 - 1 / 6) * 6)
    draw = random.Random(0)
    for _ in range(40):
        cores = draw.choice((2, 3))
        durations = [draw.randint(1, 20) for _ in range(draw.randint(1, 7))]
        best = optimum(durations, cores)
        assert plan.lpt(durations, cores).makespan <= (4 / 3 - 1 / (3 * cores)) * best + 1e-9


def test_one_job_longer_than_the_rest_bounds_the_makespan():
    assert plan.lpt([100, 1, 1, 1, 1, 2, 3], 3).makespan == 100
    assert plan.lpt([100, 1, 1, 1, 1, 2, 3], 64).makespan == 100


def test_lpt_refuses_no_core_and_negative_durations():
    with pytest.raises(ValueError, match="cores"):
        plan.lpt([1.0], 0)
    with pytest.raises(ValueError, match="durations"):
        plan.lpt([-1.0], 2)


def _record(job: Job, seconds: float, created: str | None = None) -> None:
    """A cost record for ``job`` under another key (as a cache from older code would hold)."""
    entry = cache_entries.results_dir() / job.figure / f"{job.name}-{'0' * 20}"
    cache_entries.store(entry, {"x": 0.0}, {"figure": job.figure, "name": job.name,
                                      "params": job.key(), cache_costs.COST: {
                                          "seconds": seconds, "cpu_seconds": seconds,
                                          "peak_rss_mb": 50.0}})
    if created is not None:
        meta = json.loads((entry / "meta.json").read_text())
        (entry / "meta.json").write_text(json.dumps({**meta, "created": created}))


def _chapter(figure: str, jobs: list[Job], params: object = None) -> door.Chapter:
    runs = SimpleNamespace(jobs=lambda p: jobs)
    return door.Chapter(figure, params, runs)  # type: ignore[arg-type]


def test_plan_prints_the_makespan_for_1_2_and_8_cores(monkeypatch, capsys, toy_computations):
    monkeypatch.setattr(plan, "TASK_START_SECONDS", 0.0)  # the jobs alone: test_pool_forecast
    a = [toy(1), toy(2), toy(3)]  # the toy chapter's jobs, never computed: only their recorded
    b = [other(1), other(2)]  # costs are read
    for job, seconds in zip([*a, b[0]], [100.0, 60.0, 40.0, 30.0], strict=True):
        _record(job, seconds)  # b2 has none: its chapter's median, 30 s
    chapters = {"toy": _chapter("toy", a), "toy-b": _chapter("toy-b", b)}
    monkeypatch.setattr(door, "enter", lambda figure, profile, **given: chapters[figure])
    monkeypatch.setattr(plan.timing_records, "read_timings", lambda: [])
    assert commands.main(["plan", "toy", "toy-b", "--profile", "quick",
                         "--cores", "1", "2", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "5 jobs in 5 tasks, 1 without a recorded cost" in out[0]
    assert "unknown, counted 0, for toy, toy-b" in out[0]
    # 100 60 40 30 30: one core 260 s; two: 100+30 | 60+40+30 = 130 s; eight: the longest, 100 s
    # the bound: the longest task (100 s) or the compute (260 s) over the cores
    assert re.match(r"\s+1 core : +4\.3 min = jobs 4\.3 min \+ notebooks 0\.0 s; at least "
                    r"4\.3 min \(the longest task, toy: residuals-seed1 100 s, or the compute, "
                    r"4\.3 min, over 1; then the notebooks\); 1 of 5 jobs estimated",
                    out[1]), out[1]
    assert re.match(r"\s+2 cores: +2\.2 min = jobs 2\.2 min .*at least 2\.2 min", out[2]), out[2]
    assert re.match(r"\s+8 cores: +100 s = jobs 100 s .*at least 100 s", out[3]), out[3]
    assert out[4].startswith("no whole book in published/timings.json records its forecast")
    assert len(out) == 5 and not toy_computations  # a forecast computes nothing


def test_the_bound_is_the_longest_task_or_the_compute_over_the_cores(monkeypatch):
    monkeypatch.setattr(plan, "TASK_START_SECONDS", 0.0)
    tasks = tuple(pool.PoolTask("toy", (toy(i),), s, 0, None)
                  for i, s in enumerate((90.0, 50.0, 50.0, 50.0)))
    chapters = [plan.ChapterPlan("toy", tasks, 10.0)]
    two, eight = plan.forecast(chapters, 2), plan.forecast(chapters, 8)
    assert two.compute_seconds == 240.0 and two.bound_seconds == 130.0  # 240 / 2 + 10
    assert two.seconds == 150.0 >= two.bound_seconds  # 90+50 | 50+50: the schedule is not
    assert eight.bound_seconds == 100.0 == eight.seconds  # the longest task bounds it


def test_the_forecasts_error_is_read_from_each_recorded_whole_book():
    """A whole book recorded with the forecast made at its start gives a line with its error;
    a chapter's record, or a book without a forecast (older records), gives none."""
    book = {**_timing("book", 2400.0), "cpu": "AMD EPYC", "workers": 2, "commit": "abc",
            "forecast_seconds": 3000.0}
    lines = plan.forecast_errors([book, {**book, "forecast_seconds": None},
                                  {**book, "chapter": "toy"}])
    assert lines == ["  2026-11-28 AMD EPYC (2 processes, quick, commit abc): forecast 50.0 min, "
                     "measured 40.0 min, error +25 %"]


def test_the_notebook_time_leaves_out_the_jobs_it_computed(monkeypatch, tmp_path):
    """A notebook that ran 100 s, during which one of its jobs (30 s) was computed, took 70 s of
    its own; a job computed before it started is not subtracted; another profile is unknown."""
    ended = lineage.now_iso()
    end = plan._when(ended)

    def at(seconds: float) -> str:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    inside, before = toy(1), toy(2)
    _record(inside, 30.0, created=at(end - 50))
    _record(before, 20.0, created=at(end - 500))
    params = SimpleNamespace(profile="quick", as_dict=lambda: {"workers": 1, "seeds": [0, 1]})
    notebook = tmp_path / "toy.ipynb"
    monkeypatch.setattr(plan, "notebook_path", lambda figure: notebook)
    chapter = _chapter("toy", [inside, before], params)
    assert plan.notebook_seconds(chapter, [inside, before]) is None  # not executed
    stamp = {"profile": "quick", "params": {"workers": 1, "seeds": [0, 1]}, "seconds": 100.0,
             "date": ended}
    notebook.write_text(json.dumps({"metadata": {"i2o": stamp}}))
    assert plan.notebook_seconds(chapter, [inside, before]) == 70.0
    notebook.write_text(json.dumps({"metadata": {"i2o": {**stamp, "profile": "paper"}}}))
    assert plan.notebook_seconds(chapter, [inside, before]) is None


def test_the_notebooks_run_after_the_jobs(monkeypatch):
    monkeypatch.setattr(plan, "TASK_START_SECONDS", 0.0)  # the jobs alone: test_pool_forecast
    task = pool.PoolTask("toy", (toy(0),), 50.0, 0, None)
    chapters = [plan.ChapterPlan("toy", (task, task), 7.0),
                plan.ChapterPlan("toy-b", (), None)]
    result = plan.forecast(chapters, 2)
    assert (result.jobs_seconds, result.notebooks_seconds, result.seconds) == (50.0, 7.0, 57.0)
    assert result.longest == task and (result.jobs, result.estimated) == (2, 0)
    assert plan.forecast(chapters, 1).seconds == 107.0


def _timing(chapter: str, seconds: float, profile: str = "quick", computed: int | None = 3,
            pool_jobs: int | None = 3, date: str | None = "2026-11-28T14:18:28Z") -> dict:
    return {"chapter": chapter, "profile": profile, "seconds": seconds,
            "jobs_computed": computed, "pool_jobs": pool_jobs, "date": date}


def test_the_published_notebook_time_is_the_latest_of_the_notebook_alone():
    records = [_timing("plan-a", 12.0),
               _timing("plan-a", 14.0, computed=0, pool_jobs=None, date=None),
               _timing("plan-a", 500.0, computed=3, pool_jobs=0),  # its jobs ran inside it
               _timing("plan-a", 600.0, computed=None, pool_jobs=None),  # unknown: not alone
               _timing("plan-a", 9.0, profile="paper"), _timing("plan-b", 8.0)]
    assert plan.published_seconds("plan-a", "quick", records) == (14.0, "")
    assert plan.published_seconds("plan-a", "quick", records[:1]) == (12.0,
                                                                      "2026-11-28T14:18:28Z")
    assert plan.published_seconds("plan-a", "paper", records) == (9.0, "2026-11-28T14:18:28Z")
    assert plan.published_seconds("plan-a", "quick", records[2:4]) is None
    assert plan.published_seconds("plan-c", "quick", records) is None


def test_a_fresh_clone_plans_the_notebooks_from_their_published_times(monkeypatch, capsys,
                                                                       tmp_path):
    """No executed notebook (a fresh clone): the toy notebook counts its published time and
    the line says so; toy-b's, never recorded, is still unknown."""
    monkeypatch.setattr(plan, "TASK_START_SECONDS", 0.0)
    monkeypatch.setattr(plan, "notebook_path", lambda figure: tmp_path / f"{figure}.ipynb")
    monkeypatch.setattr(plan.timing_records, "read_timings", lambda: [_timing("toy", 12.0)])
    a, b = toy(1), other(1)
    _record(a, 100.0)
    _record(b, 30.0)
    chapters = {"toy": _chapter("toy", [a]), "toy-b": _chapter("toy-b", [b])}
    monkeypatch.setattr(door, "enter", lambda figure, profile, **given: chapters[figure])
    assert commands.main(["plan", "toy", "toy-b", "--profile", "quick", "--cores", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("then the notebooks one after the other, 12 s (from the latest "
                           "record of each notebook alone in published/timings.json "
                           "(2026-11-28) for toy; unknown, counted 0, for toy-b)"), out[0]
    assert re.match(r"\s+2 cores: +112 s = jobs 100 s \+ notebooks 12 s;", out[1]), out[1]


def test_a_chapter_cost_says_where_its_costs_came_from():
    recorded = pool.PoolTask("toy", (toy(0),), 600.0, 0, None)
    published = pool.PoolTask("toy", (toy(1),), 300.0, 1, None, published=1)
    guessed = pool.PoolTask("toy", (toy(2),), 60.0, 1, None)
    cost = plan.cost_of([plan.ChapterPlan("toy", (recorded, recorded), 30.0)], "quick", 2)
    assert cost.job_seconds == 1200.0 and cost.unknown == 0 and cost.published == 0
    # two 600-s tasks on two cores, each with its process's start, then the notebook
    assert cost.seconds == 600.0 + TASK_START_SECONDS + 30.0
    assert cost.text() == "≈ 10.6 min on 2 cores from an empty cache (20.0 min of compute)"
    mixed = plan.cost_of([plan.ChapterPlan("toy", (recorded, published), 30.0)], "quick", 2)
    assert mixed.text().endswith("; 1 of 2 jobs from published costs")
    some = plan.cost_of([plan.ChapterPlan("toy", (recorded, guessed), 30.0)], "quick", 2)
    assert some.text().endswith("; 1 of 2 jobs guessed")
    none = plan.cost_of([plan.ChapterPlan("toy", (guessed, guessed), None)], "paper", 2)
    assert none.text() == "not measured (2 jobs, none run yet)"
    book = plan.cost_of([plan.ChapterPlan("toy", (recorded,), 30.0),
                         plan.ChapterPlan("toy-b", (recorded,), 10.0)], "quick", 2)
    assert book.figure == "toy, toy-b" and book.seconds == 600.0 + TASK_START_SECONDS + 40.0
