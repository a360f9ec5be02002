"""Same machine, same numbers: small real jobs of every chapter computed twice, each time in fresh
processes — once one job at a time, once two at a time (submitit's local executor, as ``make
sweep`` and the notebooks' ``workers`` run them) — store bit-identical arrays. Only measured times
may differ. The affine chapter, which has no jobs, is computed in two fresh processes.
Budget: ~2 min (about twenty short processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from i2o.compute import door

#: Two small smoke jobs per chapter (names of the jobs its ``runs.jobs`` lists).
JOBS = {
    "stability": ["ift-N18-seed0", "unrolled-N18-seed0"],
    "deq_gaps": ["language", "inverse-deq"],
    "meta": ["eval-maml-N1-online-seed0", "eval-imaml-N4-lam8-set1-seed1"],  # MAML and iMAML
    "separation": None,
}
RUN_JOBS = """
import json, sys
from i2o.compute import door, sweep
figure, names, workers = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
jobs = [job for job in door.enter(figure, "smoke").jobs() if job.name in names]
assert len(jobs) == len(names), (names, jobs)
sweep.submit(figure, [(job,) for job in jobs], "local", max_parallel=workers)
"""
RUN_AFFINE = """
from i2o.compute import profiles
from i2o.chapters.affine import runs
runs.collect(profiles.resolve("affine", "smoke"))
"""


def _timing(key: str) -> bool:
    """Measured durations, the only values allowed to differ between two runs."""
    return "second" in key or key.endswith("time") or "/time" in key


def _entries(results_dir: Path, figure: str) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for entry in sorted((results_dir / figure).iterdir()):
        if entry.name.startswith(".") or entry.suffix == ".ckpt" or not entry.is_dir():
            continue
        with np.load(entry / "arrays.npz", allow_pickle=False) as arrays:
            out[entry.name] = {k: arrays[k] for k in arrays.files}
    return out


def _assert_identical(a: dict, b: dict) -> None:
    assert a and a.keys() == b.keys()
    for name in a:
        assert a[name].keys() == b[name].keys(), name
        for key, value in a[name].items():
            if _timing(key):
                continue
            other = b[name][key]
            assert value.dtype == other.dtype and value.shape == other.shape, (name, key)
            assert value.tobytes() == other.tobytes(), f"{name}: {key} differs"


def _run(script: str, args: list[str], results_dir: Path) -> None:
    env = {**os.environ, "I2O_RESULTS_DIR": str(results_dir), "I2O_PROGRESS": "0"}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("figure", list(JOBS))
def test_jobs_are_bit_identical_in_fresh_processes_with_one_and_two_workers(figure, data_dir,
                                                                             tmp_path):
    names = JOBS[figure] or [job.name for job in door.enter(figure, "smoke").jobs()][:2]
    for workers in (1, 2):
        _run(RUN_JOBS, [figure, json.dumps(names), str(workers)], tmp_path / f"w{workers}")
    _assert_identical(_entries(tmp_path / "w1", figure), _entries(tmp_path / "w2", figure))


def test_affine_results_are_bit_identical_in_two_fresh_processes(tmp_path):
    for run in ("a", "b"):
        _run(RUN_AFFINE, [], tmp_path / run)
    _assert_identical(_entries(tmp_path / "a", "affine"), _entries(tmp_path / "b", "affine"))


def test_the_comparison_sees_a_changed_array():
    a = {"entry": {"test/accuracy": np.array([0.5, 0.25]), "seconds": np.array(1.0)}}
    b = {"entry": {"test/accuracy": np.array([0.5, 0.25]), "seconds": np.array(2.0)}}
    _assert_identical(a, b)  # a time may differ
    b["entry"]["test/accuracy"] = np.array([0.5, 0.25 + 1e-16 * 4])
    with pytest.raises(AssertionError, match="accuracy differs"):
        _assert_identical(a, b)
