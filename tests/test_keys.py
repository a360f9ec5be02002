"""Exact cache keys (issue 38): a job's key covers the code that computes it and nothing else.

Every job class of every chapter is checked: its closure
(:func:`i2o.compute.cache_key.dependencies`) reaches no verdict, prose, figure, plotting or book
machinery, and no module that changes no number (:data:`i2o.compute.results.INERT`); on a temporary
copy of the package, an edit to each of those modules leaves every key as it was, while an edit to
the numerics leaves none.
"""

from __future__ import annotations

import ast
import shutil
from collections import deque
from pathlib import Path

import pytest

from i2o.compute import cache_key, import_graph, profiles, results
from i2o.provenance import dependencies

PACKAGE = import_graph.PACKAGE_DIR

#: The faces of a chapter and the book's machinery that present, decide or drive, never compute.
PRESENTING_FACES = ("claims", "prose", "figures", "runs", "plot", "verdicts", "result", "cli",
                    "curves")
#: The rooms of machinery that enter, drive, decide, present or trace, never compute: by prefix,
#: so that a module added to one is covered without being listed.
MACHINERY_ROOMS = ("i2o.compute.", "i2o.verdicts.", "i2o.book.", "i2o.provenance.")
#: Machinery outside the rooms: the diagnosis's driver, the data preflight, the commands' entries.
MACHINERY = {"i2o.diagnose.run", "i2o.data.preflight", "i2o.sweep", "i2o.compare", "i2o.numbers",
             "i2o.probes"}


def is_machinery(module: str) -> bool:
    return module in MACHINERY or (module + ".").startswith(MACHINERY_ROOMS)


def presenting(root: Path = PACKAGE) -> set[str]:
    """Every module that presents or decides (verdicts, prose, figures, plots, the book)."""
    return {name for name in import_graph.modules(root)
            if is_machinery(name) or name.rsplit(".", 1)[-1] in PRESENTING_FACES}


def job_modules() -> dict[str, set[str]]:
    """Each module defining a job class, with the classes (every chapter, smoke and quick)."""
    found: dict[str, set[str]] = {}
    for figure in profiles.figures():
        for profile in ("smoke", "quick"):
            params = profiles.resolve(figure, profile)
            for label, (module, _) in dependencies.job_modules(figure, params).items():
                found.setdefault(module, set()).add(label)
    return found


def route(start: str, goal: str) -> list[str]:
    """The import path from ``start`` to ``goal`` (for a readable failure)."""
    edges, parents, todo = import_graph.graph(), {start: ""}, deque([start])
    while todo:
        node = todo.popleft()
        for target in edges[node]:
            if target not in parents:
                parents[target] = node
                todo.append(target)
    path = [goal]
    while parents.get(path[-1]):
        path.append(parents[path[-1]])
    return path[::-1]


def forbidden_in_key(module: str) -> dict[str, list[str]]:
    """The presenting or inert modules ``module``'s key would cover, each with its import path."""
    bad = (presenting() | results.INERT) & set(cache_key.dependencies(module))
    return {name: route(module, name) for name in sorted(bad)}


def test_the_rooms_are_machinery_by_prefix():
    assert is_machinery("i2o.verdicts.a_new_module") and is_machinery("i2o.book")
    assert is_machinery("i2o.provenance.bundles") and is_machinery("i2o.compute.pool")
    assert not is_machinery("i2o.deq.broyden") and not is_machinery("i2o.bookkeeping")


def test_every_chapter_has_job_classes_to_check():
    modules = job_modules()
    assert len(modules) >= 10, modules
    assert any("diagnose" in module for module in modules)


@pytest.mark.parametrize("module", sorted(job_modules()))
def test_no_job_key_covers_verdict_prose_figure_plotting_or_inert_code(module):
    found = forbidden_in_key(module)
    assert not found, "\n".join(f"{name}: reached by {' -> '.join(path)}"
                                for name, path in found.items())


def test_the_check_catches_a_job_module_that_reaches_verdicts():
    """The predicate fails where it should: a job defined beside ``diagnose`` (which decides)
    would be keyed by the verdicts and the claims."""
    found = forbidden_in_key("i2o.diagnose.run")
    assert {"i2o.verdicts.rule", "i2o.verdicts.gates", "i2o.verdicts.claims"} <= set(found)
    assert found["i2o.verdicts.rule"][0] == "i2o.diagnose.run"


def test_inert_modules_import_no_computing_module():
    """What leaves the keys must not hide computation behind it: an inert module imports only
    inert modules, or the numerics it reports (:mod:`i2o.base.runtime`)."""
    graph = import_graph.graph()
    for module in results.INERT:
        assert graph[module] <= results.INERT | {"i2o.base.runtime"}, (module, graph[module])
    assert not graph["i2o.train.loop"] <= results.INERT | {"i2o.base.runtime"}  # a computing one


def _edit(path: Path) -> None:
    """An edit of code (a comment would not count: keys cover code, not comments)."""
    path.write_text(path.read_text() + "\n_EDITED = True\n")


def test_editing_presentation_or_inert_code_changes_no_key_and_the_numerics_change_them(tmp_path):
    """On a temporary copy of the package: every job module's source hash, before and after an
    edit of every presenting and inert module (gates, claims, prose, figures, plotting, progress
    bars, paths, provenance); then after an edit of the numerics module."""
    root = tmp_path / "i2o"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    modules = sorted(job_modules())

    def keys() -> dict[str, str]:
        return {module: cache_key.module_source_hash(module, root) for module in modules}

    before = keys()
    edited = sorted(presenting(root) | results.INERT)
    assert {"i2o.verdicts.gates", "i2o.verdicts.intervals", "i2o.book", "i2o.base.progress",
            "i2o.chapters.stability.claims"} <= set(edited)
    for module in edited:
        _edit(import_graph.path_of(module, root))
    assert keys() == before
    _edit(root / "base" / "runtime.py")
    after = keys()
    numeric = [module for module in modules if "i2o.base.runtime" in cache_key.dependencies(module)]
    assert numeric and all(after[module] != before[module] for module in numeric)


