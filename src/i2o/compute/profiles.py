"""The figure manifest and the validation of a notebook's parameters.

Each chapter's package holds its own manifest entry, ``chapters/<name>/chapter.yaml``; together
they are the table saying, for every figure of the book: its notebook, its outputs, the schema of
its parameters and their values in each profile (``smoke``, ``quick``, ``paper``). The Makefile,
the tests and the notebooks all read it through this module (:func:`load_manifest`), and adding
a chapter touches no file of this room. An entry::

    <figure>:
      notebook: book/<name>.ipynb    executed by `make fig-<figure>` / `python -m i2o.book run`
      package:  i2o.chapters.<name>  its code (the folder holding this file); `<package>.runs
                                     .jobs(params)` lists its jobs (found by name: the
                                     machinery imports no chapter)
      position: 3                    where it stands in the book (chapters sorted by it)
      title:    shown in listings
      outputs:  names of the figures it writes to _build/figures/<name>.{png,pdf}
      data:     data sets it reads (i2o.data.fetch.DATASETS; checked before any notebook runs)
      parameters: {name: {type: int|float|bool|str|int_list|float_list, min, max, choices,
                  help}}; numbers and lists of numbers state min and max (inclusive); optional:
                  empty: true (an empty list or string is allowed), distinct (no value repeated
                  in a list; default true for a list named ...seeds), fraction: true (said as 0.9
                  for 90 %), reason (why a margin is what it is)
      profiles: {smoke: {...}, quick: {...}, paper: {...}}   every parameter, in every profile

Every figure has ``replicate`` (0 in every profile): the chapter passes each of its seeds through
:func:`i2o.base.replicates.seed`, so replicate r > 0 redraws every random choice (``make
robustness`` runs the chapters at several replicates).

A notebook's ``parameters`` cell declares ``profile = "quick"`` and every other parameter as
``None`` ("the profile's value"); papermill may override any of them. :func:`resolve_namespace`
then checks every value against the schema *before any compute* and fails with a message that
names the parameter and what it allows. Every value, a Python value or text (``-p NAME VALUE`` of
the commands: :func:`read_overrides`), is read by one reader, :func:`i2o.compute.inputs.read`, whose
docstring is the grammar (not YAML's: ``1e-2`` is a number, ``010`` and ``1:30`` are refused).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from i2o.base import lineage
from i2o.compute import inputs
from i2o.compute.inputs import ParameterError as ParameterError  # where every caller finds it

PROFILES = ("smoke", "quick", "paper")
#: Where the chapters' packages are, each with its manifest entry (:data:`MANIFEST_NAME`).
CHAPTERS_DIR = Path(__file__).resolve().parents[1] / "chapters"
MANIFEST_NAME = "chapter.yaml"
_TYPES = ("int", "float", "bool", "str", "int_list", "float_list")
#: The keys a parameter's schema may have (``reason``: why a margin is what it is).
_SCHEMA_KEYS = {"type", "min", "max", "choices", "empty", "distinct", "fraction", "help", "reason"}
#: Names the command lines take elsewhere than ``-p NAME VALUE``, and where.
NOT_PARAMETERS = {
    "profile": "the profile is not a parameter: choose it with --profile {value} "
               "(make: PROFILE={value})",
    "figure": "the figure is not a parameter: it is the command's first argument "
              "(python -m i2o.book run {value}, python -m i2o.sweep {value}; make fig-{value}, "
              "make sweep FIG={value})",
}
_NOTEBOOK_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}
#: The hidden output (a papermill/glue record) by which :func:`show` hands the kernel's
#: provenance to the build (``i2o.book`` stamps it, ``i2o.provenance.numbers`` publishes it). Its
#: type ends in ``+json`` so that the notebook format stores it as JSON, not as text.
PROVENANCE_RECORD = "i2o-provenance"
PROVENANCE_MIME = "application/papermill.record/application/vnd.i2o.provenance+json"


def manifest_paths(chapters: Path = CHAPTERS_DIR) -> list[Path]:
    """The manifest entry of every chapter's package under ``chapters``."""
    return sorted(chapters.glob(f"*/{MANIFEST_NAME}"))


@functools.cache
def _load(chapters: str) -> dict[str, Any]:
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in manifest_paths(Path(chapters)):
        with open(path) as stream:
            entries = yaml.safe_load(stream) or {}
        where = f"{path.parent.name}/{MANIFEST_NAME}"
        if not isinstance(entries, dict) or len(entries) != 1:
            raise ValueError(f"{where}: a chapter's manifest holds one figure; found "
                             f"{list(entries) if isinstance(entries, dict) else entries!r}")
        ((figure, entry),) = entries.items()
        if figure in found:
            raise ValueError(f"{where}: figure {figure!r} is also in "
                             f"{found[figure][0].parent.name}/{MANIFEST_NAME}")
        _check_entry(figure, entry, where)
        if entry["package"] != f"i2o.chapters.{path.parent.name}":
            raise ValueError(f"{where}: package is {entry['package']!r}, not the folder's "
                             f"i2o.chapters.{path.parent.name}")
        found[figure] = (path, entry)
    ordered = sorted(found.items(), key=lambda item: (item[1][1]["position"], item[0]))
    return {figure: entry for figure, (_, entry) in ordered}


