"""DEQ architectures built on :mod:`i2o.deq`.

- :mod:`i2o.models.mdeq` — the multiscale DEQ classifier of Figures 2 and 5 (configurations
  ``TINY``, ``CPU_SMALL``, ``MICRO``);
- :mod:`i2o.models.deq_transformer` — the weight-tied transformer language model of Figure 2;
- :mod:`i2o.models.inverse` — the reconstruction DEQ and ELDER of Figure 2's inverse problem.
- :mod:`i2o.models.parameters` — a model's parameter count;
- :mod:`i2o.models.portable_products` — matrix products that are fast and portable (in
  portable numerics on CPU, OpenBLAS's AVX2 kernel through NumPy): the transformer's.

A cached job imports the submodule it uses (``from i2o.models.mdeq import config``), not this
package: its cache key then covers that architecture's source only
(:mod:`i2o.compute.import_graph`).
"""

from i2o.models.deq_transformer import DEQTransformerLM, TransformerConfig, jacobian_frobenius
from i2o.models.inverse import InverseConfig, Operator, ReconstructionDEQ, psnr
from i2o.models.mdeq import (
    CONFIGS,
    CPU_SMALL,
    MICRO,
    TINY,
    MDEQClassifier,
    MDEQConfig,
    config,
)
from i2o.models.parameters import count_parameters

__all__ = ["CONFIGS", "CPU_SMALL", "MICRO", "TINY", "DEQTransformerLM", "InverseConfig",
           "MDEQClassifier", "MDEQConfig", "Operator", "ReconstructionDEQ", "TransformerConfig",
           "config", "count_parameters", "jacobian_frobenius", "psnr"]
