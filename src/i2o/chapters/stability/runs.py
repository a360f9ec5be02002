"""The stability chapter's sweep jobs (one per seed, arm and training N), for :mod:`i2o.sweep`."""

from i2o.train.stability import all_jobs, is_cached
from i2o.train.stability import cached_job as run_job

__all__ = ["all_jobs", "is_cached", "run_job"]
