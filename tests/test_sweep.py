"""i2o.sweep and the stability chapter's runs: jobs land in the cache under the notebook's keys.
Budget: ~25 s (two micro jobs through `python -m i2o.sweep` and submitit's local executor; the
first CIFAR-10 decode of the offline copy adds ~10 s once)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from i2o import profiles, results, sweep
from i2o.chapters.stability import runs as stability

TINY_RUN = {"model": "micro", "train_size": 32, "test_size": 20, "epochs": 1, "batch_size": 16,
            "pretrain_steps": 1, "train_iters": [4], "backward_iter": 4, "seeds": [0],
            "test_iters": [1, 4, 8], "eval_batch": 20}


def test_jobs_cover_seeds_arms_and_training_n_with_distinct_keys():
    params = profiles.resolve("stability", "smoke", seeds=[0, 1], train_iters=[9, 18])
    jobs = stability.all_jobs(params)
    assert len(jobs) == 8
    names = {name for name, _ in jobs}
    assert "ift-N18-seed1" in names and "unrolled-N9-seed0" in names
    keys = {results.key(stability.FIGURE, n, j, stability.SOURCES) for n, j in jobs}
    assert len(keys) == 8


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
    for name, job in stability.all_jobs(params):
        found = results.lookup(stability.FIGURE, name, job, sources=stability.SOURCES)
        assert found is not None, name
        accuracy = found["test"]["accuracy"]
        assert accuracy.shape == (3,) and np.all((0 <= accuracy) & (accuracy <= 1))
        assert found["history"]["loss"].shape == (2,)
    again = _cli("--executor", "local")
    assert again.returncode == 0 and "0 to run" in again.stdout


def test_bad_options_fail_before_submitting(capsys):
    assert sweep.main(["stability", "--executor", "slurm"]) == 2
    assert "--partition" in capsys.readouterr().err
    assert sweep.main(["stability", "-p", "seeds", "oops"]) == 2
    assert "seeds" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sweep.main(["stability", "--executor", "kubernetes"])


def test_dry_run_lists_without_computing(capsys):
    assert sweep.main(["stability", "--profile", "smoke", "--dry-run"]) == 0
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

            def result(self, name=args[1]):
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
    todo = [(f"job{i}", {"i": i}) for i in range(4)]
    assert sweep.run_jobs("stability", todo, "local", max_parallel=4) == [n for n, _ in todo]
    assert all(recorder.devices), f"a local job would run with CUDA_VISIBLE_DEVICES='': " \
                                  f"{recorder.devices}"
    assert {int(d) for d in recorder.devices} == set(range(count))


def test_slurm_jobs_requeue_through_checkpointable():
    import submitit.helpers

    job = sweep.ResumableJob()
    assert isinstance(job, submitit.helpers.Checkpointable)
    again = job.checkpoint("stability", "ift-N18-seed0", {"seed": 0}, {})
    assert again.args == ("stability", "ift-N18-seed0", {"seed": 0}, {})
