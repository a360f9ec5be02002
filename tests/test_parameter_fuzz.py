"""A parameter fuzz generated from the manifest: every figure, every parameter, every fault.

For each parameter of each figure in the manifest (each ``chapter.yaml``) the fuzz tries a
value of the wrong type,
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
parameter. On the command lines the value is text, read by :mod:`i2o.compute.inputs`: the fuzz also
writes what only text can be (``010``, ``0x10``, ``1:30``, ``3.0`` for an integer, ``nan``, ``yes``,
an unclosed list, 1,001 entries, a repeated seed, ``-p profile``, ``-p figure``, a name twice),
every environment variable the runtime reads set to what it may not be (through the door, the book,
the sweep and the diagnosis), and every option of ``python -m i2o.diagnose`` (its model file
never runs); each refusal is one line. The cases are generated, so their count grows with the
manifest; it is printed. Budget: ~30 s.
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

from i2o.book import build, stamps
from i2o.compute import door, inputs, profiles, sweep, sweep_command
from i2o.diagnose import cli as diagnose_cli
from i2o.provenance import __main__ as provenance_main
from i2o.provenance import probes, robustness


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


def _one_line(message: str) -> bool:
    """A refusal printed as one line, no traceback."""
    return message.strip().count("\n") == 0 and "Traceback" not in message


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


def _text(value: Any) -> str:
    """``value`` written as a command line gives it (the grammar of :mod:`i2o.compute.inputs`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return repr(value) if isinstance(value, float) else str(value)


def _any_text_is_a_string(case: Case) -> bool:
    """A string parameter without choices (a folder) takes any text: a wrong type cannot be
    written on a command line, only given in Python (the notebook's path refuses it)."""
    schema = profiles.entry(case.figure)["parameters"].get(case.parameter, {})
    return (case.fault == "wrong type" and schema.get("type") == "str"
            and "choices" not in schema)


def _refusals(case: Case, capsys, monkeypatch) -> list[str]:
    """The paths that did not refuse ``case`` naming its parameter (empty: all refused)."""
    failures = []
    text = _text(case.value)
    on_command_lines = not _any_text_is_a_string(case)
    code = (build.main(["run", case.figure, "--profile", "smoke", "-p", case.name, text])
            if on_command_lines else 2)
    error = capsys.readouterr().err if on_command_lines else ""
    if on_command_lines and (code != 2 or not _names_it(case, error) or not _one_line(error)):
        failures.append(f"CLI {case}: exit {code}, {error!r}")
    try:
        door.enter_namespace(case.figure, {"profile": "smoke", case.name: case.value})
        failures.append(f"notebook {case}: accepted")
    except profiles.ParameterError as refusal:
        if not _names_it(case, str(refusal)):
            failures.append(f"notebook {case}: {refusal}")
    if on_command_lines:
        code = sweep_command.main([case.figure, "--profile", "smoke", "-p", case.name, text])
        error = capsys.readouterr().err
        if code != 2 or not _names_it(case, error) or not _one_line(error):
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
             case.name, _text(case.value)],
            capture_output=True, text=True, timeout=60, env=os.environ.copy())
        seconds = time.perf_counter() - start
        assert done.returncode == 2, done.stderr
        assert _names_it(case, done.stderr), done.stderr
        assert "executing" not in done.stdout
        print(f"{figure}: {case.fault} {case.name!r} refused in {seconds:.2f} s (process included)")


# -- what only a command line can write: the grammar of a value -------------------------------

def _inside(schema: dict[str, Any]) -> int:
    """An integer inside the schema's range (so that only the form of a text is at fault)."""
    return int(max(schema["min"], min(schema["max"], 1)))


