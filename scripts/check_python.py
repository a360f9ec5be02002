# ruff: noqa: UP031  (no f-strings: the script must run, and explain, on very old Pythons)
"""Refuse, with one clear line, a Python the pinned stack does not support (run before the venv).

Reads ``requires-python`` from ``pyproject.toml`` (a plain regex: this script must run, and say
what is wrong, on any Python 3, including ones too old for ``tomllib``) and checks the interpreter
running it. Exit status 0 when supported, 1 with the message otherwise.

    python3 scripts/check_python.py              # the interpreter itself
    python3 scripts/check_python.py --version 3.10.4   # what it would say for another one (tests)
"""

import os
import re
import sys

PYPROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "pyproject.toml")
_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|<|>)\s*([0-9]+(?:\.[0-9]+)*)\s*$")


def requires_python(path=PYPROJECT):
    """The ``requires-python`` specifier of the project, e.g. ``">=3.11,<3.15"``."""
    with open(path, encoding="utf-8") as stream:
        match = re.search(r'^requires-python\s*=\s*"([^"]+)"', stream.read(), re.MULTILINE)
    if match is None:
        raise SystemExit("error: pyproject.toml declares no requires-python")
    return match.group(1)


def _as_tuple(text):
    return tuple(int(part) for part in text.split("."))


def satisfies(version, specifier):
    """Whether ``version`` (a tuple of ints) meets every comma-separated clause of ``specifier``.

    A clause compares as many components as it names (``<3.15`` admits 3.14.9, refuses 3.15.0).
    """
    for clause in specifier.split(","):
        match = _CLAUSE.match(clause)
        if match is None:
            raise ValueError("unsupported clause %r in requires-python %r" % (clause, specifier))
        operator, bound = match.group(1), _as_tuple(match.group(2))
        have = tuple(version[: len(bound)])
        ok = {">=": have >= bound, "<=": have <= bound, "==": have == bound,
              "!=": have != bound, "<": have < bound, ">": have > bound}[operator]
        if not ok:
            return False
    return True


def message(version, specifier, executable):
    shown = ".".join(str(part) for part in version)
    return ("error: Python %s (%s) is not supported: this book's pinned stack (requirements.lock) "
            "needs Python %s. Install one and name it: `make book PYTHON=python3.12`."
            % (shown, executable, specifier))


def main(argv):
    version = tuple(sys.version_info[:3])
    if len(argv) == 2 and argv[0] == "--version":
        version = _as_tuple(argv[1])
    specifier = requires_python()
    if not satisfies(version, specifier):
        sys.stderr.write(message(version, specifier, sys.executable) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
