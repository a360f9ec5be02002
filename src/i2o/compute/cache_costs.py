"""What computing each results-cache entry cost, recorded in its ``meta.json`` outside the key.

:func:`i2o.compute.results.cached` measures the wall and CPU seconds of ``compute()`` and the
process's peak memory, and stores them under :data:`COST`; :func:`recorded_costs` reads the most
recent record of each job (its name and parameters, :func:`cost_key`) under any key, for the book's
job pool (:mod:`i2o.compute.pool`) and the forecast (``python -m i2o.results plan``,
:mod:`i2o.compute.plan`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from i2o.base.digests import sha256
from i2o.compute.cache_entries import META, results_dir

#: The field of an entry's ``meta.json`` that holds what computing it cost (:class:`JobCost`).
COST = "cost"
#: An entry's folder: the job's name, a dash, the first 20 hex digits of its key.
_ENTRY_NAME = re.compile(r"(?P<name>.+)-[0-9a-f]{20}")


@dataclass(frozen=True)
class JobCost:
    """What computing one cache entry cost, as :func:`i2o.compute.results.cached` measured it around
    ``compute()``.

    ``seconds`` is the wall time, ``cpu_seconds`` the process's CPU time over the same span
    (``time.process_time``: every thread of the process, no child process). ``peak_rss_mb`` is
    the computing process's peak resident memory after the compute (``ru_maxrss`` of
    ``RUSAGE_SELF``, in MB): the peak of the whole process since it started, so an upper bound
    for the job (a job computed after a bigger one in the same process inherits its peak);
    ``None`` where the platform does not report it. ``created`` is the entry's creation time
    (UTC, ISO 8601) as its ``meta.json`` records it.
    """

    seconds: float
    cpu_seconds: float
    peak_rss_mb: float | None
    created: str = ""


def peak_rss_mb() -> float | None:
    """This process's peak resident memory so far, in MB (``ru_maxrss``: kB on Linux, bytes on
    macOS); ``None`` where ``resource`` is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 1024), 1)


def _cost_of(entry: Path) -> tuple[JobCost, dict[str, Any]] | None:
    """The cost an entry's ``meta.json`` records, with the parameters it records; ``None`` when
    it records none (computed before costs were recorded) or cannot be read."""
    try:
        meta = json.loads((entry / META).read_text())
        cost = meta[COST]
        return (JobCost(seconds=float(cost["seconds"]), cpu_seconds=float(cost["cpu_seconds"]),
                        peak_rss_mb=None if cost.get("peak_rss_mb") is None
                        else float(cost["peak_rss_mb"]),
                        created=str(meta.get("created", ""))),
                dict(meta.get("params") or {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def comparable_params(params: Mapping[str, Any]) -> Any:
    """``params`` as ``meta.json`` stores them (tuples become lists, other values their repr)."""
    return json.loads(json.dumps(dict(params), default=repr))


def params_digest(params: Mapping[str, Any]) -> str:
    """First 16 hex digits of the SHA-256 of a job's key parameters in the form ``meta.json``
    stores them (:func:`comparable_params`)."""
    stored = json.dumps(comparable_params(params), sort_keys=True)
    return sha256(stored.encode())[:16]


def cost_key(name: str, params: Mapping[str, Any]) -> str:
    """``<job name> <parameters digest>``: what a cost is recorded under, one per job. Jobs of
    one name with other parameters (the language model's seeds, another profile's run) are
    other jobs; a changed cache key (a code change) keeps the name and parameters, so the
    record still counts."""
    return f"{name} {params_digest(params)}"


def recorded_costs(figure: str,
                   wanted: Iterable[tuple[str, Mapping[str, Any]]] | None = None
                   ) -> dict[str, JobCost]:
    """The most recent recorded cost of every job in ``figure``'s cache folder, under any key,
    by :func:`cost_key` (entries are ``<name>-<20 hex digits>``; their ``meta.json`` records
    the parameters). With ``wanted`` (``(name, key parameters)`` of each job asked for), only
    those jobs' records are returned."""
    folder = results_dir() / figure
    asked = None if wanted is None else {cost_key(name, params) for name, params in wanted}
    found: dict[str, tuple[tuple[str, float], JobCost]] = {}
    if not folder.is_dir():
        return {}
    for entry in folder.iterdir():
        match = _ENTRY_NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir():
            continue
        if asked is not None and not any(key.startswith(match["name"] + " ") for key in asked):
            continue
        read = _cost_of(entry)
        if read is None:
            continue
        key = cost_key(match["name"], read[1])
        if asked is not None and key not in asked:
            continue
        cost = read[0]
        order = (cost.created, (entry / META).stat().st_mtime)
        if key not in found or order > found[key][0]:
            found[key] = (order, cost)
    return {key: cost for key, (_, cost) in found.items()}


def recorded_cost(figure: str, name: str, params: Mapping[str, Any] | None = None
                  ) -> JobCost | None:
    """The most recent recorded cost of the job ``name`` with ``params`` in ``figure``'s cache
    folder, under any key (:func:`recorded_costs`); without ``params``, of any job of that name.
    ``None`` when no such entry records a cost."""
    if params is not None:
        return recorded_costs(figure, [(name, params)]).get(cost_key(name, params))
    mine = [cost for key, cost in recorded_costs(figure).items()
            if key.rsplit(" ", 1)[0] == name]
    return max(mine, key=lambda cost: cost.created, default=None)
