"""The package's layout as a checked contract (see ``i2o.chapters``): the import graph of
``src/i2o`` has no cycle, imports run only downward (chapters → book machinery → engines →
runtime), no chapter imports another, the lower rooms of the machinery (``i2o.compute``,
``i2o.verdicts``) import neither the upper ones (``i2o.book``, ``i2o.provenance``) nor a chapter,
and every chapter of the manifest has its faces."""

from __future__ import annotations

import importlib
import inspect
import typing
from pathlib import Path

import pytest

from i2o.compute import import_graph, profiles
from i2o.compute.chapter import ChapterResults
from i2o.compute.job import Job
from i2o.compute.profiles import Params
from i2o.verdicts.claims import Claims

ENGINES = ("deq", "models", "data", "train")
#: The rooms under everything (:mod:`i2o.base`); ``i2o.pins`` beside them is machinery.
BASE = ("base",)
LAYERS = {"base": 0, "engine": 1, "machinery": 2, "chapter": 3}
#: The rooms of the machinery: the lower ones enter, compute and decide; the upper ones present
#: and trace, and may import the lower ones, never the reverse.
LOWER_ROOMS = ("compute", "verdicts")
UPPER_ROOMS = ("book", "provenance")
#: Machinery kept beside the engine it serves: the data preflight reads the manifest
#: (:mod:`i2o.compute.profiles`) to know which data sets a figure needs.
MACHINERY_AMONG_ENGINES = {"i2o.data.preflight"}
PACKAGE_DIR = import_graph.PACKAGE_DIR
GRAPH = import_graph.graph()


def chapter_of(module: str) -> str | None:
    return module.split(".")[2] if module.startswith("i2o.chapters.") else None


def layer_of(module: str) -> str:
    if chapter_of(module) or module == "i2o.chapters":
        return "chapter"
    if module in MACHINERY_AMONG_ENGINES:
        return "machinery"
    top = module.split(".")[1] if "." in module else ""
    if top in BASE:
        return "base"
    if top in ENGINES:
        return "engine"
    return "machinery"  # i2o itself, book, profiles, results, claims, plotting, sweep, …


def room_of(module: str) -> str | None:
    top = module.split(".")[1] if "." in module else ""
    return top if top in LOWER_ROOMS + UPPER_ROOMS else None


def upward_from_lower_rooms(graph: dict[str, set[str]] | dict[str, frozenset[str]]
                            ) -> list[str]:
    """Each import from a lower room into an upper room or a chapter."""
    return [f"{m} imports {n}" for m, targets in graph.items() if room_of(m) in LOWER_ROOMS
            for n in sorted(targets) if room_of(n) in UPPER_ROOMS or layer_of(n) == "chapter"]


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


def test_the_top_of_the_package_holds_only_commands():
    """Beside the rooms and ``i2o.pins``, each module at the top is a command's entry
    (``python -m i2o.X``): a few lines that hand over to the room that has the code."""
    top = sorted(path for path in PACKAGE_DIR.glob("*.py") if path.name != "__init__.py")
    assert {path.stem for path in top} == {"compare", "numbers", "probes", "results", "sweep"}
    for path in top:
        text = path.read_text()
        assert 'if __name__ == "__main__":' in text and len(text.splitlines()) <= 10, path.name


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


def test_compute_and_verdicts_import_no_book_provenance_or_chapter():
    assert {room_of(m) for m in GRAPH} >= set(LOWER_ROOMS + UPPER_ROOMS)
    found = upward_from_lower_rooms(GRAPH)
    assert not found, "\n".join(found)


def test_the_room_check_finds_a_lower_room_importing_upward():
    graph = {"i2o.compute.pool": {"i2o.book.build", "i2o.compute.schedule"},
             "i2o.verdicts.rows": {"i2o.chapters.meta.claims", "i2o.verdicts.claims"},
             "i2o.book.build": {"i2o.compute.pool"}, "i2o.provenance.golden": {"i2o.book.build"}}
    assert upward_from_lower_rooms(graph) == ["i2o.compute.pool imports i2o.book.build",
                                              "i2o.verdicts.rows imports i2o.chapters.meta.claims"]


def test_no_chapter_imports_another():
    crossing = [f"{m} imports {n}" for m, targets in GRAPH.items() for n in targets
                if chapter_of(m) and chapter_of(n) and chapter_of(m) != chapter_of(n)]
    assert not crossing, "\n".join(crossing)