def load_manifest() -> dict[str, Any]:
    """The parsed manifest, every chapter's entry in the book's order (``position``):
    ``{figure: {notebook, package, position, title, outputs, parameters, …}}``."""
    return _load(str(CHAPTERS_DIR))


def figures() -> list[str]:
    return list(load_manifest())


def entry(figure: str) -> dict[str, Any]:
    manifest = load_manifest()
    if figure not in manifest:
        raise ParameterError(f"unknown figure {figure!r}; the figures are: {', '.join(manifest)}")
    return manifest[figure]


def _check_entry(figure: str, entry: Mapping[str, Any], where: str) -> None:
    for key in ("notebook", "package", "position", "title", "outputs", "parameters",
                "profiles"):
        if key not in entry:
            raise ValueError(f"{where}: figure {figure!r} has no {key!r}")
    if not isinstance(entry["position"], int) or isinstance(entry["position"], bool):
        raise ValueError(f"{where}: figure {figure!r} has position {entry['position']!r}; "
                         "a whole number (the chapters are sorted by it)")
    if "replicate" not in entry["parameters"]:
        raise ValueError(f"{where}: figure {figure!r} has no 'replicate' parameter "
                         "(every chapter redraws its random choices by it: i2o.base.replicates)")
    for name, schema in entry["parameters"].items():
        if schema.get("type") not in _TYPES:
            raise ValueError(f"{where}: {figure}.{name} has type {schema.get('type')!r}; "
                             f"allowed: {', '.join(_TYPES)}")
        if unknown := sorted(set(schema) - _SCHEMA_KEYS):
            raise ValueError(f"{where}: {figure}.{name} has unknown key(s) {unknown}; "
                             f"allowed: {', '.join(sorted(_SCHEMA_KEYS))}")
        if schema["type"] not in ("str", "bool") and not {"min", "max"} <= set(schema):
            raise ValueError(f"{where}: {figure}.{name} states no range: a number or a "
                             "list of numbers needs both min and max")
    for profile in PROFILES:
        values = entry["profiles"].get(profile)
        if values is None:
            raise ValueError(f"{where}: figure {figure!r} has no profile {profile!r}")
        missing = set(entry["parameters"]) - set(values)
        extra = set(values) - set(entry["parameters"])
        if missing or extra:
            raise ValueError(f"{where}: {figure}.{profile} misses {sorted(missing)} "
                             f"or has unknown {sorted(extra)}")
        for name, value in values.items():
            validate_value(figure, name, value, entry["parameters"][name])


def spec(name: str, schema: Mapping[str, Any]) -> inputs.Spec:
    """The reader's spec of parameter ``name`` (:meth:`i2o.compute.inputs.Spec.from_schema`)."""
    return inputs.Spec.from_schema(name, schema)


def describe(schema: Mapping[str, Any], name: str = "") -> str:
    """What a schema allows, in words: ``an integer ≥ 1``, ``one of 'ift', 'unrolled'``
    (:func:`i2o.compute.inputs.describe`; ``name``: a list named ``…seeds`` allows no repeated
    seed)."""
    return inputs.describe(spec(name, schema))


def validate_value(figure: str, name: str, value: Any, schema: Mapping[str, Any]) -> Any:
    """Return ``value`` read by :func:`i2o.compute.inputs.read` (text by its grammar; ints accepted
    for floats, returned as floats) or raise :class:`ParameterError` naming the parameter."""
    return inputs.read(value, spec(name, schema), f"parameter {name!r} of figure {figure!r}")


def require(figure: str, params: Mapping[str, Any],
            rules: Iterable[tuple[str, bool, str]]) -> None:
    """Raise :class:`ParameterError` for the first rule ``(name, ok, allowed)`` with ``ok`` false:
    "parameter 'name' of figure 'figure' must be allowed; got value". The cross-parameter checks
    of the chapters (their ``runs.check_params``) are written as such rules."""
    for name, ok, allowed in rules:
        if not ok:
            raise ParameterError(f"parameter {name!r} of figure {figure!r} must be {allowed}; "
                                 f"got {params[name]!r}")


class Params(dict):
    """Validated parameters of one figure run, read one way in every chapter: ``params["name"]``
    (there is no attribute access to a parameter); plus ``figure``, ``profile`` and
    ``overridden``."""

    def __init__(self, figure: str, profile: str, values: Mapping[str, Any],
                 overridden: tuple[str, ...] = ()):
        super().__init__(values)
        self.figure = figure
        self.profile = profile
        self.overridden = overridden

    def as_dict(self) -> dict[str, Any]:
        return dict(self)

    def with_(self, **changes: Any) -> Params:
        """A copy with some values changed (validated), e.g. one seed of a sweep."""
        return resolve(self.figure, self.profile, **{**self, **changes})


def _close_names(name: str, names: Iterable[str]) -> list[str]:
    """Parameters ``name`` is likely a typo of: similar spelling, or the same letters reordered."""
    names = list(names)
    return (difflib.get_close_matches(name, names, n=1)
            or [other for other in names if sorted(other) == sorted(name)])