def text_cases(figure: str) -> list[tuple[str, str, str]]:
    """``(name, fault, text)``: texts a YAML reader would have read (as 8, 90, 16, True, a list
    with a repeat, …) or choked on, generated for every parameter by its type; each must be
    refused naming the parameter. Plus ``-p profile``, ``-p figure`` and a name given twice."""
    cases = []
    for name, schema in profiles.entry(figure)["parameters"].items():
        kind = schema["type"]
        if kind in ("int", "float"):
            cases += [(name, "hexadecimal", "0x10"), (name, "minutes:seconds", "1:30"),
                      (name, "null", "null"), (name, "empty", ""), (name, "octal", "0o17")]
        if kind == "int":
            value = _inside(schema)
            cases += [(name, "leading zero", f"0{value}"), (name, "point", f"{value}.0"),
                      (name, "exponent", f"{value}e0"), (name, "boolean", "true")]
        if kind == "float":
            cases += [(name, "nan", "nan"), (name, "inf", "inf"), (name, ".inf", ".inf"),
                      (name, "overflow", "1e999"),
                      (name, "yes", "yes")]
        if kind == "bool":
            cases += [(name, "yes", "yes"), (name, "one", "1"), (name, "on", "on"),
                      (name, "null", "null")]
        if kind == "str" and "choices" in schema:
            cases += [(name, "unmatched quotes", f"\"{schema['choices'][0]}'"),
                      (name, "choice in a list", f"[{schema['choices'][0]}]")]
        if kind.endswith("_list"):
            value = _inside(schema)
            cases += [(name, "unclosed bracket", f"[{value}, {value}"),
                      (name, "no brackets", f"{value}"), (name, "nested list", f"[[{value}]]"),
                      (name, "empty entry", f"[{value},,{value}]"),
                      (name, "trailing comma", f"[{value},]"),
                      (name, "too many entries",
                       "[" + ",".join([str(value)] * (inputs.MAX_ITEMS + 1)) + "]")]
            if kind == "int_list":
                cases.append((name, "leading zero entry", f"[0{value}]"))
            else:
                cases.append((name, "nan entry", "[nan]"))
            if profiles.spec(name, schema).distinct:
                cases.append((name, "repeated value", f"[{value}, {value}]"))
    return cases


@pytest.mark.parametrize("figure", profiles.figures())
def test_every_bad_text_is_refused_in_one_line_on_every_command_line(
        figure, tripwire, no_submission, capsys):
    """``-p NAME TEXT`` of ``python -m i2o.book run`` (what ``make fig-* P=…`` calls) and of
    ``python -m i2o.sweep`` (``make sweep P=…``): one line, exit 2, naming the parameter (or
    saying how to choose a profile or a figure), nothing executed or submitted."""
    commands = {"book": lambda argv: build.main(["run", figure, "--profile", "smoke", *argv]),
                "sweep": lambda argv: sweep_command.main([figure, "--profile", "smoke", *argv])}
    cases = [(["-p", name, text], fault, f"parameter {name!r} of figure {figure!r} must be")
             for name, fault, text in text_cases(figure)]
    cases += [(["-p", "profile", "paper"], "-p profile",
               "-p profile paper: the profile is not a parameter: choose it with --profile"),
              (["-p", "figure", "meta"], "-p figure",
               "-p figure meta: the figure is not a parameter: it is the command's first"),
              (["-p", "replicate", "0", "-p", "replicate", "1"], "given twice",
               "-p replicate is given twice")]
    failures = []
    for argv, fault, expected in cases:
        for path, command in commands.items():
            code = command(argv)
            error = capsys.readouterr().err
            if code != 2 or expected not in error or not _one_line(error):
                failures.append(f"{path} {fault} {argv[:3]}: exit {code}, {error[:300]!r}")
    assert not stamps.executed_path(figure).exists()
    assert not failures, "\n".join(failures)
    with capsys.disabled():
        print(f"\n[fuzz] {figure}: {len(cases)} bad texts, each refused in one line by "
              "python -m i2o.book run and python -m i2o.sweep")


# -- the environment ---------------------------------------------------------------------------

