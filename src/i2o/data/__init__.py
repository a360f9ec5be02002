"""Data sets: each found locally (``I2O_DATA_DIR``) or downloaded, decoded once, cached as arrays.

- :mod:`i2o.data.cifar10` — CIFAR-10 image classification (Figure 5, the DEQ chapter);
- :mod:`i2o.data.shakespeare` — character-level Tiny Shakespeare (the DEQ chapter).
"""

from i2o.data.cifar10 import CLASSES, ImageSet, balanced_subset, load_cifar10, to_tensor
from i2o.data.errors import DataCorruptError, DataNotFoundError
from i2o.data.shakespeare import CharCorpus, load_shakespeare

__all__ = ["CLASSES", "CharCorpus", "DataCorruptError", "DataNotFoundError", "ImageSet",
           "balanced_subset", "load_cifar10", "load_shakespeare", "to_tensor"]
