"""The one reader of every value a user gives (:mod:`i2o.compute.inputs`): each form of its grammar
that is accepted (and to what Python value), each that is refused (in one line naming what was
given, the value and what is allowed), the manifest's own checks, the seeds of every chapter, and
the values a YAML reader accepted, which must read the same (a cache key holds them). Budget: ~2
s."""

from __future__ import annotations

import math
import os

import pytest
import yaml

from i2o.book import build
from i2o.compute import inputs, profiles
from i2o.compute.inputs import MAX_ITEMS, ParameterError, Spec, read

INT = Spec("int", 0, 100)
FLOAT = Spec("float", 0.0, 10.0)
WHAT = "parameter 'x' of figure 'toy'"


@pytest.mark.parametrize(("text", "spec", "value"), [
    ("0", INT, 0), ("-0", Spec("int", -5, 5), 0), ("+5", INT, 5), ("42", INT, 42),
    (" 7 ", INT, 7), ("1_0", INT, 10), ("50_000", Spec("int", 1, 100_000), 50_000),
    ("1e-2", FLOAT, 0.01), ("1E-2", FLOAT, 0.01), ("2.5e-06", FLOAT, 2.5e-6), (".5", FLOAT, 0.5),
    ("5.", FLOAT, 5.0), ("1", FLOAT, 1.0), ("0.25", FLOAT, 0.25), ("1e+1", FLOAT, 10.0),
    ("true", Spec("bool"), True), ("false", Spec("bool"), False), ("True", Spec("bool"), True),
    ("False", Spec("bool"), False),
    ("tiny", Spec("str", choices=("tiny", "micro")), "tiny"),
    ("/a folder/with spaces", Spec("str"), "/a folder/with spaces"),
    ("", Spec("str", empty=True), ""),
    ("[0, 1]", Spec("int_list", 0, 9), [0, 1]), ("[0,1]", Spec("int_list", 0, 9), [0, 1]),
    (" [ 3 , 4 ] ", Spec("int_list", 0, 9), [3, 4]), ("[]", Spec("int_list", 0, 9, empty=True), []),
    ("[1e-2, 3]", Spec("float_list", 0, 9), [0.01, 3.0]),
    ("[0, 0]", Spec("int_list", 0, 9), [0, 0]),  # a repeat only where the spec is distinct
    ("0", Spec("flag"), False), ("1", Spec("flag"), True), ("TRUE", Spec("flag"), True),
])
def test_every_accepted_form_reads_to_its_value(text, spec, value):
    got = read(text, spec, WHAT)
    assert got == value and type(got) is type(value)
    if isinstance(got, list):
        assert all(type(g) is type(v) for g, v in zip(got, value, strict=True))


