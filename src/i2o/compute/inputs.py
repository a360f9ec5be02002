"""One reader for every value a user gives: a figure's parameters (a notebook's parameters cell,
papermill, ``-p NAME VALUE`` of ``python -m i2o.book run`` / ``make fig-*`` / ``python -m
i2o.sweep`` / ``make sweep``), the options of the commands (``python -m i2o.diagnose``, ``python -m
i2o.sweep``) and the environment variables the runtime reads (:data:`ENVIRONMENT`). What a value
may be is a :class:`Spec` (the manifest's schema of a parameter is one: :meth:`Spec.from_schema`);
:func:`read` checks a value against it and returns it, or raises :class:`ParameterError`, one line
naming what was given, what is allowed and the value given.

**Text** (a command line, an environment variable, or a ``str`` given where another kind is
expected, as papermill's own ``-p`` hands over a list) is read by this grammar, not by YAML:

- *integer*: ``[+-]`` and decimal digits, ``_`` allowed between two digits (``50_000``). Refused:
  a leading zero (``010``: 8 in YAML 1.1 and C, 10 elsewhere, so neither is guessed), a point or
  an exponent (``3.0``, ``1e3``), ``0x10``/``0o10``/``0b10``, ``1:30`` (90 in YAML 1.1).
- *number*: an integer, or a decimal with a point and/or an exponent (``0.5``, ``.5``, ``5.``,
  ``1e-2``, ``1E-2``, ``2.5e-06``); finite only (``nan``, ``inf``, ``.inf``, ``1e999`` refused).
- *boolean*: ``true`` or ``false`` (``True``, ``False``); not ``yes``/``no``/``on``/``off``/``1``.
- *string*: the text as given (no quotes removed); a choice must match exactly.
- *list*: ``[a, b, c]``, brackets required, entries of one of the kinds above separated by commas
  (spaces optional), no nesting.

Surrounding spaces are dropped except from a string. **Python values** (a notebook's cell,
:func:`i2o.compute.door.enter`): an ``int`` for an integer (``True`` is not one), an ``int`` or a
finite ``float`` for a number (returned as a ``float``), a ``bool``, a ``str``, a list or tuple (a
``list``). Then, for every value: ``min``/``max`` inclusive (``min_open``/``max_open`` make them
strict); a ``choices`` list; a string or list empty only where ``empty`` says so; a list at most
:data:`MAX_ITEMS` entries and, where ``distinct`` (every list of seeds, unless its schema says
``distinct: false``), no value repeated; a ``fraction`` is said as one (``0.9 for 90 %``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Entries a list may hold (20,000 seeds would be 40,000 jobs of a chapter with two arms).
MAX_ITEMS = 1000
#: Torch threads a process may ask for (``I2O_THREADS``, ``--cpus``, ``--threads``): beyond any
#: node this book runs on; a larger count is a typo, and it would start as many threads.
MAX_THREADS = 1024
KINDS = ("int", "float", "bool", "str", "int_list", "float_list", "flag")
_SHOWN = 100  # characters of a refused value quoted in its message

_DIGITS = r"[0-9](?:_?[0-9])*"
_INTEGER = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)")
_DECIMAL = re.compile(rf"[+-]?(?:(?:0|[1-9](?:_?[0-9])*)(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})"
                      r"(?:[eE][+-]?[0-9]+)?")
_LEADING_ZERO = re.compile(r"[+-]?0[0-9_]+(?:[.eE].*)?")
_PREFIXED = re.compile(r"[+-]?0[xXoObB].*")
_SEXAGESIMAL = re.compile(r"[+-]?[0-9]+(?::[0-9]+)+(?:\.[0-9]*)?")
_NOT_FINITE = re.compile(r"[+-]?\.?(?:nan|inf|infinity)", re.IGNORECASE)


class ParameterError(ValueError):
    """A value a user gave (a figure's parameter, a command's option, an environment variable)
    is unknown or outside what it may be; its message is one line naming it."""


@dataclass(frozen=True)
class Spec:
    """What a value may be (the module docstring says how each field is read)."""

    kind: str
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    choices: tuple[Any, ...] | None = None
    empty: bool = False
    distinct: bool = False
    fraction: bool = False
    help: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r}; allowed: {', '.join(KINDS)}")

    @classmethod
    def from_schema(cls, name: str, schema: Mapping[str, Any]) -> Spec:
        """The spec of a manifest parameter (a chapter's ``chapter.yaml``): its ``type``,
        ``min``, ``max``, ``choices``, ``empty``, ``distinct`` (default: true for a list named
        ``…seeds``), ``fraction`` and ``help``."""
        kind = schema["type"]
        distinct = schema.get("distinct", kind == "int_list" and name.endswith("seeds"))
        choices = schema.get("choices")
        return cls(kind, schema.get("min"), schema.get("max"),
                   choices=None if choices is None else tuple(choices),
                   empty=bool(schema.get("empty", False)), distinct=bool(distinct),
                   fraction=bool(schema.get("fraction", False)), help=schema.get("help"))

    @property
    def element(self) -> str:
        """The kind of one entry (the kind itself for a scalar)."""
        return self.kind.removesuffix("_list")

    @property
    def is_list(self) -> bool:
        return self.kind.endswith("_list")


def _bounds(spec: Spec) -> str:
    parts = []
    if spec.min is not None:
        parts.append(f"{'>' if spec.min_open else '≥'} {spec.min}")
    if spec.max is not None:
        parts.append(f"{'<' if spec.max_open else '≤'} {spec.max}")
    return " and ".join(parts)


def describe(spec: Spec) -> str:
    """What ``spec`` allows, in words: ``an integer ≥ 1``, ``one of 'ift', 'unrolled'``, ``a list
    of integers with every element ≥ 0, no value repeated, at most 1,000 entries``."""
    if spec.choices is not None and not spec.is_list:
        return "one of " + ", ".join(repr(c) for c in spec.choices)
    words = {"int": "an integer", "float": "a number", "bool": "true or false",
             "str": "a string", "flag": "0, 1, true or false", "int_list": "a list of integers",
             "float_list": "a list of numbers"}[spec.kind]
    if bounds := _bounds(spec):
        words += (" with every element " if spec.is_list else " ") + bounds
    if spec.fraction:
        words += " (a fraction: 0.9 for 90 %)"
    if spec.is_list:
        if spec.distinct:
            words += ", no value repeated"
        words += f", at most {MAX_ITEMS:,} entries"
        if spec.empty:
            words += " (or an empty list)"
    elif spec.kind == "str" and spec.choices is None and not spec.empty:
        words = "a non-empty string"
    return words


class _Refused(Exception):
    """A value refused; ``detail`` says why when the range alone does not."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


def _why_not_a_number(text: str, integer: bool) -> str:
    """Why ``text`` is not an integer (``integer``) or a number, when a reader could have read
    it as one elsewhere."""
    if _NOT_FINITE.fullmatch(text):
        return "not a finite number"
    if _PREFIXED.fullmatch(text):
        return "decimal digits only (no 0x, 0o or 0b)"
    if _SEXAGESIMAL.fullmatch(text):
        return "not a number (':' is not read as minutes:seconds)"
    if _LEADING_ZERO.fullmatch(text):
        return "a leading zero is refused (010 would be 8 in YAML 1.1 and C, 10 elsewhere)"
    if integer and _DECIMAL.fullmatch(text):
        return "an integer is written without a point or an exponent"
    return ""


def _scalar_from_text(text: str, kind: str) -> Any:
    """One value of ``kind`` read from ``text`` by the grammar (strings are taken as given, but
    for one pair of matching quotes around them: ``'"micro"'`` is ``micro``, as YAML read it)."""
    if kind == "str":
        quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'"
        return text[1:-1] if quoted and text[0] not in text[1:-1] else text
    text = text.strip()
    if kind == "int":
        if not _INTEGER.fullmatch(text):
            raise _Refused(_why_not_a_number(text, integer=True))
        return int(text.replace("_", ""))
    if kind == "float":
        if not _DECIMAL.fullmatch(text):
            raise _Refused(_why_not_a_number(text, integer=False))
        value = float(text.replace("_", ""))
        if not math.isfinite(value):
            raise _Refused("not a finite number")
        return value
    if kind == "bool":
        if text in ("true", "True", "false", "False"):
            return text in ("true", "True")
        raise _Refused()
    if kind == "flag":
        if text.lower() in ("0", "1", "true", "false"):
            return text.lower() in ("1", "true")
        raise _Refused()
    raise AssertionError(kind)


def _list_from_text(text: str, spec: Spec) -> list[Any]:
    body = text.strip()
    if body.startswith("[") != body.endswith("]"):
        raise _Refused("a bracket is not closed")
    if not body.startswith("["):
        raise _Refused("a list is written in brackets: [0, 1]")
    body = body[1:-1].strip()
    if not body:
        return []
    items = body.split(",")
    if len(items) > MAX_ITEMS:
        raise _Refused(f"{len(items):,} entries")
    if any("[" in item or "]" in item for item in items):
        raise _Refused("a list of single values, not of lists")
    values = []
    for item in items:
        if not item.strip():
            raise _Refused("an empty entry (two commas in a row, or one at an end)")
        try:
            values.append(_scalar_from_text(item, spec.element))
        except _Refused as refused:
            raise _Refused(f"entry {item.strip()!r}"
                           + (f": {refused.detail}" if refused.detail else "")) from None
    return values


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scalar(value: Any, kind: str) -> Any:
    """A Python value of ``kind``, normalised (an int for a number becomes a float later)."""
    if kind == "int":
        if not _is_int(value):
            raise _Refused("True and False are not integers" if isinstance(value, bool) else "")
        return value
    if kind == "float":
        if not (_is_int(value) or isinstance(value, float)) or isinstance(value, bool):
            raise _Refused()
        try:
            if not math.isfinite(value):
                raise _Refused("not a finite number")
        except OverflowError:  # an int too large for a float
            raise _Refused("too large") from None
        return value
    if kind in ("bool", "flag"):
        if not isinstance(value, bool):
            raise _Refused()
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise _Refused()
        return value
    raise AssertionError(kind)


def _in_range(value: Any, spec: Spec) -> bool:
    if spec.min is not None and (value <= spec.min if spec.min_open else value < spec.min):
        return False
    if spec.max is not None and (value >= spec.max if spec.max_open else value > spec.max):
        return False
    return spec.choices is None or value in spec.choices


def _check(value: Any, spec: Spec) -> Any:
    """``value`` (a Python value) checked against ``spec`` and normalised; :class:`_Refused`
    otherwise."""
    if spec.is_list:
        if not isinstance(value, list | tuple):
            raise _Refused()
        if len(value) > MAX_ITEMS:
            raise _Refused(f"{len(value):,} entries")
        if not value and not spec.empty:
            raise _Refused("empty")
        elements = []
        for item in value:
            element = _scalar(item, spec.element)
            if spec.element != "str" and not _in_range(element, spec):
                raise _Refused(f"entry {element!r} is out of range")
            elements.append(element)
        if spec.distinct:
            seen: set[Any] = set()
            for element in elements:
                if element in seen:
                    raise _Refused(f"{element!r} is repeated")
                seen.add(element)
        return [float(e) for e in elements] if spec.element == "float" else elements
    value = _scalar(value, spec.kind)
    if spec.kind == "str" and not value and not spec.empty:
        raise _Refused()  # "a non-empty string" says it
    if spec.kind in ("int", "float") and not _in_range(value, spec):
        raise _Refused()
    if spec.kind == "str" and spec.choices is not None and value not in spec.choices:
        raise _Refused()
    return float(value) if spec.kind == "float" else value


def _from_text(value: Any, spec: Spec) -> Any:
    """A ``str`` given where another kind is expected, read by the grammar; anything else as
    given."""
    if not isinstance(value, str):
        return value
    if spec.kind == "str" and not spec.is_list:
        return _scalar_from_text(value, "str")
    if spec.kind == "str":
        return value
    return _list_from_text(value, spec) if spec.is_list else _scalar_from_text(value, spec.kind)


def shown(value: Any) -> str:
    """``repr(value)``, cut to about :data:`_SHOWN` characters (a list of 20,000 seeds is quoted
    by its start)."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def read(value: Any, spec: Spec, what: str) -> Any:
    """``value`` (text or a Python value) as ``spec`` allows it, or :class:`ParameterError`:
    ``"{what} must be {describe(spec)}; got {value!r}"``, why when the range alone does not say
    it, and the spec's help in parentheses. ``what`` names it: ``parameter 'seeds' of figure
    'stability'``, ``--fit``, ``environment variable I2O_THREADS``. The value quoted is the text
    when the grammar refuses it (``got '010'``), else what it reads to (``got 1.5``)."""
    given = value
    try:
        given = _from_text(value, spec)
        return _check(given, spec)
    except _Refused as refused:
        raise ParameterError(
            f"{what} must be {describe(spec)}; got {shown(given)}"
            + (f": {refused.detail}" if refused.detail else "")
            + (f" ({spec.help})" if spec.help else "")) from None


# -- the environment ----------------------------------------------------------------------------

_PATH = "a folder"
#: Every environment variable the runtime reads that a user may set, with what it may be. An
#: unset variable takes its default (README); a set one is read by :func:`read`, so an empty
#: value is refused where it would mean nothing.
ENVIRONMENT: dict[str, Spec] = {
    "I2O_THREADS": Spec("int", 1, MAX_THREADS, help="torch threads per process; default 1"),
    "I2O_NUMERICS": Spec("str", choices=("portable", "native"),
                         help="numerics mode; default portable"),
    "I2O_JAX_CACHE": Spec("flag", help="keep JAX's compiled programs in <results>/_jax; "
                                       "default 1"),
    "I2O_PROGRESS": Spec("flag", help="progress bars on the terminal; default 1"),
    "I2O_PROGRESS_INTERVAL": Spec("float", 0, 86400,
                                  help="seconds between two updates of a progress bar"),
    "I2O_HEARTBEAT": Spec("float", 0, 86400, help="seconds between two lines of a job board"),
    "I2O_FILL_UNINITIALIZED": Spec("str", choices=("0", "1"),
                                   help="1: new tensors filled with NaN in deterministic mode"),
    "I2O_DATA_DIR": Spec("str", help=f"{_PATH} holding the data sets"),
    "I2O_RESULTS_DIR": Spec("str", help=f"{_PATH}: the results cache"),
    "I2O_CACHE_DIR": Spec("str", help=f"{_PATH}: the decoded arrays"),
    "I2O_BUILD_DIR": Spec("str", help=f"{_PATH}: the executed notebooks and the HTML"),
    "I2O_ROOT": Spec("str", help=f"{_PATH}: the repository"),
}


def _environment_text(name: str, text: str) -> str:
    """A variable's text as its reader reads it: a choice or a flag without surrounding spaces
    or case (``I2O_NUMERICS=Native``)."""
    return text.strip().lower() if name == "I2O_NUMERICS" else text


def environment_value(name: str, default: Any = None,
                      env: Mapping[str, str] | None = None) -> Any:
    """The value of environment variable ``name`` (one of :data:`ENVIRONMENT`) read by its spec,
    ``default`` when unset; :class:`ParameterError` for a bad one."""
    env = os.environ if env is None else env
    if name not in env:
        return default
    return read(_environment_text(name, env[name]), ENVIRONMENT[name],
                f"environment variable {name}")


#: The variables naming folders: made absolute by :func:`check_environment`.
FOLDERS = ("I2O_DATA_DIR", "I2O_RESULTS_DIR", "I2O_CACHE_DIR", "I2O_BUILD_DIR", "I2O_ROOT")


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Refuse (:class:`ParameterError`, one line) the first environment variable of
    :data:`ENVIRONMENT` that is set to what it may not be; every entry point calls it before any
    compute (:mod:`i2o.compute.door`, the commands).

    In this process's environment (``env`` not given), a relative folder (:data:`FOLDERS`) is
    then made absolute against the current directory, once, where the user gave it: the kernels
    and workers started afterwards (which run in ``book/`` or elsewhere) inherit the absolute
    path, so every process reads and writes the same folder. A folder of blanks only is refused."""
    for name in ENVIRONMENT:
        value = environment_value(name, env=env)
        if name in FOLDERS and value is not None and not str(value).strip():
            raise ParameterError(f"environment variable {name} must be a folder's path; got "
                                 f"{shown(value)} ({ENVIRONMENT[name].help})")
    if env is None:
        for name in FOLDERS:
            if name in os.environ:
                os.environ[name] = str(Path(os.environ[name]).expanduser().absolute())
