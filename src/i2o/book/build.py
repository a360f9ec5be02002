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

    python -m i2o.book run affine --profile paper -p n_seeds 50 [--force]
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
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
import yaml
from filelock import FileLock, Timeout

from i2o import lineage, locations, progress, results, runtime
from i2o.book import claims_page, published, site
from i2o.compute import door, job_costs, pool, profiles, timings
from i2o.data import preflight
from i2o.digests import sha256
from i2o.provenance import numbers, robustness

STAMP_KEY = "i2o"


def executed_dir() -> Path:
    return locations.build_dir() / "notebooks"


def executed_path(figure: str) -> Path:
    return executed_dir() / Path(profiles.entry(figure)["notebook"]).name


def stamp_inputs(figure: str, params: profiles.Params) -> dict[str, Any]:
    """What ``figure``'s stamp is computed from: the SHA-256 of its source notebook, the profile,
    the parameters, the SHA-256 of every i2o source file (:func:`i2o.results.source_hash`) and,
    in portable mode, the numerics pins (:func:`i2o.runtime.numerics_key`, as in a cache key:
    other pins re-execute)."""
    source = locations.repo_root() / profiles.entry(figure)["notebook"]
    what = {"notebook": sha256(source.read_bytes()),
            "profile": params.profile, "params": params.as_dict(), "i2o": results.source_hash()}
    if (numerics := runtime.numerics_key()) is not None:
        what["numerics"] = numerics
    return what


def stamp_of(inputs: Mapping[str, Any]) -> str:
    """The stamp of :func:`stamp_inputs`: SHA-256 of their canonical JSON (keys sorted)."""
    return sha256(json.dumps(dict(inputs), sort_keys=True).encode())


def _stamp(figure: str, params: profiles.Params) -> str:
    return stamp_of(stamp_inputs(figure, params))


def stamped(figure: str, params: profiles.Params) -> tuple[str, dict[str, Any]]:
    """``figure``'s stamp with ``params`` and what it was computed from, with the digest of each
    source file beside it (``sources``, :func:`source_digests`; not part of the stamp)."""
    inputs = stamp_inputs(figure, params)
    return stamp_of(inputs), {**inputs, "sources": source_digests()}


def source_digests(root: Path = results.PACKAGE_DIR) -> dict[str, str]:
    """Each file the stamp's ``i2o`` digest covers (every ``*.py`` under ``root``, as
    :func:`i2o.results.source_hash` finds them), by path relative to ``root``, with the first 16
    hex digits of its SHA-256: kept beside the stamp so that a changed stamp names its files."""
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


def _recorded(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())["metadata"].get(STAMP_KEY, {})
    except (ValueError, KeyError):
        return {}


@contextmanager
def _exclusive(name: str, what: str) -> Iterator[bool]:
    """Hold the build lock ``name``; yield whether another process had to be waited for."""
    locks = locations.build_dir() / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    lock, owner = FileLock(str(locks / f"{name}.lock")), locks / f"{name}.owner"
    waited = False
    try:
        lock.acquire(blocking=False)
    except Timeout:
        try:
            holder = owner.read_text().strip()
        except OSError:
            holder = "another process"
        print(f"[i2o] {what}: already running ({holder}); waiting for it to finish", flush=True)
        lock.acquire()
        waited = True
    try:
        owner.write_text(f"pid {os.getpid()} on {socket.gethostname()} since {lineage.now_iso()}\n")
        yield waited
    finally:
        lock.release()


def up_to_date(figure: str, params: profiles.Params) -> bool:
    """Whether ``figure``'s executed notebook carries the stamp of ``params`` (so that
    :func:`run` would not execute it again without ``force``)."""
    return _recorded(executed_path(figure)).get("stamp") == _stamp(figure, params)


