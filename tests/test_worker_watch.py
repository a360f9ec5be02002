"""i2o.compute.worker_watch and the sweep's cancelling: no local worker outlives its sweep.
Budget: ~3 s (two short-lived Python processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from i2o.compute import sweep, worker_watch


def _wait_until(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_this_process_is_alive_and_an_ended_one_is_not():
    assert worker_watch.alive(worker_watch.identity())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    token = worker_watch.identity(child.pid)
    child.wait()
    assert not worker_watch.alive(token)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_a_zombie_and_a_reused_pid_count_as_gone():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    token = worker_watch.identity(child.pid)
    assert _wait_until(lambda: not worker_watch.alive(token))  # exited, not yet reaped
    assert child.poll() is not None
    me = worker_watch.identity()
    pid, _, start = me.partition(":")
    assert not worker_watch.alive(f"{pid}:{int(start) + 1}")  # same pid, later start


def test_a_malformed_identity_is_refused_before_watching():
    with pytest.raises(ValueError, match=worker_watch.ENV):
        worker_watch.watch("12x:3")
    with pytest.raises(ValueError, match="<pid>:<start>"):
        worker_watch.watch("123")


def test_the_watch_ends_the_worker_once_its_sweep_is_gone():
    ended: list[int] = []
    sweep_process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    worker_watch.watch(worker_watch.identity(sweep_process.pid), 0.02, ended.append)
    time.sleep(0.2)
    assert ended == []  # its sweep runs
    sweep_process.kill()
    sweep_process.wait()
    assert _wait_until(lambda: ended == [worker_watch.EXIT_ORPHANED], 5.0)


def test_a_worker_of_a_sweep_killed_with_sigkill_ends(tmp_path):
    """The process tree of a local sweep: the sweep starts a worker that watches it; SIGKILL of
    the sweep (no handler can run) ends the worker."""
    pid_file = tmp_path / "worker.pid"
    worker = (f"import os, time; from i2o.compute import worker_watch; "
              f"worker_watch.watch(os.environ[worker_watch.ENV], 0.05); "
              f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)")
    parent = (f"import os, subprocess, sys, time; from i2o.compute import worker_watch; "
              f"env = dict(os.environ, **{{worker_watch.ENV: worker_watch.identity()}}); "
              f"subprocess.Popen([sys.executable, '-c', {worker!r}], env=env); time.sleep(60)")
    sweep_process = subprocess.Popen([sys.executable, "-c", parent])
    try:
        assert _wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", 30.0)
        worker_pid = int(pid_file.read_text())
        assert worker_watch.alive(worker_watch.identity(worker_pid))
        token = worker_watch.identity(worker_pid)
        os.kill(sweep_process.pid, signal.SIGKILL)
        sweep_process.wait()
        assert _wait_until(lambda: not worker_watch.alive(token), 10.0), \
            f"worker {worker_pid} outlived its killed sweep"
    finally:
        sweep_process.kill()


class _RunningJob:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.cancelled = False

    def cancel(self, check: bool = True) -> None:
        self.cancelled = True


def test_an_interrupted_sweep_cancels_its_running_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    running = [_RunningJob("1"), _RunningJob("2")]
    with pytest.raises(KeyboardInterrupt):
        with sweep._cancelling(running, "stability"):
            raise KeyboardInterrupt
    assert all(job.cancelled for job in running)
    assert "cancelled job 2" in sweep.log_path("stability").read_text()


def test_a_sweep_that_ends_normally_cancels_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    running = [_RunningJob("1")]
    with sweep._cancelling(running, "stability"):
        pass
    assert not running[0].cancelled


def test_a_process_started_by_the_sweep_writes_its_stderr_to_the_log_not_the_terminal(
        tmp_path, capfd):
    """Submitit's local controller prints a traceback when its job is cancelled: it is started
    with the sweep's stderr pointed at ``controllers.log``, and the sweep's own stderr is back
    as it was once the process has started."""
    log = tmp_path / "logs" / sweep.CONTROLLER_LOG
    with sweep._stderr_to(log):
        child = subprocess.Popen([sys.executable, "-c",
                                  "import sys; sys.stderr.write('Traceback: cancelled')"])
    child.wait()
    print("the sweep's own line", file=sys.stderr)
    said = capfd.readouterr().err
    assert "Traceback" not in said and "the sweep's own line" in said
    assert log.read_text() == "Traceback: cancelled"


@pytest.mark.parametrize("executor, watched", [("local", True), ("debug", False)])
def test_local_tasks_and_only_they_are_told_their_sweep(monkeypatch, executor, watched):
    told: list[dict] = []
    monkeypatch.setattr(sweep, "_submit", lambda ex, figure, todo, executor, mp, env, *a:
                        told.append(env) or [])
    sweep.submit("stability", [], executor)
    assert (worker_watch.ENV in told[0]) is watched
    if watched:
        assert told[0][worker_watch.ENV] == worker_watch.identity()


def test_a_task_that_did_not_finish_is_reported_in_one_line(monkeypatch, capsys):
    from submitit.core.utils import FailedJobError, UncompletedJobError

    from i2o.compute import sweep_command

    for error in (FailedJobError("Job (task=0) failed\nTraceback …\nValueError: boom"),
                  UncompletedJobError("Job 1234 (task: 0) with path x\nhas not produced any "
                                      "output (state: INTERRUPTED)")):
        def failing(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(sweep_command.sweep, "sweep", failing)
        assert sweep_command.main(["affine", "--profile", "smoke"]) == 1
        said = capsys.readouterr().err.strip()
        assert "\n" not in said and said.startswith("error: a task of affine did not finish")
        assert ("ValueError: boom" if isinstance(error, FailedJobError)
                else "ended without a result, state INTERRUPTED: killed") in said
    monkeypatch.setattr(sweep_command.sweep, "sweep",
                        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug of ours")))
    with pytest.raises(RuntimeError, match="a bug of ours"):
        sweep_command.main(["affine", "--profile", "smoke"])
