"""Predicates and gates of i2o.gates: for each, a doctored result that holds and one that fails."""

from __future__ import annotations

import numpy as np
import pytest

from i2o import claims, gates


def ci(lo: float, hi: float, n: int = 5) -> gates.Interval:
    return gates.Interval((lo + hi) / 2, lo, hi, n, "seeds")


def test_interval_is_students_t():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    got = gates.interval(values, level=0.90)
    half = 2.1318 * np.std(values, ddof=1) / np.sqrt(5)  # t_{0.95, 4}
    assert got.mean == pytest.approx(3.0)
    assert got.hi - got.mean == pytest.approx(half, rel=1e-3)
    assert got.n == 5 and got.over == "seeds"


def test_difference_is_welch_and_shrinks_with_seeds():
    rng = np.random.default_rng(0)
    few = gates.difference(rng.normal(0, 1, 3), rng.normal(0, 1, 3))
    many = gates.difference(rng.normal(0, 1, 300), rng.normal(0, 1, 300))
    assert (many.hi - many.lo) < (few.hi - few.lo)
    same = gates.difference([1.0, 1.0], [0.5, 0.5])
    assert same.lo == same.hi == pytest.approx(0.5)


def test_interval_refuses_too_few_or_nonfinite():
    with pytest.raises(ValueError, match="at least 2"):
        gates.interval([1.0])
    with pytest.raises(ValueError, match="non-finite"):
        gates.interval([1.0, float("nan")])


@pytest.mark.parametrize("predicate, holding, failing, straddling", [
    (lambda c: gates.equivalent(c, 1.0), ci(-0.5, 0.5), ci(1.2, 3.0), ci(0.5, 1.5)),
    (lambda c: gates.above(c, 1.0), ci(1.1, 2.0), ci(-3.0, 0.9), ci(0.5, 1.5)),
    (lambda c: gates.not_above(c, 1.0), ci(-3.0, 0.9), ci(1.1, 2.0), ci(0.5, 1.5)),
    (lambda c: gates.not_below(c, 1.0), ci(-0.9, 3.0), ci(-2.0, -1.1), ci(-1.5, 0.5)),
    (gates.positive, ci(0.1, 2.0), ci(-2.0, 0.0), ci(-0.1, 0.1)),
    (gates.negative, ci(-2.0, -0.1), ci(0.0, 2.0), ci(-0.1, 0.1)),
])
def test_predicates_hold_fail_and_refuse(predicate, holding, failing, straddling):
    assert predicate(holding)[0] is True
    assert predicate(failing)[0] is False
    verdict, reason = predicate(straddling)
    assert verdict is None and "too little power" in reason


def test_equivalence_fails_on_either_side():
    assert gates.equivalent(ci(-3.0, -1.5), 1.0)[0] is False


def test_margin_must_be_positive():
    with pytest.raises(ValueError, match="margin"):
        gates.not_above(ci(0, 1), 0.0)


def test_fit_gate_opens_and_closes():
    opened, reason = gates.fit_gate({"IFT": [0.95, 0.99], "unrolled": [1.0]}, 0.9)
    assert opened is True and "≥ 90%" in reason
    closed, reason = gates.fit_gate({"IFT": [0.41, 0.99], "unrolled": [1.0]}, 0.9)
    assert closed is None
    assert "does not fit its training set" in reason and "41.0" in reason and "IFT" in reason
    lower, _ = gates.fit_gate({"lm": [1.2]}, 1.5, "training loss", higher_is_better=False,
                              unit="", scale=1.0)
    assert lower is True
    assert gates.fit_gate({"lm": [1.7]}, 1.5, "training loss", higher_is_better=False,
                          unit="", scale=1.0)[0] is None
    assert gates.fit_gate({"IFT": [float("nan")]}, 0.9)[0] is None


def test_health_gate_and_decide():
    assert gates.health_gate({"IFT": ["", None]})[0] is True
    closed = gates.health_gate({"IFT": ["", "loss became non-finite at step 3"]})
    assert closed[0] is None and "non-finite" in closed[1]
    # a closed gate makes even a predicate that holds undecided, with the gate's reason
    assert gates.gated([closed], (True, "CI below +1"), quote=True) == closed
    opened = gates.combine((True, "fit"), (True, "healthy"))
    assert gates.gated([opened], (False, "CI above +1"), quote=True)[0] is False
    assert gates.combine((True, "fit"), closed) == closed


def test_claims_keep_old_signature_and_store_check_and_margin(tmp_path, monkeypatch):
    monkeypatch.setattr(claims, "claims_dir", lambda: tmp_path)
    table = claims.Claims("figure", "smoke")
    table.add("old style", True, "1.0")
    table.add("old style, undecided", None, "n/a", "paper")
    table.decide("gated", (None, "model does not fit its training set"), "41 %", margin="±1 point")
    rows = [r.__dict__ for r in table.rows]
    assert rows[0]["check"] == "" and rows[2]["margin"] == "±1 point"
    assert "does not fit" in table.to_text() and "Margin" in table.to_html()
    table.write()
    assert claims.read_all()["figure"][2]["check"] == "model does not fit its training set"