def run(figure: str, profile: str = "quick", overrides: dict[str, Any] | None = None,
        force: bool = False, chapter: door.Chapter | None = None) -> Path:
    """Validate (through :mod:`i2o.compute.door`, unless ``chapter`` is the figure already entered
    with these parameters), then execute one figure's notebook; return the executed copy's path.

    While another process runs the same figure, wait for it; then use its notebook if its stamp is
    this run's (even with ``force``: it was executed after this run was asked for).
    """
    asked = time.time()
    overrides = dict(overrides or {})
    if chapter is None:
        chapter = door.enter(figure, profile, **overrides)  # fails before any compute
    params = chapter.params
    source = locations.repo_root() / profiles.entry(figure)["notebook"]
    if not source.exists():
        raise FileNotFoundError(f"figure {figure!r}: notebook {source} does not exist")
    target = executed_path(figure)
    stamp, inputs = stamped(figure, params)
    with _exclusive(f"figure-{figure}", figure) as waited:
        recorded = _recorded(target)
        same = recorded.get("stamp") == stamp
        if same and waited and target.stat().st_mtime >= asked:
            print(f"[i2o] {figure}: executed meanwhile by the run waited for, with the same "
                  f"parameters; using it ({target})")
            return target
        if same and not force:
            print(f"[i2o] {figure}: up to date ({target.relative_to(locations.build_dir())}, "
                  f"profile {profile}); --force to re-execute")
            return target
        if not same and recorded.get("stamp"):
            print(f"[i2o] {figure}: its stamp changed since its last execution: "
                  + "; ".join(stamp_changes(recorded.get("inputs", {}), inputs)), flush=True)
        return _execute(figure, profile, overrides, params, (stamp, inputs), source, target)


def _progress_bar() -> bool | dict[str, Any]:
    """papermill's bar over the notebook's cells, on the terminal (never in the notebook)."""
    if not progress.progress_enabled():
        return False
    return {"desc": "[i2o] cells", "mininterval": 1.0 if sys.stderr.isatty() else 30.0}


def _execute(figure: str, profile: str, overrides: dict[str, Any], params: profiles.Params,
             stamp_and_inputs: tuple[str, dict[str, Any]], source: Path, target: Path) -> Path:
    """Execute ``figure``'s notebook into ``target``, its metadata recording
    ``stamp_and_inputs`` (the stamp and the inputs it was computed from, :func:`stamped`)."""
    import papermill  # lazy: papermill loads only when a notebook is executed

    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.stem}.*.partial.ipynb"):  # from killed runs
        stale.unlink(missing_ok=True)
    runtime.apply_numerics()  # the kernel inherits it: pinned before torch or JAX loads
    start = time.perf_counter()
    print(f"[i2o] executing {figure} (profile {profile}"
          + (f", overrides {overrides}" if overrides else "") + ") ...", flush=True)
    partial = target.with_name(f".{target.stem}.{os.getpid()}.partial.ipynb")
    try:
        with tempfile.TemporaryDirectory(prefix="i2o-kernel-") as sockets:
            papermill.execute_notebook(
                str(source), str(partial), parameters={"profile": profile, **overrides},
                cwd=str(source.parent), kernel_name="python3", progress_bar=_progress_bar(),
                request_save_on_cell_execute=False, **kernel_manager(sockets))
    except BaseException:
        if partial.exists():  # keep the failed notebook for reading, never as the executed one
            partial.replace(target.with_suffix(".failed.ipynb"))
        raise
    seconds = time.perf_counter() - start
    notebook = json.loads(partial.read_text())
    stamp, inputs = stamp_and_inputs
    notebook["metadata"][STAMP_KEY] = {"stamp": stamp, "inputs": inputs,
                                       "figure": figure, "profile": profile,
                                       "params": params.as_dict(), "seconds": round(seconds, 1),
                                       "git": lineage.git_sha(), "date": lineage.now_iso(),
                                       "provenance": kernel_provenance(notebook)}
    partial.write_text(json.dumps(notebook, indent=1))
    partial.replace(target)
    target.with_suffix(".failed.ipynb").unlink(missing_ok=True)
    failure_path(figure).unlink(missing_ok=True)
    print(f"[i2o] {figure}: executed in {seconds:.1f} s -> {target}")
    return target


def kernel_manager(folder: str) -> dict[str, Any]:
    """The papermill option that runs the notebook's kernel over local IPC sockets in ``folder``
    (a fresh temporary directory) instead of TCP: no port is opened, and ipykernel has no cause
    for its warning about unencrypted TCP. Empty (papermill's default kernel manager, TCP) where
    Unix sockets are not available."""
    if os.name != "posix":
        return {}
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.transport = "ipc"
            self.ip = os.path.join(folder, "kernel")

    return {"kernel_manager_class": IPCKernelManager}