def test_a_name_imported_through_a_package_face_reaches_its_defining_module(tmp_path):
    graph = import_graph.graph()
    assert "i2o.deq.spec" in graph["i2o.chapters.diagnose.jobs"]
    assert "i2o.deq" not in graph["i2o.chapters.diagnose.jobs"]
    assert graph["i2o.deq"] == frozenset()  # a face of re-exports computes nothing itself
    assert import_graph.face_exports("i2o.diagnose")["diagnose"] == "i2o.diagnose.run"
    assert "i2o.chapters.diagnose" in graph["i2o.chapters.diagnose.jobs"]  # FIGURE is its own
    whole = tmp_path / "whole.py"
    whole.write_text("import i2o.deq\nfrom i2o.deq import solve\n")
    found = import_graph.imports_in(whole)
    assert {"i2o.deq", "i2o.deq.spec", "i2o.deq.solve", "i2o.deq.layer"} <= found
    named = tmp_path / "named.py"
    named.write_text("from i2o.diagnose import Curves\n")
    assert import_graph.imports_in(named) == {"i2o.verdicts.curves"}


def test_a_docstring_or_a_comment_changes_no_key_and_code_does(tmp_path):
    """A key covers code (:func:`i2o.compute.cache_key.code_of`): rewording the Broyden solver's
    docstrings and comments leaves a stability job's key as it was; changing one constant of its
    code does not."""
    root = tmp_path / "i2o"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    module, solver = "i2o.chapters.stability.jobs", root / "deq" / "broyden.py"
    before = cache_key.module_source_hash(module, root)
    text = solver.read_text()
    first = text.index('"""') + 3
    solver.write_text(text[:first] + "Reworded. " + text[first:] + "\n# a comment\n")
    assert cache_key.module_source_hash(module, root) == before
    _edit(solver)
    assert cache_key.module_source_hash(module, root) != before


def _package(root: Path, files: dict[str, str]) -> Path:
    """A throwaway package ``i2o`` under ``root`` with the given files (path → source)."""
    for name, source in {"__init__.py": "", **files}.items():
        path = root / "i2o" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root / "i2o"


def test_a_faces_own_names_its_redefinitions_and_cycles_resolve_to_the_right_module(tmp_path):
    root = _package(tmp_path, {
        "a/__init__.py": "from .x import X\nfrom . import y\nFIG = 1\n",
        "a/x.py": "X = 1\n", "a/y.py": "Y = 1\n",
        "c/__init__.py": "from .x import f\n\n\ndef f():\n    return 2\n",
        "c/x.py": "def f():\n    return 1\n",
        "p/__init__.py": "from .q import Q\nP = 1\n",
        "p/q/__init__.py": "from i2o.p import P\nQ = P\n",
        "job_fig.py": "from i2o.a import FIG\n", "job_x.py": "from i2o.a import X\n",
        "job_f.py": "from i2o.c import f\n", "job_q.py": "from i2o.p import Q\n",
        "job_all.py": "import i2o.a\n",
    })
    closure = {name: set(import_graph.closure(f"i2o.{name}", root)) - {f"i2o.{name}"}
               for name in ("job_fig", "job_x", "job_f", "job_q", "job_all")}
    assert closure["job_fig"] == {"i2o.a"}  # the face's own name: not what it re-exports
    assert closure["job_x"] == {"i2o.a.x"}
    assert closure["job_f"] == {"i2o.c"}  # the face's own f replaces the imported one
    assert "i2o.p.q" in closure["job_q"]  # faces importing each other: no endless recursion
    assert closure["job_all"] == {"i2o.a", "i2o.a.x", "i2o.a.y"}  # a whole package: everything


class _NoDocstrings(ast.NodeTransformer):
    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        bare = isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        return None if bare else node


def test_what_a_key_covers_is_the_whole_code_and_only_the_code():
    """:func:`i2o.compute.cache_key.code_of` cuts docstrings and comments out of the source text:
    for every module of the package the text left has the syntax tree of the module without its
    docstrings: no code was cut."""
    compared = 0
    for path in import_graph.modules().values():
        expected = ast.dump(_NoDocstrings().visit(ast.parse(path.read_text())))
        try:
            found = ast.dump(_NoDocstrings().visit(ast.parse(cache_key.code_of(path).decode())))
        except SyntaxError:  # a body that held only a docstring (an abstract method) is empty
            continue
        assert found == expected, path
        compared += 1
    assert compared > 100


def test_a_thread_count_other_than_one_is_another_key(monkeypatch):
    """Two torch threads give other bits than one (issue 65): never the same entry."""
    def key() -> str:
        return cache_key.key("stability", "job", {"seed": 0}, module="i2o.chapters.stability.jobs")

    monkeypatch.delenv("I2O_THREADS", raising=False)
    alone = key()
    monkeypatch.setenv("I2O_THREADS", "1")
    assert key() == alone  # one thread: the keys computed before the count was in them
    monkeypatch.setenv("I2O_THREADS", "2")
    assert key() != alone
    for bad in ("0", "-1", "two", "1.5", ""):
        monkeypatch.setenv("I2O_THREADS", bad)
        with pytest.raises(ValueError, match="I2O_THREADS must be a whole number"):
            key()
