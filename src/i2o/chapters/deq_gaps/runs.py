"""The deq-gaps chapter's sweep jobs (one per trained DEQ), for :mod:`i2o.sweep`."""

from collections.abc import Mapping
from typing import Any

from i2o.chapters.deq_gaps import jobs
from i2o.chapters.deq_gaps.chapter import all_jobs
from i2o.chapters.deq_gaps.jobs import is_cached

__all__ = ["all_jobs", "is_cached", "run_job"]


def run_job(name: str, job: Mapping[str, Any]) -> None:
    """Train and sweep one DEQ of the chapter into the results cache."""
    jobs.compute(name, dict(job))
