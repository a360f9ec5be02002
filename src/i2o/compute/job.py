"""A job: one expensive computation of a chapter, as a frozen, typed value.

A job's dataclass fields are everything its result depends on besides the code: they are its cache
key (:func:`dataclasses.asdict`), and the code is the import closure of the module that defines its
class (:func:`i2o.compute.cache_key.dependencies`: the modules it reaches through imports, without
the cache's own plumbing), so no job lists its sources by hand. A job is pickled as it is by
:mod:`i2o.compute.sweep` (one submitit task per job) and computed by :meth:`run` wherever it is
called: a notebook, a local worker, a SLURM array task. Whoever asks first computes and stores it
(:func:`i2o.compute.results.cached`); everyone after reads it.

A chapter's ``runs.jobs(params) -> list[Job]`` lists the jobs of a parameter set; its job classes
live in modules that import what computes them, never the chapter's ``runs``, ``figures`` or
``claims`` (those would enter the closure, and every plot edit would recompute the jobs).
"""

from __future__ import annotations

import abc
import dataclasses
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from i2o.compute import cache_entries, results

#: The functions that read a training checkpoint back, by module: an error raised inside one of
#: them is a damaged file (each holds the file it reads in its local ``path``).
CHECKPOINT_READERS = {"i2o.train.checkpoint": "load_checkpoint",
                      "i2o.chapters.meta.checkpoint": "load",
                      "i2o.chapters.meta.mechanism_probe": "load_probes"}
#: Where damaged checkpoints go, under the results folder: ``_damaged/<figure>/``.
DAMAGED_FOLDER = "_damaged"


def damaged_checkpoint(error: BaseException) -> Path | None:
    """The checkpoint file whose reading raised ``error`` (the innermost of
    :data:`CHECKPOINT_READERS` in its traceback), or ``None`` when no reader raised it."""
    found = None
    trace = error.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        reader = CHECKPOINT_READERS.get(frame.f_globals.get("__name__", ""))
        if reader == frame.f_code.co_name and isinstance(frame.f_locals.get("path"), Path):
            found = frame.f_locals["path"]
        trace = trace.tb_next
    return found


def set_aside(path: Path, figure: str) -> Path:
    """Move the file ``path`` to ``<results>/_damaged/<figure>/<its folder>/<name>.<UTC time>``
    (kept for whoever wants to look at it, out of every reader's way); its new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = (cache_entries.results_dir() / DAMAGED_FOLDER / figure / path.parent.name
              / f"{path.name}.{stamp}")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return target


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else "no message"


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
        """The stored result, computed first if missing (:func:`i2o.compute.results.cached`).

        A checkpoint that cannot be read back (a truncated or flipped file: the error is raised
        inside one of :data:`CHECKPOINT_READERS`) is named in one line on stderr, moved out of
        the way (:func:`set_aside`) and the job computed again without it, so that a damaged file
        does not fail every rerun."""
        return results.cached(self.figure, self.name, self.key(),
                              lambda: self._compute_past_damage(progress), module=self.module)

    def _compute_past_damage(self, progress: bool | None) -> Mapping[str, Any]:
        set_aside_already: set[Path] = set()
        while True:
            try:
                return self.compute(progress)
            except Exception as error:
                damaged = damaged_checkpoint(error)
                if damaged is None or damaged in set_aside_already:
                    raise
                set_aside_already.add(damaged)
                moved = set_aside(damaged, self.figure)
                print(f"{self.figure}/{self.name}: the checkpoint {damaged} cannot be read "
                      f"({type(error).__name__}: {_first_line(error)}); moved to {moved}, "
                      f"computing without it", file=sys.stderr, flush=True)

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
