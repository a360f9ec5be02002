"""The results cache: expensive computations stored once, keyed by what determines them.

An entry's key is ``sha256(figure, name, parameters, hash of the i2o source)``: changing a
parameter or the code that computes a result recomputes it; rerunning the book does not. The source
hash covers the whole package unless the caller names the modules the result depends on
(``sources=("meta",)``), so that a long run is not invalidated by edits to unrelated chapters.

Entries are written atomically (a temporary directory renamed into place) and carry the SHA-256 of
their arrays: a truncated or corrupted entry is detected on read, reported, deleted and recomputed,
never silently used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from i2o import runtime

PACKAGE_DIR = Path(__file__).resolve().parent
_ARRAYS = "arrays.npz"
_META = "meta.json"


class CorruptEntry(RuntimeError):
    """A cache entry whose files are missing, truncated or do not match their checksum."""


def results_dir() -> Path:
    """``I2O_RESULTS_DIR`` or ``<repo>/data/results``."""
    return Path(os.environ.get("I2O_RESULTS_DIR", runtime.repo_root() / "data" / "results"))


def source_hash(sources: Iterable[str] | None = None) -> str:
    """SHA-256 of the package's Python source (every module, or those named, e.g. ``"meta"``)."""
    if sources is None:
        files = sorted(PACKAGE_DIR.rglob("*.py"))
    else:
        files = []
        for source in sources:
            path = PACKAGE_DIR / source.replace(".", "/")
            if path.is_dir():
                files += sorted(path.rglob("*.py"))
            elif path.with_suffix(".py").is_file():
                files.append(path.with_suffix(".py"))
            else:
                raise ValueError(f"source {source!r} is not a module of i2o ({path}[.py])")
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(PACKAGE_DIR)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _canonical(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=repr, separators=(",", ":"))


def key(figure: str, name: str, params: Mapping[str, Any],
        sources: Iterable[str] | None = None) -> str:
    blob = _canonical({"figure": figure, "name": name, "params": dict(params),
                       "source": source_hash(sources)})
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_dir(figure: str, name: str, params: Mapping[str, Any],
              sources: Iterable[str] | None = None) -> Path:
    return results_dir() / figure / f"{name}-{key(figure, name, params, sources)[:20]}"


def checkpoint_dir(figure: str, name: str, params: Mapping[str, Any],
                   sources: Iterable[str] | None = None) -> Path:
    """A directory, tied to the same key as the result, where a long run keeps its checkpoints."""
    path = entry_dir(figure, name, params, sources).with_suffix(".ckpt")
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load(path: Path) -> dict[str, Any]:
    """Read an entry, checking its checksum; raise :class:`CorruptEntry` if anything is off."""
    try:
        meta = json.loads((path / _META).read_text())
        if _sha256(path / _ARRAYS) != meta["sha256"]:
            raise CorruptEntry(f"{path}: checksum mismatch")
        with np.load(path / _ARRAYS, allow_pickle=False) as arrays:
            flat = {k: arrays[k] for k in arrays.files}
    except CorruptEntry:
        raise
    except Exception as error:  # missing file, bad JSON, truncated zip, …
        raise CorruptEntry(f"{path}: {type(error).__name__}: {error}") from error
    return _unflatten(flat)


def store(path: Path, result: Mapping[str, Any], info: Mapping[str, Any]) -> None:
    """Write an entry atomically: everything goes to a temporary directory renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        np.savez(tmp / _ARRAYS, **_flatten(result))
        meta = {**info, "sha256": _sha256(tmp / _ARRAYS), "created": runtime.now_iso(),
                "git": runtime.git_sha()}
        (tmp / _META).write_text(json.dumps(meta, indent=1, default=repr))
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def lookup(figure: str, name: str, params: Mapping[str, Any],
           sources: Iterable[str] | None = None) -> dict[str, Any] | None:
    """The cached result, or ``None`` when absent or corrupted (a corrupted entry is deleted)."""
    path = entry_dir(figure, name, params, sources)
    if not path.exists():
        return None
    try:
        return load(path)
    except CorruptEntry as error:
        warnings.warn(f"results cache: discarding corrupted entry ({error}); recomputing",
                      stacklevel=2)
        shutil.rmtree(path, ignore_errors=True)
        return None


def cached(figure: str, name: str, params: Mapping[str, Any],
           compute: Callable[[], Mapping[str, Any]],
           sources: Iterable[str] | None = None) -> dict[str, Any]:
    """Return the stored result of ``compute()`` for this key, computing and storing it if needed.

    ``compute`` returns a (nested) dict of arrays, numbers and strings. What comes back is always
    the stored form (lists become arrays, 0-d arrays become Python scalars), whether it was just
    computed or read, so a first and a cached run behave the same.
    """
    params = dict(params)
    found = lookup(figure, name, params, sources)
    if found is not None:
        return found
    path = entry_dir(figure, name, params, sources)
    result = compute()
    store(path, result, {"figure": figure, "name": name, "params": params,
                         "source": source_hash(sources)})
    return load(path)


def clean(figure: str | None = None) -> None:
    """Delete every cached result (or one figure's)."""
    target = results_dir() / figure if figure else results_dir()
    if target.exists():
        shutil.rmtree(target)
