"""The package's layout as a checked contract (see ``i2o.chapters``): the import graph of
``src/i2o`` has no cycle, imports run only downward (chapters → book machinery → engines →
runtime), no chapter imports another, and every chapter of the manifest has its faces."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from i2o import profiles

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "src" / "i2o"
ENGINES = ("deq", "models", "data", "train")
BASE = ("runtime",)
LAYERS = {"base": 0, "engine": 1, "machinery": 2, "chapter": 3}


def module_name(path: Path) -> str:
    parts = ["i2o", *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def imports_of(module: str) -> set[str]:
    """The i2o modules ``module`` imports (at top level or inside functions)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
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
                found.add(f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in MODULES
                          else origin)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def chapter_of(module: str) -> str | None:
    return module.split(".")[2] if module.startswith("i2o.chapters.") else None


def layer_of(module: str) -> str:
    if chapter_of(module) or module == "i2o.chapters":
        return "chapter"
    top = module.split(".")[1] if "." in module else ""
    if top in BASE:
        return "base"
    if top in ENGINES:
        return "engine"
    return "machinery"  # i2o itself, book, profiles, results, claims, plotting, sweep, …


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_has_no_cycle():
    assert find_cycle(GRAPH) is None, " → ".join(find_cycle(GRAPH))


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_imports_run_only_downward():
    upward = [f"{m} ({layer_of(m)}) imports {n} ({layer_of(n)})"
              for m, targets in GRAPH.items() for n in targets
              if LAYERS[layer_of(n)] > LAYERS[layer_of(m)]]
    assert not upward, "\n".join(upward)


def test_no_chapter_imports_another():
    crossing = [f"{m} imports {n}" for m, targets in GRAPH.items() for n in targets
                if chapter_of(m) and chapter_of(n) and chapter_of(m) != chapter_of(n)]
    assert not crossing, "\n".join(crossing)


def test_the_graph_sees_function_level_and_relative_imports():
    assert "i2o.chapters.affine.sweeps" in GRAPH["i2o.chapters.affine.runs"]
    assert "i2o.runtime" in GRAPH["i2o.profiles"]  # imported inside a function


@pytest.mark.parametrize("figure", profiles.figures())
def test_every_chapter_has_its_faces(figure):
    """The manifest names each chapter's package; ``FIGURE`` agrees with the key, the notebook
    stem with the package name, and ``runs`` has all of the sweep faces or none."""
    package = profiles.entry(figure)["package"]
    assert package == "i2o.chapters." + Path(profiles.entry(figure)["notebook"]).stem
    chapter = importlib.import_module(package)
    assert chapter.FIGURE == figure and chapter.__doc__
    runs = importlib.import_module(package + ".runs")
    faces = [hasattr(runs, face) for face in ("all_jobs", "is_cached", "run_job")]
    assert all(faces) or not any(faces)
    assert callable(runs.collect)
    assert callable(runs.check_params)
    assert importlib.import_module(package + ".figures")
    claims = importlib.import_module(package + ".claims")
    assert callable(claims.numbers) and callable(claims.claims)


MAX_NOTEBOOK_LOGIC_LINES = 35


@pytest.mark.parametrize("figure", profiles.figures())
def test_notebooks_stay_thin(figure):
    """Outside its parameters cell a notebook only calls its chapter's package: parameters →
    ``runs.collect`` → one call per figure → claims (at most 35 logic lines)."""
    import nbformat

    notebook = nbformat.read(PACKAGE_DIR.parents[1] / profiles.entry(figure)["notebook"], 4)
    lines = [line for cell in notebook.cells if cell.cell_type == "code"
             and "parameters" not in cell.metadata.get("tags", [])
             for line in cell.source.splitlines()
             if line.strip() and not line.strip().startswith("#")]
    assert len(lines) <= MAX_NOTEBOOK_LOGIC_LINES, f"{len(lines)} logic lines"


@pytest.mark.parametrize("figure", profiles.figures())
def test_chapter_id_notebook_stem_and_package_agree(figure):
    entry = profiles.entry(figure)
    assert Path(entry["notebook"]).stem == figure
    assert entry["package"] == f"i2o.chapters.{figure}"
