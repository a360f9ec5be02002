"""What a chapter's cached results depend on: ``python -m i2o.results deps FIG``.

A job's cache key covers the source of every i2o module its class's module reaches through imports
(:func:`i2o.compute.cache_key.dependencies`), so an edit to one of them recomputes its entries and
an edit elsewhere does not. This prints, for each job class of a chapter, those modules: before an
edit, a researcher sees which of the chapter's results it will recompute.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from i2o.compute import cache_key, door, profiles
from i2o.provenance import fingerprint


def job_modules(figure: str, params: profiles.Params) -> dict[str, tuple[str, int]]:
    """Each job class of ``figure``'s jobs for ``params`` (``module.Class``), with the module
    whose closure keys it and how many of the chapter's entries it has."""
    found: dict[str, tuple[str, int]] = {}
    for listed in door.entered(params).jobs():
        for job in fingerprint.entry_jobs(listed):
            label = f"{type(job).__module__}.{type(job).__qualname__}"
            module, count = found.get(label, (job.module, 0))
            found[label] = (module, count + 1)
    return found


def report(figures: Sequence[str], profile: str = "quick") -> list[str]:
    """The lines ``deps`` prints: per figure and job class, its entries and its modules."""
    lines = []
    for figure in figures:
        params = profiles.resolve(figure, profile)
        for label, (module, count) in sorted(job_modules(figure, params).items()):
            covered = cache_key.dependencies(module)
            lines.append(f"{figure}: {label} ({count} entr{'y' if count == 1 else 'ies'} in "
                         f"{profile}), keyed by {len(covered)} modules:")
            lines += [f"  {name}" for name in covered]
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m i2o.results deps [FIG ...]``: the modules each job class's key covers."""
    allowed = profiles.figures()
    parser = argparse.ArgumentParser(
        prog="python -m i2o.results deps",
        description="For each job class of a chapter, the i2o modules its cache key covers: an "
                    "edit to one of them recomputes that class's entries, an edit elsewhere "
                    "does not.")
    parser.add_argument("figures", nargs="*", metavar="FIG",
                        help=f"chapters (default all with jobs): {', '.join(allowed)}")
    parser.add_argument("--profile", default="quick", help="the profile whose jobs are listed")
    args = parser.parse_args(argv)
    unknown = [figure for figure in args.figures if figure not in allowed]
    if unknown:
        print(f"error: figure(s) {', '.join(map(repr, unknown))} have no jobs; allowed: "
              f"{', '.join(allowed)}", file=sys.stderr)
        return 2
    try:
        print("\n".join(report(args.figures or allowed, args.profile)))
    except profiles.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
