"""Shared fixtures: every test writes its build products and results into temporary folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS",
                      "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_outputs(tmp_path_factory, monkeypatch):
    """Keep tests away from the user's ``_build`` and ``data/results``."""
    if "I2O_TEST_KEEP_DIRS" not in os.environ:
        base = tmp_path_factory.mktemp("i2o")
        monkeypatch.setenv("I2O_BUILD_DIR", str(base / "_build"))
        monkeypatch.setenv("I2O_RESULTS_DIR", str(base / "results"))


@pytest.fixture
def data_dir() -> Path:
    """The offline data folder named by ``I2O_DATA_DIR``; skips the test when it is absent."""
    value = os.environ.get("I2O_DATA_DIR")
    if not value:
        pytest.skip("I2O_DATA_DIR is not set: point it at a folder with cifar10/ and "
                    "tinyshakespeare/ (CI uses ../shared/data)")
    path = Path(value)
    if not path.is_dir():
        pytest.skip(f"I2O_DATA_DIR={value} is not a directory")
    return path
