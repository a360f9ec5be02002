"""Measured costs kept in the repository: the Reproduce page's tables come from them.

Two committed files in ``published/``, each a JSON list of records, appended to and never
rewritten (:func:`record`):

- ``timings.json`` (:data:`TIMINGS_FILE`): one record per executed notebook of a timed run (and
  one for a whole ``make book``, chapter :data:`WHOLE_BOOK`), with the fields of
  :data:`TIMING_FIELDS`: the wall seconds, whether the run started from an empty results cache
  (``cache``: ``empty`` when none of the chapter's jobs was in the cache at the start, else
  ``warm`` with ``jobs_computed``), the machine (CPU model and vendor, :func:`i2o.lineage.
  machine_facts`), the commit, the worker processes, the 1-minute load averages when the command
  started (before any of its processes) and when the notebook (or run) ended, whether the
  machine was otherwise idle (:func:`is_idle`), the date, the replicate and a free ``note``.
- ``numerics-costs.json`` (:data:`NUMERICS_FILE`): records of kind ``numerics``
  (:data:`NUMERICS_FIELDS`), one per measured step and run of ``benchmarks/bench_numerics.py``:
  the portable mode's time over the native mode's (``ratio``) and each pin's share
  (``components``: portable time over portable time without that pin). A sibling file because
  these are ratios of one step, not wall times of a chapter.

A timed run appends only when asked: ``python -m i2o.book book --record-timing`` (``make book
RECORD=1``, :func:`i2o.book.all_chapters.run_all`) or ``python -m i2o.book run FIG --record-timing``
(``make fig-FIG RECORD=1``), so tests, CI and casual builds never write to ``published/``. A
notebook run inside ``make book`` finds its jobs computed by the book's pool
(:mod:`i2o.compute.pool`): its record's ``seconds`` are the notebook's alone, ``pool_jobs`` says how
many of its jobs the pool computed, and the whole-book record carries the pool's time.

At staging the Reproduce page's section "Measured cost" is filled from these files
(:func:`fill_reproduce`): :func:`table`, one row per chapter × profile with the latest timing
from an empty cache and the count of the others, and :func:`numerics_table`, one row per step.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from i2o import lineage, locations
from i2o.compute import profiles

if TYPE_CHECKING:
    from i2o.compute.door import Chapter

TIMINGS_FILE = "timings.json"
NUMERICS_FILE = "numerics-costs.json"
#: The chapter name of a record timing a whole ``make book`` (pool and notebooks).
WHOLE_BOOK = "book"
CACHE_STATES = ("empty", "warm")
NUMERICS_KIND = "numerics"
#: Load (1-minute average) that counts as idle: below half a core busy besides the run's own.
IDLE_LOAD = 0.5
#: The goal for the portable mode's cost: at most this many times the native mode's time.
NUMERICS_GOAL = 1.3
#: A table cell whose measurement did not record it.
UNKNOWN = "—"
COST_START, COST_END = "<!-- i2o:measured-cost:start -->", "<!-- i2o:measured-cost:end -->"
NUMERICS_START, NUMERICS_END = ("<!-- i2o:numerics-cost:start -->",
                                "<!-- i2o:numerics-cost:end -->")


class RecordError(ValueError):
    """A record (or a file of records) that does not follow its schema."""


@dataclass(frozen=True)
class Field:
    """One field of a record: its JSON types, whether ``null`` is allowed, what it must be."""

    name: str
    types: tuple[type, ...]
    nullable: bool
    means: str
    valid: Callable[[Any], bool] = lambda value: True


def _at_least(bound: float) -> Callable[[Any], bool]:
    return lambda value: value >= bound


def _positive(value: Any) -> bool:
    return value > 0


def _iso(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _ratios(value: Mapping[str, Any]) -> bool:
    return all(isinstance(k, str) and k and _is(v, (int, float)) and v > 0
               for k, v in value.items())


_NUMBER = (int, float)
_MACHINE = (
    Field("cpu", (str,), True, "the CPU model"),
    Field("vendor", (str,), True, "the CPU vendor (vendor_id, e.g. GenuineIntel)"),
    Field("cores", (int,), True, "an integer ≥ 1 (the machine's cores)", _at_least(1)),
    Field("commit", (str,), True, "the commit measured"),
    Field("load_start", _NUMBER, True, "the 1-minute load average at the start, ≥ 0",
          _at_least(0)),
    Field("load_end", _NUMBER, True, "the 1-minute load average at the end, ≥ 0", _at_least(0)),
    Field("idle", (bool,), True, "true or false: whether the machine was otherwise idle"),
    Field("date", (str,), True, "an ISO 8601 date or time", _iso),
)
TIMING_FIELDS = (
    Field("chapter", (str,), False, f"a chapter of the manifest or {WHOLE_BOOK!r}",
          lambda value: bool(value)),
    Field("profile", (str,), False, f"one of {', '.join(profiles.PROFILES)}",
          lambda value: value in profiles.PROFILES),
    Field("replicate", (int,), True, "an integer ≥ 0", _at_least(0)),
    Field("seconds", _NUMBER, True, "the wall seconds, ≥ 0", _at_least(0)),
    Field("cpu_seconds", _NUMBER, True, "the CPU seconds of the jobs, > 0", _positive),
    Field("cache", (str,), False, "'empty' (none of the jobs in the results cache at the start) "
          "or 'warm'", lambda value: value in CACHE_STATES),
    Field("jobs_computed", (int,), True, "an integer ≥ 0", _at_least(0)),
    Field("pool_jobs", (int,), True, "an integer ≥ 0 (jobs computed by the book's pool)",
          _at_least(0)),
    Field("workers", (int,), True, "an integer ≥ 1", _at_least(1)),
    *_MACHINE,
    Field("note", (str,), False, "text (may be empty)"),
)
NUMERICS_FIELDS = (
    Field("kind", (str,), False, f"{NUMERICS_KIND!r}", lambda value: value == NUMERICS_KIND),
    Field("step", (str,), False, "the measured step, named", lambda value: bool(value)),
    Field("ratio", _NUMBER, False, "portable time over native time, > 0", _positive),
    Field("components", (dict,), False, "an object: pin name → portable time over portable "
          "time without that pin (each > 0)", _ratios),
    Field("command", (str,), True, "the command that measured it"),
    *_MACHINE,
    Field("note", (str,), False, "text (may be empty)"),
)


def _is(value: Any, types: tuple[type, ...]) -> bool:
    """``isinstance`` where a JSON boolean is not a number."""
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _check(record: Any, fields: Sequence[Field], where: str) -> dict[str, Any]:
    """``record`` with its fields in schema order; :class:`RecordError` naming the first field
    that is missing, unknown, of the wrong type or out of range."""
    if not isinstance(record, Mapping):
        raise RecordError(f"{where}: a record is a JSON object; got {type(record).__name__}")
    names = [field.name for field in fields]
    if unknown := [name for name in record if name not in names]:
        raise RecordError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}; a record "
                          f"has exactly {', '.join(names)}")
    if missing := [name for name in names if name not in record]:
        raise RecordError(f"{where}: missing field(s) {', '.join(map(repr, missing))} (null "
                          "where not known)")
    for field in fields:
        value = record[field.name]
        if value is None and field.nullable:
            continue
        if not _is(value, field.types) or not field.valid(value):
            null = " or null" if field.nullable else ""
            raise RecordError(f"{where}: field {field.name!r} must be {field.means}{null}; "
                              f"got {value!r}")
    return {name: record[name] for name in names}


def check_timing(record: Any, chapters: Sequence[str] | None = None,
                 where: str = "timing record") -> dict[str, Any]:
    """A timing record checked against :data:`TIMING_FIELDS`, and: a wall time or a CPU time,
    ``pool_jobs`` at most ``jobs_computed``, and (given ``chapters``) a known chapter."""
    checked = _check(record, TIMING_FIELDS, where)
    if checked["seconds"] is None and checked["cpu_seconds"] is None:
        raise RecordError(f"{where}: a timing needs 'seconds' (wall) or 'cpu_seconds'")
    pooled, computed = checked["pool_jobs"], checked["jobs_computed"]
    if pooled is not None and computed is not None and pooled > computed:
        raise RecordError(f"{where}: 'pool_jobs' ({pooled}) exceeds 'jobs_computed' "
                          f"({computed})")
    if chapters is not None and checked["chapter"] not in chapters:
        raise RecordError(f"{where}: field 'chapter' must be one of {', '.join(chapters)}; "
                          f"got {checked['chapter']!r}")
    return checked


def check_numerics(record: Any, where: str = "numerics record") -> dict[str, Any]:
    """A numerics record checked against :data:`NUMERICS_FIELDS`."""
    return _check(record, NUMERICS_FIELDS, where)


def folder() -> Path:
    return locations.repo_root() / "published"


def timings_path() -> Path:
    return folder() / TIMINGS_FILE


def numerics_path() -> Path:
    return folder() / NUMERICS_FILE


def _read(path: Path, check: Callable[[Any, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Every record of ``path`` checked (``[]`` when it does not exist); :class:`RecordError`
    naming the file and the record that breaks the schema."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
    except ValueError as error:
        raise RecordError(f"{path}: not JSON ({error})") from error
    if not isinstance(data, list):
        raise RecordError(f"{path}: must hold a JSON list of records; got "
                          f"{type(data).__name__}")
    return [check(item, f"{path.name} record {index}") for index, item in enumerate(data)]


def read_timings(path: Path | None = None) -> list[dict[str, Any]]:
    return _read(path or timings_path(), lambda item, where: check_timing(item, where=where))


def read_numerics(path: Path | None = None) -> list[dict[str, Any]]:
    return _read(path or numerics_path(), lambda item, where: check_numerics(item, where))


def record(entry: Mapping[str, Any], path: Path | None = None) -> Path:
    """Append ``entry`` to its file (``kind`` ``numerics``: :data:`NUMERICS_FILE`, else
    :data:`TIMINGS_FILE`; ``path`` overrides) after checking it and every record already there;
    the file is rewritten whole through a temporary file renamed into place, under a lock, so a
    reader never sees half of it and two writers never drop each other's record."""
    numerics = entry.get("kind") == NUMERICS_KIND
    target = path or (numerics_path() if numerics else timings_path())
    if numerics:
        checked, read = check_numerics(entry), read_numerics
    else:
        checked, read = check_timing(entry, [*profiles.figures(), WHOLE_BOOK]), read_timings
    locks = locations.build_dir() / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"{target.name}.lock")):
        records = [*read(target), checked]
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n")
        partial.replace(target)
    return target


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
           note: str = "") -> dict[str, Any]:
    """A timing record of this machine now: its CPU (:func:`i2o.lineage.machine_facts`), the
    commit (:func:`i2o.lineage.git_sha`), the date, and whether it was idle
    (:func:`is_idle` with ``own`` processes of the run)."""
    facts = lineage.machine_facts()
    return check_timing({
        "chapter": chapter, "profile": profile, "replicate": replicate,
        "seconds": None if seconds is None else round(seconds, 1),
        "cpu_seconds": cpu_seconds, "cache": cache, "jobs_computed": jobs_computed,
        "pool_jobs": pool_jobs, "workers": workers, "cpu": facts["cpu"],
        "vendor": facts["vendor"], "cores": facts["cores"], "commit": lineage.git_sha(),
        "load_start": load_start, "load_end": load_end,
        "idle": is_idle(load_start, load_end, own), "date": lineage.now_iso(), "note": note})


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
        manifest started with none of its jobs cached and was executed."""
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


def _minutes(seconds: float) -> str:
    whole = f"{seconds:,.0f} s"
    return f"{seconds / 60:.1f} min ({whole})" if seconds >= 60 else whole


def _wall(entry: Mapping[str, Any]) -> str:
    if entry["seconds"] is not None:
        said = _minutes(entry["seconds"])
    else:
        said = "no wall time recorded"
    if entry["cpu_seconds"] is not None:
        hours = entry["cpu_seconds"] / 3600
        cpu = f"{hours:.1f} CPU-hours" if hours >= 1 else f"{entry['cpu_seconds']:,.0f} CPU-s"
        said += f"; {cpu} of jobs"
    if entry["pool_jobs"]:
        said += (f"; the notebook alone: {entry['pool_jobs']} of its jobs ran in the book's "
                 f"pool (row {WHOLE_BOOK})")
    if entry["replicate"]:
        said += f"; replicate {entry['replicate']}"
    return said


def _idle(entry: Mapping[str, Any]) -> str:
    word = {True: "yes", False: "**no**", None: UNKNOWN}[entry["idle"]]
    loads = [f"{entry[k]:g}" if entry[k] is not None else "?" for k in ("load_start", "load_end")]
    if loads != ["?", "?"]:
        word += f" (load {loads[0]} → {loads[1]})"
    return word


def _machine(entry: Mapping[str, Any]) -> str:
    if entry["cpu"] is None:
        return UNKNOWN
    return entry["cpu"] + (f", {entry['cores']} cores" if entry["cores"] else "")


def _or_unknown(value: Any, code: bool = False) -> str:
    if value is None:
        return UNKNOWN
    return f"`{value}`" if code else str(value)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _order(figures: Sequence[str]) -> Callable[[tuple[str, str]], tuple[int, int, str, str]]:
    chapters, known = [*figures, WHOLE_BOOK], list(profiles.PROFILES)

    def key(pair: tuple[str, str]) -> tuple[int, int, str, str]:
        chapter, profile = pair
        return (chapters.index(chapter) if chapter in chapters else len(chapters),
                known.index(profile) if profile in known else len(known), chapter, profile)

    return key


def _others(group: Sequence[Mapping[str, Any]], shown: int | None) -> str:
    where = f"`published/{TIMINGS_FILE}`"
    if shown is None:
        return f"{_plural(len(group), 'timing')} in {where}, none from an empty cache"
    earlier, later = shown, len(group) - shown - 1
    said = f"{_plural(earlier, 'earlier timing')} in {where}" if earlier else "none earlier"
    if later:
        said += f"; {later} later, not from an empty cache"
    return said


def table(profile: str | None = None, records: Sequence[Mapping[str, Any]] | None = None
          ) -> str:
    """A Markdown table, one row per chapter × profile recorded (``profile``: that one only):
    its latest timing from an empty results cache (wall time, CPU, commit, workers, whether the
    machine was idle, date) and how many other timings the file holds; ``records`` default to
    ``published/timings.json``."""
    entries = read_timings() if records is None else [
        check_timing(item, where=f"record {i}") for i, item in enumerate(records)]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        if profile is None or entry["profile"] == profile:
            groups.setdefault((entry["chapter"], entry["profile"]), []).append(entry)
    if not groups:
        return (f"No timing in `published/{TIMINGS_FILE}`" + (f" at `{profile}`" if profile
                                                              else "")
                + " yet: `make clean-results` then `make book RECORD=1` appends them.")
    lines = ["| chapter | profile | wall time from an empty cache | CPU | commit | workers | "
             "idle | date | other timings |", "|---|---|---|---|---|---|---|---|---|"]
    for chapter, prof in sorted(groups, key=_order(profiles.figures())):
        group = groups[(chapter, prof)]
        empty = [i for i, entry in enumerate(group) if entry["cache"] == "empty"]
        name = "whole book (`make book`)" if chapter == WHOLE_BOOK else f"`{chapter}`"
        if not empty:
            lines.append(f"| {name} | `{prof}` | none recorded | — | — | — | — | — | "
                         f"{_others(group, None)} |")
            continue
        entry = group[empty[-1]]
        lines.append(f"| {name} | `{prof}` | {_wall(entry)} | {_machine(entry)} | "
                     f"{_or_unknown(entry['commit'], code=True)} | "
                     f"{_or_unknown(entry['workers'])} | {_idle(entry)} | "
                     f"{_or_unknown(entry['date'])} | {_others(group, empty[-1])} |")
    return "\n".join(lines)


def numerics_table(records: Sequence[Mapping[str, Any]] | None = None) -> str:
    """A Markdown table, one row per measured step: its latest portable-over-native ratio, each
    pin's share, whether it meets the goal (≤ :data:`NUMERICS_GOAL`), the machine and how many
    earlier measurements ``published/numerics-costs.json`` holds."""
    entries = read_numerics() if records is None else [
        check_numerics(item, f"record {i}") for i, item in enumerate(records)]
    steps: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        steps.setdefault(entry["step"], []).append(entry)
    if not steps:
        return f"No measurement in `published/{NUMERICS_FILE}` yet."
    lines = [f"| step | portable ÷ native | of which (each pin) | ≤ {NUMERICS_GOAL}× | CPU | "
             "idle | commit | earlier |", "|---|---|---|---|---|---|---|---|"]
    for step, group in steps.items():
        entry = group[-1]
        parts = ", ".join(f"{name} {value:.2f}×" for name, value in entry["components"].items())
        met = "met" if entry["ratio"] <= NUMERICS_GOAL else "**not met**"
        lines.append(f"| {step} | {entry['ratio']:.2f}× | {parts or '—'} | {met} | "
                     f"{_machine(entry)} | {_idle(entry)} | "
                     f"{_or_unknown(entry['commit'], code=True)} | {len(group) - 1} |")
    return "\n".join(lines)


def _section(make: Callable[[], str], path: Path) -> str:
    """``make()``, or one line saying why ``path`` could not be shown (the build goes on)."""
    try:
        return make()
    except RecordError as error:
        print(f"[i2o] warning: {error}", flush=True)
        return f"(`published/{path.name}` could not be read: {error})"


def replace_block(page: Path, start: str, end: str, text: str) -> bool:
    """Replace the markers ``start`` … ``end`` of ``page`` and what lies between them by
    ``text`` (the staged copy keeps no marker); ``False`` (the page untouched) if it lacks
    them."""
    content = page.read_text()
    if start not in content or end not in content.split(start, 1)[1]:
        return False
    head, rest = content.split(start, 1)
    page.write_text(head + text + rest.split(end, 1)[1])
    return True


def fill_reproduce(page: Path) -> bool:
    """Put the Reproduce page's two measured-cost tables in place of their markers (staging);
    ``False`` if ``page`` lacks either pair."""
    costs = replace_block(page, COST_START, COST_END, _section(table, timings_path()))
    ratios = replace_block(page, NUMERICS_START, NUMERICS_END,
                           _section(numerics_table, numerics_path()))
    return costs and ratios