@pytest.mark.parametrize(("text", "spec", "why"), [
    ("010", INT, "a leading zero is refused"), ("007", INT, "a leading zero"),
    ("0x10", INT, "decimal digits only"), ("0o17", INT, "decimal digits only"),
    ("0b11", INT, "decimal digits only"), ("1:30", INT, "':' is not read as minutes:seconds"),
    ("3.0", INT, "without a point or an exponent"), ("1e3", INT, "without a point"),
    ("ten", INT, ""), ("", INT, ""), ("null", INT, ""), ("~", INT, ""), ("true", INT, ""),
    ("1__0", INT, ""), ("_1", INT, ""), ("101", INT, ""), ("-1", INT, ""),
    ("nan", FLOAT, "not a finite number"), ("NaN", FLOAT, "not a finite number"),
    (".inf", FLOAT, "not a finite number"), ("inf", FLOAT, "not a finite number"),
    ("-inf", FLOAT, "not a finite number"), ("1e999", FLOAT, "not a finite number"),
    ("1:30", FLOAT, "minutes:seconds"), ("0x1p3", FLOAT, "decimal digits only"),
    ("00.5", FLOAT, "a leading zero"), (".", FLOAT, ""), ("1e", FLOAT, ""), ("11", FLOAT, ""),
    ("yes", Spec("bool"), ""), ("no", Spec("bool"), ""), ("on", Spec("bool"), ""),
    ("1", Spec("bool"), ""), ("TRUE", Spec("bool"), ""),
    ("Tiny", Spec("str", choices=("tiny",)), ""),
    ("", Spec("str"), "empty"),
    ("[0, 1", Spec("int_list", 0, 9), "a bracket is not closed"),
    ("0, 1", Spec("int_list", 0, 9), "a list is written in brackets"),
    ("5", Spec("int_list", 0, 9), "a list is written in brackets"),
    ("[[1]]", Spec("int_list", 0, 9), "not of lists"),
    ("[1,,2]", Spec("int_list", 0, 9), "an empty entry"),
    ("[1,]", Spec("int_list", 0, 9), "an empty entry"),
    ("[]", Spec("int_list", 0, 9), "empty"),
    ("[01]", Spec("int_list", 0, 9), "entry '01': a leading zero"),
    ("[nan]", Spec("float_list", 0, 9), "entry 'nan': not a finite number"),
    ("[1, 10]", Spec("int_list", 0, 9), "entry 10 is out of range"),
    ("[3, 3]", Spec("int_list", 0, 9, distinct=True), "3 is repeated"),
    ("maybe", Spec("flag"), ""), ("off", Spec("flag"), ""), ("", Spec("flag"), ""),
])
def test_every_refused_form_is_one_line_naming_the_value_and_what_is_allowed(text, spec, why):
    """The text is quoted when the grammar refuses it, else what it reads to (out of range)."""
    with pytest.raises(ParameterError) as error:
        read(text, spec, WHAT)
    message = str(error.value)
    quoted = READ_BUT_OUT_OF_RANGE.get(text, repr(text))
    assert message.startswith(f"{WHAT} must be {inputs.describe(spec)}; got {quoted}")
    assert why in message and "\n" not in message


READ_BUT_OUT_OF_RANGE = {"101": "101", "-1": "-1", "11": "11.0", "[]": "[]",
                         "[1, 10]": "[1, 10]", "[3, 3]": "[3, 3]"}


@pytest.mark.parametrize(("value", "spec"), [
    (True, INT), (3.0, INT), (2.5, INT), ("3.0", INT), (float("nan"), FLOAT),
    (float("inf"), FLOAT), (10 ** 400, FLOAT), (None, INT), ([1], INT), ("x", FLOAT),
    (1, Spec("bool")), (7, Spec("str")), (5, Spec("int_list", 0, 9)),
    ([True], Spec("int_list", 0, 9)), ([[1]], Spec("int_list", 0, 9)),
    ([math.nan], Spec("float_list", 0, 9)), ({"a": 1}, Spec("int_list", 0, 9)),
])
def test_python_values_of_the_wrong_kind_are_refused(value, spec):
    with pytest.raises(ParameterError, match=r"^parameter 'x' of figure 'toy' must be"):
        read(value, spec, WHAT)


def test_python_values_are_normalised_as_before():
    assert read(1, FLOAT, WHAT) == 1.0 and type(read(1, FLOAT, WHAT)) is float
    assert read((1, 2), Spec("int_list", 0, 9), WHAT) == [1, 2]
    assert read([1, 2.5], Spec("float_list", 0, 9), WHAT) == [1.0, 2.5]
    assert read("[0, 1]", Spec("int_list", 0, 9), WHAT) == [0, 1]  # papermill's -p gives text


def test_ranges_open_bounds_and_fractions_are_stated():
    fit = Spec("float", 0.0, 1.0, min_open=True, fraction=True)
    assert inputs.describe(fit) == "a number > 0.0 and ≤ 1.0 (a fraction: 0.9 for 90 %)"
    assert read("1", fit, "--fit") == 1.0
    for bad in ("0", "90", "1.0001"):
        with pytest.raises(ParameterError, match=r"0\.9 for 90 %"):
            read(bad, fit, "--fit")
    level = Spec("float", 0.5, 1.0, max_open=True)
    assert read("0.5", level, "--level") == 0.5
    with pytest.raises(ParameterError, match="must be a number ≥ 0.5 and < 1.0"):
        read("1", level, "--level")


