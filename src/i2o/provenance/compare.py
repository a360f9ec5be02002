"""Compare two builds of the book number by number: ``python -m i2o.compare THEIRS.json OURS.json``.

Both files are ``numbers.json`` (:mod:`i2o.provenance.numbers`): the one served with the online book
and the one a reader's ``make book`` wrote to ``_build/numbers.json``. Printed per chapter: every
glued number that differs (numbers found in the glued text compared with their absolute and relative
difference, other text shown as it is), numbers present on one side only, every claim whose
verdict or measured value differs, and a different profile or numbers mode; then the chapters
present on one side only. Measured costs (times, memory) are listed apart and never make a chapter
differ: they change from run to run on one machine.

Exit status: 0 when every verdict agrees (numbers may differ), 1 when a claim's verdict differs
or a claim is on one side only, 2 when a file cannot be read.

Given two fingerprint files instead (``python -m i2o.results fingerprint``,
:mod:`i2o.provenance.fingerprint`), it names, per chapter, the cache entries whose raw results
differ and those on one side only, with both machines; exit status 0 when every entry agrees, 1
otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b")


@dataclass
class Report:
    """What differs between two ``numbers.json`` files."""

    lines: list[str] = field(default_factory=list)
    verdicts_differ: bool = False

    def add(self, line: str) -> None:
        self.lines.append(line)


def numbers_in(value: Any) -> tuple[str, list[float]]:
    """``value``'s text with every number replaced by ``#``, and those numbers in order."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    found = [float(match) for match in _NUMBER.findall(text)]
    return _NUMBER.sub("#", text), found


def describe_change(theirs: Any, ours: Any) -> str | None:
    """How ``ours`` differs from ``theirs`` (``None`` when equal): the largest absolute and
    relative difference of their numbers when only numbers differ, else both texts."""
    if theirs == ours:
        return None
    shape_a, values_a = numbers_in(theirs)
    shape_b, values_b = numbers_in(ours)
    if shape_a != shape_b or len(values_a) != len(values_b) or not values_a:
        return f"{theirs!r} → {ours!r}"
    pairs = [(a, b) for a, b in zip(values_a, values_b, strict=True) if not _same(a, b)]
    if not pairs:
        return f"{theirs!r} → {ours!r} (same numbers, other spelling)"
    absolute = max(abs(b - a) for a, b in pairs)
    relative = max(abs(b - a) / abs(a) if a else math.inf for a, b in pairs)
    return f"{theirs!r} → {ours!r} (|Δ| {absolute:.3g}, relative {relative:.3g})"


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _verdict(row: Mapping[str, Any]) -> str:
    holds = row.get("holds")
    if holds is None:
        return "undecided"
    return "holds" if holds else "fails"


def compare_chapter(name: str, theirs: Mapping[str, Any], ours: Mapping[str, Any],
                    report: Report) -> None:
    """Add to ``report`` what differs in chapter ``name``."""
    lines: list[str] = []
    for what in ("profile", "params"):
        if theirs.get(what) != ours.get(what):
            lines.append(f"  {what}: {theirs.get(what)!r} → {ours.get(what)!r}")
    modes = [(side.get("provenance") or {}).get("numerics") for side in (theirs, ours)]
    if modes[0] != modes[1]:
        lines.append(f"  numerics mode: {modes[0]} → {modes[1]} (numbers may differ in the "
                     "last digits)")
    a, b = theirs.get("numbers", {}), ours.get("numbers", {})
    for key in sorted(a.keys() | b.keys()):
        if key not in b or key not in a:
            lines.append(f"  number {key}: only in {'theirs' if key in a else 'ours'}")
        elif change := describe_change(a[key], b[key]):
            lines.append(f"  number {key}: {change}")
    rows_a = {row["claim"]: row for row in theirs.get("claims", [])}
    rows_b = {row["claim"]: row for row in ours.get("claims", [])}
    for claim in [*rows_a, *(c for c in rows_b if c not in rows_a)]:
        if claim not in rows_a or claim not in rows_b:
            report.verdicts_differ = True
            lines.append(f"  CLAIM only in {'theirs' if claim in rows_a else 'ours'}: {claim}")
            continue
        verdicts = _verdict(rows_a[claim]), _verdict(rows_b[claim])
        if verdicts[0] != verdicts[1]:
            report.verdicts_differ = True
            lines.append(f"  VERDICT {verdicts[0]} → {verdicts[1]}: {claim}")
        if change := describe_change(rows_a[claim].get("value"), rows_b[claim].get("value")):
            lines.append(f"  claim value: {change} — {claim}")
    costs = [f"  cost {key}: {change}"
             for key in sorted(theirs.get("costs", {}).keys() & ours.get("costs", {}).keys())
             if (change := describe_change(theirs["costs"][key], ours["costs"][key]))]
    counted = f"{len(a)} numbers, {len(rows_a)} claims"
    costs_note = "; measured costs differ, as they do between runs" if costs else ""
    report.add(f"== {name}: " + ("identical" if not lines else "differs") + f" ({counted})"
               + costs_note)
    report.lines.extend(lines + costs)


