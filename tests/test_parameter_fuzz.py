"""A parameter fuzz generated from the manifest: every figure, every parameter, every fault.

For each parameter of each figure in ``figures.yaml`` the fuzz tries a value of the wrong type,
values outside its range (below ``min``, above ``max``, not among ``choices``, an element out of
range in a list), an empty list where a non-empty list goes, a non-finite number where a number
goes, and a misspelt name; and, per chapter, one value its own rules between parameters refuse
(``runs.check_params``: :data:`CROSS`). Each case goes through every path into a chapter, all of
which enter through :mod:`i2o.compute.door`: the command line (``python -m i2o.book run … -p NAME
VALUE``, ``make fig-*``, with papermill replaced by a tripwire, so "before any compute" is checked,
not assumed), the notebook's first cell (:func:`i2o.compute.door.enter_namespace`, what a papermill
run reaches), the sweep (``python -m i2o.sweep FIG -p NAME VALUE``, ``make sweep``, with submission
replaced by a tripwire) and the robustness runs (``make robustness``, whose parameters are the
profile's: the bad value is put into the manifest's profile). Each must refuse and name the
parameter. The cases are generated, so their count grows with the manifest; it is printed.
Budget: ~5 s.
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

from i2o.book import build, stamps
from i2o.compute import door, profiles, sweep, sweep_command
from i2o.provenance import robustness


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
        if kind.endswith("_list") and not schema.get("empty"):
            cases.append(Case(figure, name, "empty list", [], name))
        if kind == "float":
            cases.append(Case(figure, name, "not finite", float("nan"), name))
        if kind == "float_list":
            cases.append(Case(figure, name, "not finite", [float("nan")], name))
        cases.append(Case(figure, _misspell(name, set(schemas)), "misspelt name", smoke[name],
                          name))
    return cases


#: One value per chapter that the manifest's schema accepts and the chapter's own rules between
#: parameters refuse (``runs.check_params``), from the chapter's smoke profile.
CROSS = {
    "affine": lambda smoke: ("left_rank_out", smoke["left_d_z"] + 1),
    "stability": lambda smoke: ("pretrain_steps", 100_000),
    "deq_gaps": lambda smoke: ("inv_crop", smoke["inv_crop"] + 1),
    "diagnose": lambda smoke: ("td_channels", 6),
    "meta": lambda smoke: ("maml_inner_steps", [smoke["maml_inner_steps"][0]] * 2),
    "separation": lambda smoke: ("diag_n", smoke["diag_d"]),
}


def cross_case(figure: str) -> Case:
    name, value = CROSS[figure](profiles.entry(figure)["profiles"]["smoke"])
    return Case(figure, name, "refused by the chapter's rules", value, name)


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


@pytest.fixture
def no_submission(monkeypatch):
    """The sweep's submission replaced by a tripwire: nothing may be submitted."""
    def submit(*args, **kwargs):
        raise AssertionError("a sweep was submitted although its parameters are bad")

    monkeypatch.setattr(sweep, "submit", submit)


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()


def _refusals(case: Case, capsys, monkeypatch) -> list[str]:
    """The paths that did not refuse ``case`` naming its parameter (empty: all refused)."""
    failures = []
    text = _yaml(case.value)
    code = build.main(["run", case.figure, "--profile", "smoke", "-p", case.name, text])
    error = capsys.readouterr().err
    if code != 2 or not _names_it(case, error):
        failures.append(f"CLI {case}: exit {code}, {error!r}")
    try:
        door.enter_namespace(case.figure, {"profile": "smoke", case.name: case.value})
        failures.append(f"notebook {case}: accepted")
    except profiles.ParameterError as refusal:
        if not _names_it(case, str(refusal)):
            failures.append(f"notebook {case}: {refusal}")
    code = sweep_command.main([case.figure, "--profile", "smoke", "-p", case.name, text])
    error = capsys.readouterr().err
    if code != 2 or not _names_it(case, error):
        failures.append(f"sweep {case}: exit {code}, {error!r}")
    # a profile holds only the manifest's names; robustness sets the replicate itself (its own
    # --replicates check refuses a bad one)
    if case.fault != "misspelt name" and case.parameter != "replicate":
        with monkeypatch.context() as patch:
            patch.setitem(profiles.entry(case.figure)["profiles"]["smoke"], case.name,
                          case.value)
            try:
                robustness.check_request("smoke", [0, 1], [case.figure])
                failures.append(f"robustness {case}: accepted")
            except profiles.ParameterError as refusal:
                if not _names_it(case, str(refusal)):
                    failures.append(f"robustness {case}: {refusal}")
    return failures


@pytest.mark.parametrize("figure", profiles.figures())
def test_every_bad_parameter_is_refused_on_every_path_before_any_compute(
        figure, tripwire, no_submission, capsys, monkeypatch):
    cases = [*fuzz_cases(figure), cross_case(figure)]
    failures, slowest = [], 0.0
    for case in cases:
        text = _yaml(case.value)
        assert yaml.safe_load(text) == case.value or case.fault == "not finite", text
        start = time.perf_counter()
        failures += _refusals(case, capsys, monkeypatch)
        slowest = max(slowest, time.perf_counter() - start)
    assert not stamps.executed_path(figure).exists()
    assert not failures, "\n".join(failures)
    with capsys.disabled():
        count = len(profiles.entry(figure)["parameters"])
        paths = "CLI, notebook, sweep, robustness"
        print(f"\n[fuzz] {figure}: {len(cases)} bad parameters over {count} parameters, each "
              f"refused on every path ({paths}); slowest case {1000 * slowest:.0f} ms")


def test_a_good_value_passes_every_door(tripwire, no_submission, capsys, monkeypatch, tmp_path):
    """The predicate of the fuzz fails where it should: the smoke profile's own values are
    accepted by the notebook's door and the robustness check, and a sweep with everything cached
    submits nothing (an empty cache: it reaches the tripwire, the proof that it would submit)."""
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    smoke = profiles.entry("stability")["profiles"]["smoke"]
    assert door.enter_namespace("stability", {"profile": "smoke"}).params == smoke
    assert robustness.check_request("smoke", [0, 1], ["stability"]) == [0, 1]
    with pytest.raises(AssertionError, match="submitted"):
        sweep_command.main(["stability", "--profile", "smoke", "-p", "pretrain_steps",
                    str(smoke["pretrain_steps"])])
    case = cross_case("stability")
    assert _refusals(case, capsys, monkeypatch) == []


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
            assert (not schema["type"].endswith("_list") or schema.get("empty")
                    or "empty list" in faults)
        total, parameters = total + len(cases), parameters + len(schemas)
    with capsys.disabled():
        print(f"\n[fuzz] {total} cases over {len(profiles.figures())} figures and {parameters} "
              "parameters (each tried on every path into its chapter)")


def test_the_sweep_command_refuses_before_submission():
    """The issue's case, ``make sweep FIG=stability P="-p pretrain_steps 100000"``, through a
    fresh ``python -m i2o.sweep`` process: refused, naming the parameter, nothing listed."""
    done = subprocess.run([sys.executable, "-m", "i2o.sweep", "stability", "--profile", "smoke",
                           "-p", "pretrain_steps", "100000"], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    assert done.returncode == 2, done.stderr
    assert _names_it(cross_case("stability"), done.stderr), done.stderr
    assert "jobs" not in done.stdout and "would run" not in done.stdout


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