def test_an_undecided_interval_says_how_many_values_would_decide_it():
    ci = gates.Interval(mean=-0.7, lo=-1.5, hi=0.1, n=10, over="seeds")
    verdict, why = gates.not_below(ci, 1.0)
    assert verdict is None
    # half-width 0.8, distance to the boundary −1.0 is 0.3: 10 × (0.8 / 0.3)² = 71.1 → 72
    assert "about 72 seeds (now 10) would decide it" in why
    on_boundary = gates.Interval(mean=0.0, lo=-1.0, hi=1.0, n=5, over="examples")
    assert "no number of examples would decide it" in gates.positive(on_boundary)[1]


def test_a_decided_interval_carries_no_power_note():
    ci = gates.Interval(mean=2.0, lo=1.5, hi=2.5, n=10, over="seeds")
    assert gates.positive(ci) == (True, "CI above 0")


def test_powered_opens_with_headroom_and_names_the_seeds_it_needs():
    wide = gates.Interval(mean=0.0, lo=-1.0, hi=1.0, n=10, over="seeds")
    verdict, why = gates.powered(wide, margin=1.0)
    assert verdict is None and "about 40 seeds would give it" in why  # 10 × (1 / 0.5)²
    narrow = gates.Interval(mean=0.9, lo=0.5, hi=1.3, n=10, over="seeds")
    assert gates.powered(narrow, margin=1.0)[0] is True
    with pytest.raises(ValueError):
        gates.powered(narrow, margin=0.0)


def test_enough_opens_at_the_count_needed_and_stays_closed_below():
    assert gates.enough(2, 2, "2 seeds", "1 seed: needs ≥ 2") == (True, "2 seeds")
    assert gates.enough(5, 2, "5 seeds", "") == (True, "5 seeds")
    assert gates.enough(1, 2, "1 seed", "1 seed: needs ≥ 2") == (None, "1 seed: needs ≥ 2")
    assert gates.enough(0, 2, "", "none")[0] is None


def test_condition_opens_on_the_callers_criterion_and_closes_with_its_reason():
    assert gates.condition(3 >= 2, "trained too little") == (True, "")
    assert gates.condition(np.bool_(True), "x", "enough steps") == (True, "enough steps")
    assert gates.condition(1 >= 2, "trained too little") == (None, "trained too little")
    assert gates.condition(np.bool_(False), "no reference")[0] is None


def test_gated_returns_the_first_closed_gate_or_the_predicate_as_it_is():
    calls = []

    def predicate():
        calls.append(1)
        return True, "measured"

    assert gates.gated([(True, "open"), (True, "")], predicate) == (True, "measured")
    assert gates.gated([], lambda: (False, "CI at or below 0")) == (False, "CI at or below 0")
    calls.clear()

    def checks():
        yield None, "too few seeds"
        raise AssertionError("a gate after a closed one is not evaluated")

    assert gates.gated(checks(), predicate) == (None, "too few seeds") and not calls


def test_symmetric_gate_decides_when_both_qualify_and_fails_a_subject_that_cannot():
    calls = []

    def predicate():
        calls.append(1)
        return True, "CI above +0.04"

    texts = {"fails": "not trainable", "closed": "reference does not fit", "neither": "neither"}
    assert gates.symmetric_gate(True, True, predicate, **texts) == (True, "CI above +0.04")
    assert gates.symmetric_gate(True, True, lambda: (False, "CI below +0.04"), **texts) == (
        False, "CI below +0.04")
    calls.clear()
    # the subject cannot qualify while the reference does: the claim fails, undecided otherwise
    assert gates.symmetric_gate(False, True, predicate, **texts) == (False, "not trainable")
    assert gates.symmetric_gate(True, False, predicate, **texts) == (
        None, "reference does not fit")
    assert gates.symmetric_gate(False, False, predicate, **texts) == (None, "neither")
    assert not calls  # the predicate runs only when both qualify


def test_all_of_holds_when_every_part_holds_and_fails_when_one_fails():
    assert gates.all_of([(True, "a"), (True, "b")]) == (True, "a; b")
    assert gates.all_of([(True, "a"), (False, "b"), (None, "c")]) == (False, "a; b; c")
    assert gates.all_of([(True, "a"), (None, "b")]) == (None, "a; b")
    assert gates.all_of(iter([(True, "a"), (None, "b")]), ", ") == (None, "a, b")
    assert gates.all_of([]) == (True, "")


def test_rank_association_holds_fails_and_stays_undecided_with_its_exact_p():
    x = np.arange(6.0)
    found = gates.rank_association(x, -x, direction=-1)
    assert found.holds is True and "p = 0.00139" in found.reason  # 1/6! = 0.00139
    assert gates.rank_association(x, x, direction=-1).holds is False
    assert gates.rank_association(x, x, direction=+1).holds is True
    assert gates.rank_association(x, [2, 5, 0, 3, 1, 4], direction=-1).holds is None
    few = gates.rank_association([1, 2, 3], [3, 2, 1], direction=-1)
    assert few.holds is None and few.facts.closed_by == "count"
    assert gates.rank_association([1, 2, np.nan], [3, 2, 1], -1).facts.closed_by == "count"
    with pytest.raises(ValueError, match="direction"):
        gates.rank_association(x, x, direction=0)