def environment_cases() -> list[tuple[str, str]]:
    """``(variable, value)``: for every variable the runtime reads
    (:data:`i2o.compute.inputs.ENVIRONMENT`), values its spec refuses: empty, a word, and for a
    number out of range, not finite, not decimal."""
    cases = []
    for name, spec in inputs.ENVIRONMENT.items():
        cases.append((name, ""))
        if spec.kind == "int":
            cases += [(name, v) for v in ("0", "-1", "two", "1.5", "02", "0x2", "1e3",
                                          str(inputs.MAX_THREADS + 1), " ")]
        elif spec.kind == "float":
            cases += [(name, v) for v in ("nan", "inf", "-1", "soon", "1:30", "1e999")]
        elif spec.kind == "flag":
            cases += [(name, v) for v in ("maybe", "yes", "off", "2", "-1", "on")]
        elif spec.choices is not None:
            cases += [(name, v) for v in ("maybe", "2", "true")]
    return cases


ACCEPTED_ENVIRONMENT = [("I2O_THREADS", "1"), ("I2O_THREADS", "4"), ("I2O_JAX_CACHE", "0"),
                        ("I2O_JAX_CACHE", "1"), ("I2O_JAX_CACHE", "true"),
                        ("I2O_JAX_CACHE", "False"), ("I2O_PROGRESS", "0"),
                        ("I2O_PROGRESS_INTERVAL", "0"), ("I2O_PROGRESS_INTERVAL", "0.5"),
                        ("I2O_HEARTBEAT", "60"), ("I2O_NUMERICS", "native"),
                        ("I2O_NUMERICS", "Portable"), ("I2O_FILL_UNINITIALIZED", "1"),
                        ("I2O_DATA_DIR", "/data")]


def test_every_bad_environment_variable_is_refused_in_one_line_on_every_path(
        tripwire, no_submission, capsys, monkeypatch, tmp_path):
    """Each bad value through every entry point: the notebook's door (before the chapter's code
    is imported), ``python -m i2o.book run`` (``make fig-*``), ``python -m i2o.sweep``,
    ``python -m i2o.diagnose`` (before its model file runs), ``python -m i2o.results`` and
    ``python -m i2o.probes``: one line naming the variable."""
    marker = tmp_path / "model-ran"
    model = tmp_path / "model.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\ndef build():\n    return None\n")
    commands = {
        "book": lambda: build.main(["run", "affine", "--profile", "smoke"]),
        "sweep": lambda: sweep_command.main(["affine", "--profile", "smoke", "--dry-run"]),
        "diagnose": lambda: diagnose_cli.main(["--model", f"{model}:build", "--data",
                                               str(tmp_path / "none.pt"), "--no-progress"]),
        "results": lambda: provenance_main.main(["deps", "affine"]),
        "probes": lambda: probes.main(["torch_sqrt"]),
    }
    failures = []
    cases = environment_cases()
    for name, value in cases:
        expected = f"environment variable {name} must be"
        with monkeypatch.context() as patch:
            patch.setenv(name, value)
            try:
                door.enter("affine", "smoke")
                failures.append(f"door {name}={value!r}: accepted")
            except profiles.ParameterError as refusal:
                if expected not in str(refusal) or "\n" in str(refusal):
                    failures.append(f"door {name}={value!r}: {refusal}")
            for path, command in commands.items():
                code = command()
                error = capsys.readouterr().err
                if code != 2 or expected not in error or not _one_line(error):
                    failures.append(f"{path} {name}={value!r}: exit {code}, {error[:300]!r}")
    for name, value in ACCEPTED_ENVIRONMENT:
        assert inputs.environment_value(name, env={name: value}) is not None, (name, value)
    assert not marker.exists(), "the model file ran although the environment is bad"
    assert not failures, "\n".join(failures)
    with capsys.disabled():
        print(f"\n[fuzz] environment: {len(cases)} bad values over {len(inputs.ENVIRONMENT)} "
              "variables, each refused in one line (door, book, sweep, diagnose, results, "
              "probes); "
              f"{len(ACCEPTED_ENVIRONMENT)} good ones accepted")


# -- the options of python -m i2o.diagnose -----------------------------------------------------

