"""Progress bars on the terminal, never in a notebook's pages: :class:`Progress` for a loop,
:class:`TaskBoard` for the tasks of a pool of processes.

A bar shows a loop's state and changes no number, so this module is outside every job's cache key
(:data:`i2o.compute.results.INERT`): rewording a bar recomputes nothing.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from tqdm import tqdm


@functools.cache
def _fd_stream(fd: int) -> TextIO:
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), write_through=True)


def terminal_stream() -> TextIO | None:
    """Where progress goes: the terminal, never a notebook's output.

    Inside a Jupyter kernel (papermill), ``sys.stderr`` and even file descriptor 2 are captured
    into the notebook; ipykernel keeps a copy of the original descriptor, which reaches the
    terminal of ``make book`` — that copy is used. ``None`` when a kernel offers no such copy
    (progress is then off rather than printed into the page). Elsewhere: ``sys.stderr``.
    """
    fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    if isinstance(fd, int):
        return _fd_stream(fd)
    if type(sys.stderr).__module__.startswith("ipykernel"):
        # descriptor 2 not watched (ipykernel does not under pytest): it is the terminal
        watched = getattr(sys.stderr, "_should_watch", True)
        return sys.__stderr__ if watched is False and sys.__stderr__ is not None else None
    return sys.stderr


def progress_enabled() -> bool:
    """Progress bars are on unless ``I2O_PROGRESS=0``."""
    return os.environ.get("I2O_PROGRESS", "1").strip().lower() not in ("0", "false", "no", "off")


class Progress:
    """A progress bar with rate and ETA on the terminal (tqdm), for every long loop.

    ``Progress(total, "train MDEQ", unit="step")``; ``update(n)``, ``note(**values)`` (shown after
    the bar), ``close()``; usable as a context manager, and ``Progress.over(iterable, ...)`` wraps
    a loop. Written to :func:`terminal_stream` only, so nothing reaches a notebook's pages; off
    with ``I2O_PROGRESS=0`` or ``enabled=False``. Updates at most every ``I2O_PROGRESS_INTERVAL``
    seconds (default 1 on a terminal, 30 in a log file). On a terminal a finished bar is erased
    (``leave``); in a log file its last state stays.
    """

    def __init__(self, total: int | None, desc: str, unit: str = "it", initial: int = 0,
                 enabled: bool | None = None, leave: bool | None = None) -> None:
        stream = terminal_stream()
        on = (progress_enabled() if enabled is None else enabled) and stream is not None
        interactive = bool(on and getattr(stream, "isatty", lambda: False)())
        interval = float(os.environ.get("I2O_PROGRESS_INTERVAL", 1.0 if interactive else 30.0))
        self.enabled = on
        self._bar = tqdm(total=total, initial=initial, desc=f"[i2o] {desc}", unit=unit,
                         file=stream, disable=not on, mininterval=interval,
                         leave=(not interactive) if leave is None else leave,
                         dynamic_ncols=interactive, ascii=not interactive)

    @classmethod
    def over(cls, items: Iterable[Any], desc: str, unit: str = "it", total: int | None = None,
             **options: Any) -> Iterator[Any]:
        """Iterate over ``items``, advancing a bar by one per item."""
        if total is None and hasattr(items, "__len__"):
            total = len(items)  # type: ignore[arg-type]
        with cls(total, desc, unit=unit, **options) as bar:
            for item in items:
                yield item
                bar.update(1)

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def note(self, **values: Any) -> None:
        self._bar.set_postfix(values, refresh=False)

    @property
    def n(self) -> int:
        return int(self._bar.n)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: ``eta(pending, running)``: the seconds a pool still needs, given the indices of the tasks not
#: started yet and, for each running task's index, the seconds since it was submitted.
Eta = Callable[[Sequence[int], Mapping[int, float]], float]


def clock(seconds: float) -> str:
    """``m:ss`` below an hour, ``h:mm:ss`` above."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def span(seconds: float) -> str:
    """A duration to read at a glance: ``42 s``, ``12.5 min`` or ``3.2 h``."""
    if seconds < 120:
        return f"{max(seconds, 0.0):.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


#: Off a terminal, a :class:`TaskBoard` writes its status this often (``I2O_HEARTBEAT``).
HEARTBEAT_SECONDS = 180.0


