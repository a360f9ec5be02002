"""DEQ architectures built on :mod:`i2o.deq`.

- :mod:`i2o.models.mdeq` — the multiscale DEQ classifier of Figure 5 (configurations ``TINY``,
  ``CPU_SMALL``, ``MICRO``).
"""

from i2o.models.mdeq import (
    CONFIGS,
    CPU_SMALL,
    MICRO,
    TINY,
    MDEQClassifier,
    MDEQConfig,
    config,
    count_parameters,
)

__all__ = ["CONFIGS", "CPU_SMALL", "MICRO", "TINY", "MDEQClassifier", "MDEQConfig", "config",
           "count_parameters"]
