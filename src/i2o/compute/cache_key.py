"""The key of a results-cache entry: its parameters and the code its import closure reaches.

A key is ``sha256(figure, name, parameters, hash of the i2o code, numerics pins)``. The code
hashed is the import closure of the module that computes the result (``module=``, for a job the
module that defines its class, :class:`i2o.compute.job.Job`;
:func:`i2o.compute.import_graph.closure`): the modules the computation can reach, found from the
code and never listed by hand, so that an edit to one of them recomputes the entry and an edit to an
unrelated chapter or plot does not. The cache's own plumbing (:data:`CACHE_MACHINERY`) stores and
finds results without computing them, so it is left out, as are the modules that change no number
(:data:`INERT`). An import through a package's face (``from i2o.deq import solve``) reaches the
submodule that defines the name, not everything the face re-exports.

The hash is of content, not of where it lives (:func:`module_source_hash`): each module of the
closure counts by its code without comments, docstrings and ``i2o`` imports (:func:`content_of`),
and by the names those imports bind with the module whose content each comes from. No file path,
module name or import line enters it, so moving a module to another room, renaming one, or
regrouping and reordering imports recomputes nothing, while an edit to any code of the closure, or
an import rebound to other code, does. Keys of the earlier schemes (file paths in the hash; then
imports read as the names they bind, in their order) are moved to these by ``python -m
i2o.results rekey`` (:mod:`i2o.provenance.rekey`). Without ``module`` the hash
is of the whole package (:func:`source_hash`, with paths).
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
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from i2o.base import runtime
from i2o.base.digests import sha256
from i2o.compute import import_graph


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


def content_of(path: Path, inside: bool = True) -> bytes:
    """:func:`code_of` without its imports of i2o code: ``from i2o.deq.broyden import broyden as
    solver``, ``from .broyden import broyden`` and ``import i2o.deq`` are cut out, wherever they
    stand, so that the text says nothing of where the imported code lives nor of how its imports
    are grouped or ordered (which code each bound name is, is hashed beside it:
    :func:`module_source_hash`). ``inside``: the file is a module of i2o, whose relative imports
    are i2o's; other imports are kept as written."""
    stat = path.stat()
    return _code_of(str(path), stat.st_mtime_ns, stat.st_size, imports="cut", inside=inside)


def bound_names_content_of(path: Path, inside: bool = True) -> bytes:
    """The content keys held from d14b95d to this scheme (read by ``python -m i2o.results
    rekey`` only): :func:`code_of` with each import of i2o code reduced to the names it binds
    (``from i2o.deq.broyden import broyden as solver`` read ``import solver``), which kept how
    the imports were grouped and ordered: moving a module imported beside another changed it."""
    stat = path.stat()
    return _code_of(str(path), stat.st_mtime_ns, stat.st_size, imports="names", inside=inside)


def _is_i2o(node: ast.Import | ast.ImportFrom, inside: bool) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.level > 0 and inside) or (node.module or "").split(".")[0] == "i2o"
    return any(alias.name.split(".")[0] == "i2o" for alias in node.names)


def _bound(alias: ast.alias) -> str:
    return alias.asname or alias.name.split(".")[0]


