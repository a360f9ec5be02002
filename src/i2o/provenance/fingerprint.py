"""Fingerprints of computed results: one SHA-256 per cache entry, one per chapter.

``numbers.json`` holds numbers as the pages print them (rounded); a fingerprint holds the raw
results. An entry's fingerprint is the SHA-256 of its stored arrays — each one's path, dtype,
shape and bytes, in sorted order — without the measurements of the machine that computed it
(:func:`is_measured`: wall and CPU times, memory, the device's name), which differ between two runs
of the same code. A chapter's fingerprint is the SHA-256 of its entries' names and fingerprints.
Two machines whose fingerprints agree computed bit-identical results.

A chapter's entries are those of its jobs for a profile and replicate (``runs.jobs(params)``,
with the jobs a job is made of: a meta evaluation's model), found
with the current code's keys; an entry not in the cache is listed as missing.

    python -m i2o.results fingerprint [FIG ...] [--profile P] [--replicate R] [-o FILE]

writes them as JSON with the machine (:func:`i2o.base.lineage.machine_facts`: CPU model, vendor,
flags, caches, library versions, numerics pins); its exit status is 1 when an entry is missing or
corrupt. ``python -m i2o.compare A.json B.json`` names the entries that differ between two such
files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from i2o.base import lineage, runtime
from i2o.base.digests import arrays_sha256, sha256
from i2o.compute import cache_entries, door, profiles
from i2o.compute.job import Job

#: The format of a fingerprint file (``kind``), so that ``i2o.provenance.compare`` can tell it
#: apart.
KIND = "i2o-fingerprint"
_MEASURED = re.compile(r"(^|_)(seconds|mb)(_|$)|^(memory_method|device|resumed_from)$")
#: What an entry that cannot be read is fingerprinted as (it differs from every true digest).
CORRUPT = "corrupt"


def is_measured(path: str) -> bool:
    """Is the stored array ``path`` (``a/b/name``) a measurement of the machine or the run (a
    time, a memory size, the device's name, the step a resumed run started from) rather than a
    result? Decided by its last component: ``seconds`` or ``mb`` as a word of it
    (``train_seconds``, ``seconds_per_step``, ``peak_mb``), ``memory_method``, ``device`` or
    ``resumed_from``."""
    return bool(_MEASURED.search(path.rsplit("/", 1)[-1]))


def entry_fingerprint(path: Path) -> str:
    """SHA-256 of the cache entry at ``path`` without its measurements (:func:`is_measured`);
    raises :class:`i2o.compute.cache_entries.CorruptEntry` if the entry does not match its
    checksum."""
    cache_entries.load(path)  # checks the stored checksum first
    with np.load(path / "arrays.npz", allow_pickle=False) as arrays:
        names = [name for name in sorted(arrays.files) if not is_measured(name)]
        return arrays_sha256((arrays[name] for name in names), names)


def entry_jobs(job: Job) -> Iterator[Job]:
    """The cache entries ``job`` stands for: the jobs it is made of (fields holding a job or a
    tuple of jobs, e.g. the model an evaluation reads), depth first, then itself."""
    for field in dataclasses.fields(job):
        value = getattr(job, field.name)
        for inner in (value if isinstance(value, tuple) else (value,)):
            if isinstance(inner, Job):
                yield from entry_jobs(inner)
    yield job


def _parameters_digest(job: Job) -> str:
    text = json.dumps(job.key(), sort_keys=True, default=repr, separators=(",", ":"))
    return sha256(text.encode())[:10]


def chapter_jobs(figure: str, params: profiles.Params) -> dict[str, Job]:
    """Each job whose entry ``figure`` reads for ``params``, by a label that does not depend on
    the code: the job's name, followed by a digest of its parameters (``name[0123456789]``)
    where several jobs share the name."""
    jobs: dict[tuple[str, str], Job] = {}
    for listed in door.entered(params).jobs():
        for job in entry_jobs(listed):
            jobs.setdefault((job.name, _parameters_digest(job)), job)
    shared = Counter(name for name, _ in jobs)
    return {(name if shared[name] == 1 else f"{name}[{digest}]"): job
            for (name, digest), job in jobs.items()}


def chapter_entries(figure: str, params: profiles.Params) -> dict[str, Path]:
    """Each cache entry of ``figure``'s jobs for ``params`` at its current key, by the labels of
    :func:`chapter_jobs`."""
    return {label: cache_entries.entry_dir(job.figure, job.name, job.key(), job.module)
            for label, job in chapter_jobs(figure, params).items()}


def computed_on(path: Path) -> dict[str, Any]:
    """The CPU, numerics mode and pins an entry was computed with (its ``meta.json``)."""
    facts = json.loads((path / "meta.json").read_text()).get("provenance", {})
    return {key: facts.get(key) for key in ("cpu", "numerics", "pinned", "torch", "jaxlib")}


def chapter_fingerprint(figure: str, params: profiles.Params) -> dict[str, Any]:
    """``{"digest", "entries": {name: sha256}, "missing": [names], "computed_on": [...]}`` of
    one chapter; the digest covers the entries present, and is ``None`` when any is missing;
    ``computed_on`` lists the distinct machines and numerics the entries were computed with."""
    entries, missing, machines = {}, [], []
    for name, path in sorted(chapter_entries(figure, params).items()):
        if not path.exists():
            missing.append(name)
            continue
        try:
            entries[name] = entry_fingerprint(path)
            machine = computed_on(path)
        except (cache_entries.CorruptEntry, OSError, ValueError):
            entries[name], machine = CORRUPT, None
        if machine is not None and machine not in machines:
            machines.append(machine)
    digest = sha256(json.dumps(entries, sort_keys=True).encode())
    return {"digest": None if missing else digest, "entries": entries, "missing": missing,
            "computed_on": machines}


def fingerprint(figures: Sequence[str] | None = None, profile: str = "smoke",
                replicate: int = 0) -> dict[str, Any]:
    """The fingerprint file of ``figures`` (default every figure) at ``profile`` and
    ``replicate``, read from the results cache (:func:`i2o.compute.cache_entries.results_dir`)."""
    allowed = profiles.figures()
    figures = list(figures or allowed)
    unknown = [figure for figure in figures if figure not in allowed]
    if unknown:
        raise profiles.ParameterError(f"figure(s) {', '.join(map(repr, unknown))} not in the "
                                      f"manifest; allowed: {', '.join(allowed)}")
    chapters = {}
    for figure in figures:
        params = profiles.resolve(figure, profile, replicate=replicate)
        chapters[figure] = chapter_fingerprint(figure, params)
    return {"kind": KIND, "profile": profile, "replicate": replicate, "git": lineage.git_sha(),
            "machine": lineage.machine_facts(), "chapters": chapters}


@dataclasses.dataclass(frozen=True)
class Difference:
    """What differs between two fingerprint files: the settings (profile, replicate) that are
    not the same, and per chapter the entries whose fingerprints differ (in the order of their
    names), the entries present on one side only and those computed on neither side."""

    settings: list[str]
    differ: dict[str, list[str]]
    one_side: dict[str, list[str]]
    missing: dict[str, list[str]]

    @property
    def same(self) -> bool:
        return not (self.settings or self.differ or self.one_side or self.missing)

    def lines(self, first: int = 5) -> list[str]:
        """Up to ``first`` entries per chapter, one line each."""
        out = [f"not comparable: {setting}" for setting in self.settings]
        for figure, names in self.differ.items():
            shown = ", ".join(names[:first]) + (f" and {len(names) - first} more"
                                                 if len(names) > first else "")
            out.append(f"{figure}: {len(names)} entr{'y' if len(names) == 1 else 'ies'} "
                       f"differ: {shown}")
        for figure, names in self.one_side.items():
            out.append(f"{figure}: on one side only: {', '.join(names[:first])}")
        for figure, names in self.missing.items():
            out.append(f"{figure}: computed on neither side (not in either results cache): "
                       f"{', '.join(names[:first])}")
        return out


def difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> Difference:
    """Compare two fingerprint files (:func:`fingerprint`), chapter by chapter."""
    settings = [f"{what} {a.get(what)!r} against {b.get(what)!r}"
                for what in ("profile", "replicate") if a.get(what) != b.get(what)]
    differ: dict[str, list[str]] = {}
    one_side: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}
    chapters_a, chapters_b = a.get("chapters", {}), b.get("chapters", {})
    for figure in [*chapters_a, *(f for f in chapters_b if f not in chapters_a)]:
        if figure not in chapters_a or figure not in chapters_b:
            one_side[figure] = ["(the whole chapter)"]
            continue
        ea, eb = chapters_a[figure]["entries"], chapters_b[figure]["entries"]
        if names := sorted(name for name in ea.keys() & eb.keys()
                           if ea[name] != eb[name] or ea[name] == CORRUPT):
            differ[figure] = names
        if alone := sorted(ea.keys() ^ eb.keys()):
            one_side[figure] = alone
        neither = set(chapters_a[figure].get("missing", [])) & set(
            chapters_b[figure].get("missing", []))
        if neither:
            missing[figure] = sorted(neither)
    return Difference(settings, differ, one_side, missing)


def is_fingerprint(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("kind") == KIND


def main(argv: list[str] | None = None) -> int:
    """``python -m i2o.results fingerprint``: write the fingerprints of cached results."""
    parser = argparse.ArgumentParser(
        prog="python -m i2o.results fingerprint",
        description="One SHA-256 per cache entry of each chapter's jobs (measured times and "
                    "memory left out) and one per chapter, with the machine, as JSON. Entries "
                    "are looked up in the results cache (I2O_RESULTS_DIR) under the current "
                    "code's keys and numerics mode (I2O_NUMERICS).")
    parser.add_argument("figures", nargs="*", metavar="FIG",
                        help=f"chapters (default all with jobs): {', '.join(profiles.figures())}")
    parser.add_argument("--profile", default="quick", help="smoke, quick (default) or paper")
    parser.add_argument("--replicate", type=int, default=0, help="default 0")
    parser.add_argument("-o", "--output", type=Path, help="write here (default: print)")
    args = parser.parse_args(argv)
    try:
        found = fingerprint(args.figures, args.profile, args.replicate)
    except profiles.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    incomplete = False
    for figure, chapter in found["chapters"].items():
        corrupt = sorted(name for name, value in chapter["entries"].items() if value == CORRUPT)
        total = len(chapter["missing"]) + len(chapter["entries"])
        if chapter["missing"] or corrupt:
            incomplete = True
            state = (f"{len(chapter['missing'])} of {total} entries not computed"
                     + (f", {len(corrupt)} corrupt ({', '.join(corrupt)})" if corrupt else ""))
        else:
            state = f"sha256 {chapter['digest']}"
        print(f"{figure} ({args.profile}, replicate {args.replicate}): {state}", file=sys.stderr)
    if incomplete:
        print(f"looked up in {cache_entries.results_dir()} "
              f"with numerics {runtime.numerics_mode()}: "
              "an entry is found under the key of the current code, parameters and numerics "
              "mode", file=sys.stderr)
    return 1 if incomplete else 0
