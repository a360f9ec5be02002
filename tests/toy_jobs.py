"""The toy chapter's job (``tests/toy_chapter``) as the machinery's tests use it: built by seed,
and the same job in a second chapter for tests of several chapters at once. The fixture
``toy_computations`` (``conftest.py``) counts the computations."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from toy_chapter.jobs import ResidualJob

__all__ = ["OtherChapterJob", "ResidualJob", "counting", "other", "toy"]


def toy(seed: int, test_iters: int = 12) -> ResidualJob:
    """The job of ``seed`` at the toy chapter's smoke sizes (``test_iters`` another entry)."""
    return ResidualJob(seed=seed, replicate=0, dim=4, contraction=0.5, test_iters=test_iters)


@dataclass(frozen=True)
class OtherChapterJob(ResidualJob):
    """The same job in a second chapter, ``toy-b``."""

    figure: ClassVar[str] = "toy-b"


def other(seed: int) -> OtherChapterJob:
    return OtherChapterJob(seed=seed, replicate=0, dim=4, contraction=0.5, test_iters=12)


def counting(counted: Counter) -> Any:
    """A ``compute`` for :class:`ResidualJob` that counts each call as ``figure/name`` in
    ``counted`` before computing."""
    compute = ResidualJob.compute

    def counted_compute(self: ResidualJob, progress: bool | None = None) -> dict[str, Any]:
        counted[f"{self.figure}/{self.name}"] += 1
        return compute(self, progress)

    return counted_compute
