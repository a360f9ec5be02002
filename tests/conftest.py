"""Shared fixtures: every test writes its build products and results into temporary folders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import i2o  # noqa: F401  first: pins portable numerics before a test loads numpy, torch or JAX

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS",
                      "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

REPO = Path(__file__).resolve().parents[1]
# the benchmark modules import their helper by name (``import knobs``), as ``python
# benchmarks/run.py`` lets them; the tests load those modules from their files
sys.path.append(str(REPO / "benchmarks"))


@pytest.fixture(autouse=True)
def _isolated_outputs(tmp_path_factory, monkeypatch):
    """Keep tests away from the user's ``_build`` and ``data/results``."""
    if "I2O_TEST_KEEP_DIRS" not in os.environ:
        base = tmp_path_factory.mktemp("i2o")
        monkeypatch.setenv("I2O_BUILD_DIR", str(base / "_build"))
        monkeypatch.setenv("I2O_RESULTS_DIR", str(base / "results"))


@pytest.fixture
def toy_computations(monkeypatch):
    """Every computation of a toy-chapter job (``tests/toy_jobs.py``) in this process, counted
    by ``figure/name``."""
    from collections import Counter

    import toy_jobs

    counted: Counter = Counter()
    monkeypatch.setattr(toy_jobs.ResidualJob, "compute", toy_jobs.counting(counted))
    return counted


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """Every figure executed at ``smoke`` and the HTML built, in a temporary build folder (the
    book's tests read it; the bundles' round trip exports its results)."""
    from i2o.book import execute, html_build
    from i2o.compute import profiles

    base = tmp_path_factory.mktemp("book")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("I2O_BUILD_DIR", str(base / "_build"))
        patch.setenv("I2O_RESULTS_DIR", str(base / "results"))
        executed = {figure: execute.run(figure, "smoke") for figure in profiles.figures()}
        site = html_build.html(strict=True)  # any Sphinx warning fails the build: this fixture
    return {"build": base / "_build", "executed": executed, "html": site}


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


@pytest.fixture(autouse=True)
def _no_post_mortem(monkeypatch):
    """submitit's debug executor opens pdb on a failed job; in tests, let the error surface."""
    import pdb

    monkeypatch.setattr(pdb, "post_mortem", lambda *args, **kwargs: None)


@pytest.fixture(autouse=True)
def _drop_log_handlers_on_closed_streams():
    """A library that attaches a logging handler during a test binds it to that test's captured
    stream; once pytest closes it, any later log record (submitit's debug executor logs one)
    fails with "I/O operation on closed file". Remove such handlers after each test."""
    yield
    import logging

    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in list(getattr(logger, "handlers", [])):
            if getattr(getattr(handler, "stream", None), "closed", False):
                logger.removeHandler(handler)