DIAGNOSE_OPTIONS = [
    (["--fit", "nan"], "--fit"), (["--fit", "90"], "0.9 for 90 %"), (["--fit", "inf"], "--fit"),
    (["--fit", "0"], "--fit"), (["--fit", "-0.1"], "--fit"), (["--fit", ""], "--fit"),
    (["--fit", "yes"], "--fit"), (["--fit", "1.5", "--metric", "error"], "--fit"),
    (["--fit", "nan", "--metric", "loss"], "--fit"),
    (["--train-iters", "0"], "--train-iters"), (["--train-iters", "-1"], "--train-iters"),
    (["--train-iters", "1001"], "--train-iters"), (["--train-iters", "1e3"], "--train-iters"),
    (["--train-iters", "18.0"], "--train-iters"), (["--train-iters", "018"], "--train-iters"),
    (["--train-iters", "abc"], "--train-iters"), (["--train-iters", "100000"], "≤ 1000"),
    (["--grid", "1:100000"], "--grid"), (["--grid", "0:5"], "--grid"),
    (["--grid", "a:b"], "--grid"), (["--grid", "1:2:0"], "--grid"),
    (["--grid", "1:2:3:4"], "--grid"), (["--grid", "5:1"], "--grid"),
    (["--grid", "1,,2"], "--grid"),
    (["--grid", "1:1001"], "--grid"), (["--grid", "01:5"], "--grid"),
    (["--margin", "nan"], "--margin"), (["--margin", "0"], "--margin"),
    (["--margin", "-1"], "--margin"), (["--margin", "5"], "--margin"),
    (["--margin", "inf", "--metric", "loss"], "--margin"),
    (["--level", "90"], "--level"), (["--level", "1"], "--level"), (["--level", "0.4"], "--level"),
    (["--level", "nan"], "--level"),
    (["--batch-size", "0"], "--batch-size"), (["--batch-size", "-5"], "--batch-size"),
    (["--batch-size", "2.5"], "--batch-size"),
    (["--limit", "0"], "--limit"), (["--limit", "-1"], "--limit"), (["--limit", "1.5"], "--limit"),
    (["--limit", "nan"], "--limit"),
    (["--threads", "0"], "--threads"), (["--threads", "-1"], "--threads"),
    (["--threads", "two"], "--threads"), (["--threads", "2000"], "--threads"),
    (["--metric", "f1"], "--metric"), (["--higher-is-better"], "custom metric only"),
    (["--out", ""], "--out"),
]


def test_every_bad_diagnose_option_is_refused_in_one_line_before_the_model_runs(
        capsys, tmp_path):
    """``python -m i2o.diagnose`` with each bad option: exit 2, one line naming the option, the
    model file never run (its import would leave a marker), nothing computed; ``--limit 0`` is
    the option's fault, not the data's. Then ``--out`` a file, or under one."""
    marker = tmp_path / "model-ran"
    model = tmp_path / "model.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\ndef build():\n    return None\n")
    (tmp_path / "file").write_text("")
    cases = [*DIAGNOSE_OPTIONS, (["--out", str(tmp_path / "file")], "is a file"),
             (["--out", str(tmp_path / "file" / "sub")], "a file")]
    failures = []
    for extra, expected in cases:
        argv = ["--model", f"{model}:build", "--data", str(tmp_path / "none.pt"),
                "--out", str(tmp_path / "out"), "--no-progress", *extra]
        code = diagnose_cli.main(argv)
        error = capsys.readouterr().err
        if code != 2 or expected not in error or not _one_line(error) \
                or "data is empty" in error:
            failures.append(f"{extra}: exit {code}, {error[:300]!r}")
    assert not marker.exists(), "the model file ran although an option is bad"
    assert not (tmp_path / "out").exists()
    assert not failures, "\n".join(failures)
    good = diagnose_cli.read_options(diagnose_cli.parser().parse_args(
        ["--model", "m.py:f", "--data", "d.pt", "--fit", "0.9", "--train-iters", "18",
         "--grid", "1:54", "--margin", "1e-2", "--level", "0.95", "--limit", "100",
         "--threads", "2", "--out", str(tmp_path / "new" / "folder")]))
    assert (good["fit"], good["train_iters"], good["grid"][-1], good["margin"], good["level"],
            good["limit"], good["threads"]) == (0.9, 18, 54, 0.01, 0.95, 100, 2)
    with capsys.disabled():
        print(f"\n[fuzz] diagnose: {len(cases)} bad options, each refused in one line before "
              "the model file ran")
