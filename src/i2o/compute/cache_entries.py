"""The entries of the results cache on disk: where they are, how they are written and read.

An entry is a folder ``<results_dir>/<figure>/<name>-<first 20 hex digits of its key>`` holding
``arrays.npz`` (the result, a nested dict flattened to ``a/b`` paths) and ``meta.json`` (what was
computed, its provenance, the SHA-256 of the arrays). Entries are written atomically (a temporary
directory renamed into place, under the entry's lock, :mod:`i2o.compute.cache_locks`) and
verified on read: a truncated or corrupted entry raises :class:`CorruptEntry`, and
:func:`read_entry` deletes it so that it is computed again, never silently used. Should two
writers race (a file system without locks), the loser of the rename verifies the winner's entry
and keeps it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from filelock import Timeout

from i2o.base import lineage, locations, runtime
from i2o.base.digests import sha256
from i2o.compute.cache_key import key, key_of
from i2o.compute.cache_locks import entry_lock, holding

T = TypeVar("T")

ARRAYS = "arrays.npz"
META = "meta.json"


class CorruptEntry(RuntimeError):
    """A cache entry whose files are missing, truncated or do not match their checksum."""


def results_dir() -> Path:
    """``I2O_RESULTS_DIR`` or ``<repo>/data/results``."""
    return Path(os.environ.get("I2O_RESULTS_DIR", locations.repo_root() / "data" / "results"))


def entry_dir(figure: str, name: str, params: Mapping[str, Any],
              module: str | None = None) -> Path:
    """The folder of the entry of job ``name`` of ``figure`` with ``params`` computed by
    ``module`` (:func:`i2o.compute.cache_key.key`)."""
    return results_dir() / figure / f"{name}-{key(figure, name, params, module)[:20]}"


def _recorded(meta: Mapping[str, Any], field: str, kind: type[T]) -> T:
    value = meta.get(field)
    if not isinstance(value, kind):
        raise ValueError(f"its {field} is {value!r}")
    return value


def recorded_key(meta: Mapping[str, Any]) -> str:
    """The key of the entry whose ``meta.json`` is ``meta``, from what it records: the figure,
    the job's name, its parameters and the hash of the code that computed it, with the torch
    thread count and the numerics mode of its provenance (portable mode's pins taken as this
    code's); :func:`entry_dir` names the entry's folder by it. ``ValueError`` naming what is
    missing or malformed. An import checks that an entry lands in the folder its record
    names."""
    figure, name, source = (_recorded(meta, field, str) for field in ("figure", "name", "source"))
    params = _recorded(meta, "params", dict)
    provenance = meta.get("provenance", {})
    if not isinstance(provenance, dict):
        raise ValueError(f"its provenance is {provenance!r}")
    counts = provenance.get("threads", {})
    threads = counts.get("I2O_THREADS", "1") if isinstance(counts, dict) else counts
    if not isinstance(threads, str) or not threads.strip().isdigit():
        raise ValueError(f"its torch thread count is {threads!r}")
    mode = provenance.get("numerics")
    numerics: dict[str, Any] | None
    if mode is None or mode == "native":  # native, or computed before the modes existed
        numerics = None
    elif mode != "portable":
        raise ValueError(f"its numerics mode is {mode!r}")
    elif str(provenance.get("machine", "")).lower() in ("x86_64", "amd64"):
        numerics = {"mode": mode, "pins": runtime.PORTABLE_PINS,
                    "xla": list(runtime.XLA_PORTABLE_FLAGS)}
    else:  # nothing is pinned there
        numerics = {"mode": mode}
    return key_of(figure, name, params, source, int(threads), numerics)


def checkpoint_dir(figure: str, name: str, params: Mapping[str, Any],
                   module: str | None = None) -> Path:
    """A directory, tied to the same key as the result, where a long run keeps its checkpoints."""
    entry = entry_dir(figure, name, params, module)
    path = entry.with_name(f"{entry.name}.ckpt")  # not with_suffix: a name may hold a dot
    path.mkdir(parents=True, exist_ok=True)
    return path


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    flat = {}
    for k, v in tree.items():
        if "/" in k:
            raise ValueError(f"result keys may not contain '/': {k!r}")
        path = f"{prefix}{k}"
        if isinstance(v, Mapping):
            flat.update(_flatten(v, path + "/"))
        else:
            array = np.asarray(v)
            if array.dtype == object:
                raise TypeError(f"result {path!r} is not an array, number or string: {type(v)}")
            flat[path] = array
    return flat


def _unflatten(flat: Mapping[str, np.ndarray]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path, array in flat.items():
        *parents, leaf = path.split("/")
        node = tree
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = array.item() if array.ndim == 0 else array
    return tree


def load(path: Path) -> dict[str, Any]:
    """Read an entry, checking its checksum; raise :class:`CorruptEntry` if anything is off."""
    try:
        meta = json.loads((path / META).read_text())
        if sha256(path / ARRAYS) != meta["sha256"]:
            raise CorruptEntry(f"{path}: checksum mismatch")
        with np.load(path / ARRAYS, allow_pickle=False) as arrays:
            flat = {k: arrays[k] for k in arrays.files}
    except CorruptEntry:
        raise
    except Exception as error:  # missing file, bad JSON, truncated zip, …
        raise CorruptEntry(f"{path}: {type(error).__name__}: {error}") from error
    return _unflatten(flat)


def publish(tmp: Path, path: Path) -> bool:
    """Rename ``tmp`` to ``path``; return ``False`` when a valid entry was already there.

    Losing the race to another writer of the same key is not an error: the winner's entry is
    verified (checksum) and kept. A corrupted one is replaced.
    """
    for _ in range(3):
        try:
            os.rename(tmp, path)
            return True
        except OSError:
            if not path.exists():
                raise
        try:
            load(path)
            return False
        except CorruptEntry as error:
            warnings.warn(f"results cache: replacing corrupted entry ({error})", stacklevel=3)
            shutil.rmtree(path, ignore_errors=True)
    raise OSError(f"results cache: could not rename {tmp} to {path}")


def store(path: Path, result: Mapping[str, Any], info: Mapping[str, Any]) -> None:
    """Write an entry atomically: everything goes to a temporary directory renamed into place.

    A valid entry already at ``path`` (same key, so the same result) is kept as it is.
    """
    flat = _flatten(result)
    with staging(path) as tmp:
        # numpy's stub checks **arrays against savez's own allow_pickle: bool
        np.savez(tmp / ARRAYS, **flat)  # type: ignore[arg-type]
        meta = {**info, "sha256": sha256(tmp / ARRAYS), "created": lineage.now_iso(),
                "git": lineage.git_sha(), "provenance": lineage.provenance()}
        (tmp / META).write_text(json.dumps(meta, indent=1, default=repr))
        publish(tmp, path)


@contextmanager
def staging(path: Path) -> Iterator[Path]:
    """A temporary directory beside the entry ``path``, held under its lock, into which a writer
    puts the entry's files before renaming it into place; removed if it is still there at exit
    (and, should the process be killed, by the next process that uses the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with holding(path, path.name):
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        tmp.mkdir()
        try:
            yield tmp
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)


def read_entry(path: Path) -> dict[str, Any] | None:
    """The entry at ``path``, or ``None`` when absent or corrupted (a corrupted entry is deleted,
    unless another process holds its key, in which case that process is rewriting it)."""
    if not path.exists():
        return None
    try:
        return load(path)
    except CorruptEntry as error:
        lock = entry_lock(path)
        try:
            lock.acquire(blocking=False)
        except Timeout:
            return None
        try:
            try:
                return load(path)  # rewritten meanwhile
            except CorruptEntry:
                pass
            warnings.warn(f"results cache: discarding corrupted entry ({error}); recomputing",
                          stacklevel=3)
            shutil.rmtree(path, ignore_errors=True)
            return None
        finally:
            lock.release()


def clean(figure: str | None = None) -> None:
    """Delete every cached result (or one figure's)."""
    target = results_dir() / figure if figure else results_dir()
    if target.exists():
        shutil.rmtree(target)
