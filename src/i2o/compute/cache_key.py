"""The key of a results-cache entry: its parameters and the code its import closure reaches.

A key is ``sha256(figure, name, parameters, hash of the i2o code, numerics pins)``. The code
hashed is the import closure of the module that computes the result (``module=``, for a job the
module that defines its class, :class:`i2o.job.Job`; :func:`i2o.compute.import_graph.closure`):
the modules the computation can reach, found from the code and never listed by hand, so that an
edit to one of them recomputes the entry and an edit to an unrelated chapter or plot does not.
The cache's own plumbing (:data:`CACHE_MACHINERY`) stores and finds results without computing
them, so it is left out, as are the modules that change no number (:data:`INERT`). An import
through a package's face (``from i2o.deq import solve``) reaches the submodule that defines the
name, not everything the face re-exports. What is hashed is each module's code without its
comments and docstrings (:func:`code_of`). Without ``module`` it is the whole package.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import io
import json
import os
import tokenize
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from i2o import runtime
from i2o.compute import import_graph
from i2o.digests import sha256


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


#: The cache's own plumbing: how a result is stored and found, never what it is — the face
#: :mod:`i2o.results`, :mod:`i2o.job`, the import graph and the cache's modules in this room. A
#: job's closure neither includes nor follows them, so that fixing the cache does not discard
#: results.
CACHE_MACHINERY = frozenset({
    "i2o.job", "i2o.results", "i2o.compute.import_graph", "i2o.compute.cache_key",
    "i2o.compute.cache_entries", "i2o.compute.cache_locks", "i2o.compute.cache_costs",
    "i2o.compute.jax_cache"})
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


def torch_threads() -> int:
    """torch's intra-op thread count as this process's environment sets it (``I2O_THREADS``, read
    by :func:`i2o.runtime.set_threads`): a whole number ≥ 1, default 1; ``ValueError`` in one line
    for any other value. Other counts give other bits (reductions split differently)."""
    raw = os.environ.get("I2O_THREADS", "1").strip()
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"I2O_THREADS must be a whole number of torch threads ≥ 1; got {raw!r}")
    return int(raw)


def _canonical(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=repr, separators=(",", ":"))


def key(figure: str, name: str, params: Mapping[str, Any], module: str | None = None) -> str:
    """The entry's key: ``params`` and the source of ``module``'s import closure. A result
    computed in another numerics mode, or with other portable pins, is another entry
    (:func:`i2o.runtime.numerics_key`); native mode's keys are those of the entries computed
    before the modes existed (they are native). So is one computed with another torch thread
    count than 1 (:func:`torch_threads`), which gives other bits."""
    return key_of(figure, name, params, module_source_hash(module), torch_threads(),
                  runtime.numerics_key())


def key_of(figure: str, name: str, params: Mapping[str, Any], source: str, threads: int = 1,
           numerics: Mapping[str, Any] | None = None) -> str:
    """The key :func:`key` gives for these values, whatever this process's code and
    environment: ``source``, the hash of the computing code (:func:`module_source_hash`),
    ``threads``, the torch thread count, and ``numerics``, the numerics' part
    (:func:`i2o.runtime.numerics_key`); what an entry's record is checked against
    (:func:`i2o.compute.cache_entries.recorded_key`)."""
    what: dict[str, Any] = {"figure": figure, "name": name, "params": dict(params),
                            "source": source}
    if threads != 1:  # one thread's keys are those from before
        what["threads"] = threads
    if numerics is not None:
        what["numerics"] = dict(numerics)
    return sha256(_canonical(what).encode())
