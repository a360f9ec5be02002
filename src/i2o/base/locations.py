"""Where things are: the repository, the build products, decoded data and the data sets.

Paths never change a computed number (data files are verified by their checksums), so this module
is outside every job's cache key (:data:`i2o.compute.results.INERT`).
"""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The project's root: ``I2O_ROOT`` if set, else the checkout holding this package."""
    if env := os.environ.get("I2O_ROOT"):
        return Path(env).resolve()
    return Path(__file__).resolve().parents[3]


def build_dir() -> Path:
    """Build products (executed notebooks, figures, claims, HTML): ``I2O_BUILD_DIR``/``_build``."""
    return Path(os.environ.get("I2O_BUILD_DIR", repo_root() / "_build")).resolve()


def cache_dir() -> Path:
    """Decoded arrays and data locks: ``I2O_CACHE_DIR`` or ``<repo>/data/cache``."""
    return Path(os.environ.get("I2O_CACHE_DIR", repo_root() / "data" / "cache"))


def data_dir() -> Path:
    """Data sets: ``I2O_DATA_DIR`` (e.g. ``../shared/data`` offline) or ``<repo>/data``."""
    return Path(os.environ.get("I2O_DATA_DIR", repo_root() / "data")).resolve()
