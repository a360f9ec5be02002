"""The results cache: expensive computations stored once, keyed by what determines them.

An entry's key is ``sha256(figure, name, parameters, hash of the i2o code, numerics pins)``:
changing a parameter, the code that computes a result, the numerics mode (``I2O_NUMERICS``) or
portable mode's pins recomputes it; rerunning the book does not. Each entry's ``meta.json`` records
its provenance (:func:`i2o.lineage.provenance`: machine, library versions, numerics pins). The
source hashed is the import closure of the module that computes the result (``module=``, for a job
the module that defines its class, :class:`i2o.job.Job`; :func:`i2o.compute.import_graph.closure`):
the modules the computation can reach, found from the code and never listed by hand, so that an edit
to one of them recomputes the entry and an edit to an unrelated chapter or plot does not. The
cache's own plumbing (:data:`CACHE_MACHINERY`: this module, :mod:`i2o.job`,
:mod:`i2o.compute.import_graph`) stores and finds results without computing them, so it is left out,
as are the modules that change no number (:data:`INERT`: paths, progress bars, provenance, the
allocator). An import through a package's face (``from i2o.deq import solve``) reaches the submodule
that defines the name, not everything the face re-exports. What is hashed is each module's code
without its comments and docstrings (:func:`code_of`). Without ``module`` it is the whole package.

``python -m i2o.results fingerprint [FIG ...]`` prints the SHA-256 of every entry of a chapter's
jobs (:mod:`i2o.provenance.fingerprint`), to compare the results of two machines; ``python -m
i2o.results deps [FIG ...]`` the modules each job class's key covers
(:mod:`i2o.provenance.dependencies`).

Each entry's ``meta.json`` also records what computing it cost (:class:`JobCost`: wall and CPU
seconds, the computing process's peak memory), outside the key; :func:`recorded_cost` reads the
most recent record of a job name under any key, for the book's job pool (:mod:`i2o.compute.pool`)
and the forecast (``python -m i2o.results plan``, :mod:`i2o.compute.plan`).

Entries are written atomically (a temporary directory renamed into place) and carry the SHA-256 of
their arrays: a truncated or corrupted entry is detected on read, reported, deleted and recomputed,
never silently used.

Several processes may share one cache (``make sweep`` in the background and ``make book``, SLURM
array jobs). Each key has a lock file (``<figure>/.locks/<entry>.lock``, via ``filelock``): the
process that computes an entry holds it, and a second process asking for the same entry waits,
saying what it waits for, then reads the entry instead of computing it again. The operating system
releases the lock of a killed process, so a crash never blocks the others. Should two writers still
race (a file system without locks), the loser of the rename verifies the winner's entry (checksum)
and uses it. Temporary directories left by killed writers (``.<entry>.<token>``) are removed by the
next process that uses the figure's cache.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import io
import json
import os
import re
import secrets
import shutil
import socket
import sys
import time
import tokenize
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

from i2o import lineage, locations, pins, runtime
from i2o.compute import import_graph
from i2o.digests import sha256

PACKAGE_DIR = Path(__file__).resolve().parent
_ARRAYS = "arrays.npz"
_META = "meta.json"
_LOCKS = ".locks"
# One lock object per lock file and process: filelock's locks are reentrant per object, so a
# ``store`` inside ``cached`` (both holding the key) does not wait for itself.
_lock_objects: dict[str, FileLock] = {}
_swept: set[str] = set()


class CorruptEntry(RuntimeError):
    """A cache entry whose files are missing, truncated or do not match their checksum."""


def results_dir() -> Path:
    """``I2O_RESULTS_DIR`` or ``<repo>/data/results``."""
    return Path(os.environ.get("I2O_RESULTS_DIR", locations.repo_root() / "data" / "results"))


#: Where :func:`jax_compilation_cache` keeps XLA's compiled programs, inside the results cache.
JAX_CACHE = "_jax"


def jax_compilation_cache() -> Path | None:
    """Keep JAX's compiled programs on disk (``results_dir() / JAX_CACHE``), so that another
    process — a sweep worker, the notebook that reads its results, the next replicate — loads a
    program it would otherwise compile again. Numbers do not change: a loaded program is the one
    compiled, and JAX's key covers the program, the compile options and the library versions.
    ``I2O_JAX_CACHE=0`` leaves JAX's default (no persistent cache). Returns the directory, or
    ``None`` when off."""
    if os.environ.get("I2O_JAX_CACHE", "1").strip().lower() in ("0", "off", "false", "no", ""):
        return None
    import jax  # lazy: JAX only for the chapters that use it

    directory = results_dir() / JAX_CACHE
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    # the meta chapter's programs compile in well under JAX's default threshold of 1 s each,
    # but there are many of them
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory


def source_hash(modules: Iterable[str] | None = None,
                root: Path = import_graph.PACKAGE_DIR, code_only: bool = False) -> str:
    """SHA-256 of the source of the named i2o modules (dotted names, e.g. ``"i2o.deq.broyden"``;
    a package's name is its ``__init__``), or of every module of the package; with
    ``code_only``, of their code without comments and docstrings (:func:`code_of`)."""
    if modules is None:
        files = sorted(root.rglob("*.py"))
    else:
        files = sorted({import_graph.path_of(module, root) for module in modules})
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(root)).encode())
        digest.update(code_of(file) if code_only else file.read_bytes())
    return digest.hexdigest()


def code_of(path: Path) -> bytes:
    """The code of a Python file, without what cannot run: its source with every docstring (and
    every other bare string statement) and every comment cut out, blank lines and trailing spaces
    dropped. A cache key covers this, so rewording a docstring or a comment recomputes nothing,
    while the text stays the source's own: the same on every Python version (a syntax tree's dump
    is not)."""
    stat = path.stat()
    return _code_of(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1024)
def _code_of(path: str, mtime_ns: int, size: int) -> bytes:
    source = Path(path).read_text()
    lines = source.splitlines(keepends=True)

    def column(row: int, utf8_offset: int) -> int:  # the syntax tree counts UTF-8 bytes
        return len(lines[row - 1].encode()[:utf8_offset].decode(errors="ignore"))

    cuts = [(node.lineno, column(node.lineno, node.col_offset), node.end_lineno,
             column(node.end_lineno, node.end_col_offset))
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and node.end_lineno is not None
            and node.end_col_offset is not None]
    cuts += [(*token.start, *token.end)
             for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    for first, start, last, end in sorted(cuts, reverse=True):
        lines[first - 1:last] = [lines[first - 1][:start] + lines[last - 1][end:]]
    kept = (line.rstrip() for line in "".join(lines).splitlines())
    return "\n".join(line for line in kept if line).encode()


#: The cache's own plumbing: how a result is stored and found, never what it is. A job's
#: closure neither includes nor follows them, so that fixing the cache does not discard results.
CACHE_MACHINERY = frozenset({"i2o.job", "i2o.results", "i2o.compute.import_graph"})
#: Modules a computation may call that never change its numbers: where files are
#: (:mod:`i2o.locations`; data files are verified by checksum), progress bars
#: (:mod:`i2o.progress`), provenance, the commit and the clock (:mod:`i2o.lineage`) and the
#: allocator (:mod:`i2o.allocator`). A job's closure neither includes nor follows them, so that
#: rewording a progress bar recomputes nothing. They import no computing module, only each other
#: and the numerics they report (:mod:`i2o.runtime`; ``tests/test_keys.py``).
INERT = frozenset({"i2o.locations", "i2o.progress", "i2o.lineage", "i2o.allocator"})


def dependencies(module: str, root: Path = import_graph.PACKAGE_DIR) -> tuple[str, ...]:
    """The i2o modules a result computed by ``module`` depends on: its import closure, without
    the cache machinery (:data:`CACHE_MACHINERY`) and the modules that change no number
    (:data:`INERT`); ``root``: a copy of the package (tests)."""
    return import_graph.closure(module, root, stop=CACHE_MACHINERY | INERT)


def module_source_hash(module: str | None, root: Path = import_graph.PACKAGE_DIR) -> str:
    """:func:`source_hash` of the code of ``module``'s :func:`dependencies` (of the whole
    package when ``None``; ``root``: a copy of the package, in tests). A module outside i2o (a
    researcher's own job, a test) is hashed with the dependencies of the i2o modules it
    imports."""
    if module is None:
        return source_hash(root=root, code_only=True)
    if module in import_graph.modules(root):
        return source_hash(dependencies(module, root), root, code_only=True)
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ValueError(f"module {module!r}: no Python source to hash")
    path = Path(spec.origin)
    digest = hashlib.sha256(code_of(path))
    imported = import_graph.imports_in(path, root=root)
    digest.update(source_hash(import_graph.reach(imported, root, CACHE_MACHINERY | INERT), root,
                              code_only=True).encode())
    return digest.hexdigest()


def _canonical(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=repr, separators=(",", ":"))


def key(figure: str, name: str, params: Mapping[str, Any], module: str | None = None) -> str:
    """The entry's key: ``params`` and the source of ``module``'s import closure. A result
    computed in another numerics mode, or with other portable pins, is another entry
    (:func:`i2o.runtime.numerics_key`); native mode's keys are those of the entries computed
    before the modes existed (they are native)."""
    what = {"figure": figure, "name": name, "params": dict(params),
            "source": module_source_hash(module)}
    if (numerics := runtime.numerics_key()) is not None:
        what["numerics"] = numerics
    return sha256(_canonical(what).encode())


def entry_dir(figure: str, name: str, params: Mapping[str, Any],
              module: str | None = None) -> Path:
    return results_dir() / figure / f"{name}-{key(figure, name, params, module)[:20]}"


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
        meta = json.loads((path / _META).read_text())
        if sha256(path / _ARRAYS) != meta["sha256"]:
            raise CorruptEntry(f"{path}: checksum mismatch")
        with np.load(path / _ARRAYS, allow_pickle=False) as arrays:
            flat = {k: arrays[k] for k in arrays.files}
    except CorruptEntry:
        raise
    except Exception as error:  # missing file, bad JSON, truncated zip, …
        raise CorruptEntry(f"{path}: {type(error).__name__}: {error}") from error
    return _unflatten(flat)


def lock_path(path: Path) -> Path:
    """The lock file of the entry ``path`` (held while the entry is computed and written)."""
    return path.parent / _LOCKS / f"{path.name}.lock"


def _lock(path: Path) -> FileLock:
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
    lock = _lock(path)
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
    return child.name.startswith(".") and child.name != _LOCKS and child.is_dir()


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
        entry = _entry_of_temporary(child)
        lock = _lock(entry)
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


def _publish(tmp: Path, path: Path) -> bool:
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
        np.savez(tmp / _ARRAYS, **flat)  # type: ignore[arg-type]
        meta = {**info, "sha256": sha256(tmp / _ARRAYS), "created": lineage.now_iso(),
                "git": lineage.git_sha(), "provenance": lineage.provenance()}
        (tmp / _META).write_text(json.dumps(meta, indent=1, default=repr))
        _publish(tmp, path)


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


def _read(path: Path) -> dict[str, Any] | None:
    """The entry at ``path``, or ``None`` when absent or corrupted (a corrupted entry is deleted,
    unless another process holds its key, in which case that process is rewriting it)."""
    if not path.exists():
        return None
    try:
        return load(path)
    except CorruptEntry as error:
        lock = _lock(path)
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


def lookup(figure: str, name: str, params: Mapping[str, Any],
           module: str | None = None) -> dict[str, Any] | None:
    """The cached result, or ``None`` when absent or corrupted (a corrupted entry is deleted)."""
    return _read(entry_dir(figure, name, params, module))


def cached(figure: str, name: str, params: Mapping[str, Any],
           compute: Callable[[], Mapping[str, Any]],
           module: str | None = None) -> dict[str, Any]:
    """Return the stored result of ``compute()`` for this key, computing and storing it if needed.

    ``compute`` returns a (nested) dict of arrays, numbers and strings. What comes back is always
    the stored form (lists become arrays, 0-d arrays become Python scalars), whether it was just
    computed or read, so a first and a cached run behave the same. While computing, the key's lock
    is held: another process asking for the same entry waits for it instead of computing it too.
    """
    params = dict(params)
    path = entry_dir(figure, name, params, module)
    found = _read(path)
    if found is not None:
        return found
    if str(path.parent) not in _swept:
        _swept.add(str(path.parent))
        remove_stale_temporaries(path.parent)
    with holding(path, f"{figure}/{name}"):
        found = _read(path)  # computed by the process we waited for
        if found is not None:
            return found
        pins.require_pinned(f"{figure}/{name}")
        wall, cpu = time.perf_counter(), time.process_time()
        result = compute()
        cost = {"seconds": round(time.perf_counter() - wall, 3),
                "cpu_seconds": round(time.process_time() - cpu, 3),
                "peak_rss_mb": peak_rss_mb()}  # a JobCost, read back by recorded_costs
        store(path, result, {"figure": figure, "name": name, "params": params,
                             "source": module_source_hash(module), "module": module,
                             COST: cost})
        return load(path)


#: The field of an entry's ``meta.json`` that holds what computing it cost (:class:`JobCost`).
COST = "cost"
#: An entry's folder: the job's name, a dash, the first 20 hex digits of its key.
_ENTRY_NAME = re.compile(r"(?P<name>.+)-[0-9a-f]{20}")


@dataclass(frozen=True)
class JobCost:
    """What computing one cache entry cost, as :func:`cached` measured it around ``compute()``.

    ``seconds`` is the wall time, ``cpu_seconds`` the process's CPU time over the same span
    (``time.process_time``: every thread of the process, no child process). ``peak_rss_mb`` is
    the computing process's peak resident memory after the compute (``ru_maxrss`` of
    ``RUSAGE_SELF``, in MB): the peak of the whole process since it started, so an upper bound
    for the job (a job computed after a bigger one in the same process inherits its peak);
    ``None`` where the platform does not report it. ``created`` is the entry's creation time
    (UTC, ISO 8601) as its ``meta.json`` records it.
    """

    seconds: float
    cpu_seconds: float
    peak_rss_mb: float | None
    created: str = ""


def peak_rss_mb() -> float | None:
    """This process's peak resident memory so far, in MB (``ru_maxrss``: kB on Linux, bytes on
    macOS); ``None`` where ``resource`` is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 1024), 1)


