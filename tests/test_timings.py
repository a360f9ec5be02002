"""i2o.compute.timing_records, .timings and .timing_tables: measured costs appended to
``published/``, and the Reproduce page's tables."""

from __future__ import annotations

import json

import pytest

from i2o.base import locations
from i2o.book import all_chapters, build, execute, html_build, stamps
from i2o.compute import door, pool, profiles, timing_records, timing_tables, timings
from i2o.data import preflight


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A ``published/`` folder of its own, empty."""
    folder = tmp_path / "published"
    monkeypatch.setattr(timing_records, "folder", lambda: folder)
    return folder


def entry(chapter="meta", profile="quick", seconds=500.0, cache="empty", **given):
    """A valid timing record; ``given`` overrides any field."""
    record = {"chapter": chapter, "profile": profile, "replicate": 0, "seconds": seconds,
              "cpu_seconds": None, "cache": cache, "jobs_computed": 19 if cache == "empty" else 2,
              "pool_jobs": 0, "workers": 2, "cpu": "Some CPU", "vendor": "GenuineIntel",
              "cores": 2, "commit": "abc1234", "load_start": 0.1, "load_end": 2.0,
              "idle": True, "date": "2026-11-28T10:00:00Z", "note": ""}
    return {**record, **given}


def numerics_entry(step="TINY step", ratio=1.17, **given):
    record = {"kind": "numerics", "step": step, "ratio": ratio,
              "components": {"oneDNN's AVX2 cap": 1.15}, "command": "bench", "cpu": "Some CPU",
              "vendor": "GenuineIntel", "cores": 2, "commit": None, "load_start": None,
              "load_end": None, "idle": False, "date": None, "note": ""}
    return {**record, **given}


def row_of(text: str, chapter: str, profile: str) -> str:
    start = f"| `{chapter}` | `{profile}` |"
    return next(line for line in text.splitlines() if line.startswith(start))


def test_an_append_keeps_every_earlier_record(kept):
    first = timing_records.record(entry(seconds=600.0, commit="old"))
    before = first.read_text()
    timing_records.record(entry(seconds=500.0, commit="new"))
    records = json.loads(first.read_text())
    assert first == kept / timing_records.TIMINGS_FILE
    assert [r["commit"] for r in records] == ["old", "new"]
    assert first.read_text().startswith(before.removesuffix("\n]\n"))  # left as it was
    timing_records.record(numerics_entry())  # its own file, the timings untouched
    assert len(timing_records.read_timings()) == 2 and len(timing_records.read_numerics()) == 1


def test_the_table_shows_the_latest_empty_cache_timing_and_counts_the_others():
    records = [entry(seconds=941.0, commit="first"), entry(seconds=849.0, commit="second"),
               entry(seconds=30.0, cache="warm", commit="warm-before"),
               entry(seconds=521.0, commit="latest", cpu="Intel Xeon"),
               entry(seconds=12.0, cache="warm", commit="warm-after"),
               entry(chapter="meta", profile="paper", seconds=None, cpu_seconds=16560.0),
               entry(chapter="affine", seconds=30.0)]
    text = timing_tables.table(records=records)
    meta = row_of(text, "meta", "quick")
    assert "8.7 min (521 s)" in meta and "Intel Xeon, 2 cores" in meta and "`latest`" in meta
    assert "3 earlier timings in `published/timings.json`" in meta
    assert "1 later, not from an empty cache" in meta
    assert "4.6 CPU-hours of jobs" in row_of(text, "meta", "paper")
    assert "30 s" in row_of(text, "affine", "quick") and "none earlier" in row_of(
        text, "affine", "quick")
    order = [line.split(" | ")[0] for line in text.splitlines()[2:]]
    assert order == ["| `affine`", "| `meta`", "| `meta`"]  # manifest order, then profile
    assert "`paper`" not in timing_tables.table("quick", records)


def test_a_chapter_without_an_empty_cache_timing_says_so():
    text = timing_tables.table(records=[entry(cache="warm"), entry(cache="warm")])
    assert "none recorded" in row_of(text, "meta", "quick")
    assert "2 timings in `published/timings.json`, none from an empty cache" in text


def test_a_timing_on_a_busy_machine_is_marked_so():
    busy = timing_tables.table(records=[entry(idle=False, load_start=4.7, load_end=5.1)])
    assert "| **no** (load 4.7 → 5.1) |" in row_of(busy, "meta", "quick")
    idle = timing_tables.table(records=[entry(idle=True, load_start=0.3, load_end=None)])
    assert "| yes (load 0.3 → ?) |" in row_of(idle, "meta", "quick")
    unknown = timing_tables.table(records=[entry(idle=None, load_start=None, load_end=None)])
    assert f"| {timing_tables.UNKNOWN} |" in row_of(unknown, "meta", "quick")


def test_idle_holds_on_a_quiet_machine_fails_on_a_busy_one_and_is_undecided_without_loads():
    assert timings.is_idle(0.2, 2.3, own=2) is True  # the run's own two processes at the end
    assert timings.is_idle(1.2, 2.3, own=2) is False  # another job before the run started
    assert timings.is_idle(0.2, 3.1, own=2) is False  # another job while it ran
    assert timings.is_idle(None, 2.3, own=2) is None and timings.is_idle(0.2, None, own=2) is None


@pytest.mark.parametrize("bad, says", [
    ({"seconds": "500"}, "field 'seconds' must be the wall seconds"),
    ({"seconds": -1.0}, "field 'seconds'"),
    ({"cache": "cold"}, "field 'cache' must be 'empty'"),
    ({"workers": True}, "field 'workers' must be an integer ≥ 1"),
    ({"profile": "huge"}, "field 'profile' must be one of smoke, quick, paper"),
    ({"date": "yesterday"}, "field 'date' must be an ISO 8601 date"),
    ({"idle": "yes"}, "field 'idle' must be true or false"),
    ({"speed": 3}, "unknown field(s) 'speed'"),
    ({"seconds": None}, "a timing needs 'seconds' (wall) or 'cpu_seconds'"),
    ({"pool_jobs": 5, "jobs_computed": 2}, "'pool_jobs' (5) exceeds 'jobs_computed' (2)"),
    ({"chapter": "nonesuch"}, "field 'chapter' must be one of"),
    ({"forecast_seconds": -5.0}, "field 'forecast_seconds' must be the wall seconds"),
])
def test_a_bad_record_is_refused_and_the_file_left_as_it_was(kept, bad, says):
    path = timing_records.record(entry())
    before = path.read_text()
    with pytest.raises(timing_records.RecordError) as refused:
        timing_records.record(entry(**bad))
    assert says in str(refused.value)
    assert path.read_text() == before


def test_a_record_missing_a_field_or_a_broken_file_is_refused(kept):
    incomplete = entry()
    del incomplete["note"]
    with pytest.raises(timing_records.RecordError, match="missing field"):
        timing_records.record(incomplete)
    with pytest.raises(timing_records.RecordError, match="field 'ratio'"):
        timing_records.record(numerics_entry(ratio=0))
    kept.mkdir(parents=True, exist_ok=True)
    (kept / timing_records.TIMINGS_FILE).write_text(json.dumps({"not": "a list"}))
    with pytest.raises(timing_records.RecordError, match="must hold a JSON list of records"):
        timing_records.record(entry())
    (kept / timing_records.TIMINGS_FILE).write_text(json.dumps([entry(cache="cold")]))
    with pytest.raises(timing_records.RecordError, match="timings.json record 0: field 'cache'"):
        timing_records.read_timings()


def test_a_record_older_than_the_forecast_field_reads_with_a_null_forecast(kept):
    """``forecast_seconds`` came later: a record without it is read (null), one with it keeps
    it; the field is written in every new record."""
    old, new = entry(), entry(forecast_seconds=612.0)
    assert "forecast_seconds" not in old
    kept.mkdir(parents=True)
    (kept / timing_records.TIMINGS_FILE).write_text(json.dumps([old, new]))
    assert [r["forecast_seconds"] for r in timing_records.read_timings()] == [None, 612.0]
    assert timings.timing("meta", "quick", seconds=1.0, cache="empty",
                          jobs_computed=0)["forecast_seconds"] is None


def test_the_table_shows_a_recorded_forecast_and_its_error():
    book = entry(chapter=timing_records.WHOLE_BOOK, seconds=2400.0, forecast_seconds=3000.0,
                 pool_jobs=365, jobs_computed=365)
    (row,) = [line for line in timing_tables.table(records=[book]).splitlines()
              if line.startswith("| whole book")]
    assert "forecast at its start 50.0 min (3,000 s), +25 % (over the measured time)" in row
    assert "365 jobs computed in its pool" in row and "the notebook alone" not in row
    short = entry(chapter=timing_records.WHOLE_BOOK, seconds=4000.0, forecast_seconds=3000.0)
    (row,) = [line for line in timing_tables.table(records=[short]).splitlines()
              if line.startswith("| whole book")]
    assert "-25 % (under the measured time)" in row


def test_a_whole_book_from_an_empty_cache_records_the_forecast_made_at_its_start(monkeypatch):
    """:meth:`TimedRun.book` carries the start's forecast only for a whole book from an empty
    cache (the forecast is for an empty cache); a warm run records none."""
    monkeypatch.setattr(profiles, "figures", lambda: ["affine", "meta"])
    executed = [timings.timing(f, "quick", seconds=10.0, cache="empty", jobs_computed=3,
                               workers=2) for f in ("affine", "meta")]
    empty = {f: timings.JobCount(3, 3) for f in ("affine", "meta")}
    run = timings.TimedRun("quick", 0.1, 0.0, empty, {}, forecast_seconds=2345.6)
    assert run.book(executed, 2)["forecast_seconds"] == 2345.6
    warm = timings.TimedRun("quick", 0.1, 0.0, {**empty, "meta": timings.JobCount(1, 3)}, {},
                            forecast_seconds=2345.6)
    assert warm.book(executed, 2)["forecast_seconds"] is None


def test_the_numerics_table_shows_each_steps_latest_ratio_against_the_goal():
    text = timing_tables.numerics_table([numerics_entry(ratio=1.4), numerics_entry(ratio=1.17),
                                   numerics_entry(step="LM step", ratio=2.42, components={})])
    tiny = next(line for line in text.splitlines() if line.startswith("| TINY step |"))
    assert "| 1.17× | oneDNN's AVX2 cap 1.15× | met |" in tiny and tiny.endswith("| 1 |")
    assert "| LM step | 2.42× | — | **not met** |" in text


def test_the_staged_reproduce_page_has_the_generated_tables_and_no_marker(kept):
    timing_records.record(entry(chapter="affine", seconds=29.0, commit="staged1"))
    timing_records.record(numerics_entry())
    text = (html_build.stage() / "book" / "reproduce.md").read_text()
    assert "| `affine` | `quick` | 29 s |" in text and "`staged1`" in text
    assert "| TINY step | 1.17× |" in text
    for marker in (timing_tables.COST_START, timing_tables.COST_END, timing_tables.NUMERICS_START,
                   timing_tables.NUMERICS_END, "i2o:measured-cost", "i2o:numerics-cost"):
        assert marker not in text
    assert "(filled in by `make book` from `published/timings.json`)" not in text


def test_a_broken_file_is_said_on_the_page_and_the_build_goes_on(kept, tmp_path):
    kept.mkdir(parents=True)
    (kept / timing_records.TIMINGS_FILE).write_text("[{")
    page = tmp_path / "reproduce.md"
    page.write_text(f"a\n{timing_tables.COST_START}\nx\n{timing_tables.COST_END}\nb\n"
                    f"{timing_tables.NUMERICS_START}\n{timing_tables.NUMERICS_END}\nc\n")
    assert timing_tables.fill_reproduce(page)
    text = page.read_text()
    assert "`published/timings.json` could not be read" in text and "not JSON" in text
    assert text.startswith("a\n") and text.endswith("c\n")
    assert not timing_tables.fill_reproduce(page)  # the markers are gone


def test_the_committed_measurements_are_valid_and_the_page_has_the_markers():
    text = (locations.repo_root() / "book" / "reproduce.md").read_text()
    for start, end in ((timing_tables.COST_START, timing_tables.COST_END),
                       (timing_tables.NUMERICS_START, timing_tables.NUMERICS_END)):
        assert text.index(start) < text.index(end)
    chapters = [*profiles.figures(), timing_records.WHOLE_BOOK]
    recorded = timing_records.read_timings()
    assert recorded and all(timing_records.check_timing(r, chapters) for r in recorded)
    assert timing_records.read_numerics()
    assert "| `meta` | `paper` |" in timing_tables.table()


class _Job:
    def __init__(self, cached: set[str], name: str) -> None:
        self.cached, self.name = cached, name

    def is_cached(self) -> bool:
        return self.name in self.cached


class _Params:
    def as_dict(self) -> dict[str, int]:
        return {"workers": 2, "replicate": 0}


class _Chapter:
    def __init__(self, figure: str, cached: set[str]) -> None:
        self.figure, self.params = figure, _Params()
        self.jobs = [_Job(cached, f"{figure}/j{i}") for i in range(3)]

    def tasks(self) -> list[tuple[_Job, ...]]:
        return [(job,) for job in self.jobs]


def test_make_book_records_timings_only_when_asked(kept, monkeypatch):
    """``run_all``: without ``record_timing`` nothing is written; with it, one record per
    executed notebook (from its stamp's seconds, its jobs counted before and after) and one for
    the whole run, appended at the end."""
    cached: set[str] = {"deq_gaps/j0"}
    figures = ["affine", "deq_gaps"]
    chapters = {figure: _Chapter(figure, cached) for figure in figures}
    monkeypatch.setattr(profiles, "figures", lambda: figures)
    monkeypatch.setattr(profiles, "resolve", lambda figure, profile, **given: None)
    monkeypatch.setattr(door, "enter", lambda figure, profile, **given: chapters[figure])
    monkeypatch.setattr(preflight, "needs", lambda figure: False)
    monkeypatch.setattr(preflight, "check", lambda names, **_: dict.fromkeys(names))
    monkeypatch.setattr(stamps, "up_to_date", lambda figure, params: False)
    monkeypatch.setattr(pool, "run", lambda chapters, workers=None: pool.PoolRun(0))

    def notebook(figure, profile="quick", overrides=None, force=False, chapter=None):
        cached.update(job.name for job in chapters[figure].jobs)
        path = stamps.executed_path(figure)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name("partial.ipynb")  # renamed into place, as book.run does
        partial.write_text(json.dumps({"metadata": {stamps.STAMP_KEY: {"seconds": 12.5}}}))
        partial.replace(path)
        return path

    monkeypatch.setattr(execute, "run", notebook)
    assert all_chapters.run_all("quick") == {}
    assert not (kept / timing_records.TIMINGS_FILE).exists()
    cached.clear()
    cached.add("deq_gaps/j0")
    assert all_chapters.run_all("quick", record_timing=True) == {}
    records = timing_records.read_timings()
    assert [r["chapter"] for r in records] == ["affine", "deq_gaps", timing_records.WHOLE_BOOK]
    affine, gaps, whole = records
    assert (affine["seconds"], affine["cache"], affine["jobs_computed"]) == (12.5, "empty", 3)
    assert (gaps["cache"], gaps["jobs_computed"], gaps["workers"]) == ("warm", 2, 2)
    assert whole["cache"] == "warm" and whole["jobs_computed"] == 5
    assert affine["cpu"] and affine["commit"] and affine["date"]


def test_make_fig_records_its_notebook_only_when_executed(kept, monkeypatch):
    """``python -m i2o.book run FIG --record-timing``: one record when the notebook runs, none
    when it is up to date."""
    cached: set[str] = set()
    chapter = _Chapter("affine", cached)
    monkeypatch.setattr(door, "enter", lambda figure, profile, **given: chapter)
    monkeypatch.setattr(preflight, "check", lambda names, **_: dict.fromkeys(names))
    executes = [True, False]

    def notebook(figure, profile="quick", overrides=None, force=False, chapter=None):
        path = stamps.executed_path(figure)
        if executes.pop(0):
            cached.update(job.name for job in chapter.jobs)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name("partial.ipynb")
            partial.write_text(json.dumps({"metadata": {stamps.STAMP_KEY: {"seconds": 20.0}}}))
            partial.replace(path)
        return path

    monkeypatch.setattr(execute, "run", notebook)
    assert build.main(["run", "affine", "--record-timing"]) == 0
    assert build.main(["run", "affine", "--record-timing"]) == 0  # up to date: nothing more
    (only,) = timing_records.read_timings()
    assert (only["chapter"], only["seconds"], only["cache"], only["jobs_computed"],
            only["pool_jobs"], only["workers"]) == ("affine", 20.0, "empty", 3, 0, 2)
