"""The five principles of READING.md (:mod:`i2o.verdicts.readings`): each decides where it
should and fails or stays undecided where it should (budget: < 1 s)."""

import pytest

from i2o.verdicts import readings
from i2o.verdicts.intervals import Interval


def ci(lo, hi, n=10):
    return Interval((lo + hi) / 2, lo, hi, n, "seeds")


def test_a_direction_holds_beyond_the_floor_whatever_a_reference_effect_says():
    assert readings.direction(ci(0.02, 0.05), 0.01).holds is True
    assert readings.direction(ci(-0.05, -0.02), 0.01, side=-1).holds is True


def test_a_direction_fails_short_of_the_floor_and_is_open_when_it_straddles():
    assert readings.direction(ci(-0.03, 0.005), 0.01).holds is False
    straddles = readings.direction(ci(0.0, 0.05), 0.01)
    assert straddles.holds is None and straddles.facts.needs is not None
    with pytest.raises(ValueError, match="floor"):
        readings.direction(ci(0, 1), -1.0)


def test_some_direction_holds_on_one_widened_interval_and_fails_when_every_one_is_short():
    assert readings.some_direction([ci(-0.1, 0.0), ci(0.02, 0.04)], [1, 2], 0.01).holds is True
    assert readings.some_direction([ci(-0.1, 0.0), ci(-0.2, 0.005)], [1, 2], 0.01).holds is False
    assert readings.some_direction([ci(-0.1, 0.0), ci(0.0, 0.04)], [1, 2], 0.01).holds is None


def test_no_benefit_holds_when_every_upper_bound_is_below_the_margin():
    assert readings.no_benefit([ci(-0.02, 0.009), ci(-0.1, 0.0)], [6, 7], 0.01).holds is True


def test_no_benefit_fails_on_one_lower_bound_above_the_margin_and_is_open_between():
    assert readings.no_benefit([ci(0.02, 0.03), ci(-0.1, 0.0)], [6, 7], 0.01).holds is False
    open_ = readings.no_benefit([ci(-0.02, 0.02), ci(-0.1, 0.0)], [6, 7], 0.01)
    assert open_.holds is None and "N'=6" in open_.reason


def test_a_power_gate_reads_only_the_intervals_that_straddle_their_bound():
    wide_but_clear = ci(-5.0, -0.5)
    narrow_straddling = ci(0.005, 0.015)
    assert readings.straddling([wide_but_clear, narrow_straddling], (0.01,)) == [
        narrow_straddling]
    assert readings.straddling([wide_but_clear], (0.01, -0.01)) == []


def test_a_test_row_needs_models_that_beat_the_trivial_baseline():
    nll = ci(2.2, 2.4)  # nats/char over seeds; a bigram model of the training text: 2.69
    assert readings.generalises(nll, 2.69, higher_is_better=False).holds is True
    memoriser = ci(3.30, 3.40)
    found = readings.generalises(memoriser, 2.69, higher_is_better=False)
    assert found.holds is None and found.facts.closed_by == "regime"
    assert "does not generalise" in found.reason
