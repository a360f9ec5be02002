"""A parameter fuzz generated from the manifest: every figure, every parameter, every fault.

For each parameter of each figure in ``figures.yaml`` the fuzz tries a value of the wrong type,
values outside its range (below ``min``, above ``max``, not among ``choices``, an element out of
range in a list), an empty list where a list goes, a non-finite number where a number goes, and a
misspelt name. Each case goes through both doors a user has: the command line
(``python -m i2o.book run … -p NAME VALUE``, with papermill replaced by a tripwire, so "before
any compute" is checked, not assumed) and the notebook's own validation
(:func:`i2o.profiles.resolve_namespace`, what a papermill run reaches). Each must refuse and name
the parameter. The cases are generated, so their count grows with the manifest; it is printed.
Budget: ~3 s.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from i2o import book, profiles


@dataclass(frozen=True)
class Case:
    figure: str
    name: str  # the name given (misspelt in a misspelt-name case)
    fault: str
    value: Any
    parameter: str  # the manifest's parameter the refusal must name


def _misspell(name: str, taken: set[str]) -> str:
    """A plausible typo: two neighbouring letters swapped, else a letter doubled or dropped."""
    candidates = [name[:i] + name[i + 1] + name[i] + name[i + 2:] for i in range(len(name) - 1)
                  if name[i] != name[i + 1]]
    candidates += [name + name[-1], name[:-1]]
    return next(c for c in candidates if c not in taken and c.isidentifier() and c != name)


def _outside(bound: float, kind: str, below: bool) -> float:
    step = 1 if kind.startswith("int") else max(1.0, abs(bound))
    return bound - step if below else bound + step


def _out_of_range(schema: dict[str, Any], good: Any) -> list[tuple[str, Any]]:
    kind = schema["type"]
    values = []
    if "choices" in schema:
        values.append(("not a choice", "no_such_choice"))
    for key, below in (("min", True), ("max", False)):
        if key in schema and kind in ("int", "float", "int_list", "float_list"):
            value = _outside(schema[key], kind, below)
            if kind.endswith("_list"):
                values.append((f"element {'below min' if below else 'above max'}",
                               [good[0], value]))
            else:
                values.append(("below min" if below else "above max", value))
    return values


WRONG_TYPE = {"int": 2.5, "float": "ten", "bool": "ten", "str": 7, "int_list": 5,
              "float_list": 0.5}


def fuzz_cases(figure: str) -> list[Case]:
    entry = profiles.entry(figure)
    schemas, smoke = entry["parameters"], entry["profiles"]["smoke"]
    cases = []
    for name, schema in schemas.items():
        kind = schema["type"]
        cases.append(Case(figure, name, "wrong type", WRONG_TYPE[kind], name))
        cases += [Case(figure, name, fault, value, name)
                  for fault, value in _out_of_range(schema, smoke[name])]
        if kind.endswith("_list"):
            cases.append(Case(figure, name, "empty list", [], name))
        if kind == "float":
            cases.append(Case(figure, name, "not finite", float("nan"), name))
        if kind == "float_list":
            cases.append(Case(figure, name, "not finite", [float("nan")], name))
        cases.append(Case(figure, _misspell(name, set(schemas)), "misspelt name", smoke[name],
                          name))
    return cases


def _names_it(case: Case, message: str) -> bool:
    """Does the refusal name the parameter (and, for a misspelt name, the name given)?"""
    if case.fault != "misspelt name":
        return f"parameter {case.parameter!r} of figure {case.figure!r} must be" in message
    allowed = re.search(r"allowed: ([^(]*)", message)
    # the suggestion may be another parameter at the same distance (miaml_… → maml_…)
    return (f"unknown parameter(s) {case.name!r} for figure {case.figure!r}" in message
            and f"did you mean {case.name!r} → '" in message and allowed is not None
            and case.parameter in allowed.group(1).strip().split(", "))


@pytest.fixture
def tripwire(monkeypatch):
    """papermill replaced by a module whose execution fails the test: nothing may start."""
    def execute_notebook(*args, **kwargs):
        raise AssertionError("a notebook was executed although its parameters are bad")

    monkeypatch.setitem(sys.modules, "papermill",
                        types.SimpleNamespace(execute_notebook=execute_notebook))


@pytest.mark.parametrize("figure", profiles.figures())
def test_every_bad_parameter_is_refused_before_any_compute(figure, tripwire, capsys):
    cases = fuzz_cases(figure)
    failures, slowest = [], 0.0
    for case in cases:
        text = yaml.safe_dump(case.value, default_flow_style=True).removesuffix("\n...\n").strip()
        assert yaml.safe_load(text) == case.value or case.fault == "not finite", text
        start = time.perf_counter()
        code = book.main(["run", figure, "--profile", "smoke", "-p", case.name, text])
        slowest = max(slowest, time.perf_counter() - start)
        error = capsys.readouterr().err
        if code != 2 or not _names_it(case, error):
            failures.append(f"CLI {case}: exit {code}, {error!r}")
        namespace = {"profile": "smoke", case.name: case.value}
        try:
            profiles.resolve_namespace(figure, namespace)
            failures.append(f"notebook {case}: accepted")
        except profiles.ParameterError as refusal:
            if not _names_it(case, str(refusal)):
                failures.append(f"notebook {case}: {refusal}")
    assert not book.executed_path(figure).exists()
    assert not failures, "\n".join(failures)
    with capsys.disabled():
        count = len(profiles.entry(figure)["parameters"])
        print(f"\n[fuzz] {figure}: {len(cases)} bad parameters over {count} "
              f"parameters, each refused by the CLI and by the notebook's validation; slowest "
              f"CLI refusal {1000 * slowest:.0f} ms")


def test_the_fuzz_grows_with_the_manifest(capsys):
    """At least a wrong type, a misspelt name and (where a range exists) an out-of-range value
    for every parameter of every figure; the total is printed."""
    total = parameters = 0
    for figure in profiles.figures():
        cases = fuzz_cases(figure)
        schemas = profiles.entry(figure)["parameters"]
        for name, schema in schemas.items():
            faults = {c.fault for c in cases if c.parameter == name}
            assert {"wrong type", "misspelt name"} <= faults, (figure, name, faults)
            ranged = "choices" in schema or {"min", "max"} & set(schema)
            assert not ranged or len(faults) >= 3, (figure, name, faults)
            assert not schema["type"].endswith("_list") or "empty list" in faults
        total, parameters = total + len(cases), parameters + len(schemas)
    with capsys.disabled():
        print(f"\n[fuzz] {total} cases over {len(profiles.figures())} figures and {parameters} "
              "parameters (each tried through the CLI and the notebook's validation)")


def test_the_real_command_line_refuses_quickly(tmp_path):
    """One case per figure through a fresh ``python -m i2o.book`` process (wall time printed)."""
    for figure in profiles.figures():
        case = fuzz_cases(figure)[-1]
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "i2o.book", "run", figure, "--profile", "smoke", "-p",
             case.name, yaml.safe_dump(case.value).removesuffix("\n...\n").strip()],
            capture_output=True, text=True, timeout=60, env=os.environ.copy())
        seconds = time.perf_counter() - start
        assert done.returncode == 2, done.stderr
        assert _names_it(case, done.stderr), done.stderr
        assert "executing" not in done.stdout
        print(f"{figure}: {case.fault} {case.name!r} refused in {seconds:.2f} s (process included)")
