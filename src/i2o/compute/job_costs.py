"""Published job costs: what each job cost where it was last measured, kept in the repository so
that a fresh clone's first ``make book`` orders its pool longest first and forecasts its wall time
from measurements rather than from a flat guess.

The results cache records each job's cost when it computes it
(:class:`i2o.compute.cache_costs.JobCost`), but a fresh clone has no cache: without this file every
job of its first build would be expected to cost the same
(:data:`i2o.compute.pool.DEFAULT_JOB_SECONDS`), the order of its pool would be arbitrary and its
forecast wrong by hours. ``published/job-costs.json`` holds, per chapter, one record per job name
and parameters: the wall time, CPU time and peak memory of the job, the CPU it ran on, and the
digest of its key parameters (:func:`i2o.compute.cache_costs.cost_key`), so that a record counts
only for a job with the same parameters (another profile's run of the same name is another record).

- :func:`publish` (``make book RECORD=1``, at the end of the build) writes the records of every
  job of the chapters run that the results cache holds, replacing earlier records of the same job
  and parameters and keeping the others;
- :func:`lookup` reads them for :func:`i2o.compute.pool.estimate_jobs`, which prefers the cache's
own
  record (this machine's) and falls back to the published one.

A published cost was measured on another machine, so it orders and forecasts; it decides nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from i2o.base import lineage, locations
from i2o.compute import cache_costs
from i2o.compute.job import Job

FILE = "job-costs.json"


def path() -> Path:
    return locations.repo_root() / "published" / FILE


def record_key(job: Job) -> str:
    """``<job name> <parameters digest>``: one record per job
    (:func:`i2o.compute.cache_costs.cost_key`)."""
    return cache_costs.cost_key(job.name, job.key())


def read(at: Path | None = None) -> dict[str, Any]:
    """The published records (``{"chapters": {figure: {record key: record}}}``); empty when the
    file is absent or unreadable."""
    try:
        data = json.loads((at or path()).read_text())
    except (OSError, ValueError):
        return {"chapters": {}}
    return data if isinstance(data.get("chapters"), dict) else {"chapters": {}}


def lookup(jobs: Sequence[Job], at: Path | None = None) -> list[cache_costs.JobCost | None]:
    """The published cost of each of ``jobs``, in order (``None`` where none has the job's name
    and parameters)."""
    chapters = read(at)["chapters"]
    found: list[cache_costs.JobCost | None] = []
    for job in jobs:
        record = chapters.get(job.figure, {}).get(record_key(job))
        found.append(None if record is None else cache_costs.JobCost(
            seconds=float(record["seconds"]), cpu_seconds=float(record["cpu_seconds"]),
            peak_rss_mb=record.get("peak_rss_mb"), created=str(record.get("created", ""))))
    return found


def collect(jobs: Sequence[Job]) -> dict[str, dict[str, dict[str, Any]]]:
    """The records of ``jobs`` whose cost the results cache holds, by chapter and record key,
    each with the CPU that measured it (this machine: the cache's entries were computed here or
    imported, and an import keeps the exporting machine's ``meta.json``, whose CPU is read)."""
    by_figure: dict[str, list[Job]] = {}
    for job in jobs:
        by_figure.setdefault(job.figure, []).append(job)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for figure, mine in by_figure.items():
        costs = cache_costs.recorded_costs(figure, [(job.name, job.key()) for job in mine])
        for key, cost in costs.items():
            out.setdefault(figure, {})[key] = {
                "seconds": round(cost.seconds, 2), "cpu_seconds": round(cost.cpu_seconds, 2),
                "peak_rss_mb": None if cost.peak_rss_mb is None else round(cost.peak_rss_mb, 1),
                "created": cost.created, "cpu": lineage.machine_facts().get("cpu")}
    return out


def publish(jobs: Sequence[Job], at: Path | None = None) -> tuple[Path, int]:
    """Merge the cache's records of ``jobs`` (:func:`collect`) into the published file; return
    it and the number of records written."""
    target = at or path()
    data = read(target)
    found = collect(jobs)
    for figure, records in found.items():
        data["chapters"].setdefault(figure, {}).update(records)
    data["updated"] = lineage.now_iso()
    data["commit"] = lineage.git_sha()
    data["chapters"] = {f: dict(sorted(r.items())) for f, r in sorted(data["chapters"].items())}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(target)
    return target, sum(len(r) for r in found.values())