def kernel_provenance(notebook: dict[str, Any]) -> dict[str, Any] | None:
    """The provenance the kernel recorded (:func:`i2o.compute.profiles.show`), or ``None``."""
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            if output.get("metadata", {}).get("scrapbook", {}).get("name") == \
                    profiles.PROVENANCE_RECORD:
                return output["data"][profiles.PROVENANCE_MIME]
    return None


def failure_path(figure: str) -> Path:
    """Why the last run of ``figure`` built no notebook (one line), while that is so."""
    return executed_path(figure).with_suffix(".notbuilt.txt")


def first_error_line(error: BaseException) -> str:
    """The first line of what went wrong: the notebook's own exception for a failed cell."""
    if type(error).__name__ == "PapermillExecutionError":
        text = f"{error.ename}: {error.evalue}"  # type: ignore[attr-defined]
    else:
        text = f"{type(error).__name__}: {error}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _record_failure(figure: str, reason: str) -> None:
    path = failure_path(figure)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reason + "\n")


def run_all(profile: str = "quick", force: bool = False, workers: int | None = None,
            record_timing: bool = False) -> dict[str, str]:
    """Run every figure that can run; return ``{figure: one-line reason}`` for the others.

    A preflight first makes every data set ready (:mod:`i2o.data.preflight`): a figure whose data is
    missing is not started. Then the missing jobs of every chapter to execute (not up to date,
    or ``force``) are computed in one pool of ``workers`` local processes
    (:func:`i2o.compute.pool.run`; ``None``: the cores this process may use, capped by memory), and
    the notebooks run one after the other, reading them. A figure whose notebook fails does not stop
    the others. Each failure is recorded beside the executed notebooks (``<name>.notbuilt.txt``) for
    the HTML build. With ``record_timing``, each executed notebook's timing, and the whole run's
    when every chapter was built, are appended to ``published/timings.json`` at the end
    (:mod:`i2o.compute.timings`).
    """

    figures = profiles.figures()
    for figure in figures:  # the schema first: no chapter is imported for a bad value
        profiles.resolve(figure, profile)
    # every parameter error stops everything, before any compute; a chapter that cannot be
    # entered (its code fails to import) is reported and the others still run
    chapters, broken = {}, {}
    for figure in figures:
        try:
            chapters[figure] = door.enter(figure, profile)
        except profiles.ParameterError:
            raise
        except Exception as error:
            broken[figure] = first_error_line(error)
    print("[i2o] preflight: data sets of " + ", ".join(
        f for f in figures if preflight.needs(f)), flush=True)
    failures = {figure: reason for figure, reason in preflight.check(figures).items() if reason}
    failures.update(broken)
    for figure, reason in failures.items():
        print(f"[i2o] {figure}: not started: {reason}", flush=True)
        _record_failure(figure, reason)
    runnable = [figure for figure in figures if figure not in failures]
    timer = _start_timer([chapters[figure] for figure in runnable], profile, record_timing)
    try:
        done = pool.run([chapters[figure] for figure in runnable
                         if force or not up_to_date(figure, chapters[figure].params)], workers)
    except Exception as error:  # the notebooks still compute what they miss, one by one
        print(f"[i2o] job pool: FAILED ({first_error_line(error)}); each notebook computes "
              f"its own missing jobs", flush=True)
        done = pool.PoolRun(0)
    executed = []
    with pool.told(done):
        for figure in runnable:
            try:
                before = _identity(executed_path(figure)) if timer is not None else None
                run(figure, profile, force=force, chapter=chapters[figure])
                if timer is not None and (entry := _timed(timer, figure, before, done)):
                    executed.append(entry)
            except profiles.ParameterError:
                raise
            except Exception as error:  # keep going: the others still run, the reason is said
                failures[figure] = first_error_line(error)
                print(f"[i2o] {figure}: FAILED: {failures[figure]} (notebook: "
                      f"{executed_path(figure).with_suffix('.failed.ipynb')})", flush=True)
                _record_failure(figure, failures[figure])
    if timer is not None:
        _append_timings(timer, executed, done, failures)
        _publish_job_costs([chapters[figure] for figure in runnable])
    return failures


