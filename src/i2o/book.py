"""Execute the figure notebooks with papermill and build the HTML book with Jupyter Book 1.

Source notebooks in ``book/`` carry no outputs. ``run`` validates a figure's parameters (before a
kernel even starts), executes its notebook into ``_build/notebooks/``, and records a stamp (source
notebook, parameters, i2o source hash) so that an unchanged figure is not executed twice.
Two runs of the same figure at once (``make sweep`` in the background and ``make book``) do not
collide: a run holds the figure's lock (``_build/notebooks/.locks/<figure>.lock``) while it
executes; a second run says the figure is already running, waits for it, and then uses the
notebook it wrote when that notebook matches its own parameters. The executed notebook, stamp
included, goes to a private temporary file renamed into place, so a reader never sees half of one.
``html`` stages the book sources with the executed notebooks in place of the clean ones into
``_build/stage`` and runs ``jupyter-book build`` on it (execution off), producing ``_build/html``.

Command line (what the Makefile calls)::

    python -m i2o.book run affine --profile paper -p n_seeds 50 [--force]
    python -m i2o.book all --profile quick
    python -m i2o.book html
    python -m i2o.book figures
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock, Timeout

from i2o import profiles, results, runtime

STAMP_KEY = "i2o"


def executed_dir() -> Path:
    return runtime.build_dir() / "notebooks"


def executed_path(figure: str) -> Path:
    return executed_dir() / Path(profiles.entry(figure)["notebook"]).name


def _stamp(figure: str, params: profiles.Params) -> str:
    source = runtime.repo_root() / profiles.entry(figure)["notebook"]
    blob = json.dumps({"notebook": hashlib.sha256(source.read_bytes()).hexdigest(),
                       "profile": params.profile, "params": params.as_dict(),
                       "i2o": results.source_hash()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _recorded(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())["metadata"].get(STAMP_KEY, {})
    except (ValueError, KeyError):
        return {}


def kernel_env() -> dict[str, str]:
    """Thread settings for the notebook kernels (see DEVELOPERS: 2 cores, deliberate threads)."""
    env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS", "1"),
           "I2O_THREADS": os.environ.get("I2O_THREADS", "1")}
    if "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
                            " intra_op_parallelism_threads=1").strip()
    return env


@contextmanager
def _exclusive(name: str, what: str) -> Iterator[bool]:
    """Hold the build lock ``name``; yield whether another process had to be waited for."""
    locks = runtime.build_dir() / ".locks"
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
        owner.write_text(f"pid {os.getpid()} on {socket.gethostname()} since {runtime.now_iso()}\n")
        yield waited
    finally:
        lock.release()


def run(figure: str, profile: str = "quick", overrides: dict[str, Any] | None = None,
        force: bool = False) -> Path:
    """Validate, then execute one figure's notebook; return the executed copy's path.

    While another process runs the same figure, wait for it; then use its notebook if its stamp is
    this run's (even with ``force``: it was executed after this run was asked for).
    """
    asked = time.time()
    overrides = dict(overrides or {})
    params = profiles.resolve(figure, profile, **overrides)  # fails before any compute
    source = runtime.repo_root() / profiles.entry(figure)["notebook"]
    if not source.exists():
        raise FileNotFoundError(f"figure {figure!r}: notebook {source} does not exist")
    target = executed_path(figure)
    stamp = _stamp(figure, params)
    with _exclusive(f"figure-{figure}", figure) as waited:
        same = _recorded(target).get("stamp") == stamp
        if same and waited and target.stat().st_mtime >= asked:
            print(f"[i2o] {figure}: executed meanwhile by the run waited for, with the same "
                  f"parameters; using it ({target})")
            return target
        if same and not force:
            print(f"[i2o] {figure}: up to date ({target.relative_to(runtime.build_dir())}, "
                  f"profile {profile}); --force to re-execute")
            return target
        return _execute(figure, profile, overrides, params, stamp, source, target)


def _execute(figure: str, profile: str, overrides: dict[str, Any], params: profiles.Params,
             stamp: str, source: Path, target: Path) -> Path:
    import papermill

    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.stem}.*.partial.ipynb"):  # from killed runs
        stale.unlink(missing_ok=True)
    os.environ.update(kernel_env())
    start = time.perf_counter()
    print(f"[i2o] executing {figure} (profile {profile}"
          + (f", overrides {overrides}" if overrides else "") + ") ...", flush=True)
    partial = target.with_name(f".{target.stem}.{os.getpid()}.partial.ipynb")
    try:
        papermill.execute_notebook(
            str(source), str(partial), parameters={"profile": profile, **overrides},
            cwd=str(source.parent), kernel_name="python3", progress_bar=False,
            request_save_on_cell_execute=False)
    except BaseException:
        if partial.exists():  # keep the failed notebook for reading, never as the executed one
            partial.replace(target.with_suffix(".failed.ipynb"))
        raise
    seconds = time.perf_counter() - start
    notebook = json.loads(partial.read_text())
    notebook["metadata"][STAMP_KEY] = {"stamp": stamp, "figure": figure, "profile": profile,
                                       "params": params.as_dict(), "seconds": round(seconds, 1),
                                       "git": runtime.git_sha(), "date": runtime.now_iso()}
    partial.write_text(json.dumps(notebook, indent=1))
    partial.replace(target)
    target.with_suffix(".failed.ipynb").unlink(missing_ok=True)
    print(f"[i2o] {figure}: executed in {seconds:.1f} s -> {target}")
    return target


def run_all(profile: str = "quick", force: bool = False) -> list[Path]:
    return [run(figure, profile, force=force) for figure in profiles.figures()]


def stage() -> Path:
    """Assemble the book sources with executed notebooks into ``_build/stage``."""
    root, staged = runtime.repo_root(), runtime.build_dir() / "stage"
    if staged.exists():
        shutil.rmtree(staged)
    staged.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(root / name, staged / name)
    shutil.copytree(root / "book", staged / "book",
                    ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "_build"))
    for figure in profiles.figures():
        notebook = profiles.entry(figure)["notebook"]
        executed = executed_path(figure)
        if not executed.exists():
            raise FileNotFoundError(
                f"figure {figure!r} has not been executed ({executed} is missing): "
                f"run `make fig-{figure}` or `make book`")
        shutil.copy(executed, staged / notebook)
    return staged


def html() -> Path:
    """Build the HTML book into ``_build/html`` from the staged sources (one build at a time)."""
    with _exclusive("html", "the HTML build"):
        return _build_html()


def _build_html() -> Path:
    staged = stage()
    out = runtime.build_dir()
    command = ["jupyter-book", "build", str(staged), "--path-output", str(staged),
               "--builder", "html"]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.book", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="execute one figure's notebook")
    one.add_argument("figure")
    for p in (one, sub.add_parser("all", help="execute every figure's notebook")):
        p.add_argument("--profile", default="quick")
        p.add_argument("--force", action="store_true", help="re-execute even if up to date")
    one.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"))
    sub.add_parser("html", help="build the HTML book from the executed notebooks")
    sub.add_parser("figures", help="list the manifest's figures")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            run(args.figure, args.profile, _parse_overrides(args.parameter), args.force)
        elif args.command == "all":
            run_all(args.profile, args.force)
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


if __name__ == "__main__":
    raise SystemExit(main())