@functools.lru_cache(maxsize=2048)
def _code_of(path: str, mtime_ns: int, size: int, imports: str = "kept",
             inside: bool = True) -> bytes:
    source = Path(path).read_text()
    lines = source.splitlines(keepends=True)

    def column(row: int, utf8_offset: int) -> int:  # the syntax tree counts UTF-8 bytes
        return len(lines[row - 1].encode()[:utf8_offset].decode(errors="ignore"))

    def span(node: ast.stmt) -> tuple[int, int, int, int]:
        assert node.end_lineno is not None and node.end_col_offset is not None
        return (node.lineno, column(node.lineno, node.col_offset), node.end_lineno,
                column(node.end_lineno, node.end_col_offset))

    tree = ast.parse(source)
    edits = [(*span(node), "") for node in ast.walk(tree)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
             and isinstance(node.value.value, str)]
    rewritten = [] if imports == "kept" else [
        (*span(node), "" if imports == "cut" else "import " + ", ".join(
            _bound(alias) if isinstance(node, ast.Import) else alias.asname or alias.name
            for alias in node.names))
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and _is_i2o(node, inside)]
    within = [(first, last) for first, _, last, _, _ in rewritten]
    edits += rewritten + [
        (*token.start, *token.end, "")
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT  # a comment inside a rewritten import goes with it
        and not any(first <= token.start[0] <= last for first, last in within)]
    for first, start, last, end, text in sorted(edits, reverse=True):
        lines[first - 1:last] = [lines[first - 1][:start] + text + lines[last - 1][end:]]
    kept = (line.rstrip() for line in "".join(lines).splitlines())
    return "\n".join(line for line in kept if line).encode()


#: The cache's own plumbing: how a result is stored and found, never what it is — the face
#: :mod:`i2o.compute.results`, :mod:`i2o.compute.job`, the import graph and the cache's modules in
#: this room. A job's closure neither includes nor follows them, so that fixing the cache does not
#: discard results.
CACHE_MACHINERY = frozenset({
    "i2o.compute.job", "i2o.compute.results", "i2o.compute.import_graph", "i2o.compute.cache_key",
    "i2o.compute.cache_entries", "i2o.compute.cache_locks", "i2o.compute.cache_costs",
    "i2o.compute.jax_cache"})
#: Modules a computation may call that never change its numbers: where files are
#: (:mod:`i2o.base.locations`; data files are verified by checksum), progress bars
#: (:mod:`i2o.base.progress`), provenance, the commit and the clock (:mod:`i2o.base.lineage`) and
#: the allocator (:mod:`i2o.base.allocator`). A job's closure neither includes nor follows them, so
#: that rewording a progress bar recomputes nothing. They import no computing module, only each
#: other and the numerics they report (:mod:`i2o.base.runtime`; ``tests/test_keys.py``).
INERT = frozenset({"i2o.base.locations", "i2o.base.progress", "i2o.base.lineage",
                   "i2o.base.allocator"})
#: Modules that decide where and when jobs run, never their numbers (the same fingerprints with
#: one and two pool processes: ``tests/test_pool_fingerprints.py``, ``tests/test_determinism.py``).
#: No job imports them; the digest of a chapter's verdict code
#: (:func:`i2o.book.published.claims_code_digest`) does not follow them either, so that an edit to
#: the pool leaves published verdicts current.
SCHEDULING = frozenset({"i2o.compute.pool", "i2o.compute.sweep", "i2o.compute.schedule",
                        "i2o.compute.job_costs", "i2o.compute.worker_watch"})


