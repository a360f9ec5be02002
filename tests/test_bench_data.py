"""``make bench`` checks the data sets its benchmarks read before any of them runs: each module
declares them (``DATA_SETS``), and a missing one stops the run naming it and the variable."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

from i2o.data import preflight

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench_run():
    spec = importlib.util.spec_from_file_location("bench_run", BENCHMARKS / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_benchmark_that_reads_data_declares_it(bench_run):
    declared = {path.stem: bench_run.data_sets(path) for path in bench_run.chosen([])}
    assert declared["bench_diagnose"] == ("cifar10",)
    assert declared["bench_floor"] == ("cifar10", "shakespeare")
    assert declared["bench_broyden"] == () and declared["bench_meta"] == ()
    assert [p.stem for p in bench_run.chosen(["floor", "meta"])] == ["bench_floor", "bench_meta"]
    with pytest.raises(ValueError, match="unknown data set"):
        preflight.check_data(["mnist"])


def test_an_empty_data_folder_stops_the_benchmarks_before_any_runs(bench_run, tmp_path,
                                                                  monkeypatch, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("I2O_DATA_DIR", str(empty))
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("I2O_BUILD_DIR", str(tmp_path / "build"))
    offline = functools.partial(preflight.check_data, download=False)  # never the network
    monkeypatch.setattr(bench_run.preflight, "check_data",
                        lambda names, download=True: offline(names))

    def ran(path):
        raise AssertionError(f"{path.name} ran although its data are missing")

    monkeypatch.setattr(bench_run, "_load", ran)
    assert bench_run.main(["floor", "diagnose", "broyden"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: the benchmarks need data sets that are not ready")
    assert "I2O_DATA_DIR" in err[0] and "nothing was run" in err[0]
    assert [line.split(":")[0].strip() for line in err[1:]] == ["cifar10", "shakespeare"]
    for line in err[1:]:
        assert f"not found in {empty}" in line and "DATA_DIR=" in line
    assert not (tmp_path / "build" / "bench.json").exists()


def test_benchmarks_without_data_are_not_held_back(bench_run, tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path))
    checked = []
    monkeypatch.setattr(bench_run.preflight, "check_data",
                        lambda names, download=True: checked.append(list(names)) or {})
    assert bench_run.missing_data(bench_run.chosen(["broyden", "meta"])) == []
    assert checked == [[]]
