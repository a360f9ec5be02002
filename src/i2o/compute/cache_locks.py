"""The results cache's locks, and the cleaning of what killed writers left behind.

Several processes may share one cache (``make sweep`` in the background and ``make book``, SLURM
array jobs). Each entry has a lock file (``<figure>/.locks/<entry>.lock``, via ``filelock``): the
process that computes or writes an entry holds it, and a second process asking for the same
entry waits, saying what it waits for. The operating system releases the lock of a killed
process, so a crash never blocks the others. Temporary directories left by killed writers
(``.<entry>.<token>``) are stale exactly when their entry's lock can be taken
(:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from i2o.base import lineage

LOCKS = ".locks"
# One lock object per lock file and process: filelock's locks are reentrant per object, so a
# ``store`` inside ``cached`` (both holding the key) does not wait for itself.
_lock_objects: dict[str, FileLock] = {}


def lock_path(path: Path) -> Path:
    """The lock file of the entry ``path`` (held while the entry is computed and written)."""
    return path.parent / LOCKS / f"{path.name}.lock"


def entry_lock(path: Path) -> FileLock:
    """This process's one lock object for the entry ``path`` (its folder of locks created)."""
    file = lock_path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    return _lock_objects.setdefault(str(file), FileLock(str(file)))


def _holder(path: Path) -> str:
    """Who holds the key's lock, as its holder recorded it (best effort)."""
    try:
        return lock_path(path).with_suffix(".owner").read_text().strip()
    except OSError:
        return "another process"


@contextmanager
def holding(path: Path, what: str) -> Iterator[None]:
    """Hold the lock of entry ``path``; if another process holds it, say so and wait for it."""
    lock = entry_lock(path)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        print(f"[i2o] results cache: waiting for {what} ({path.name}): {_holder(path)} is "
              f"computing it (lock {lock_path(path)})", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        if lock.lock_counter == 1:
            lock_path(path).with_suffix(".owner").write_text(
                f"pid {os.getpid()} on {socket.gethostname()} since {lineage.now_iso()}\n")
        yield
    finally:
        lock.release()


def _is_temporary(child: Path) -> bool:
    return child.name.startswith(".") and child.name != LOCKS and child.is_dir()


def _entry_of_temporary(child: Path) -> Path:
    """``.<entry>.<token>`` → ``<entry>``."""
    return child.with_name(child.name[1:].rsplit(".", 1)[0])


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Delete the temporary directories of writers that died before renaming them into place.

    A temporary directory belongs to a live writer exactly when its entry's lock is held (every
    writer holds it), so one whose lock can be taken is stale. Returns what was removed.
    """
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    for child in sorted(directory.iterdir()):
        if not _is_temporary(child):
            continue
        lock = entry_lock(_entry_of_temporary(child))
        try:
            lock.acquire(blocking=False)
        except Timeout:
            continue  # its writer is alive
        try:
            if lock.lock_counter == 1 and child.exists():
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
        finally:
            lock.release()
    if removed:
        print(f"[i2o] results cache: removed {len(removed)} temporary entr"
              f"{'y' if len(removed) == 1 else 'ies'} left by interrupted writers in {directory}",
              file=sys.stderr, flush=True)
    return removed
