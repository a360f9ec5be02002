"""The benchmarks' knobs (``benchmarks/knobs.py``): unset or blank gives the default, a value is
read as its type, and a bad value is refused naming the variable and what was expected."""

from __future__ import annotations

import knobs
import pytest

NAME = "I2O_BENCH_TEST_KNOB"


def test_unset_and_blank_give_the_default(monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    assert knobs.integer(NAME, 100) == 100 and knobs.optional_integer(NAME) is None
    assert knobs.text(NAME, "quick") == "quick" and knobs.integers(NAME) == []
    assert knobs.items(NAME, "ift,unrolled") == ["ift", "unrolled"]
    monkeypatch.setenv(NAME, "  ")
    assert knobs.integer(NAME, 100) == 100 and knobs.optional_integer(NAME) is None


def test_values_are_read_as_their_type(monkeypatch):
    monkeypatch.setenv(NAME, " 32 ")
    assert knobs.integer(NAME, 100) == 32 and knobs.optional_integer(NAME) == 32
    monkeypatch.setenv(NAME, "1, 2,,36")
    assert knobs.integers(NAME) == [1, 2, 36] and knobs.items(NAME, "") == ["1", "2", "36"]
    monkeypatch.setenv(NAME, "")
    assert knobs.items(NAME, "ift,unrolled") == []  # set but empty: none (e.g. no training arm)


@pytest.mark.parametrize("value", ["x", "1.5", "0"])
def test_a_bad_value_names_the_variable_and_the_type(monkeypatch, value):
    monkeypatch.setenv(NAME, value)
    for read in (lambda: knobs.integer(NAME, 1), lambda: knobs.optional_integer(NAME),
                 lambda: knobs.integers(NAME)):
        with pytest.raises(knobs.KnobError, match=f"{NAME}='{value}': expected an integer ≥ 1"):
            read()
