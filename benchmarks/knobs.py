"""The benchmarks' size knobs: ``I2O_BENCH_*`` environment variables read one way.

Each reader takes the variable's name and its default; an unset or blank variable gives the
default. A value that is not of the expected type raises :class:`KnobError`, naming the variable,
the value and what was expected. The benchmark modules import this file by name (``import
knobs``): ``python benchmarks/run.py`` puts this folder first on ``sys.path``, and the tests'
``conftest.py`` appends it.
"""

from __future__ import annotations

import os


class KnobError(ValueError):
    """An ``I2O_BENCH_*`` variable holds a value of the wrong type."""


def _given(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _integer(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise KnobError(f"{name}={value!r}: expected an integer ≥ {minimum}")
    return number


def text(name: str, default: str) -> str:
    """The variable's value, else ``default``."""
    return _given(name) or default


def integer(name: str, default: int, minimum: int = 1) -> int:
    """The variable as an integer ≥ ``minimum``, else ``default``."""
    value = _given(name)
    return default if value is None else _integer(name, value, minimum)


def optional_integer(name: str, minimum: int = 1) -> int | None:
    """The variable as an integer ≥ ``minimum``, else ``None`` (the caller's own default)."""
    value = _given(name)
    return None if value is None else _integer(name, value, minimum)


def items(name: str, default: str) -> list[str]:
    """The variable (else ``default``) as a comma-separated list, empty items dropped."""
    value = os.environ.get(name, default)
    return [item.strip() for item in value.split(",") if item.strip()]


def integers(name: str, default: str = "", minimum: int = 1) -> list[int]:
    """The variable (else ``default``) as a comma-separated list of integers ≥ ``minimum``."""
    return [_integer(name, item, minimum) for item in items(name, default)]
