"""The import graph of the ``i2o`` package, read from its source (no module is imported).

A module's edges are the ``i2o`` modules it names in an ``import`` or ``from … import`` statement,
at top level or inside a function, absolute or relative. ``from i2o.deq import solve`` is an edge
to the package ``i2o.deq`` (its ``__init__``); ``from i2o import results`` an edge to the module
``i2o.results``. The parents a submodule import executes on the way (``i2o``, ``i2o.deq``) are not
edges unless named: they hold docstrings and re-exports, not computation.

Two users: :mod:`i2o.results` keys a cache entry by the source of the :func:`closure` of the
module that defines its job (so no source list is written by hand), and ``tests/test_layout.py``
checks the graph's layers.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


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
    """The i2o modules ``module`` imports."""
    path = path_of(module, root)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    return imports_in(path, package, root) - {module}


def imports_in(path: Path, package: str = "", root: Path = PACKAGE_DIR) -> set[str]:
    """The i2o modules the Python file ``path`` imports (``package``: where its relative
    imports start; a file outside i2o has none that reach it)."""
    known = modules(root)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                origin = f"{base}.{node.module}" if node.module else base
            else:
                origin = node.module or ""
            for alias in node.names:
                child = f"{origin}.{alias.name}"
                found.add(child if child in known else origin)
    return {name for name in found if name in known}


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
