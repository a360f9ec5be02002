"""Measured costs kept in the repository, as checked records: the Reproduce page's tables come
from them.

Two committed files in ``published/``, each a JSON list of records, appended to and never
rewritten (:func:`record`):

- ``timings.json`` (:data:`TIMINGS_FILE`): one record per executed notebook of a timed run (and
  one for a whole ``make book``, chapter :data:`WHOLE_BOOK`), with the fields of
  :data:`TIMING_FIELDS`: the wall seconds, whether the run started from an empty results cache
  (``cache``: ``empty`` when none of the chapter's jobs was in the cache at the start, else
  ``warm`` with ``jobs_computed``), the machine (CPU model and vendor, :func:`i2o.base.lineage.
  machine_facts`), the commit, the worker processes, the 1-minute load averages when the command
  started (before any of its processes) and when the notebook (or run) ended, whether the
  machine was otherwise idle (:func:`i2o.compute.timings.is_idle`), the date, the replicate, a
  free ``note`` and, for a whole book from an empty cache, the wall time forecast at its start
  (``forecast_seconds``, :mod:`i2o.compute.plan`; absent in records older than the field).
- ``numerics-costs.json`` (:data:`NUMERICS_FILE`): records of kind ``numerics``
  (:data:`NUMERICS_FIELDS`), one per measured step and run of ``benchmarks/bench_numerics.py``:
  the portable mode's time over the native mode's (``ratio``) and each pin's share
  (``components``: portable time over portable time without that pin). A sibling file because
  these are ratios of one step, not wall times of a chapter.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from i2o.base import locations
from i2o.compute import profiles

TIMINGS_FILE = "timings.json"
NUMERICS_FILE = "numerics-costs.json"
#: The chapter name of a record timing a whole ``make book`` (pool and notebooks).
WHOLE_BOOK = "book"
CACHE_STATES = ("empty", "warm")
NUMERICS_KIND = "numerics"


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
    optional: bool = False  # absent from records written before the field existed: null


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
    Field("forecast_seconds", _NUMBER, True, "the wall seconds python -m i2o.results plan "
          "forecast for the run at its start (a whole book from an empty cache), ≥ 0",
          _at_least(0), optional=True),
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
    optional = {field.name for field in fields if field.optional}
    record = {**{name: None for name in optional}, **record}
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