def _publish_job_costs(chapters: list[door.Chapter]) -> None:
    """The recorded cost of every job of ``chapters`` into ``published/job-costs.json``."""
    try:
        jobs = [job for chapter in chapters for job in chapter.jobs()]
        target, written = job_costs.publish(jobs)
    except Exception as error:  # the build succeeded: only the costs are lost, and said so
        print(f"[i2o] job costs: not recorded ({first_error_line(error)})", flush=True)
        return
    print(f"[i2o] job costs: {written} jobs' recorded costs written to "
          f"{target.relative_to(locations.repo_root())}", flush=True)


def _start_timer(chapters: list[door.Chapter], profile: str,
                 asked: bool) -> timings.TimedRun | None:
    """The timed run's start (load, clock, each chapter's missing jobs) when ``asked``; a
    chapter whose jobs cannot be listed leaves the run untimed (said in one line)."""
    if not asked:
        return None
    try:
        return timings.start(chapters, profile)
    except Exception as error:
        print(f"[i2o] timings: not recorded ({first_error_line(error)})", flush=True)
        return None


def _identity(path: Path) -> tuple[int, int] | None:
    """``path``'s inode and modification time (``None`` if absent): an executed notebook is
    renamed into place, so an execution changes it."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns


def _timed(timer: timings.TimedRun, figure: str, before: tuple[int, int] | None,
           done: pool.PoolRun) -> dict[str, Any] | None:
    """The timing record of ``figure``'s notebook if it was executed since its file had the
    identity ``before`` (an up-to-date notebook was not), from its stamp's seconds."""
    path = executed_path(figure)
    seconds = _recorded(path).get("seconds")
    if seconds is None or _identity(path) in (None, before):
        return None
    pooled = sum(name.startswith(f"{figure}/") for name in done.computed)
    try:
        return timer.notebook(figure, float(seconds), timings.load_average(), pooled,
                              done.workers)
    except Exception as error:  # the notebook ran: its timing alone is lost, and said so
        print(f"[i2o] timings: {figure}: not recorded ({first_error_line(error)})", flush=True)
        return None


def _append_timings(timer: timings.TimedRun, executed: list[dict[str, Any]],
                    done: pool.PoolRun, failures: dict[str, str]) -> None:
    """Append the executed notebooks' records, and the whole run's when no chapter failed."""
    entries = list(executed)
    if executed and not failures:
        entries.append(timer.book(executed, done.workers))
    elif failures:
        print(f"[i2o] timings: the whole book's time is not recorded ({len(failures)} "
              f"chapter(s) not built)", flush=True)
    timings.append_all(entries)


def report(failures: dict[str, str]) -> None:
    """One line per chapter that was not built, on stderr, after everything else."""
    for figure, reason in failures.items():
        print(f"[i2o] not built: {figure}: {reason}", file=sys.stderr, flush=True)


def stage() -> Path:
    """Assemble the book sources with executed notebooks into ``_build/stage``."""
    root, staged = locations.repo_root(), locations.build_dir() / "stage"
    if staged.exists():
        shutil.rmtree(staged)
    staged.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(root / name, staged / name)
    shutil.copytree(root / "book", staged / "book",
                    ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "_build"))
    notebooks = {}
    for figure in profiles.figures():
        notebook = profiles.entry(figure)["notebook"]
        executed = executed_path(figure)
        reason = failure_path(figure).read_text().strip() if failure_path(figure).exists() \
            else None
        if reason is None and not executed.exists():
            reason = f"not executed yet: run `make fig-{figure}` or `make book`"
        notebooks[figure] = staged / notebook
        if reason is None:  # presented for reading: plumbing hidden, figures numbered
            shown = site.present(json.loads(executed.read_text()),
                                 profiles.entry(figure)["outputs"])
            notebooks[figure].write_text(json.dumps(shown, indent=1))
        else:
            _write_not_built(notebooks[figure], figure, reason)
    site.figures_page(staged, notebooks)
    fallback = published.robustness_fallback()
    robustness.write_page(staged, fallback)
    claims_page.write(staged, notebooks, fallback)  # anchors each chapter's claim rows too
    site.fill_timings(staged / "book" / "reproduce.md", notebooks)
    published.fill_reproduce(staged / "book" / "reproduce.md")
    timings.fill_reproduce(staged / "book" / "reproduce.md")
    numbers.write()  # every glued number and claim row, served with the book (html())
    config = yaml.safe_load((staged / "_config.yml").read_text())
    if site.copy_mathjax(staged / "book" / "_static"):  # math rendered offline
        config.setdefault("sphinx", {}).setdefault("config", {})["mathjax_path"] = \
            "mathjax/tex-chtml.js"
    else:
        print("[i2o] MathJax is not installed (npm ci): the pages load it from a CDN",
              file=sys.stderr)
    (staged / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False,
                                                       allow_unicode=True))
    return staged