def dependencies(module: str, root: Path = import_graph.PACKAGE_DIR,
                 also_stop: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The i2o modules a result computed by ``module`` depends on: its import closure, without
    the cache machinery (:data:`CACHE_MACHINERY`), the modules that change no number
    (:data:`INERT`) and ``also_stop``; ``root``: a copy of the package (tests)."""
    return import_graph.closure(module, root, stop=CACHE_MACHINERY | INERT | also_stop)


Content = Callable[[Path, bool], bytes]


def module_source_hash(module: str | None, root: Path = import_graph.PACKAGE_DIR,
                       also_stop: frozenset[str] = frozenset(),
                       content: Content = content_of) -> str:
    """The hash of the code a result computed by ``module`` depends on, by content: of every
    module of its :func:`dependencies`, the SHA-256 of its :func:`content_of`, with, for each
    i2o name it binds by an import, that name and the content's SHA-256 of the module defining
    it (an inert or cache module: ``"inert"``); and which of them is ``module``. No path or
    module name enters it: moving or renaming a module changes no key. ``root``: a copy of the
    package (tests); ``also_stop``: modules not followed either (:data:`SCHEDULING`, for verdict
    code). A module outside i2o (a researcher's own job, a test) is hashed by its own file and
    the dependencies of the i2o modules it imports. ``None``: the whole package
    (:func:`source_hash`). ``content``: each module's text (:func:`bound_names_content_of` gives
    the keys of the previous scheme, for ``rekey``)."""
    if module is None:
        return source_hash(root=root, code_only=True)
    if module in import_graph.modules(root):
        top = content(import_graph.path_of(module, root), True)
        return _closure_hash(top, import_graph.used_bindings(module, root),
                             dependencies(module, root, also_stop), root, content)
    path = source_file(module)
    bindings = import_graph.bindings_in(path, root=root)
    reached = import_graph.reach({target for _, target, _ in bindings}, root,
                                 CACHE_MACHINERY | INERT | also_stop)
    return _closure_hash(content(path, False), bindings, reached, root, content)


def source_file(module: str) -> Path:
    """The Python file of an importable ``module`` (one outside i2o: a researcher's job, a
    test); ``ValueError`` when it has none."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ValueError(f"module {module!r}: no Python source to hash")
    return Path(spec.origin)


def _closure_hash(top: bytes, top_bindings: list[tuple[str, str, bool]],
                  closure: Iterable[str], root: Path, content: Content) -> str:
    own = {module: sha256(content(import_graph.path_of(module, root), True))
           for module in closure}

    def label(target: str) -> str:
        return own.get(target, "inert")  # not followed: cache machinery or inert

    def edges(bindings: list[tuple[str, str, bool]]) -> list[list[Any]]:
        return sorted([bound, label(target), sorted(
            label(exported) for exported in
            (import_graph.face_exports(target, root).values() if whole else ()))]
            for bound, target, whole in bindings)

    nodes = sorted([own[module], edges(import_graph.used_bindings(module, root))]
                   for module in own)
    return sha256(_canonical({"module": [sha256(top), edges(top_bindings)],
                              "closure": nodes}).encode())


def torch_threads() -> int:
    """torch's intra-op thread count as this process's environment sets it (``I2O_THREADS``, read
    by :func:`i2o.base.runtime.set_threads`): a whole number ≥ 1, default 1; ``ValueError`` in one
    line for any other value. Other counts give other bits (reductions split differently)."""
    raw = os.environ.get("I2O_THREADS", "1").strip()
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"I2O_THREADS must be a whole number of torch threads ≥ 1; got {raw!r}")
    return int(raw)


def _canonical(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=repr, separators=(",", ":"))


def key(figure: str, name: str, params: Mapping[str, Any], module: str | None = None) -> str:
    """The entry's key: ``params`` and the source of ``module``'s import closure. A result
    computed in another numerics mode, or with other portable pins, is another entry
    (:func:`i2o.base.runtime.numerics_key`); native mode's keys are those of the entries computed
    before the modes existed (they are native). So is one computed with another torch thread
    count than 1 (:func:`torch_threads`), which gives other bits."""
    return key_of(figure, name, params, module_source_hash(module), torch_threads(),
                  runtime.numerics_key())


def key_of(figure: str, name: str, params: Mapping[str, Any], source: str, threads: int = 1,
           numerics: Mapping[str, Any] | None = None) -> str:
    """The key :func:`key` gives for these values, whatever this process's code and
    environment: ``source``, the hash of the computing code (:func:`module_source_hash`),
    ``threads``, the torch thread count, and ``numerics``, the numerics' part
    (:func:`i2o.base.runtime.numerics_key`); what an entry's record is checked against
    (:func:`i2o.compute.cache_entries.recorded_key`)."""
    what: dict[str, Any] = {"figure": figure, "name": name, "params": dict(params),
                            "source": source}
    if threads != 1:  # one thread's keys are those from before
        what["threads"] = threads
    if numerics is not None:
        what["numerics"] = dict(numerics)
    return sha256(_canonical(what).encode())
