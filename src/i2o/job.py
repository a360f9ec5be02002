"""A job: one expensive computation of a chapter, as a frozen, typed value.

A job's dataclass fields are everything its result depends on besides the code: they are its cache
key (:func:`dataclasses.asdict`), and the code is the import closure of the module that defines its
class (:func:`i2o.compute.cache_key.dependencies`: the modules it reaches through imports, without
the cache's own plumbing), so no job lists its sources by hand. A job is pickled as it is by
:mod:`i2o.compute.sweep` (one submitit task per job) and computed by :meth:`run` wherever it is
called: a notebook, a local worker, a SLURM array task. Whoever asks first computes and stores it
(:func:`i2o.results.cached`); everyone after reads it.

A chapter's ``runs.jobs(params) -> list[Job]`` lists the jobs of a parameter set; its job classes
live in modules that import what computes them, never the chapter's ``runs``, ``figures`` or
``claims`` (those would enter the closure, and every plot edit would recompute the jobs).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from i2o import results


@dataclasses.dataclass(frozen=True)
class Job(abc.ABC):
    """Subclasses are frozen dataclasses that set ``figure``, define :attr:`name` and
    :meth:`compute` (abstract: a job class without them cannot be built, so it fails where its
    chapter lists it, not inside a worker)."""

    #: the figure (cache folder) the job belongs to: its chapter's ``FIGURE``
    figure: ClassVar[str]
    #: fields that change only what is evaluated after training (the evaluation set's size, the
    #: swept grid): in the result's key, not in its checkpoints' (:meth:`checkpoints`), so a
    #: larger evaluation set costs only its evaluation
    evaluation_fields: ClassVar[tuple[str, ...]] = ()

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The entry's readable name (its folder is ``<name>-<key prefix>``)."""

    @abc.abstractmethod
    def compute(self, progress: bool | None = None) -> Mapping[str, Any]:
        """The result: a (nested) dict of arrays, numbers and strings. Called only on a miss."""

    @property
    def module(self) -> str:
        """The module whose import closure the result depends on: the one defining the class."""
        return type(self).__module__

    def key(self) -> dict[str, Any]:
        """The cache key's parameters: every field."""
        return dataclasses.asdict(self)

    def run(self, progress: bool | None = None) -> dict[str, Any]:
        """The stored result, computed first if missing (:func:`i2o.results.cached`)."""
        return results.cached(self.figure, self.name, self.key(),
                              lambda: self.compute(progress), module=self.module)

    def is_cached(self) -> bool:
        return results.lookup(self.figure, self.name, self.key(), module=self.module) is not None

    def training_key(self) -> dict[str, Any]:
        """The key of the job's training: every field but :attr:`evaluation_fields`."""
        unknown = set(self.evaluation_fields) - set(self.key())
        if unknown:
            raise TypeError(f"{type(self).__name__}.evaluation_fields names no field: "
                            f"{sorted(unknown)}")
        return {k: v for k, v in self.key().items() if k not in self.evaluation_fields}

    def checkpoints(self) -> Path:
        """The directory, tied to the job's training key (:meth:`training_key`) and code, where
        an interrupted run resumes from and a finished one's trained state is read back: two jobs
        that differ only in what they evaluate share it (a finished training is not rerun)."""
        return results.checkpoint_dir(self.figure, self.name, self.training_key(),
                                      module=self.module)
