"""What the chapters run at several replicates wrote, summarised: per chapter and claim, the
verdict and value at each replicate and whether they agree (:func:`agreement`), kept in
``_build/robustness.json`` (:func:`write_summary`, :func:`read_summary`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from i2o.base import lineage, locations
from i2o.compute import profiles

#: agreement statuses, in the order the page counts them
SAME_DECIDED, SAME_UNDECIDED, FLIPS, INCOMPLETE = ("same verdict", "undecided at every replicate",
                                                    "flips", "incomplete")
STATUSES = (SAME_DECIDED, SAME_UNDECIDED, FLIPS, INCOMPLETE)


def replicate_dir(profile: str, replicate: int) -> Path:
    """The build folder of the chapters run at ``replicate`` in ``profile``."""
    return locations.build_dir() / "robustness" / profile / f"r{replicate}"


def summary_path() -> Path:
    return locations.build_dir() / "robustness.json"


def _stamp(folder: Path, figure: str) -> dict[str, Any]:
    path = folder / "notebooks" / Path(profiles.entry(figure)["notebook"]).name
    try:
        return json.loads(path.read_text())["metadata"].get("i2o", {})
    except (OSError, ValueError, KeyError):
        return {}


def _claims(folder: Path, figure: str) -> list[dict[str, Any]] | None:
    try:
        return json.loads((folder / "claims" / f"{figure}.json").read_text())
    except (OSError, ValueError):
        return None


def verdict(row: Mapping[str, Any]) -> str:
    holds = row.get("holds")
    return "undecided" if holds is None else ("holds" if holds else "fails")


def agreement(verdicts: Sequence[str | None]) -> str:
    """One claim's status across replicates (``None``: that replicate is missing)."""
    if not verdicts or any(v is None for v in verdicts):
        return INCOMPLETE
    if len(set(verdicts)) > 1:
        return FLIPS
    return SAME_UNDECIDED if verdicts[0] == "undecided" else SAME_DECIDED


def _keyed(rows: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Rows by id when the row has one (its wording may quote a measured number), else by claim
    text (a repeated key gets `` #2``, `` #3``…)."""
    out: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        base = row.get("id") or row["claim"]
        key, k = base, 2
        while key in out:
            key, k = f"{base} #{k}", k + 1
        out[key] = row
    return out


def chapter_table(runs: Mapping[int, list[dict[str, Any]] | None]) -> list[dict[str, Any]]:
    """Per claim (in the order first seen): its verdict, value and check at each replicate, and
    its agreement. ``runs`` maps each replicate to its claim rows (``None`` when missing)."""
    keyed = {r: _keyed(rows) if rows is not None else None for r, rows in runs.items()}
    order: list[str] = []
    for rows in keyed.values():
        order += [k for k in (rows or {}) if k not in order]
    table = []
    for key in order:
        at, first = {}, None
        for r, rows in keyed.items():
            row = rows.get(key) if rows is not None else None
            first = first or row
            at[str(r)] = None if row is None else {
                "verdict": verdict(row), "value": row.get("value", ""),
                "check": row.get("check", "")}
        assert first is not None
        table.append({"claim": first["claim"] if first.get("id") else key,
                      **({"id": first["id"]} if first.get("id") else {}),
                      "section": first.get("section", ""), "replicates": at,
                      "agreement": agreement([a["verdict"] if a else None for a in at.values()])})
    return table


def counts(table: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {status: sum(row["agreement"] == status for row in table) for status in STATUSES}


def merge_chapter(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> dict[str, Any]:
    """One chapter's summary at the union of two runs' replicates: each claim's verdicts at the
    earlier run's replicates and at the later's (the later run wins on a replicate both hold),
    its agreement and the counts taken again. Both runs must come from the same code (the caller
    checks their digests); a claim one run lacks is ``incomplete`` at the other's replicates."""
    replicates = sorted({*map(int, earlier["replicates"]), *map(int, later["replicates"])})
    rows_before, rows_after = _keyed(earlier["claims"]), _keyed(later["claims"])
    table = []
    for key in [*rows_before, *(k for k in rows_after if k not in rows_before)]:
        first = rows_before.get(key) or rows_after[key]
        at = {**(rows_before.get(key) or {}).get("replicates", {}),
              **(rows_after.get(key) or {}).get("replicates", {})}
        at = {str(r): at.get(str(r)) for r in replicates}
        table.append({**{k: v for k, v in first.items() if k not in ("replicates", "agreement")},
                      "replicates": at,
                      "agreement": agreement([a["verdict"] if a else None for a in at.values()])})
    return {"claims": table, "counts": counts(table),
            "runs": {**earlier.get("runs", {}), **later.get("runs", {})},
            "missing": [], "replicates": replicates}


def chapter_replicates(data: Mapping[str, Any], figure: str) -> list[int]:
    """The replicates of ``figure`` in a robustness summary, built or published: the chapter's
    own list where it was published apart from the others (``make publish FIGURES=...`` at other
    replicates), else the summary's."""
    return [int(r) for r in data["chapters"][figure].get("replicates", data["replicates"])]


def collect(profile: str, replicates: Sequence[int],
            figures: Sequence[str] | None = None) -> dict[str, Any]:
    """What the replicate runs wrote: per chapter, the claim table, the replicates found and
    missing, and each run's machine and time."""
    figures = list(figures or profiles.figures())
    chapters = {}
    machines: dict[str, dict[str, Any]] = {}
    for figure in figures:
        runs, meta = {}, {}
        for r in replicates:
            folder = replicate_dir(profile, r)
            stamp = _stamp(folder, figure)
            rows = _claims(folder, figure) if stamp.get("profile") == profile else None
            runs[r] = rows
            if rows is not None:
                machine = _machine(stamp)
                machines[machine["id"]] = machine
                meta[str(r)] = {"seconds": stamp.get("seconds"), "git": stamp.get("git"),
                                "date": stamp.get("date"), "machine": machine["id"]}
        table = chapter_table(runs)
        missing = [r for r in replicates if runs[r] is None]
        chapters[figure] = {"claims": table, "counts": counts(table), "runs": meta,
                            "missing": missing}
    return {"profile": profile, "replicates": list(replicates), "chapters": chapters,
            "machines": list(machines.values()), "written": lineage.now_iso()}


def _machine(stamp: Mapping[str, Any]) -> dict[str, Any]:
    """The machine a run came from, as its stamp records it (``provenance``, when recorded)."""
    provenance = stamp.get("provenance") or {}
    described = {k: provenance[k] for k in sorted(provenance)
                 if isinstance(provenance[k], str | int | float)}
    if not described:
        described = {"recorded": "no provenance in this run's stamp (an older build)"}
    return {"id": json.dumps(described, sort_keys=True), **described}


def write_summary(profile: str, replicates: Sequence[int],
                  figures: Sequence[str] | None = None) -> dict[str, Any]:
    """Write ``_build/robustness.json`` from what the replicate runs wrote; return it."""
    summary = collect(profile, replicates, figures)
    path = summary_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(path)
    print(f"[i2o] robustness summary: {path}", flush=True)
    return summary


def read_summary() -> dict[str, Any] | None:
    try:
        return json.loads(summary_path().read_text())
    except (OSError, ValueError):
        return None


