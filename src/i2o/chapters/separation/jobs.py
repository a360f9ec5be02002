"""The separation chapter's sweep jobs that hold several cache entries.

Each trained model (or stack of seeds) is one cache entry, a :class:`i2o.job.Job` defined beside
the code that computes it (:mod:`.sawtooth`, :mod:`.steep`, :mod:`.gotu`, :mod:`.diagonal`,
:mod:`.frozen`). Many of them take a second or less, so one sweep task (one process) computes a
:class:`Group` of them one after the other: every model of a sawtooth target, the models of a
GOTU target other than its ReLU DEQs, the FNNs of Section 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from i2o.chapters.separation import FIGURE
from i2o.job import Job


@dataclass(frozen=True)
class Group(Job):
    """Entries computed in order by one sweep task, under the name ``label``. Not an entry
    itself: it is cached when all its members are, and its result is theirs by entry name."""

    label: str
    members: tuple[Job, ...]
    figure: ClassVar[str] = FIGURE
    is_entry: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return self.label

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return {member.name: member.run(progress) for member in self.members}

    def run(self, progress: bool | None = None) -> dict[str, Any]:
        return self.compute(progress)

    def is_cached(self) -> bool:
        return all(member.is_cached() for member in self.members)

    def key(self) -> dict[str, Any]:
        raise TypeError(f"group {self.label!r} is not a cache entry; its members are")

    def checkpoints(self) -> Path:
        raise TypeError(f"group {self.label!r} is not a cache entry; its members are")