def _write_not_built(path: Path, figure: str, reason: str) -> None:
    """A one-page notebook saying the chapter was not built, and why."""
    title = profiles.entry(figure)["title"]
    shown = reason.replace("`", "'")
    text = (f"# {title}\n\n:::{{error}}\n**Not built**: {shown}\n:::\n\n"
            f"This chapter's notebook did not run in the last build. Fix the cause and run "
            f"`make fig-{figure}` (or `make book`).")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])
    notebook.metadata[STAMP_KEY] = {"figure": figure, "not_built": reason}
    nbformat.write(notebook, str(path))


def html(strict: bool = False) -> Path:
    """Build the HTML book into ``_build/html`` from the staged sources (one build at a time).

    ``strict``: every Sphinx warning is an error (the tests' build: the book has none).
    """
    with _exclusive("html", "the HTML build"):
        return _build_html(strict)


def _build_html(strict: bool = False) -> Path:
    staged = stage()
    out = locations.build_dir()
    command = ["jupyter-book", "build", str(staged), "--path-output", str(staged),
               "--builder", "html", *(["--warningiserror", "--keep-going"] if strict else [])]
    jb = Path(sys.executable).with_name("jupyter-book")
    command[0] = str(jb) if jb.exists() else command[0]
    completed = subprocess.run(command, cwd=staged, capture_output=True, text=True)
    log = out / "jupyter-book.log"
    log.write_text(completed.stdout + completed.stderr)
    if completed.returncode != 0:
        sys.stderr.write(completed.stdout[-4000:] + completed.stderr[-4000:])
        raise RuntimeError(f"jupyter-book build failed (full log: {log})")
    warnings = [line for line in (completed.stdout + completed.stderr).splitlines()
                if "WARNING" in line or "ERROR" in line]
    built = staged / "_build" / "html"
    target = out / "html"
    if target.exists():
        shutil.rmtree(target)
    shutil.move(built, target)
    shutil.copy(locations.build_dir() / numbers.FILENAME, target / numbers.FILENAME)
    print(f"[i2o] book built: {target / 'index.html'}"
          + (f" ({len(warnings)} warnings, see {log})" if warnings else ""))
    return target


def _parse_overrides(pairs: list[list[str]] | None) -> dict[str, Any]:
    """``-p name value`` pairs; values parsed as YAML (``50`` → int, ``[1, 2]`` → list)."""
    overrides = {}
    for name, raw in pairs or []:
        try:
            overrides[name] = yaml.safe_load(raw)
        except yaml.YAMLError:
            overrides[name] = raw
    return overrides


def _positive(text: str) -> int:
    """An integer ≥ 1 (``--workers``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"an integer ≥ 1; got {text!r}")
    return value


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
        p.add_argument("--workers", type=_positive, default=None,
                       help="processes of the job pool that computes every chapter's missing "
                            "jobs first (default: the cores this process may use, capped so "
                            "that the jobs' recorded peak memory fits)")
    one.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"))
    sub.add_parser("html", help="build the HTML book from the executed notebooks")
    sub.add_parser("figures", help="list the manifest's figures")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            overrides = _parse_overrides(args.parameter)
            chapter = door.enter(args.figure, args.profile, **overrides)
            if reason := preflight.check([args.figure])[args.figure]:
                print(f"error: {args.figure} cannot run: {reason}", file=sys.stderr)
                _record_failure(args.figure, reason)
                return 1
            timer = _start_timer([chapter], args.profile, args.record_timing)
            before = _identity(executed_path(args.figure))
            run(args.figure, args.profile, overrides, args.force, chapter)
            if timer is not None:
                entry = _timed(timer, args.figure, before, pool.PoolRun(0))
                timings.append_all([entry] if entry else [])
        elif args.command in ("all", "book"):
            failures = run_all(args.profile, args.force, args.workers, args.record_timing)
            if args.command == "book":
                html()
            report(failures)
            return 1 if failures else 0
        elif args.command == "html":
            html()
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
