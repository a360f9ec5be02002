"""One figure's notebook executed with papermill: under the figure's build lock, skipped when its
stamp is current, written atomically with its stamp, and its failure recorded in one line."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from i2o.base import lineage, locations, progress, runtime
from i2o.book.stamps import STAMP_KEY, executed_path, recorded_stamp, stamp_changes, stamped
from i2o.compute import door, profiles


@contextmanager
def exclusive(name: str, what: str) -> Iterator[bool]:
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
    with exclusive(f"figure-{figure}", figure) as waited:
        recorded = recorded_stamp(target)
        same = recorded.get("stamp") == stamp
        if same and waited and target.stat().st_mtime >= asked:
            print(f"[i2o] {figure}: executed meanwhile by the run waited for, with the same "
                  f"parameters; using it ({target})")
            failure_path(figure).unlink(missing_ok=True)
            return target
        if same and not force:
            print(f"[i2o] {figure}: up to date ({target.relative_to(locations.build_dir())}, "
                  f"profile {profile}); --force to re-execute")
            # a failure recorded since (bad data, a refused value) was of a run that replaced
            # nothing: this run found its cause gone, and the page is this notebook again
            failure_path(figure).unlink(missing_ok=True)
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


def record_failure(figure: str, reason: str) -> None:
    path = failure_path(figure)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reason + "\n")

