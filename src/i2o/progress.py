"""Progress bars on the terminal, never in a notebook's pages.

A bar shows a loop's state and changes no number, so this module is outside every job's cache key
(:data:`i2o.results.INERT`): rewording a bar recomputes nothing.
"""

from __future__ import annotations

import functools
import io
import os
import sys
from collections.abc import Iterable, Iterator
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
