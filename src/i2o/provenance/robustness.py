"""Do the book's verdicts survive a new draw of every random choice? Chapters at several replicates.

A chapter run at replicate r > 0 redraws every random choice it makes (:mod:`i2o.replicates`);
replicate 0 is the book's own draw. :func:`run` executes each chapter's notebook at each replicate
(``python -m i2o.book run <figure> -p replicate <r>``), each into its own build folder
``_build/robustness/<profile>/r<r>/`` so that the book's pages are untouched. Every expensive step
goes through the results cache, so a replicate's training jobs are shared with ``make sweep ... -p
replicate <r>``, nothing is computed twice, and an interrupted run resumes; an unchanged notebook
is not even re-executed (its stamp is up to date), so a rerun on a warm cache takes seconds.

:func:`collect` then reads the claims each run wrote and :func:`write_summary` writes
``_build/robustness.json``: per chapter and claim, the verdict and value at each replicate and an
agreement status (:func:`agreement`). :func:`page` turns it into the book's Robustness page
(``book/robustness.md``, written when the book is staged); ``make book`` never computes a
replicate, it shows what was computed and names the command for what is missing.

Command line (``make robustness PROFILE=quick``)::

    python -m i2o.provenance.robustness --profile quick --replicates 0 1 2 [--figures meta
    stability]
        [--workers 2] [--summary-only]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from i2o import lineage, locations
from i2o.compute import door, profiles
from i2o.data import preflight
from i2o.progress import Progress

DEFAULT_REPLICATES = (0, 1, 2)
PAGE = "book/robustness.md"
#: agreement statuses, in the order the page counts them
SAME_DECIDED, SAME_UNDECIDED, FLIPS, INCOMPLETE = ("same verdict", "undecided at every replicate",
                                                    "flips", "incomplete")
STATUSES = (SAME_DECIDED, SAME_UNDECIDED, FLIPS, INCOMPLETE)


def replicate_dir(profile: str, replicate: int) -> Path:
    """The build folder of the chapters run at ``replicate`` in ``profile``."""
    return locations.build_dir() / "robustness" / profile / f"r{replicate}"


def summary_path() -> Path:
    return locations.build_dir() / "robustness.json"


def command(profile: str, replicates: Sequence[int], figures: Sequence[str] | None = None) -> str:
    """The one command that computes these replicates."""
    text = f"make robustness PROFILE={profile} REPLICATES=\"{' '.join(map(str, replicates))}\""
    if figures:
        text += f" FIGURES=\"{' '.join(figures)}\""
    return text


def check_request(profile: str, replicates: Sequence[Any], figures: Sequence[str]) -> list[int]:
    """Refuse a bad request before any compute; return the replicates as integers.

    Replicates must be distinct integers ≥ 0 that every chapter's schema allows; figures must be
    in the manifest; the profile must be one every chapter has.
    """
    if profile not in profiles.PROFILES:
        raise profiles.ParameterError(f"--profile must be one of "
                                      f"{', '.join(profiles.PROFILES)}; got {profile!r}")
    known = profiles.figures()
    unknown = [f for f in figures if f not in known]
    if unknown:
        raise profiles.ParameterError(f"--figures: unknown figure(s) {', '.join(unknown)}; the "
                                      f"figures are: {', '.join(known)}")
    if not replicates:
        raise profiles.ParameterError("--replicates needs at least one replicate (e.g. 0 1 2)")
    out = []
    for value in replicates:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise profiles.ParameterError(f"--replicates takes integers ≥ 0; got {value!r}")
        out.append(value)
    if len(set(out)) != len(out):
        raise profiles.ParameterError(f"--replicates must not repeat a value; got {out}")
    for figure in figures:  # every parameter of every run, through the chapter's door
        for r in out:
            profiles.resolve(figure, profile, replicate=r)  # no chapter imported for these
        for r in out:
            try:
                door.enter(figure, profile, replicate=r)
            except profiles.ParameterError:
                raise
            except Exception:  # noqa: S110 - a chapter that fails to import fails its own runs
                break
    return out


def _parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"replicates are integers ≥ 0; got {text!r}") from None


@dataclass(frozen=True)
class Task:
    figure: str
    replicate: int
    profile: str
    overrides: tuple[tuple[str, Any], ...] = ()

    def folder(self) -> Path:
        return replicate_dir(self.profile, self.replicate)

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "i2o.book", "run", self.figure, "--profile", self.profile,
                "-p", "replicate", str(self.replicate)]
        for name, value in self.overrides:
            argv += ["-p", name, json.dumps(value)]
        return argv

    def log(self) -> Path:
        return self.folder() / f"{self.figure}.log"


def _expected_seconds(figure: str) -> float:
    """How long the book's own run of ``figure`` took (its stamp), for the ETA; 60 s if unknown."""
    path = locations.build_dir() / "notebooks" / Path(profiles.entry(figure)["notebook"]).name
    try:
        return float(json.loads(path.read_text())["metadata"]["i2o"]["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return 60.0


def tasks(profile: str, replicates: Sequence[int], figures: Sequence[str],
          workers: int) -> list[Task]:
    """One notebook run per (figure, replicate). With several notebooks at once, a chapter that
    has its own ``workers`` parameter runs its jobs in one process (the cores are shared)."""
    out = []
    for r in replicates:
        for figure in figures:
            own = "workers" in profiles.entry(figure)["parameters"] and workers > 1
            out.append(Task(figure, r, profile, (("workers", 1),) if own else ()))
    return out


def run(profile: str = "quick", replicates: Sequence[int] = DEFAULT_REPLICATES,
        figures: Sequence[str] | None = None, workers: int = 1) -> dict[str, Any]:
    """Execute every (figure, replicate) notebook not yet up to date, ``workers`` at a time, with
    progress and ETA on the terminal; then write and return the summary. A notebook that fails is
    reported (its log named) and the others go on."""
    figures = list(figures or profiles.figures())
    replicates = check_request(profile, list(replicates), figures)
    if workers < 1:
        raise profiles.ParameterError(f"--workers must be an integer ≥ 1; got {workers}")

    for figure, reason in preflight.check(figures).items():
        if reason:
            raise RuntimeError(f"{figure} cannot run: {reason}")
    todo = tasks(profile, replicates, figures, workers)
    expected = {t: _expected_seconds(t.figure) for t in todo}
    env = {**os.environ, "I2O_PROGRESS": "0"}
    print(f"[i2o] robustness ({profile}): {len(todo)} notebook runs, replicates {replicates}, "
          f"{workers} at a time; logs in {replicate_dir(profile, 0).parent}", flush=True)
    failed: dict[Task, int] = {}
    pending = list(todo)
    running: dict[Task, tuple[subprocess.Popen[bytes], Any, float]] = {}
    bar = Progress(round(sum(expected.values())), "robustness", unit="s (expected)")
    started = time.perf_counter()
    while pending or running:
        while pending and len(running) < workers:
            task = pending.pop(0)
            task.folder().mkdir(parents=True, exist_ok=True)
            stream = open(task.log(), "w")  # noqa: SIM115 (closed when the process ends)
            process = subprocess.Popen(task.argv(), stdout=stream, stderr=subprocess.STDOUT,
                                       env={**env, "I2O_BUILD_DIR": str(task.folder())})
            running[task] = (process, stream, time.perf_counter())
        for task, (process, stream, start) in list(running.items()):
            if process.poll() is None:
                continue
            stream.close()
            del running[task]
            bar.update(round(expected[task]))
            seconds = time.perf_counter() - start
            if process.returncode:
                failed[task] = process.returncode
                print(f"[i2o] {task.figure} replicate {task.replicate}: FAILED (see "
                      f"{task.log()})", flush=True)
            else:
                print(f"[i2o] {task.figure} replicate {task.replicate}: done in {seconds:.0f} s",
                      flush=True)
        time.sleep(0.5)
    bar.close()
    print(f"[i2o] robustness: {len(todo) - len(failed)} of {len(todo)} runs done in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    summary = write_summary(profile, replicates)
    if failed:
        raise RuntimeError("robustness: failed runs: " + ", ".join(
            f"{t.figure} r{t.replicate} ({t.log()})" for t in failed))
    return summary


# -- reading what was computed -------------------------------------------------------------------

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


# -- the book's page -------------------------------------------------------------------------

_COLOURS = {"holds": "#1a7f37", "fails": "#cf222e", "undecided": "#9a6700"}


def _cell(at: Mapping[str, Any] | None) -> str:
    if at is None:
        return "<td>missing</td>"
    tip = html.escape(f"{at['value']}" + (f" — check: {at['check']}" if at["check"] else ""),
                      quote=True)
    colour = _COLOURS[at["verdict"]]
    return (f"<td title=\"{tip}\" style=\"color:{colour};font-weight:bold\">"
            f"{at['verdict']}</td>")


def chapter_html(figure: str, chapter: Mapping[str, Any], replicates: Sequence[int]) -> str:
    """One chapter's table: a row per claim, a column per replicate, the agreement."""
    head = "".join(f"<th>r{r}</th>" for r in replicates)
    lines = ["<table class='i2o-robustness'><thead><tr><th>Claim</th>"
             f"{head}<th>Agreement</th></tr></thead><tbody>"]
    for row in chapter["claims"]:
        cells = "".join(_cell(row["replicates"].get(str(r))) for r in replicates)
        lines.append(f"<tr><td>{html.escape(row['claim'])}</td>{cells}"
                     f"<td>{row['agreement']}</td></tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def page(summary: Mapping[str, Any] | None, requested: Sequence[int] = DEFAULT_REPLICATES,
         profile: str = "quick",
         published: Mapping[str, tuple[str, str]] | None = None) -> str:
    """The Robustness page (MyST Markdown) from a summary, or what to run when there is none.

    ``published`` (chapter → its status and why, :func:`i2o.book.published.robustness_fallback`)
    says the summary is a published one, measured elsewhere: the page says where it came from and
    marks each chapter current or stale."""
    lines = ["# Robustness", "",
             "Is a verdict a property of the experiment or of one draw of its random choices? "
             "Replicate r > 0 of a chapter redraws every random choice it makes "
             "(initialisations, batch orders, data subsets, test sets, task draws, random "
             "problems: `i2o.replicates`); replicate 0 is the book's own draw. A claim whose "
             "verdict is the same at every replicate is a property of the experiment at this "
             "scale; one that flips was decided by chance. Hover over a verdict for its measured "
             "value and check. Generated by `i2o.provenance.robustness` from "
             "`_build/robustness.json`; `make book` never computes replicates.", ""]
    if summary is None:
        lines += ["```{admonition} No replicates computed yet", ":class: warning",
                  f"Run `{command(profile, requested)}`, then `make html`.", "```", ""]
        return "\n".join(lines)
    replicates = summary["replicates"]
    lines += [f"Profile `{summary['profile']}`, replicates {', '.join(map(str, replicates))}; "
              f"summary written {summary.get('written', '?')}.", ""]
    if published is not None:
        origin = summary.get("origin", {})
        lines += ["```{admonition} Measured elsewhere", ":class: note",
                  "This build computed no replicate of its own, so this page shows the summary "
                  f"published from commit `{origin.get('commit', '?')}` on "
                  f"{origin.get('published', '?')} (`published/`, machines at the end), each "
                  f"chapter marked current or stale. `{command(profile, requested)}` computes "
                  "this build's own.", "```", ""]
    total = {status: 0 for status in STATUSES}
    for figure, chapter in summary["chapters"].items():
        c = chapter["counts"]
        for status in STATUSES:
            total[status] += c[status]
        lines += [f"## {profiles.entry(figure)['title']}", "",
                  f"{c[SAME_DECIDED]} claim(s) with the same verdict at every replicate, "
                  f"{c[FLIPS]} that flip, {c[SAME_UNDECIDED]} undecided at every replicate"
                  + (f", {c[INCOMPLETE]} incomplete" if c[INCOMPLETE] else "") + ".", ""]
        if published is not None:
            state, why = published.get(figure, ("stale", "not in this checkout's book"))
            lines += [f"Published summary, **{state}**: {why}.", ""]
        if chapter["missing"]:
            lines += ["```{admonition} Missing replicates", ":class: warning",
                      f"Replicate(s) {', '.join(map(str, chapter['missing']))} of `{figure}` "
                      f"have not been computed: "
                      f"`{command(summary['profile'], chapter['missing'], [figure])}`.", "```",
                      ""]
        lines += ["```{raw} html", chapter_html(figure, chapter, replicates), "```", ""]
    lines += ["## All chapters", "",
              f"{total[SAME_DECIDED]} claim(s) with the same verdict at every replicate, "
              f"{total[FLIPS]} that flip, {total[SAME_UNDECIDED]} undecided at every replicate, "
              f"{total[INCOMPLETE]} incomplete.", "", "## Machines", ""]
    for machine in summary["machines"] or [{"id": "", "recorded": "none"}]:
        described = ", ".join(f"{k}: {v}" for k, v in machine.items() if k != "id")
        lines.append(f"- {described}")
    lines.append("")
    return "\n".join(lines)


def write_page(staged: Path, fallback: tuple[Mapping[str, Any],
                                             Mapping[str, tuple[str, str]]] | None = None) -> Path:
    """Write the Robustness page into the staged book (``book.stage``): this build's summary, or
    else ``fallback``, a published summary with each chapter's status and why
    (:func:`i2o.book.published.robustness_fallback`)."""
    path = staged / PAGE
    summary: Mapping[str, Any] | None = read_summary()
    states: Mapping[str, tuple[str, str]] | None = None
    if summary is None and fallback is not None:
        summary, states = fallback
    path.write_text(page(summary, published=states))
    return path


# -- command line --------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.provenance.robustness",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="quick", help="smoke, quick or paper")
    parser.add_argument("--replicates", nargs="+", type=_parse_int,
                        default=list(DEFAULT_REPLICATES), help="replicates to run (default 0 1 2)")
    parser.add_argument("--figures", nargs="+", default=None,
                        help="chapters (default: every chapter of figures.yaml)")
    parser.add_argument("--workers", type=_parse_int, default=1,
                        help="notebooks run at once (default 1)")
    parser.add_argument("--summary-only", action="store_true",
                        help="compute nothing: write _build/robustness.json from what is there")
    args = parser.parse_args(argv)
    figures = args.figures or profiles.figures()
    try:
        replicates = check_request(args.profile, args.replicates, figures)
        if args.summary_only:
            write_summary(args.profile, replicates, figures)
        else:
            run(args.profile, replicates, figures, args.workers)
    except profiles.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
