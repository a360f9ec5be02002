"""Do the book's verdicts survive a new draw of every random choice? Chapters at several replicates.

A chapter run at replicate r > 0 redraws every random choice it makes (:mod:`i2o.base.replicates`);
replicate 0 is the book's own draw. :func:`run` executes each chapter's notebook at each replicate
(``python -m i2o.book run <figure> -p replicate <r>``), each into its own build folder
``_build/robustness/<profile>/r<r>/`` so that the book's pages are untouched. Every expensive step
goes through the results cache, so a replicate's training jobs are shared with ``make sweep ... -p
replicate <r>``, nothing is computed twice, and an interrupted run resumes; an unchanged notebook
is not even re-executed (its stamp is up to date), so a rerun on a warm cache takes seconds.

:mod:`i2o.provenance.replicate_summary` then reads the claims each run wrote and writes
``_build/robustness.json``: per chapter and claim, the verdict and value at each replicate and an
agreement status. :mod:`i2o.provenance.robustness_page` turns it into the book's Robustness page
(``book/robustness.md``, written when the book is staged); ``make book`` never computes a
replicate, it shows what was computed and names the command for what is missing.

Command line (``make robustness PROFILE=quick``)::

    python -m i2o.provenance.robustness --profile quick --replicates 0 1 2 [--figures meta
    stability]
        [--workers 2] [--summary-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from i2o.base import locations
from i2o.base.progress import Progress
from i2o.compute import door, profiles
from i2o.data import preflight
from i2o.provenance.replicate_summary import replicate_dir, write_summary

DEFAULT_REPLICATES = (0, 1, 2)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.provenance.robustness",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="quick", help="smoke, quick or paper")
    parser.add_argument("--replicates", nargs="+", type=_parse_int,
                        default=list(DEFAULT_REPLICATES), help="replicates to run (default 0 1 2)")
    parser.add_argument("--figures", nargs="+", default=None,
                        help="chapters (default: every chapter of the manifest)")
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
