"""A local worker ends with the sweep that started it.

submitit's local executor starts, per task, a controller process (``submitit.local._local``)
that starts the task's own process; both are meant to outlive the Python session that submitted
them. A sweep killed with SIGTERM or SIGKILL would leave them computing as orphans, holding cores
and writing a cache nobody reads. So :func:`i2o.compute.sweep.submit` tells each local task the
identity of the submitting process (:func:`identity`, passed as :data:`ENV`), and the task
watches it (:func:`watch`): a daemon thread polls every :data:`POLL_SECONDS` and, once that
process is gone (no such pid, a zombie, or the pid reused by a process started later), ends the
task with :data:`EXIT_ORPHANED`, after one line on its stderr. The controller sees its task end and
ends too. What the task computed up to its last training checkpoint stays on disk; the next sweep
resumes from it.

An identity is ``<pid>:<start>``, the start being the process's start time in clock ticks since
boot (field 22 of ``/proc/<pid>/stat``), where ``/proc`` exists; elsewhere ``<pid>:`` and only the
pid's existence is checked.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

#: The environment variable carrying the submitting process's identity to a local task.
ENV = "I2O_SWEEP_PROCESS"
#: How often a task checks that its sweep is alive, in seconds.
POLL_SECONDS = 1.0
#: A task's exit status when its sweep is gone (not submitit's requeue status, 144).
EXIT_ORPHANED = 3


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or ``None`` without it."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # the name may hold spaces and parentheses


def identity(pid: int | None = None) -> str:
    """``<pid>:<start>`` of process ``pid`` (default this one); ``<pid>:`` without ``/proc``."""
    pid = os.getpid() if pid is None else pid
    fields = _stat_fields(pid)
    return f"{pid}:{fields[19] if fields else ''}"


def alive(token: str) -> bool:
    """Whether the process of identity ``token`` (:func:`identity`) still runs."""
    pid_text, _, start = token.partition(":")
    pid = int(pid_text)
    fields = _stat_fields(pid)
    if fields is not None:
        return fields[0] not in ("Z", "X") and (not start or fields[19] == start)
    if Path("/proc/self/stat").exists():  # /proc is there and the pid is not
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(token: str, poll_seconds: float = POLL_SECONDS, end=os._exit) -> threading.Thread:
    """Start a daemon thread that calls ``end(EXIT_ORPHANED)`` once ``token``'s process is gone.

    ``token`` is checked now: a malformed one raises ``ValueError`` before any compute.
    """
    pid_text, colon, _ = token.partition(":")
    if not colon or not pid_text.isdigit():
        raise ValueError(f"{ENV} must be <pid>:<start> (i2o.compute.worker_watch.identity); "
                         f"got {token!r}")

    def loop() -> None:
        while alive(token):
            time.sleep(poll_seconds)
        print(f"i2o: the sweep that started this worker (process {pid_text}) is gone; "
              f"ending the worker (its last checkpoint is kept)", file=sys.stderr, flush=True)
        end(EXIT_ORPHANED)

    thread = threading.Thread(target=loop, name="i2o-worker-watch", daemon=True)
    thread.start()
    return thread
