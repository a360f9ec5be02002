"""One door into every chapter: its manifest entry opened with parameters validated once.

Every path into a chapter enters here, before any job is listed, submitted or computed:

- the notebook's first cell after its parameters (:func:`enter_namespace`, on the variables the
  parameters cells and papermill defined);
- ``make fig-*`` and ``make book`` (:mod:`i2o.book`, before papermill starts);
- ``make sweep`` (:func:`i2o.compute.sweep.sweep`, before anything is submitted);
- ``make robustness`` (:func:`i2o.provenance.robustness.check_request`, for every replicate asked).

Validation is the manifest's schema (:func:`i2o.compute.profiles.resolve`: types, ranges, choices,
misspelt names, every value read by :func:`i2o.compute.inputs.read`), the environment variables the
runtime reads (:func:`i2o.compute.inputs.check_environment`, before the chapter's code is imported),
and then the chapter's own rules between parameters (``runs.check_params``), all raising
:class:`i2o.compute.profiles.ParameterError` that names the parameter. The machinery knows a
chapter only through the manifest's ``package``: its ``runs`` module is imported by name, never by
an import statement (``tests/test_layout.py``).

A :class:`Chapter` then lists what a sweep computes: :meth:`Chapter.jobs`, every cache entry; and
:meth:`Chapter.tasks`, the same jobs grouped as the sweep submits them (one process per task: a
chapter whose models take a second each batches them, its ``runs.tasks(params)``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from i2o.base import runtime
from i2o.compute import inputs, profiles
from i2o.compute.job import Job

#: What a sweep submits as one process: jobs computed in order (most are one job).
Task = tuple[Job, ...]


def runs_module(figure: str) -> ModuleType:
    """The ``runs`` module of ``figure``'s chapter package (the manifest's ``package``);
    ``ParameterError`` for a figure the manifest does not have or a bad environment variable."""
    package = profiles.entry(figure)["package"]
    inputs.check_environment()  # before the chapter's code reads any of them
    runtime.jax_single_thread()  # before a chapter imports JAX
    return importlib.import_module(f"{package}.runs")


@dataclass(frozen=True)
class Chapter:
    """A chapter entered with validated parameters (build it with :func:`enter`,
    :func:`enter_namespace` or :func:`entered`)."""

    figure: str
    params: profiles.Params
    runs: ModuleType = field(repr=False, compare=False)

    def jobs(self) -> list[Job]:
        """Every job of the parameters: one cache entry each (``runs.jobs(params)``)."""
        return list(self.runs.jobs(self.params))

    def tasks(self) -> list[Task]:
        """The jobs as a sweep submits them: the chapter's ``runs.tasks(params)`` where it
        batches small jobs into one process, else one job per task."""
        batched = getattr(self.runs, "tasks", None)
        if callable(batched):
            return [tuple(task) for task in batched(self.params)]
        return [(job,) for job in self.jobs()]

    def collect(self) -> Any:
        """Everything the notebook shows (``runs.collect(params)``): the missing jobs computed
        first, the rest read from the results cache."""
        return self.runs.collect(self.params)


def entered(params: profiles.Params) -> Chapter:
    """The chapter of already resolved ``params``, with its own rules checked."""
    runs = runs_module(params.figure)
    runs.check_params(params)
    return Chapter(params.figure, params, runs)


def enter(figure: str, profile: str = "quick", **overrides: Any) -> Chapter:
    """``figure``'s chapter at ``profile`` with ``overrides``: every parameter checked, the
    schema's first (no chapter code is imported for a misspelt or out-of-range value)."""
    return entered(profiles.resolve(figure, profile, **overrides))


def enter_namespace(figure: str, namespace: Mapping[str, Any]) -> Chapter:
    """The notebook's door: the variables its parameters cells defined (papermill-injected
    included), validated (:func:`i2o.compute.profiles.resolve_namespace`) and checked."""
    return entered(profiles.resolve_namespace(figure, namespace))