def test_lists_are_capped_and_the_cap_is_stated():
    spec = Spec("int_list", 0, 5000)
    assert len(read(list(range(MAX_ITEMS)), spec, WHAT)) == MAX_ITEMS
    for given in (list(range(MAX_ITEMS + 1)), "[" + ",".join(map(str, range(20_000))) + "]"):
        with pytest.raises(ParameterError) as error:
            read(given, spec, WHAT)
        message = str(error.value)
        assert f"at most {MAX_ITEMS:,} entries" in message and " entries" in message
        assert len(message) < 400 and "…" in message  # the value is quoted by its start


def test_help_is_appended_and_a_long_value_cut():
    with pytest.raises(ParameterError, match=r"; got -1 \(how many\)$"):
        read("-1", Spec("int", 0, 9, help="how many"), WHAT)
    assert inputs.shown("x" * 500).endswith("…") and len(inputs.shown("x" * 500)) == 101


# -- the manifest ------------------------------------------------------------------------------

def test_every_list_of_seeds_of_every_chapter_refuses_a_repeated_seed():
    """Stability once counted one model twice with ``seeds: [0, 0]``; every list named
    ``…seeds`` is distinct unless its schema says why not (``mechanism_seeds`` pairs a seed with
    a size: the chapter refuses a repeated pair)."""
    checked = []
    for figure in profiles.figures():
        for name, schema in profiles.entry(figure)["parameters"].items():
            if schema["type"] != "int_list" or not name.endswith("seeds"):
                continue
            if schema.get("distinct") is False:
                assert name == "mechanism_seeds", (figure, name)
                continue
            seed = profiles.entry(figure)["profiles"]["smoke"][name][0]
            with pytest.raises(ParameterError, match=f"{seed} is repeated"):
                profiles.resolve(figure, "smoke", **{name: [seed, seed]})
            checked.append(f"{figure}.{name}")
    assert {"stability.seeds", "deq_gaps.seeds", "meta.fig4_seeds", "separation.seeds",
            "separation.steep_seeds", "separation.gotu_seeds"} <= set(checked)


def test_the_issues_case_through_the_command_line(capsys):
    assert build.main(["run", "stability", "--profile", "smoke", "-p", "seeds", "[0, 0]"]) == 2
    error = capsys.readouterr().err
    assert "parameter 'seeds' of figure 'stability'" in error and "0 is repeated" in error


def test_values_yaml_accepted_read_the_same():
    """No cache key moves: every text a YAML reader turned into an accepted value reads to the
    same Python value, of the same type."""
    cases = {("affine", "n_seeds"): ["50", "+5", "1_000"],
             ("affine", "eta_scale"): ["0.5", "1.0e-3", "1", ".5", "1.0e+0"],
             ("stability", "seeds"): ["[0, 1]", "[0,1,2]", "[ 3 ]"],
             ("stability", "tol"): ["1.0e-3", "0"],
             ("meta", "imaml_acceleration"): ["true", "false", "True"],
             ("meta", "noise_regularizations"): ["[1, 2.5]", "[1.0e-2]"],
             ("stability", "model"): ["tiny", "micro", '"micro"', "'tiny'"],
             ("affine", "delta_n_min"): ["-20", "0"]}
    for (figure, name), texts in cases.items():
        schema = profiles.entry(figure)["parameters"][name]
        for text in texts:
            before = profiles.validate_value(figure, name, yaml.safe_load(text), schema)
            after = profiles.read_overrides(figure, [[name, text]])[name]
            assert after == before and type(after) is type(before), (figure, name, text)
            if isinstance(after, list):
                assert [type(a) for a in after] == [type(b) for b in before]