def compare(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> Report:
    """Compare two parsed ``numbers.json`` files, chapter by chapter."""
    report = Report()
    for name in [n for n in theirs if n in ours]:
        compare_chapter(name, theirs[name], ours[name], report)
    for name in [n for n in theirs if n not in ours]:
        report.add(f"== {name}: missing in ours (not built there)")
    for name in [n for n in ours if n not in theirs]:
        report.add(f"== {name}: missing in theirs")
    report.add("verdicts: " + ("SOME DIFFER" if report.verdicts_differ else "all agree"))
    return report


def _read(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: cannot read a numbers.json: {error}") from error
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a numbers.json maps chapters to their numbers; got "
                         f"{type(data).__name__}")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.compare",
                                     description=__doc__.split("\n\n")[0],
                                     epilog="exit status: 0 verdicts agree, 1 a verdict differs, "
                                            "2 unreadable input")
    parser.add_argument("theirs", help="a numbers.json, e.g. the online book's")
    parser.add_argument("ours", help="another, e.g. _build/numbers.json")
    args = parser.parse_args(argv)
    try:
        theirs, ours = _read(args.theirs), _read(args.ours)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from i2o.provenance import fingerprint  # lazy: a numbers comparison needs none of it

    kinds = [fingerprint.is_fingerprint(side) for side in (theirs, ours)]
    if any(kinds):
        if not all(kinds):
            print("error: one file is a fingerprint (python -m i2o.results fingerprint), the other "
                  "a numbers.json; compare two of a kind", file=sys.stderr)
            return 2
        return compare_fingerprints(theirs, ours)
    report = compare(theirs, ours)
    print("\n".join(report.lines))
    return 1 if report.verdicts_differ else 0


def compare_fingerprints(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> int:
    """Print what differs between two fingerprint files; 0 when every entry agrees, else 1."""
    from i2o.provenance import fingerprint, golden  # lazy: the numbers comparison needs none of it

    difference = fingerprint.difference(theirs, ours)
    for side, found in (("theirs", theirs), ("ours", ours)):
        print(f"{side}: {golden.describe_machine(found.get('machine', {}))}, profile "
              f"{found.get('profile')}, replicate {found.get('replicate')}, git {found.get('git')}")
    for figure in [*theirs.get("chapters", {}), *(f for f in ours.get("chapters", {})
                                                  if f not in theirs.get("chapters", {}))]:
        if figure not in difference.differ and figure not in difference.one_side:
            print(f"== {figure}: identical")
    print("\n".join(f"== {line}" for line in difference.lines(first=10)))
    print("fingerprints: " + ("all agree" if difference.same else "SOME DIFFER"))
    return 0 if difference.same else 1


if __name__ == "__main__":
    raise SystemExit(main())
