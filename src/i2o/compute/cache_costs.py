"""What computing each results-cache entry cost, recorded in its ``meta.json`` outside the key.

:func:`i2o.results.cached` measures the wall and CPU seconds of ``compute()`` and the process's
peak memory, and stores them under :data:`COST`; :func:`recorded_costs` reads the most recent
record of each job name under any key, for the book's job pool (:mod:`i2o.compute.pool`) and the
forecast (``python -m i2o.results plan``, :mod:`i2o.compute.plan`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from i2o.compute.cache_entries import META, results_dir

#: The field of an entry's ``meta.json`` that holds what computing it cost (:class:`JobCost`).
COST = "cost"
#: An entry's folder: the job's name, a dash, the first 20 hex digits of its key.
_ENTRY_NAME = re.compile(r"(?P<name>.+)-[0-9a-f]{20}")


@dataclass(frozen=True)
class JobCost:
    """What computing one cache entry cost, as :func:`i2o.results.cached` measured it around
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


def recorded_costs(figure: str, params: Mapping[str, Mapping[str, Any]] | None = None
                   ) -> dict[str, JobCost]:
    """The most recent recorded cost of every job name in ``figure``'s cache folder, under any
    key (entries are ``<name>-<20 hex digits>``; a changed key, after a code change, keeps the
    name). With ``params`` (name → the job's key parameters), a name's records count only where
    the entry's recorded parameters equal those (so that another profile's run of the same name
    is not taken for this one's); names not in ``params`` are then left out."""
    folder = results_dir() / figure
    wanted = None if params is None else {name: comparable_params(p)
                                          for name, p in params.items()}
    found: dict[str, tuple[tuple[str, float], JobCost]] = {}
    if not folder.is_dir():
        return {}
    for entry in folder.iterdir():
        match = _ENTRY_NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir():
            continue
        name = match["name"]
        if wanted is not None and name not in wanted:
            continue
        read = _cost_of(entry)
        if read is None or (wanted is not None and read[1] != wanted[name]):
            continue
        cost = read[0]
        order = (cost.created, (entry / META).stat().st_mtime)
        if name not in found or order > found[name][0]:
            found[name] = (order, cost)
    return {name: cost for name, (_, cost) in found.items()}


def recorded_cost(figure: str, name: str, params: Mapping[str, Any] | None = None
                  ) -> JobCost | None:
    """The most recent recorded cost of the job ``name`` in ``figure``'s cache folder, under any
    key (:func:`recorded_costs`); with ``params``, only an entry computed with those parameters
    counts. ``None`` when no entry of that name records a cost."""
    if params is None:
        return recorded_costs(figure).get(name)
    return recorded_costs(figure, {name: params}).get(name)
