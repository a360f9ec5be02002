"""i2o.compute.sweep and the stability chapter's jobs: jobs land in the cache under the notebook's
keys. Budget: ~30 s (two micro jobs through `python -m i2o.sweep` and submitit's local executor, one
through the debug executor; the first CIFAR-10 decode of the offline copy adds ~10 s once)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

from i2o.chapters.stability import runs as stability
from i2o.chapters.stability.jobs import TrainJob
from i2o.compute import cache_entries, cache_key, door, profiles, results, sweep, sweep_command
from i2o.compute.job import Job

TINY_RUN = {"model": "micro", "train_size": 32, "test_size": 20, "epochs": 1, "batch_size": 16,
            "pretrain_steps": 1, "train_iters": [4], "backward_iter": 4, "seeds": [0],
            "test_iters": [1, 4, 8], "eval_batch": 20}


def _entry(job: Job):
    """The job's entry in the results cache, found by its key (``None`` when absent)."""
    return results.lookup(job.figure, job.name, job.key(), module=job.module)


def test_jobs_cover_seeds_arms_and_training_n_with_distinct_keys():
    params = profiles.resolve("stability", "smoke", seeds=[0, 1], train_iters=[9, 18])
    jobs = stability.jobs(params)
    assert len(jobs) == 8 and all(isinstance(job, TrainJob) for job in jobs)
    names = {job.name for job in jobs}
    assert "ift-N18-seed1" in names and "unrolled-N9-seed0" in names
    keys = {cache_key.key(job.figure, job.name, job.key(), module=job.module) for job in jobs}
    assert len(keys) == 8


def test_the_sweep_and_the_notebook_build_the_same_keys():
    """The sweep lists the chapter's jobs and pickles each one to its worker; the notebook builds
    them again from the same parameters: the same values, hence the same entries."""
    params = profiles.resolve("stability", "smoke", seeds=[0, 1])
    listed = door.entered(params).jobs()
    built = stability.jobs(profiles.resolve("stability", "smoke", seeds=[0, 1]))
    assert listed == built
    for job, again in zip(listed, built, strict=True):
        shipped = pickle.loads(pickle.dumps(job))
        assert shipped == again and hash(shipped) == hash(again)
        assert cache_entries.entry_dir(shipped.figure, shipped.name, shipped.key(),
                                 module=shipped.module) == cache_entries.entry_dir(
            again.figure, again.name, again.key(), module=again.module)
    # the key is every field, the module the one defining the job (its closure is hashed)
    job = built[0]
    assert job.module == "i2o.chapters.stability.jobs"
    assert set(job.key()) == {field.name for field in dataclasses.fields(TrainJob)}
    assert job.key()["test_iters"] == tuple(params["test_iters"])


def test_step_costs_are_jobs_keyed_by_the_module_that_measures_them():
    params = profiles.resolve("stability", "smoke")
    costs = stability.step_cost_jobs(params, 18)
    assert [job.name for job in costs] == ["step-cost-ift-N18", "step-cost-unrolled-N18"]
    assert {job.module for job in costs} == {"i2o.chapters.stability.stepcost"}
    assert stability.step_cost_jobs(profiles.resolve("stability", "smoke", cost_steps=0), 18) \
        == []


def _cli(*args: str) -> subprocess.CompletedProcess:
    overrides = [arg for name, value in TINY_RUN.items() for arg in ("-p", name, json.dumps(value))]
    return subprocess.run([sys.executable, "-m", "i2o.sweep", "stability", "--profile", "smoke",
                           *args, *overrides], capture_output=True, text=True, timeout=600)


def test_cli_sweep_fills_the_cache_the_notebook_reads(data_dir):
    """``make sweep`` end to end: submitit's local executor, each job a fresh process writing into
    the shared cache, run from a separate process (as a user does; it also keeps the jobs away
    from state other tests leave in pytest's process)."""
    first = _cli("--executor", "local")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "2 to run" in first.stdout
    params = profiles.resolve("stability", "smoke", **TINY_RUN)
    for job in stability.jobs(params):
        found = _entry(job)
        assert found is not None, job.name
        accuracy = found["test"]["accuracy"]
        assert accuracy.shape == (3,) and np.all((0 <= accuracy) & (accuracy <= 1))
        assert found["history"]["loss"].shape == (2,)
    again = _cli("--executor", "local")
    assert again.returncode == 0 and "0 to run" in again.stdout


def test_the_debug_executor_computes_a_job_into_the_cache(data_dir):
    """submitit's debug executor runs the pickled job in this process; afterwards the notebook's
    job of the same parameters is cached and reads the same entry."""
    params = profiles.resolve("stability", "smoke", **TINY_RUN)
    job, other = stability.jobs(params)
    assert _entry(job) is None
    assert sweep.submit(stability.FIGURE, [(job,)], "debug") == [job.name]
    (again, _) = stability.jobs(profiles.resolve("stability", "smoke", **TINY_RUN))
    assert again.is_cached() and not other.is_cached()
    found = _entry(again)
    assert found["test"]["accuracy"].shape == (3,) and found["history"]["loss"].shape == (2,)


