"""The import graph of the ``i2o`` package, read from its source (no module is imported).

A module's edges are the ``i2o`` modules it names in an ``import`` or ``from … import`` statement,
at top level or inside a function, absolute or relative: ``from i2o.compute import results`` is an
edge to the module ``i2o.compute.results``. A name imported from a package goes through its face
(``__init__``) to the submodule that defines it: ``from i2o.deq import SolverSpec`` is an edge to
``i2o.deq.spec`` (:func:`face_exports`), not to everything the face re-exports; a name the face
defines itself (``from i2o.chapters.meta import FIGURE``) is an edge to the face, whose own edges
are only the imports its code uses. A whole package bound to a name (``import i2o.deq``) is an edge
to every module its face exports. The parents a submodule import executes on the way (``i2o``,
``i2o.deq``) are not edges unless named: they hold docstrings and re-exports, not computation.

Two users: :mod:`i2o.compute.results` keys a cache entry by the source of the :func:`closure` of the
module that defines its job (so no source list is written by hand), and ``tests/test_layout.py``
checks the graph's layers.
"""

from __future__ import annotations

import ast
from functools import cache, lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the i2o package, above this room


def module_name(path: Path, root: Path = PACKAGE_DIR) -> str:
    """``<root>/deq/broyden.py`` → ``i2o.deq.broyden``; a package's ``__init__`` is its name."""
    parts = ["i2o", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules(root: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Every module of the package at ``root`` (default: this one), by dotted name."""
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def path_of(module: str, root: Path = PACKAGE_DIR) -> Path:
    """The source file of ``module`` (``ValueError`` when it is not a module of i2o)."""
    try:
        return modules(root)[module]
    except KeyError:
        raise ValueError(f"{module!r} is not a module of i2o (under {root})") from None


def imports_of(module: str, root: Path = PACKAGE_DIR) -> set[str]:
    """The i2o modules ``module`` imports (a face: only those its own code uses)."""
    path = path_of(module, root)
    return _edges(path, _package_of(module, path), root, _is_face(path)) - {module}


def imports_in(path: Path, package: str = "", root: Path = PACKAGE_DIR) -> set[str]:
    """The i2o modules the Python file ``path`` imports (``package``: where its relative
    imports start; a file outside i2o has none that reach it)."""
    return _edges(path, package, root, face=False)


def face_exports(package: str, root: Path = PACKAGE_DIR) -> dict[str, str]:
    """The names ``package``'s face (``__init__``) binds, each with the module that defines it:
    followed through further faces, a submodule for a name that is a module, the face itself for
    a name it defines (a function, a class, an assignment: also one that replaces an import)."""
    return {name: target for name, (target, _) in _face_bindings(package, root).items()}


_RESOLVING: set[tuple[str, Path]] = set()


@cache
def _face_bindings(package: str, root: Path) -> dict[str, tuple[str, bool]]:
    """:func:`face_exports`, with whether each target is a whole package. Faces that import
    from each other resolve to the face where the cycle closes."""
    path = path_of(package, root)
    if not _is_face(path) or (package, root) in _RESOLVING:
        return {}
    _RESOLVING.add((package, root))
    try:
        found = {bound: (target, whole) for bound, target, whole in
                 _bindings(path, package, root)}
    finally:
        _RESOLVING.discard((package, root))
    for statement in ast.parse(path.read_text()).body:
        for name in _defined(statement):
            found[name] = (package, False)
    return found


def _defined(statement: ast.stmt) -> list[str]:
    """The names a top-level statement defines (imports aside)."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [statement.name]
    targets = (statement.targets if isinstance(statement, ast.Assign)
               else [statement.target] if isinstance(statement, ast.AnnAssign | ast.AugAssign)
               else [])
    return [node.id for target in targets for node in ast.walk(target)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)]


def _is_face(path: Path) -> bool:
    return path.name == "__init__.py"


def _package_of(module: str, path: Path) -> str:
    return module if _is_face(path) else module.rsplit(".", 1)[0]


def _origin(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _bindings(path: Path, package: str, root: Path) -> list[tuple[str, str, bool]]:
    """Each i2o name the file binds by an import: (bound name, the module that defines it,
    whether the binding is a whole package)."""
    stat = path.stat()
    return list(_bindings_read(path, stat.st_mtime_ns, stat.st_size, package, root))


@lru_cache(maxsize=4096)
def _bindings_read(path: Path, mtime_ns: int, size: int, package: str, root: Path
                   ) -> tuple[tuple[str, str, bool], ...]:
    known = modules(root)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    bound = alias.asname or alias.name.split(".")[0]
                    found.append((bound, alias.name, _is_face(known[alias.name])))
        elif isinstance(node, ast.ImportFrom):
            origin = _origin(node, package)
            for alias in node.names:
                bound, child = alias.asname or alias.name, f"{origin}.{alias.name}"
                if child in known:
                    found.append((bound, child, _is_face(known[child])))
                elif origin in known:
                    target, whole = _face_bindings(origin, root).get(alias.name, (origin, False))
                    found.append((bound, target, whole))
    return tuple(found)


def used_bindings(module: str, root: Path = PACKAGE_DIR) -> list[tuple[str, str, bool]]:
    """The i2o names ``module`` binds by an import and its code uses (a face: only those its own
    code reads), each as (bound name, the module that defines it, whether it is a whole
    package): the edges of :func:`imports_of`, with the names they bind."""
    path = path_of(module, root)
    return _used(path, _package_of(module, path), root, _is_face(path))


def bindings_in(path: Path, package: str = "", root: Path = PACKAGE_DIR
                ) -> list[tuple[str, str, bool]]:
    """:func:`used_bindings` of the Python file ``path`` (:func:`imports_in`)."""
    return _used(path, package, root, face=False)


def _used(path: Path, package: str, root: Path, face: bool) -> list[tuple[str, str, bool]]:
    bindings = _bindings(path, package, root)
    if face:
        used = _names_read(path)
        bindings = [binding for binding in bindings if binding[0] in used]
    return bindings


def _edges(path: Path, package: str, root: Path, face: bool) -> set[str]:
    """The modules the bindings of ``path`` reach; in a face, only the bindings its own code
    reads (the rest are re-exports, followed by whoever imports them)."""
    found: set[str] = set()
    for _, target, whole_package in _used(path, package, root, face):
        found.add(target)
        if whole_package:
            found |= set(face_exports(target, root).values())
    return found


def _names_read(path: Path) -> set[str]:
    """The names the file's code reads, outside ``__all__``."""
    stat = path.stat()
    return set(_names_read_at(path, stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=1024)
def _names_read_at(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    skip = {id(node) for statement in tree.body if isinstance(statement, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "__all__"
                    for target in statement.targets) for node in ast.walk(statement)}
    return frozenset(node.id for node in ast.walk(tree)
                     if isinstance(node, ast.Name) and id(node) not in skip)


@cache
def graph(root: Path = PACKAGE_DIR) -> dict[str, frozenset[str]]:
    """Every module → the i2o modules it imports (read once per process and root)."""
    return {module: frozenset(imports_of(module, root)) for module in modules(root)}


def closure(module: str, root: Path = PACKAGE_DIR,
            stop: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """``module`` and every i2o module it reaches through imports, sorted; the modules of
    ``stop`` are neither included nor followed."""
    if module not in graph(root):
        raise ValueError(f"{module!r} is not a module of i2o (under {root})")
    return reach({module}, root, stop)


def reach(start: set[str], root: Path = PACKAGE_DIR,
          stop: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The i2o modules ``start`` and everything they import, directly or not, sorted; the
    modules of ``stop`` are neither included nor followed."""
    edges = graph(root)
    seen = set(start) - stop
    todo = list(seen)
    while todo:
        for target in edges[todo.pop()]:
            if target not in seen and target not in stop:
                seen.add(target)
                todo.append(target)
    return tuple(sorted(seen))
