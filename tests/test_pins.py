"""The numerics guard (:mod:`i2o.pins`): a process whose libraries loaded without portable mode's
pins is refused before it computes a result, one started with them or importing i2o first
computes, and its bits are those of a sweep worker."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from pinned_matmul import MatmulJob, digest

from i2o import pins
from i2o.base import runtime
from i2o.compute import sweep

TESTS = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(not runtime.is_x86_64(), reason="portable mode pins x86-64 only")


def _unpinned_env() -> dict[str, str]:
    """This process's environment in portable mode without any pin, ``tests/`` importable."""
    env = {name: value for name, value in os.environ.items()
           if name not in (*runtime.PORTABLE_PINS, "XLA_FLAGS")}
    path = [str(TESTS), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "I2O_NUMERICS": "portable", "PYTHONPATH": os.pathsep.join(path)}


def _env_command() -> dict[str, str]:
    """What ``python -m i2o.pins env`` exports, parsed."""
    done = subprocess.run([sys.executable, "-m", "i2o.pins", "env"], env=_unpinned_env(),
                          capture_output=True, text=True, timeout=120, check=True)
    lines = [shlex.split(line) for line in done.stdout.splitlines()]
    assert all(words[0] == "export" and len(words) == 2 for words in lines), done.stdout
    return dict(words[1].split("=", 1) for words in lines)


def _run_job(first: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A fresh Python that imports ``first`` (a library, or ``i2o``), then computes the toy job
    into the cache and prints its digest."""
    script = (f"import {first}\nfrom pinned_matmul import MatmulJob, digest\n"
              "print('DIGEST', digest(MatmulJob().run()))")
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)


def _digest_of(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split("DIGEST")[-1].strip()


@pytest.mark.parametrize("first", ["numpy", "torch"])
def test_a_process_that_loaded_a_library_without_the_pins_is_refused_before_computing(first):
    done = _run_job(first, _unpinned_env())
    assert done.returncode != 0
    assert "UnpinnedError" in done.stderr and f"{first} was imported before i2o" in done.stderr
    assert 'eval "$(python -m i2o.pins env)"' in done.stderr
    assert "I2O_NUMERICS=native" in done.stderr
    assert "COMPUTING" not in done.stdout
    assert not MatmulJob().is_cached()


@pytest.mark.parametrize("first", ["numpy", "torch"])
def test_the_same_process_started_with_the_env_command_computes(first):
    env = {**_unpinned_env(), **_env_command()}
    assert set(runtime.PORTABLE_PINS.items()) <= set(env.items())
    done = _run_job(first, env)
    _digest_of(done)
    assert "COMPUTING" in done.stdout
    assert MatmulJob().is_cached()


def test_an_i2o_first_process_computes_the_bits_of_a_sweep_worker(tmp_path, monkeypatch):
    """A plain Python that imports i2o first (no pin in its environment) and a sweep worker
    (started with the pins) store the same bits; a native process, whose OpenBLAS picks its own
    core, differs wherever that core is not the pinned one (an AVX-512 CPU)."""
    monkeypatch.setenv("PYTHONPATH", _unpinned_env()["PYTHONPATH"])
    sweep.submit("pins-toy", [(MatmulJob(),)], "local", max_parallel=1, time_min=5)
    worker = digest(MatmulJob().run())
    env = {**_unpinned_env(), "I2O_RESULTS_DIR": str(tmp_path / "plain")}
    plain = _run_job("i2o", env)
    assert "COMPUTING" in plain.stdout
    assert _digest_of(plain) == worker
    native = {**env, "I2O_NUMERICS": "native", "I2O_RESULTS_DIR": str(tmp_path / "native")}
    script = ("import numpy\nfrom i2o import pins\nfrom pinned_matmul import MatmulJob, digest\n"
              "print(pins.openblas_cores()['numpy'], 'DIGEST', digest(MatmulJob().run()))")
    done = subprocess.run([sys.executable, "-c", script], env=native, capture_output=True,
                          text=True, timeout=300)
    (line,) = [line for line in done.stdout.splitlines() if " DIGEST " in line]
    core = line.split()[0]  # the job prints COMPUTING before it
    assert (_digest_of(done) != worker) == (core != pins.OPENBLAS_CORE), core


def test_an_unpinned_process_reads_the_cache_and_refuses_only_a_miss(monkeypatch):
    assert pins.unpinned() == []  # the test process imported i2o first (conftest)
    stored = MatmulJob().run()
    monkeypatch.setattr(pins, "_loaded_before", {"numpy": ("OPENBLAS_CORETYPE=Haswell",)})
    assert digest(MatmulJob().run()) == digest(stored)
    with pytest.raises(pins.UnpinnedError, match=r"pins-toy/matmul-1 .*\(numpy was imported "
                                                 r"before i2o, without OPENBLAS_CORETYPE"):
        MatmulJob(seed=1).run()
    assert not MatmulJob(seed=1).is_cached()


def test_a_pin_missing_from_the_environment_is_refused_in_portable_mode_only(monkeypatch,
                                                                              capsys):
    monkeypatch.delenv("MKL_CBWR")
    assert pins.unpinned() == ["the environment lacks MKL_CBWR=COMPATIBLE"]
    with pytest.raises(pins.UnpinnedError, match="MKL_CBWR=COMPATIBLE"):
        MatmulJob(seed=2).run()
    assert "COMPUTING" not in capsys.readouterr().out
    monkeypatch.setenv("I2O_NUMERICS", "native")
    assert pins.unpinned() == []
    MatmulJob(seed=2).run()
    assert "COMPUTING" in capsys.readouterr().out


def test_importing_i2o_leaves_an_environment_given_some_of_the_pins_as_it_is():
    """A benchmark measuring portable mode without one pin keeps it out, and is told so."""
    env = {**_unpinned_env(), **_env_command()}
    del env["ATEN_CPU_CAPABILITY"]
    script = ("import os, i2o\nfrom i2o import pins\n"
              "print(os.environ.get('ATEN_CPU_CAPABILITY'), pins.unpinned())")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "None ['the environment lacks ATEN_CPU_CAPABILITY=avx2']"