def test_bad_options_fail_before_submitting(capsys):
    assert sweep_command.main(["stability", "--executor", "slurm"]) == 2
    assert "--partition" in capsys.readouterr().err
    assert sweep_command.main(["stability", "-p", "seeds", "oops"]) == 2
    assert "seeds" in capsys.readouterr().err
    for argv, message in [(["--executor", "kubernetes"], "--executor must be one of local"),
                          (["--profile", "fast"], "--profile must be one of smoke"),
                          (["--cpus", "0"], "--cpus must be an integer ≥ 1"),
                          (["--time", "1e3"], "--time must be an integer"),
                          (["--slurm-arg", "qos"], "--slurm-arg takes KEY=VALUE")]:
        assert sweep_command.main(["stability", *argv]) == 2
        error = capsys.readouterr().err
        assert message in error and error.count("\n") == 1, error
    assert sweep_command.main(["no_such_figure"]) == 2
    assert "unknown figure 'no_such_figure'" in capsys.readouterr().err


def test_dry_run_lists_without_computing(capsys):
    assert sweep_command.main(["stability", "--profile", "smoke", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would run ift-N18-seed0" in out and "would run unrolled-N18-seed0" in out


@pytest.mark.parametrize("figure", ["deq_gaps", "meta"])
def test_every_chapter_with_training_jobs_has_a_sweep(figure, capsys):
    """``make sweep FIG=deq_gaps`` / ``FIG=meta`` list the jobs the notebooks read."""
    assert sweep.sweep(figure, "smoke", dry_run=True) == []
    out = capsys.readouterr().out
    assert f"{figure} (smoke):" in out and "would run" in out


# -- GPUs and requeue ---------------------------------------------------------------------------

def test_local_gpus_follow_what_the_parent_sees():
    assert sweep.local_gpus(0, None) == []
    assert sweep.local_gpus(2, "") == [0, 1]
    assert sweep.local_gpus(2, "3,5") == [3, 5]          # a job given 3 sees the parent's GPU 3
    assert sweep.local_gpus(1, "GPU-1234-uuid") == [0]


class _RecordingExecutor:
    """Stands in for submitit's local executor: records, per submitted job, the CUDA devices
    submitit would give it (its rule: the first ``gpus_per_node`` of ``visible_gpus``, or of
    0, 1, … when none are listed; ``gpus_per_node = 0`` gives the empty string)."""

    def __init__(self):
        self.parameters: dict = {}
        self.devices: list[str] = []

    def update_parameters(self, **kwargs):
        for key, value in kwargs.items():
            self.parameters[key.removeprefix("local_")] = value

    def submit(self, fn, *args):
        n = self.parameters.get("gpus_per_node", 0)
        visible = self.parameters.get("visible_gpus", ())
        gpus = range(n) if visible == () else visible[:n]
        self.devices.append(",".join(str(k) for k in gpus))

        class Done:
            job_id = str(len(self.devices))

            def done(self):
                return True

            def result(self, name=args[0][0].name):
                return name

        assert isinstance(fn, sweep.ResumableJob)
        return Done()


@pytest.mark.parametrize("count", [1, 2])
def test_local_jobs_never_hide_a_visible_gpu(monkeypatch, count):
    import submitit
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    recorder = _RecordingExecutor()
    monkeypatch.setattr(submitit, "AutoExecutor", lambda folder, cluster: recorder)
    todo = stability.jobs(profiles.resolve("stability", "smoke", seeds=[0, 1]))  # never run
    assert len(todo) == 4
    assert sweep.submit("stability", [(j,) for j in todo], "local", max_parallel=4) == [
        j.name for j in todo]
    assert all(recorder.devices), f"a local job would run with CUDA_VISIBLE_DEVICES='': " \
                                  f"{recorder.devices}"
    assert {int(d) for d in recorder.devices} == set(range(count))


def test_slurm_jobs_requeue_through_checkpointable():
    import submitit.helpers

    job = sweep.ResumableJob()
    assert isinstance(job, submitit.helpers.Checkpointable)
    (train,) = [j for j in stability.jobs(profiles.resolve("stability", "smoke"))
                if j.name == "ift-N18-seed0"]
    again = job.checkpoint(train, {"I2O_THREADS": "1"})
    assert again.args == (train, {"I2O_THREADS": "1"})


def test_cpus_set_the_jobs_torch_threads_over_the_exported_one(monkeypatch):
    import submitit

    monkeypatch.setenv("I2O_THREADS", "1")  # as the Makefile exports it
    recorder = _RecordingExecutor()
    threads: list[str] = []
    submitted = recorder.submit
    recorder.submit = lambda fn, *args: (threads.append(args[1]["I2O_THREADS"]),
                                         submitted(fn, *args))[1]
    monkeypatch.setattr(submitit, "AutoExecutor", lambda folder, cluster: recorder)
    todo = stability.jobs(profiles.resolve("stability", "smoke", seeds=[0]))  # never run
    sweep.submit("stability", [(j,) for j in todo], "local", cpus=2, max_parallel=2)
    assert threads == ["2"] * len(todo)