def read_overrides(figure: str, pairs: Iterable[Sequence[str]] | None) -> dict[str, Any]:
    """The ``-p NAME VALUE`` pairs of a command line (``python -m i2o.book run``, ``python -m
    i2o.sweep``, ``make fig-* P=…``, ``make sweep P=…``), each value read from its text by the
    parameter's schema (:func:`i2o.compute.inputs.read`); :class:`ParameterError` for ``-p profile``
    or ``-p figure`` (saying how to choose them), for a name given twice and for a bad value. A
    name the figure does not have is kept as its text: :func:`resolve` refuses it with the names
    it is close to."""
    parameters = entry(figure)["parameters"]
    overrides: dict[str, Any] = {}
    for name, text in pairs or []:
        if name in NOT_PARAMETERS:
            raise ParameterError(f"-p {name} {text}: " + NOT_PARAMETERS[name].format(value=text))
        if name in overrides:
            raise ParameterError(f"-p {name} is given twice for figure {figure!r}; give each "
                                 "parameter once")
        overrides[name] = (validate_value(figure, name, text, parameters[name])
                           if name in parameters else text)
    return overrides


def resolve(figure: str, profile: str = "quick", **given: Any) -> Params:
    """The profile's values of ``figure``, overridden by every non-``None`` value in ``given``."""
    spec = entry(figure)
    if profile not in PROFILES:
        raise ParameterError(
            f"parameter 'profile' must be one of {', '.join(map(repr, PROFILES))}; got {profile!r}")
    unknown = sorted(set(given) - set(spec["parameters"]))
    if unknown:
        guesses = [f"{name!r} → {close[0]!r}" for name in unknown
                   if (close := _close_names(name, spec["parameters"]))]
        raise ParameterError(
            f"unknown parameter(s) {', '.join(map(repr, unknown))} for figure {figure!r}; "
            f"allowed: profile, {', '.join(spec['parameters'])}"
            + (f" (did you mean {', '.join(guesses)}?)" if guesses else ""))
    values = dict(spec["profiles"][profile])
    overridden = tuple(k for k, v in given.items() if v is not None)
    for name in overridden:
        values[name] = given[name]
    checked = {name: validate_value(figure, name, value, spec["parameters"][name])
               for name, value in values.items()}
    return Params(figure, profile, checked, overridden)


def resolve_namespace(figure: str, namespace: Mapping[str, Any]) -> Params:
    """Validate the variables a notebook's parameters cells defined (papermill-injected included).

    Call it in the cell right after the parameters cells with ``globals()``: every public,
    non-module, non-callable name is taken as a parameter, so a misspelt papermill ``-p`` fails.
    A private name (IPython's ``_``, ``_i1``, ``_oh`` …) is skipped unless it is a typo of a
    parameter (``_nseeds`` for ``n_seeds``), which fails too.
    """
    parameters = entry(figure)["parameters"]

    def private(name: str) -> bool:
        return name.startswith("_") and (
            name.startswith("__")
            or not difflib.get_close_matches(name, parameters, n=1, cutoff=0.8))

    given = {
        name: value for name, value in namespace.items()
        if not private(name) and name not in _NOTEBOOK_NAMES
        and not callable(value) and type(value).__name__ != "module"
    }
    if given.get("figure") is not None:
        raise ParameterError(f"parameter 'figure' is not a parameter of figure {figure!r}: each "
                             "notebook is one figure (run another notebook for another figure); "
                             f"got {inputs.shown(given['figure'])}")
    given.pop("figure", None)
    profile = given.pop("profile", "quick")
    return resolve(figure, profile, **given)


def show(params: Params) -> None:
    """Print the profile and every size used: no reader mistakes a reduced run for the paper's."""

    spec = entry(params.figure)
    note = {"smoke": "proves the code path, not the science",
            "quick": "reduced sizes for a 2-core CPU",
            "paper": "the paper's settings"}[params.profile]
    facts = lineage.provenance()
    lines = [f"Figure {params.figure!r} run with profile {params.profile!r} ({note}) "
             f"on {lineage.device_name()}, commit {lineage.git_sha()}.",
             lineage.provenance_line(facts)]
    for name, value in params.items():
        mark = "  (overridden)" if name in params.overridden else ""
        help_text = spec["parameters"][name].get("help", "")
        lines.append(f"  {name} = {value!r}{mark}" + (f"    # {help_text}" if help_text else ""))
    print("\n".join(lines))
    _record_provenance(facts)


def _record_provenance(facts: dict[str, Any]) -> None:
    """Inside a notebook kernel, leave ``facts`` as a hidden record for the build to read."""
    try:
        from IPython import get_ipython  # lazy: IPython only inside a notebook
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is None:
        return
    prefix = PROVENANCE_MIME.removesuffix("application/vnd.i2o.provenance+json")
    display({PROVENANCE_MIME: facts}, raw=True,
            metadata={"scrapbook": {"name": PROVENANCE_RECORD, "mime_prefix": prefix}})
