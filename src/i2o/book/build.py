"""Execute the figure notebooks with papermill and build the HTML book with Jupyter Book 1.

Source notebooks in ``book/`` carry no outputs. ``run`` validates a figure's parameters (before a
kernel even starts), executes its notebook into ``_build/notebooks/``, and records a stamp (source
notebook, parameters, i2o source hash, numerics pins) so that an unchanged figure is not executed
twice; the stamp's inputs are kept beside it, so that a figure executed again because its stamp
changed is told with what moved (:func:`stamp_changes`: a parameter, the notebook, which i2o
files).
Two runs of the same figure at once (``make sweep`` in the background and ``make book``) do not
collide: a run holds the figure's lock (``_build/notebooks/.locks/<figure>.lock``) while it
executes; a second run says the figure is already running, waits for it, and then uses the
notebook it wrote when that notebook matches its own parameters. The executed notebook, stamp
included, goes to a private temporary file renamed into place, so a reader never sees half of one.
``all`` (and ``book``, which then builds the HTML) first checks that the data sets are there
(:mod:`i2o.data.preflight`) and keeps going past a chapter that cannot run or fails: it is reported
at the end with the first line of its error, its page in the HTML says "not built" and why, and the
exit status is non-zero. Before any notebook, it computes the missing jobs of every chapter it
will execute in one pool of local processes (:mod:`i2o.compute.pool`: ``--workers N``, default the
cores this process may use, capped by the memory the jobs' recorded peaks need), the longest first;
the notebooks then read them from the results cache.
``html`` stages the book sources with the executed notebooks in place of the clean ones into
``_build/stage`` and runs ``jupyter-book build`` on it (execution off), producing ``_build/html``,
with ``numbers.json`` (every glued number and claim row, :mod:`i2o.provenance.numbers`) beside it.

Command line (what the Makefile calls)::

    python -m i2o.book run affine --profile paper -p n_seeds 50 [--force]   # i2o.compute.inputs
    python -m i2o.book all --profile quick [--workers N] [--record-timing]
    python -m i2o.book book --profile quick [--workers N] [--record-timing]  # all, then html
    python -m i2o.book html
    python -m i2o.book figures

``--record-timing`` (``make book RECORD=1``, ``make fig-NAME RECORD=1``) appends one record per
executed notebook (and, for ``all``/``book``, one for the whole run) to ``published/timings.json``
at the end (:mod:`i2o.compute.timings`), and, for ``all``/``book``, the cost of every job of the
chapters run that the results cache records to ``published/job-costs.json``
(:mod:`i2o.compute.job_costs`, what a fresh clone's pool orders and forecasts by); without it
nothing is written there.
"""

from __future__ import annotations

import argparse
import sys

from i2o.book import all_chapters, execute, html_build
from i2o.book.stamps import executed_path
from i2o.compute import door, inputs, plan, pool, profiles, timings
from i2o.data import preflight


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.book", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="execute one figure's notebook")
    one.add_argument("figure")
    whole = sub.add_parser("book", help="execute every figure's notebook that can run, then "
                           "build the HTML; non-zero exit status when a chapter was not built")
    every = sub.add_parser("all", help="execute every figure's notebook")
    for p in (one, every, whole):
        p.add_argument("--profile", default="quick")
        p.add_argument("--force", action="store_true", help="re-execute even if up to date")
        p.add_argument("--record-timing", action="store_true",
                       help="append each executed notebook's timing to published/timings.json")
    for p in (every, whole):
        p.add_argument("--workers", type=plan.count_argument, default=None,
                       help="processes of the job pool that computes every chapter's missing "
                            "jobs first (default: the cores this process may use, capped so "
                            "that the jobs' recorded peak memory fits)")
    one.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"),
                     help="override a figure parameter, e.g. -p seeds '[0, 1]' (read by "
                          "i2o.compute.inputs, not as YAML: 1e-2 is a number, 010 and 1:30 "
                          "are refused)")
    sub.add_parser("html", help="build the HTML book from the executed notebooks")
    sub.add_parser("figures", help="list the manifest's figures")
    args = parser.parse_args(argv)
    try:
        inputs.check_environment()
        if args.command == "run":
            overrides = profiles.read_overrides(args.figure, args.parameter)
            chapter = door.enter(args.figure, args.profile, **overrides)
            if reason := preflight.check([args.figure])[args.figure]:
                print(f"error: {args.figure} cannot run: {reason}", file=sys.stderr)
                execute.record_failure(args.figure, reason)
                return 1
            timer = all_chapters.start_timer([chapter], args.profile, args.record_timing)
            before = all_chapters.file_identity(executed_path(args.figure))
            execute.run(args.figure, args.profile, overrides, args.force, chapter)
            if timer is not None:
                entry = all_chapters.notebook_timing(timer, args.figure, before,
                                                     pool.PoolRun(0))
                timings.append_all([entry] if entry else [])
        elif args.command in ("all", "book"):
            failures = all_chapters.run_all(args.profile, args.force, args.workers,
                                            args.record_timing)
            if args.command == "book":
                html_build.html()
            all_chapters.report(failures)
            return 1 if failures else 0
        elif args.command == "html":
            html_build.html()
        elif args.command == "figures":
            print(" ".join(profiles.figures()))
    except profiles.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # papermill's error carries the notebook's traceback
        if type(error).__name__ == "PapermillExecutionError":
            print(f"error: notebook failed:\n{error}", file=sys.stderr)
            return 1
        raise
    return 0
