"""What was measured elsewhere, kept in the repository and shown when a build has not computed it.

A fresh build has computed no replicate and no paper-scale chapter, so its Robustness page would
say only what to run, and no reader without a GPU or hours of CPU would see a paper-scale result.
The repository therefore keeps small *published summaries* in ``published/``:

- ``robustness-<profile>.json``: a robustness summary
  (:func:`i2o.provenance.replicate_summary.collect`, every chapter's claims at several replicates);
- ``numbers-<profile>.json``: a build's ``numbers.json`` (:mod:`i2o.provenance.numbers`: every glued
number
  and claim row of each chapter, with its provenance).

Each carries where it came from (commit, date, machines) and, per chapter, two digests that say
whether this checkout would compute the same thing:

- ``keys``: the SHA-256 of the names of every cache entry of the chapter's jobs at each replicate
  (:func:`i2o.provenance.fingerprint.chapter_entries`). An entry's name holds its key, which covers
  the job's parameters, the code that computes it and the numerics pins
  (:mod:`i2o.compute.results`);
- ``claims_code``: the hash of the chapter's claims module and everything it imports
  (:func:`i2o.compute.cache_key.module_source_hash`), which turns results into verdicts.

A chapter is *current* when both match this checkout, *stale* otherwise, and the pages say which
(:func:`status`). The Robustness page shows the published summary only when the build has none of
its own; the Reproduce page lists every published summary (:func:`reproduce_section`).

Command line (``make publish``, after ``make robustness`` or a profile's ``make book``)::

    python -m i2o.book.published robustness [--profile quick] [--figures meta ...]
    python -m i2o.book.published numbers --profile paper
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from i2o.base import lineage, locations
from i2o.base.digests import sha256
from i2o.book import site
from i2o.compute import cache_entries, cache_key, profiles
from i2o.provenance import bundles, fingerprint, numbers, replicate_summary
from i2o.provenance.replicate_summary import chapter_replicates

KINDS = ("robustness", "numbers")
CURRENT, STALE_RESULTS, STALE_CLAIMS = "current", "stale: results", "stale: claims"
START, END = "<!-- i2o:published:start -->", "<!-- i2o:published:end -->"


def folder() -> Path:
    return locations.repo_root() / "published"


def path(kind: str, profile: str) -> Path:
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; allowed: {', '.join(KINDS)}")
    return folder() / f"{kind}-{profile}.json"


def keys_digest(figure: str, profile: str, replicate: int) -> str:
    """SHA-256 of the names of the cache entries of ``figure``'s jobs at ``profile`` and
    ``replicate`` under this checkout's code."""
    params = profiles.resolve(figure, profile, replicate=replicate)
    entries = sorted(p.name for p in fingerprint.chapter_entries(figure, params).values())
    return sha256("\n".join(entries).encode())


def claims_code_digest(figure: str) -> str:
    """The hash of ``figure``'s claims module and its import closure (comments and docstrings
    left out, as for a cache key), without the modules that only schedule jobs
    (:data:`i2o.compute.cache_key.SCHEDULING`)."""
    return cache_key.module_source_hash(f"{profiles.entry(figure)['package']}.claims",
                                        also_stop=cache_key.SCHEDULING)


def chapter_digests(figure: str, profile: str, replicates: Sequence[int]) -> dict[str, Any]:
    return {"keys": {str(r): keys_digest(figure, profile, r) for r in replicates},
            "claims_code": claims_code_digest(figure)}


def status(figure: str, profile: str, recorded: Mapping[str, Any]) -> str:
    """``current`` when this checkout computes the same entries and turns them into verdicts
    with the same code; otherwise which of the two changed."""
    replicates = [int(r) for r in recorded.get("keys", {})]
    now = chapter_digests(figure, profile, replicates)
    if now["keys"] != recorded.get("keys"):
        return STALE_RESULTS
    if now["claims_code"] != recorded.get("claims_code"):
        return STALE_CLAIMS
    return CURRENT


def explain(state: str) -> str:
    return {CURRENT: "this checkout computes the same cache entries and the same claims code",
            STALE_RESULTS: "the chapter's jobs changed since (their cache keys differ: code, "
                           "parameters or numerics); these numbers are those of the older code",
            STALE_CLAIMS: "the same results, but the code that turns them into verdicts changed "
                          "since; this checkout may word or decide some rows differently"}[state]


def _write(target: Path, data: Mapping[str, Any]) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(target)
    return target


def _origin() -> dict[str, Any]:
    return {"commit": lineage.git_sha(), "published": lineage.now_iso()}


