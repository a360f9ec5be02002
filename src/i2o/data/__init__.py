"""Data sets: each found locally (``I2O_DATA_DIR``) or downloaded, decoded once, cached as arrays.

- :mod:`i2o.data.cifar10` — CIFAR-10 image classification (Figure 5, the DEQ chapter).
"""

from i2o.data.cifar10 import (
    CLASSES,
    DataNotFoundError,
    ImageSet,
    balanced_subset,
    load_cifar10,
    to_tensor,
)

__all__ = ["CLASSES", "DataNotFoundError", "ImageSet", "balanced_subset", "load_cifar10",
           "to_tensor"]