class TaskBoard:
    """One display for the tasks of a pool of processes: the jobs done of the total, the tasks
    running (their labels and how long each has run) and the time the pool still needs, as
    ``eta`` computes it from the tasks' expected costs (none shown without ``eta``).

    On a terminal it redraws one line, at most every ``I2O_PROGRESS_INTERVAL`` seconds (default
    1) when :meth:`tick` is called, and at each start and end of a task; elsewhere (a log, a
    pipe, CI: a stream that is not a terminal) it writes nothing per task (submissions and
    completions are in the sweep's log, :func:`i2o.compute.sweep.log_path`) but a heartbeat, the
    same line every ``I2O_HEARTBEAT`` seconds (default :data:`HEARTBEAT_SECONDS`), so that a
    long pool is seen to be alive. :meth:`close` writes
    the last line: the jobs done, the wall time and the time forecast when the board was made.
    Written to
    :func:`terminal_stream` (or ``stream``) only; off with ``I2O_PROGRESS=0`` or
    ``enabled=False``.
    """

    def __init__(self, labels: Sequence[str], jobs: Sequence[int], title: str,
                 eta: Eta | None = None, enabled: bool | None = None,
                 stream: TextIO | None = None, now: Callable[[], float] = time.monotonic
                 ) -> None:
        if len(labels) != len(jobs):
            raise ValueError(f"{len(labels)} labels for {len(jobs)} tasks")
        self.labels, self.jobs, self.title = list(labels), list(jobs), title
        self._eta, self._now = eta, now
        self.stream = terminal_stream() if stream is None else stream
        self.enabled = bool((progress_enabled() if enabled is None else enabled)
                            and self.stream is not None)
        self.interactive = bool(self.enabled and getattr(self.stream, "isatty", lambda: False)())
        self.interval = float(os.environ.get("I2O_PROGRESS_INTERVAL", 1.0))
        self.heartbeat = float(os.environ.get("I2O_HEARTBEAT", HEARTBEAT_SECONDS))
        self._start = now()
        self._drawn = -float("inf")
        self._beat = self._start
        self.pending = list(range(len(labels)))
        self.running: dict[int, float] = {}  # index → when it was submitted
        self.done: list[int] = []
        self.failed: list[int] = []
        self.forecast = self.remaining()

    # -- state ------------------------------------------------------------------------------------

    def started(self, index: int) -> None:
        """Task ``index`` was submitted."""
        self.pending.remove(index)
        self.running[index] = self._now()
        self._draw()

    def finished(self, index: int, ok: bool = True) -> None:
        """Task ``index`` ended (``ok``: its jobs are computed; else it failed)."""
        self.running.pop(index)
        (self.done if ok else self.failed).append(index)
        self._draw()

    def remaining(self) -> float | None:
        """The seconds ``eta`` expects the pool still needs (``None`` without ``eta``)."""
        if self._eta is None:
            return None
        now = self._now()
        return self._eta(list(self.pending), {i: now - t for i, t in self.running.items()})

    # -- text -------------------------------------------------------------------------------------

    def status(self, event: str | None = None) -> str:
        """The display's line: ``[i2o] <title>: 3/12 jobs done, 1 failed (<event>); running
        a (1:02), b (0:10); 4:12 elapsed, ETA 12.5 min``."""
        total = sum(self.jobs)
        done = sum(self.jobs[i] for i in self.done)
        failed = sum(self.jobs[i] for i in self.failed)
        now = self._now()
        head = f"[i2o] {self.title}: {done}/{total} jobs done"
        if failed:
            head += f", {failed} failed"
        if event:
            head += f" ({event})"
        running = ", ".join(f"{self.labels[i]} ({clock(now - t)})"
                            for i, t in self.running.items())
        parts = [head, f"running {running}" if running else "none running",
                 f"{clock(now - self._start)} elapsed"]
        left = self.remaining()
        if left is not None and (self.pending or self.running):
            parts[-1] += f", ETA {span(left)}" if left > 0 else ", ETA overdue"
        return "; ".join(parts)

    def summary(self) -> str:
        """The last line: jobs done, wall time, and the forecast made at the start."""
        done = sum(self.jobs[i] for i in self.done)
        text = (f"[i2o] {self.title}: {done}/{sum(self.jobs)} jobs done in "
                f"{span(self._now() - self._start)}")
        if self.forecast is not None:
            text += f" (forecast at the start: {span(self.forecast)})"
        if self.failed:
            text += f"; {len(self.failed)} task{'s' if len(self.failed) > 1 else ''} failed"
        return text

    # -- output -----------------------------------------------------------------------------------

    def tick(self) -> None:
        """Redraw the terminal's line if ``I2O_PROGRESS_INTERVAL`` seconds have passed; off a
        terminal, write the status as a line of its own every ``heartbeat`` seconds."""
        if self.interactive:
            if self._now() - self._drawn >= self.interval:
                self._draw()
        elif self.enabled and self._now() - self._beat >= self.heartbeat:
            self._write(f"{self.status()}\n")
            self._beat = self._now()

    def say(self, text: str) -> None:
        """A line of its own (a failure's message), above the terminal's redrawn line."""
        if self.interactive:
            self._write(f"\r\x1b[K{text}\n")
            self._draw()
        else:
            print(text, flush=True)

    def close(self) -> None:
        """The last line (:meth:`summary`), replacing the terminal's redrawn one."""
        if self.enabled:
            self._write(f"\r\x1b[K{self.summary()}\n" if self.interactive
                        else f"{self.summary()}\n")
        self.enabled = False

    def _draw(self) -> None:
        if not self.interactive:
            return
        width = shutil.get_terminal_size((100, 24)).columns - 1
        line = self.status()
        if len(line) > width:
            line = line[:max(width - 1, 0)] + "…"
        self._write(f"\r\x1b[K{line}")
        self._drawn = self._now()

    def _write(self, text: str) -> None:
        assert self.stream is not None
        self.stream.write(text)
        self.stream.flush()

    def __enter__(self) -> TaskBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
