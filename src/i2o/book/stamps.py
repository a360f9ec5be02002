"""Stamps of executed notebooks: where a figure's executed notebook lives, what its stamp is
computed from (source notebook, parameters, i2o source hash, numerics pins), and what moved when a
recorded stamp differs from the current one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from i2o.base import locations, runtime
from i2o.base.digests import sha256
from i2o.compute import cache_key, import_graph, profiles

STAMP_KEY = "i2o"


def executed_dir() -> Path:
    return locations.build_dir() / "notebooks"


def executed_path(figure: str) -> Path:
    return executed_dir() / Path(profiles.entry(figure)["notebook"]).name


def stamp_inputs(figure: str, params: profiles.Params) -> dict[str, Any]:
    """What ``figure``'s stamp is computed from: the SHA-256 of its source notebook, the profile,
    the parameters, the SHA-256 of every i2o source file (:func:`i2o.compute.cache_key.source_hash`)
    and, in portable mode, the numerics pins (:func:`i2o.base.runtime.numerics_key`, as in a cache
    key: other pins re-execute)."""
    source = locations.repo_root() / profiles.entry(figure)["notebook"]
    what = {"notebook": sha256(source.read_bytes()),
            "profile": params.profile, "params": params.as_dict(), "i2o": cache_key.source_hash()}
    if (numerics := runtime.numerics_key()) is not None:
        what["numerics"] = numerics
    return what


def stamp_of(inputs: Mapping[str, Any]) -> str:
    """The stamp of :func:`stamp_inputs`: SHA-256 of their canonical JSON (keys sorted)."""
    return sha256(json.dumps(dict(inputs), sort_keys=True).encode())


def stamp(figure: str, params: profiles.Params) -> str:
    return stamp_of(stamp_inputs(figure, params))


def stamped(figure: str, params: profiles.Params) -> tuple[str, dict[str, Any]]:
    """``figure``'s stamp with ``params`` and what it was computed from, with the digest of each
    source file beside it (``sources``, :func:`source_digests`; not part of the stamp)."""
    inputs = stamp_inputs(figure, params)
    return stamp_of(inputs), {**inputs, "sources": source_digests()}


def source_digests(root: Path = import_graph.PACKAGE_DIR) -> dict[str, str]:
    """Each file the stamp's ``i2o`` digest covers (every ``*.py`` under ``root``, as
    :func:`i2o.compute.cache_key.source_hash` finds them), by path relative to ``root``, with the
    first 16 hex digits of its SHA-256: kept beside the stamp so that a changed stamp names its
    files."""
    return {str(path.relative_to(root)): sha256(path.read_bytes())[:16]
            for path in sorted(root.rglob("*.py"))}


def stamp_changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between two stamps' inputs (each :func:`stamp_inputs` with ``sources``,
    :func:`source_digests`), one phrase per input that moved; empty when none did.
    ``recorded`` without inputs (a notebook executed before they were kept) says so."""
    if not recorded:
        return ["the executed notebook keeps no stamp inputs (executed before they were kept)"]
    changes = []
    if recorded.get("notebook") != current.get("notebook"):
        changes.append("the source notebook changed")
    if recorded.get("profile") != current.get("profile"):
        changes.append(f"profile {recorded.get('profile')!r} → {current.get('profile')!r}")
    changes += _parameter_changes(recorded.get("params") or {}, current.get("params") or {})
    if recorded.get("i2o") != current.get("i2o"):
        changes.append("i2o source: " + _source_changes(recorded.get("sources") or {},
                                                       current.get("sources") or {}))
    if recorded.get("numerics") != current.get("numerics"):
        changes.append(f"numerics pins {recorded.get('numerics')} → {current.get('numerics')}")
    return changes


def _parameter_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """One phrase per parameter whose value differs (or that only one side has)."""
    return [f"parameter {name}: {before.get(name)!r} → {after.get(name)!r}"
            for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]


def _source_changes(before: Mapping[str, str], after: Mapping[str, str], shown: int = 5) -> str:
    """The files changed, added and removed between two :func:`source_digests` (at most
    ``shown`` names of each kind)."""
    kinds = {"changed": sorted(n for n in set(before) & set(after) if before[n] != after[n]),
             "added": sorted(set(after) - set(before)),
             "removed": sorted(set(before) - set(after))}
    parts = [f"{kind} {', '.join(names[:shown])}"
             + (f" and {len(names) - shown} more" if len(names) > shown else "")
             for kind, names in kinds.items() if names]
    return "; ".join(parts) or "its digest differs, no file's does (changed while being read)"


def recorded_stamp(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())["metadata"].get(STAMP_KEY, {})
    except (ValueError, KeyError):
        return {}



def up_to_date(figure: str, params: profiles.Params) -> bool:
    """Whether ``figure``'s executed notebook carries the stamp of ``params`` (so that
    :func:`i2o.book.execute.run` would not execute it again without ``force``)."""
    return recorded_stamp(executed_path(figure)).get("stamp") == stamp(figure, params)