def test_profile_figure_and_a_repeated_name_are_not_overrides():
    with pytest.raises(ParameterError, match=r"^-p profile paper: the profile is not a "
                                             r"parameter: choose it with --profile paper"):
        profiles.read_overrides("stability", [["profile", "paper"]])
    with pytest.raises(ParameterError, match="make fig-meta, make sweep FIG=meta"):
        profiles.read_overrides("stability", [["figure", "meta"]])
    with pytest.raises(ParameterError, match="-p seeds is given twice"):
        profiles.read_overrides("stability", [["seeds", "[0]"], ["seeds", "[1]"]])
    assert profiles.read_overrides("stability", [["sedes", "[0]"]]) == {"sedes": "[0]"}
    with pytest.raises(ParameterError, match="'figure' is not a parameter of figure"):
        profiles.resolve_namespace("stability", {"profile": "smoke", "figure": "meta"})


def test_the_manifest_states_its_keys_and_ranges():
    def entry(schema):
        return {"notebook": "n", "package": "p", "position": 1, "title": "t", "outputs": [],
                "parameters": {"replicate": {"type": "int", "min": 0, "max": 9}, "n": schema},
                "profiles": {p: {"replicate": 0, "n": [1]} for p in profiles.PROFILES}}

    profiles._check_entry("toy", entry({"type": "int_list", "min": 0, "max": 5}),
                          "toy/chapter.yaml")
    with pytest.raises(ValueError, match=r"toy.n has unknown key\(s\) \['distict'\]"):
        profiles._check_entry("toy", entry({"type": "int_list", "min": 0, "max": 5,
                                            "distict": True}), "toy/chapter.yaml")
    for schema in ({"type": "int_list", "max": 5}, {"type": "float_list", "min": 0}):
        with pytest.raises(ValueError, match="toy.n states no range"):
            profiles._check_entry("toy", entry(schema), "toy/chapter.yaml")


# -- the environment ---------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "value"), [
    ("I2O_JAX_CACHE", "maybe"), ("I2O_JAX_CACHE", ""), ("I2O_THREADS", "-1"),
    ("I2O_THREADS", "0"), ("I2O_THREADS", "two"), ("I2O_THREADS", ""), ("I2O_RESULTS_DIR", ""),
    ("I2O_RESULTS_DIR", "  "),
    ("I2O_NUMERICS", ""), ("I2O_PROGRESS", "off"), ("I2O_HEARTBEAT", "nan"),
])
def test_bad_environment_values_are_refused_in_one_line(name, value):
    with pytest.raises(ParameterError) as error:
        inputs.check_environment({name: value})
    message = str(error.value)
    assert message.startswith(f"environment variable {name} must be ")
    assert (f"got {value!r}" in message or f"got {value}" in message) and "\n" not in message


def test_relative_folders_are_made_absolute_where_they_were_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("I2O_RESULTS_DIR", "cache/results")
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path / "data"))
    inputs.check_environment()
    assert os.environ["I2O_RESULTS_DIR"] == str(tmp_path / "cache" / "results")
    assert os.environ["I2O_DATA_DIR"] == str(tmp_path / "data")
    monkeypatch.chdir(tmp_path / "..")  # a kernel started elsewhere reads the same folder
    from i2o.compute import cache_entries

    assert cache_entries.results_dir() == tmp_path / "cache" / "results"
    given = {"I2O_RESULTS_DIR": "relative"}
    inputs.check_environment(given)  # a mapping given is only checked
    assert given == {"I2O_RESULTS_DIR": "relative"}


def test_the_jax_cache_switch_reads_by_the_reader(monkeypatch):
    from i2o.compute import jax_cache

    monkeypatch.setenv("I2O_JAX_CACHE", "false")
    assert jax_cache.jax_compilation_cache() is None
    monkeypatch.setenv("I2O_JAX_CACHE", "maybe")
    with pytest.raises(ParameterError, match="I2O_JAX_CACHE must be 0, 1, true or false"):
        jax_cache.jax_compilation_cache()
    assert inputs.environment_value("I2O_THREADS", 1, env={}) == 1
    assert inputs.environment_value("I2O_NUMERICS", env={"I2O_NUMERICS": " Native"}) == "native"