def hints(function) -> dict[str, object]:
    """The resolved annotations of ``function`` (parameters and ``return``)."""
    return typing.get_type_hints(function)


def parameter_types(function) -> list[object]:
    found = hints(function)
    return [found.get(name) for name in inspect.signature(function).parameters]


@pytest.mark.parametrize("figure", profiles.figures())
def test_every_chapter_has_its_faces(figure):
    """The manifest names each chapter's package; ``FIGURE`` agrees with the key and the
    notebook stem with the package name; and the faces have the contract's signatures, checked
    on their annotations: ``runs.check_params(Params) -> None``, ``runs.collect(Params) ->
    <Chapter>Results`` (a :class:`i2o.compute.chapter.ChapterResults`), ``runs.jobs(Params) ->
    list[Job]``, ``claims.numbers(<Chapter>Results) -> dict``,
    ``claims.claims(<Chapter>Results) -> Claims`` and ``prose.paragraphs(Claims, str) ->
    list[str]``."""
    package = profiles.entry(figure)["package"]
    assert package == "i2o.chapters." + Path(profiles.entry(figure)["notebook"]).stem
    chapter = importlib.import_module(package)
    assert chapter.FIGURE == figure and chapter.__doc__
    runs = importlib.import_module(package + ".runs")
    assert not any(hasattr(runs, old) for old in ("all_jobs", "is_cached", "run_job"))
    assert parameter_types(runs.check_params) == [Params]
    assert hints(runs.check_params)["return"] is type(None)
    assert parameter_types(runs.collect) == [Params]
    result_type = hints(runs.collect)["return"]
    assert inspect.isclass(result_type) and issubclass(result_type, ChapterResults)
    assert result_type is not ChapterResults
    assert parameter_types(runs.jobs) == [Params]
    assert hints(runs.jobs)["return"] == list[Job]
    assert importlib.import_module(package + ".figures")
    claims = importlib.import_module(package + ".claims")
    assert parameter_types(claims.numbers) == [result_type]
    assert typing.get_origin(hints(claims.numbers)["return"]) is dict
    assert parameter_types(claims.claims) == [result_type]
    assert hints(claims.claims)["return"] is Claims
    prose = importlib.import_module(package + ".prose")
    assert parameter_types(prose.paragraphs) == [Claims, str]
    assert hints(prose.paragraphs)["return"] == list[str]


def test_the_signature_check_rejects_an_untyped_face():
    def untyped(params):
        return None

    def typed(params: Params) -> None:
        return None

    assert parameter_types(untyped) == [None] != [Params]
    assert parameter_types(typed) == [Params]


@pytest.mark.parametrize("figure", profiles.figures())
def test_job_classes_live_outside_the_chapter_faces(figure):
    """A job's key hashes the import closure of the module that defines its class: that closure
    must not reach the chapter's ``runs``, ``claims``, ``figures`` or ``prose`` (or every plot
    edit would recompute the jobs)."""
    package = profiles.entry(figure)["package"]
    runs = importlib.import_module(package + ".runs")
    faces = {f"{package}.{face}" for face in ("runs", "claims", "figures", "prose")}
    modules = {type(job).__module__ for job in runs.jobs(profiles.resolve(figure, "smoke"))}
    assert modules
    for module in modules:
        reached = faces & set(import_graph.closure(module))
        assert not reached, f"{module} reaches {sorted(reached)}"


def test_no_source_list_is_written_by_hand():
    written = [str(path.relative_to(PACKAGE_DIR)) for path in PACKAGE_DIR.rglob("*.py")
               if "SOURCES =" in path.read_text() or "sources=" in path.read_text()]
    assert not written, written


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


def test_the_repo_root_is_the_checkout_that_holds_the_package(monkeypatch):
    """Without ``I2O_ROOT``, :func:`i2o.base.locations.repo_root` is the checkout above ``src/``
    (a module moved a level deeper once made it ``src/``, and the decoded data landed there)."""
    from i2o.base import locations

    monkeypatch.delenv("I2O_ROOT", raising=False)
    root = locations.repo_root()
    assert (root / "pyproject.toml").is_file() and (root / "src" / "i2o") == PACKAGE_DIR