def missing_entries(figure: str, profile: str,
                    replicates: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Per replicate, ``(absent, total)`` of ``figure``'s cache entries under this checkout's
    keys that are not in the results cache (replicates with none absent are left out)."""
    absent = {}
    for replicate in replicates:
        params = profiles.resolve(figure, profile, replicate=replicate)
        entries = fingerprint.chapter_entries(figure, params).values()
        if gone := sum(not entry.exists() for entry in entries):
            absent[int(replicate)] = (gone, len(entries))
    return absent


def _computed_by_this_code(figures: Sequence[str], profile: str,
                           replicates: Sequence[int]) -> None:
    """Refuse to publish a chapter whose entries under this checkout's keys are not in the
    results cache: its numbers were computed by other code (or read from another cache), and the
    digests recorded beside them, which are this checkout's, would call them current."""
    for figure in figures:
        if absent := missing_entries(figure, profile, replicates):
            said = ", ".join(f"{gone} of {total} at replicate {r}"
                             for r, (gone, total) in absent.items())
            raise ValueError(
                f"{figure}: cache entries under this checkout's keys not in "
                f"{cache_entries.results_dir()} ({said}), so its summary was computed by other "
                f"code or from another cache: point I2O_RESULTS_DIR at the cache it was computed "
                f"from, recompute it (`make robustness FIGURES={figure}` or the profile's "
                f"build), or publish the other chapters alone (FIGURES=...)")


def publish_robustness(profile: str = "quick", figures: Sequence[str] | None = None) -> Path:
    """``_build/robustness.json`` (``make robustness``) into ``published/``, with its digests;
    with ``figures``, only those chapters, replacing theirs in the published summary and keeping
    the others as they were published (with their digests, so they stay stale if they were).
    A chapter whose published replicates are current keeps them beside this run's (so a
    chapter's replicates may be computed in several sessions, each with an empty cache); a stale
    one is replaced. Each chapter records its replicates, so chapters published apart may have
    different ones (e.g. more replicates of the chapters whose verdicts flip); the summary's
    ``replicates`` is their union."""
    summary = replicate_summary.read_summary()
    if summary is None:
        raise FileNotFoundError(f"no {replicate_summary.summary_path()}: run `make robustness "
                                f"PROFILE={profile}` first")
    if summary["profile"] != profile:
        raise ValueError(f"{replicate_summary.summary_path()} is of profile "
                         f"{summary['profile']!r}, not {profile!r}")
    chosen = list(figures or summary["chapters"])
    if unknown := [f for f in chosen if f not in summary["chapters"]]:
        raise ValueError(f"not in {replicate_summary.summary_path()}: {', '.join(unknown)}; it has "
                         f"{', '.join(summary['chapters'])}")
    incomplete = {f: summary["chapters"][f]["missing"] for f in chosen
                  if summary["chapters"][f]["missing"]}
    if incomplete:
        raise ValueError(f"replicates missing from the summary: {incomplete}; publish a "
                         "complete run")
    _computed_by_this_code(chosen, profile, summary["replicates"])
    chapters = {figure: {**summary["chapters"][figure], "replicates": list(summary["replicates"])}
                for figure in chosen}
    machines, origin = summary["machines"], _origin()
    before = read("robustness", profile)
    if figures and before is None:
        raise ValueError(f"publishing some chapters ({', '.join(chosen)}) updates a published "
                         f"summary; {path('robustness', profile)} does not exist: publish "
                         "every chapter of a complete run first")
    if before is not None:
        chapters = {figure: _extended(before, figure, chapter, profile)
                    for figure, chapter in chapters.items()}
    digests = {figure: chapter_digests(figure, profile, chapter["replicates"])
               for figure, chapter in chapters.items()}
    if figures and before is not None:
        kept = {figure: {**chapter, "replicates": chapter_replicates(before, figure)}
                for figure, chapter in before["chapters"].items()}
        chapters = {**kept, **chapters}
        digests = {**before["digests"], **digests}
        origin |= {"chapters": chosen, "earlier": before.get("origin", {})}
    if before is not None:
        used = {run.get("machine") for c in chapters.values() for run in c["runs"].values()}
        known = {m["id"]: m for m in [*before["machines"], *summary["machines"]]}
        machines = [m for i, m in known.items() if i in used]
    every = sorted({r for chapter in chapters.values() for r in chapter["replicates"]})
    return _write(path("robustness", profile),
                  {**summary, "replicates": every, "chapters": chapters, "machines": machines,
                   "origin": origin, "digests": digests})


def _extended(before: Mapping[str, Any], figure: str, chapter: dict[str, Any],
              profile: str) -> dict[str, Any]:
    """``chapter`` (this run's) beside the replicates published before, when those are current
    (the same cache keys and claims code as this checkout's, so the same computation): replicates
    computed in different sessions add up. A stale published chapter is replaced."""
    if figure not in before["chapters"] or figure not in before.get("digests", {}):
        return chapter
    if status(figure, profile, before["digests"][figure]) != CURRENT:
        return chapter
    published_before = {**before["chapters"][figure],
                        "replicates": chapter_replicates(before, figure)}
    merged = replicate_summary.merge_chapter(published_before, chapter)
    kept = sorted(set(published_before["replicates"]) - set(chapter["replicates"]))
    print(f"[i2o] {figure}: replicates {', '.join(map(str, kept)) or 'none'} kept as published "
          f"(current), {', '.join(map(str, chapter['replicates']))} from this run", flush=True)
    return merged


def publish_numbers(profile: str) -> Path:
    """The chapters of the build's ``numbers.json`` executed at ``profile`` into
    ``published/``, with their digests; chapters executed at another profile are left out (a
    build may hold the paper profile's meta beside quick's other chapters)."""
    found = {figure: chapter for figure in profiles.figures()
             if (chapter := numbers.chapter(figure)) is not None}
    built = {f: c for f, c in found.items() if c["profile"] == profile}
    others = {f: c["profile"] for f, c in found.items() if f not in built}
    if not built:
        raise ValueError(f"no chapter executed at profile {profile!r} in "
                         f"{locations.build_dir()}" + (f" (found {others})" if others else ""))
    if others:
        print(f"[i2o] left out, executed at another profile: {others}", flush=True)
    digests, bundled = {}, {}
    for figure, chapter in built.items():
        replicate = int(chapter.get("params", {}).get("replicate", 0))
        _computed_by_this_code([figure], profile, [replicate])
        digests[figure] = chapter_digests(figure, profile, [replicate])
        described = bundles.describe_entries(figure, profile, replicate)
        bundled[figure] = {key: described[key] for key in ("files", "bytes", "contents_sha256")}
    return _write(path("numbers", profile),
                  {"profile": profile, "chapters": built, "origin": _origin(),
                   "digests": digests, "bundles": bundled})


def read(kind: str, profile: str) -> dict[str, Any] | None:
    try:
        return json.loads(path(kind, profile).read_text())
    except (OSError, ValueError):
        return None


def available() -> list[tuple[str, str, dict[str, Any]]]:
    """Every published summary as ``(kind, profile, data)``, in a stable order."""
    found = []
    for file in sorted(folder().glob("*.json")):
        kind, _, profile = file.stem.partition("-")
        data = read(kind, profile) if kind in KINDS else None
        if data is not None:
            found.append((kind, profile, data))
    return found


def statuses(data: Mapping[str, Any], profile: str) -> dict[str, str]:
    """Each published chapter's :func:`status`; a chapter no longer in the book is stale."""
    known = set(profiles.figures())
    return {figure: status(figure, profile, recorded) if figure in known else STALE_RESULTS
            for figure, recorded in data.get("digests", {}).items()}


def robustness_fallback(profile: str = "quick"
                        ) -> tuple[dict[str, Any], dict[str, tuple[str, str]]] | None:
    """The published robustness summary of ``profile`` with each chapter's status and why, for
    the Robustness page of a build that has none of its own; ``None`` when none is published."""
    data = read("robustness", profile)
    if data is None:
        return None
    return data, {figure: (state, explain(state))
                  for figure, state in statuses(data, profile).items()}


def origin_line(data: Mapping[str, Any]) -> str:
    origin = data.get("origin", {})
    cpus = sorted({m.get("cpu", "?") for m in data.get("machines", [])})
    where = f" on {', '.join(cpus)}" if cpus else ""
    return (f"published from commit `{origin.get('commit', '?')}` on "
            f"{origin.get('published', '?')}{where}")


def _verdicts(rows: Sequence[Mapping[str, Any]]) -> str:
    tally = {"holds": 0, "fails": 0, "undecided": 0}
    words: dict[bool | None, str] = {True: "holds", False: "fails"}
    for row in rows:
        tally[words.get(row.get("holds"), "undecided")] += 1
    return ", ".join(f"{n} {word}" for word, n in tally.items())


def beside_replicates(rows: Sequence[Mapping[str, Any]],
                      replicated: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each claim row of a chapter (one run, e.g. the paper profile's) beside the same claim in a
    robustness summary's table (``replicated``: its verdict at every replicate), matched by id
    where both rows have one, else by the claim's wording; ``replicates`` is ``{}`` for a claim
    the summary does not have."""
    by_id = {row["id"]: row for row in replicated if row.get("id")}
    by_claim = {row["claim"]: row for row in replicated}
    out = []
    for row in rows:
        match = by_id.get(row.get("id", "")) or by_claim.get(row["claim"])
        out.append({"claim": row["claim"], "verdict": replicate_summary.verdict(row),
                    "replicates": {r: (v or {}).get("verdict", "missing")
                                   for r, v in (match or {}).get("replicates", {}).items()}})
    return out


def _comparison(figure: str, profile: str, chapter: Mapping[str, Any]) -> list[str]:
    """A published chapter's claims beside the published robustness summary's replicates of
    another profile, when one is published for that chapter."""
    lines = []
    for kind, other, data in available():
        replicated = data["chapters"].get(figure) if kind == "robustness" else None
        if other == profile or not replicated:
            continue
        rows = beside_replicates(chapter["claims"], replicated["claims"])
        replicates = chapter_replicates(data, figure)
        run = int(chapter.get("params", {}).get("replicate", 0))
        lines += [f"{figure}, {profile} replicate {run} beside {other} replicates "
                  f"{', '.join(map(str, replicates))} (`published/robustness-{other}.json`):", "",
                  f"| claim | {profile} r{run} | "
                  + " | ".join(f"{other} r{r}" for r in replicates) + " |",
                  "|---|---|" + "---|" * len(replicates)]
        for row in rows:
            at = [row["replicates"].get(str(r), "—") for r in replicates]
            lines.append(f"| {row['claim']} | {row['verdict']} | " + " | ".join(at) + " |")
        lines.append("")
    return lines


def _bundle_lines(data: Mapping[str, Any], profile: str) -> list[str]:
    """One line per chapter whose results bundle a published summary describes: the command that
    writes it from the cache and the contents digest a downloaded bundle must show."""
    lines = []
    for figure, bundle in data.get("bundles", {}).items():
        lines += [f"Results bundle of {figure} at {profile} (`python -m i2o.results export "
                  f"{figure} --profile {profile} -o {figure}-{profile}.tar`, not committed): "
                  f"{bundle['files']} files, {bundle['bytes'] / 1e6:.1f} MB, contents digest "
                  f"`{bundle['contents_sha256']}` (printed by the export and by `python -m "
                  f"i2o.compute.results import`).", ""]
    return lines


def _replicates_line(data: Mapping[str, Any]) -> str:
    shown = "(shown on the Robustness page when this build has computed none)."
    per_chapter = {figure: chapter_replicates(data, figure) for figure in data["chapters"]}
    if len({tuple(r) for r in per_chapter.values()}) <= 1:
        return f"Replicates {', '.join(map(str, data['replicates']))} of every chapter {shown}"
    return ("Replicates " + "; ".join(f"{', '.join(map(str, r))} of {figure}"
                                      for figure, r in per_chapter.items()) + f" {shown}")


def reproduce_section() -> str:
    """The Reproduce page's list of published summaries, each chapter marked current or stale."""
    found = available()
    if not found:
        return ("No summary is published in this checkout (`published/` is empty): "
                "`make robustness` then `make publish` writes one.")
    lines = []
    for kind, profile, data in found:
        state = statuses(data, profile)
        lines += [f"**`published/{kind}-{profile}.json`**, {origin_line(data)}.", ""]
        if kind == "robustness":
            lines += [_replicates_line(data), ""]
        lines += ["| chapter | what it says | status |", "|---|---|---|"]
        for figure, chapter in data["chapters"].items():
            if kind == "robustness":
                c = chapter["counts"]
                said = (f"{c['same verdict']} same verdict, {c['flips']} flip, "
                        f"{c['undecided at every replicate']} undecided throughout")
            else:
                said = (f"{len(chapter['numbers'])} numbers; claims: "
                        f"{_verdicts(chapter['claims'])}; digest "
                        f"`{numbers.digests({figure: chapter})[figure][:16]}…`")
            mark = state.get(figure, STALE_RESULTS)
            lines.append(f"| {figure} | {said} | {mark}: {explain(mark)} |")
        lines.append("")
        if kind == "numbers":
            lines += _bundle_lines(data, profile)
            for figure, chapter in data["chapters"].items():
                lines += _comparison(figure, profile, chapter)
    return "\n".join(lines)


def fill_reproduce(page: Path) -> bool:
    """Replace what lies between the published-summary markers of ``page``; ``False`` if none."""
    return site.fill_between(page, START, END, reproduce_section())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.book.published",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--profile", default=None,
                        help="robustness: quick by default; numbers: required")
    parser.add_argument("--figures", nargs="+", default=None,
                        help="robustness: publish only these chapters, keeping the others of "
                             "the published summary")
    args = parser.parse_args(argv)
    try:
        if args.kind == "robustness":
            written = publish_robustness(args.profile or "quick", args.figures)
        else:
            if args.profile is None:
                raise ValueError("numbers needs --profile (the profile the book was built at)")
            written = publish_numbers(args.profile)
    except (OSError, ValueError, profiles.ParameterError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"[i2o] published {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