def _cost_of(entry: Path) -> tuple[JobCost, dict[str, Any]] | None:
    """The cost an entry's ``meta.json`` records, with the parameters it records; ``None`` when
    it records none (computed before costs were recorded) or cannot be read."""
    try:
        meta = json.loads((entry / _META).read_text())
        cost = meta[COST]
        return (JobCost(seconds=float(cost["seconds"]), cpu_seconds=float(cost["cpu_seconds"]),
                        peak_rss_mb=None if cost.get("peak_rss_mb") is None
                        else float(cost["peak_rss_mb"]),
                        created=str(meta.get("created", ""))),
                dict(meta.get("params") or {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def comparable_params(params: Mapping[str, Any]) -> Any:
    """``params`` as ``meta.json`` stores them (tuples become lists, other values their repr)."""
    return json.loads(json.dumps(dict(params), default=repr))


def recorded_costs(figure: str, params: Mapping[str, Mapping[str, Any]] | None = None
                   ) -> dict[str, JobCost]:
    """The most recent recorded cost of every job name in ``figure``'s cache folder, under any
    key (entries are ``<name>-<20 hex digits>``; a changed key, after a code change, keeps the
    name). With ``params`` (name → the job's key parameters), a name's records count only where
    the entry's recorded parameters equal those (so that another profile's run of the same name
    is not taken for this one's); names not in ``params`` are then left out."""
    folder = results_dir() / figure
    wanted = None if params is None else {name: comparable_params(p)
                                          for name, p in params.items()}
    found: dict[str, tuple[tuple[str, float], JobCost]] = {}
    if not folder.is_dir():
        return {}
    for entry in folder.iterdir():
        match = _ENTRY_NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir():
            continue
        name = match["name"]
        if wanted is not None and name not in wanted:
            continue
        read = _cost_of(entry)
        if read is None or (wanted is not None and read[1] != wanted[name]):
            continue
        cost = read[0]
        order = (cost.created, (entry / _META).stat().st_mtime)
        if name not in found or order > found[name][0]:
            found[name] = (order, cost)
    return {name: cost for name, (_, cost) in found.items()}


def recorded_cost(figure: str, name: str, params: Mapping[str, Any] | None = None
                  ) -> JobCost | None:
    """The most recent recorded cost of the job ``name`` in ``figure``'s cache folder, under any
    key (:func:`recorded_costs`); with ``params``, only an entry computed with those parameters
    counts. ``None`` when no entry of that name records a cost."""
    if params is None:
        return recorded_costs(figure).get(name)
    return recorded_costs(figure, {name: params}).get(name)


def clean(figure: str | None = None) -> None:
    """Delete every cached result (or one figure's)."""
    target = results_dir() / figure if figure else results_dir()
    if target.exists():
        shutil.rmtree(target)


if __name__ == "__main__":  # ``python -m i2o.results COMMAND``: the commands of i2o.provenance
    import runpy

    runpy.run_module("i2o.provenance", run_name="__main__", alter_sys=True)
