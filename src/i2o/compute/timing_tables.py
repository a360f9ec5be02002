"""The Reproduce page's section "Measured cost", filled at staging from the records of
``published/`` (:mod:`i2o.compute.timing_records`).

At staging the Reproduce page's section "Measured cost" is filled from these files
(:func:`fill_reproduce`): :func:`table`, one row per chapter × profile with the latest timing
from an empty cache and the count of the others, and :func:`numerics_table`, one row per step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from i2o.compute import profiles
from i2o.compute.timing_records import (
    NUMERICS_FILE,
    TIMINGS_FILE,
    WHOLE_BOOK,
    RecordError,
    check_numerics,
    check_timing,
    numerics_path,
    read_numerics,
    read_timings,
    timings_path,
)

#: The goal for the portable mode's cost: at most this many times the native mode's time.
NUMERICS_GOAL = 1.3
#: A table cell whose measurement did not record it.
UNKNOWN = "—"
COST_START, COST_END = "<!-- i2o:measured-cost:start -->", "<!-- i2o:measured-cost:end -->"
NUMERICS_START, NUMERICS_END = ("<!-- i2o:numerics-cost:start -->",
                                "<!-- i2o:numerics-cost:end -->")


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
    if entry["pool_jobs"] and entry["chapter"] == WHOLE_BOOK:
        said += f"; {entry['pool_jobs']} jobs computed in its pool"
    elif entry["pool_jobs"]:
        said += (f"; the notebook alone: {entry['pool_jobs']} of its jobs ran in the book's "
                 f"pool (row {WHOLE_BOOK})")
    if entry["replicate"]:
        said += f"; replicate {entry['replicate']}"
    if entry["forecast_seconds"] and entry["seconds"]:
        error = 100 * (entry["forecast_seconds"] - entry["seconds"]) / entry["seconds"]
        said += (f"; forecast at its start {_minutes(entry['forecast_seconds'])}, "
                 f"{error:+.0f} % ({'over' if error > 0 else 'under'} the measured time)")
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
