"""Predicates and gates of i2o.verdicts.gates: for each, a doctored result that holds and one that
fails."""

from __future__ import annotations

import numpy as np
import pytest

from i2o.verdicts import claims, gates, intervals, margins, ranks
from i2o.verdicts.decision import Decision, Facts, Gate, Needs, Over


def pair(decision: Decision) -> tuple[bool | None, str]:
    """A decision's verdict and reason (its facts aside)."""
    return decision.holds, decision.reason


def ci(lo: float, hi: float, n: int = 5) -> intervals.Interval:
    return intervals.Interval((lo + hi) / 2, lo, hi, n, "seeds")


def test_interval_is_students_t():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    got = intervals.interval(values, level=0.90)
    half = 2.1318 * np.std(values, ddof=1) / np.sqrt(5)  # t_{0.95, 4}
    assert got.mean == pytest.approx(3.0)
    assert got.hi - got.mean == pytest.approx(half, rel=1e-3)
    assert got.n == 5 and got.over == "seeds"


def test_difference_is_welch_and_shrinks_with_seeds():
    rng = np.random.default_rng(0)
    few = intervals.difference(rng.normal(0, 1, 3), rng.normal(0, 1, 3))
    many = intervals.difference(rng.normal(0, 1, 300), rng.normal(0, 1, 300))
    assert (many.hi - many.lo) < (few.hi - few.lo)
    same = intervals.difference([1.0, 1.0], [0.5, 0.5])
    assert same.lo == same.hi == pytest.approx(0.5)


def test_interval_refuses_too_few_or_nonfinite():
    with pytest.raises(ValueError, match="at least 2"):
        intervals.interval([1.0])
    with pytest.raises(ValueError, match="non-finite"):
        intervals.interval([1.0, float("nan")])


@pytest.mark.parametrize("predicate, holding, failing, straddling", [
    (lambda c: margins.equivalent(c, 1.0), ci(-0.5, 0.5), ci(1.2, 3.0), ci(0.5, 1.5)),
    (lambda c: margins.above(c, 1.0), ci(1.1, 2.0), ci(-3.0, 0.9), ci(0.5, 1.5)),
    (lambda c: margins.not_below(c, 1.0), ci(-0.9, 3.0), ci(-2.0, -1.1), ci(-1.5, 0.5)),
    (margins.positive, ci(0.1, 2.0), ci(-2.0, 0.0), ci(-0.1, 0.1)),
    (margins.negative, ci(-2.0, -0.1), ci(0.0, 2.0), ci(-0.1, 0.1)),
])
def test_predicates_hold_fail_and_refuse(predicate, holding, failing, straddling):
    assert predicate(holding).holds is True
    assert predicate(failing).holds is False
    straddled = predicate(straddling)
    assert straddled.holds is None and "too little power" in straddled.reason


def test_equivalence_fails_on_either_side():
    assert margins.equivalent(ci(-3.0, -1.5), 1.0).holds is False


def test_margin_must_be_positive():
    with pytest.raises(ValueError, match="margin"):
        margins.above(ci(0, 1), 0.0)


def test_fit_gate_opens_and_closes():
    opened = gates.fit_gate({"IFT": [0.95, 0.99], "unrolled": [1.0]}, 0.9)
    assert opened.holds is True and "≥ 90%" in opened.reason
    closed = gates.fit_gate({"IFT": [0.41, 0.99], "unrolled": [1.0]}, 0.9)
    assert closed.holds is None and closed.facts.closed_by is Gate.FIT
    assert all(text in closed.reason for text in ("does not fit its training set", "41.0", "IFT"))
    lower = gates.fit_gate({"lm": [1.2]}, 1.5, "training loss", higher_is_better=False,
                           unit="", scale=1.0)
    assert lower.holds is True
    assert gates.fit_gate({"lm": [1.7]}, 1.5, "training loss", higher_is_better=False,
                          unit="", scale=1.0).holds is None
    assert gates.fit_gate({"IFT": [float("nan")]}, 0.9).holds is None


def test_health_gate_and_decide():
    assert gates.health_gate({"IFT": ["", None]}).holds is True
    closed = gates.health_gate({"IFT": ["", "loss became non-finite at step 3"]})
    assert closed.holds is None and "non-finite" in closed.reason
    # a closed gate makes even a predicate that holds undecided, with the gate's reason and facts
    assert gates.gated([closed], Decision(True, "CI below +1"), quote=True) == closed
    opened = gates.combine(Decision(True, "fit"), Decision(True, "healthy"))
    assert gates.gated([opened], Decision(False, "CI above +1"), quote=True).holds is False
    assert gates.combine(Decision(True, "fit"), closed) == closed


def test_claims_keep_old_signature_and_store_check_and_margin(tmp_path, monkeypatch):
    monkeypatch.setattr(claims, "claims_dir", lambda: tmp_path)
    table = claims.Claims("figure", "smoke")
    table.add("old style", True, "1.0")
    table.add("old style, undecided", None, "n/a", "paper")
    table.decide("gated", gates.undecided("model does not fit its training set", Gate.FIT),
                 "41 %", margin="±1 point")
    rows = [r.__dict__ for r in table.rows]
    assert rows[0]["check"] == "" and rows[2]["margin"] == "±1 point"
    assert "does not fit" in table.to_text() and "Margin" in table.to_html()
    table.write()
    written = claims.read_all()["figure"]
    assert written[2]["check"] == "model does not fit its training set"
    assert written[2]["facts"]["closed_by"] == "fit" and written[0]["facts"]["closed_by"] == ""


def test_an_undecided_interval_says_how_many_values_would_decide_it():
    ci = intervals.Interval(mean=-0.7, lo=-1.5, hi=0.1, n=10, over="seeds")
    found = margins.not_below(ci, 1.0)
    assert found.holds is None and found.facts.needs == Needs(72, Over.SEEDS)
    # half-width 0.8, distance to the boundary −1.0 is 0.3: 10 × (0.8 / 0.3)² = 71.1 → 72
    assert "about 72 seeds (now 10) would decide it" in found.reason
    on_boundary = intervals.Interval(mean=0.0, lo=-1.0, hi=1.0, n=5, over="examples")
    assert "no number of examples would decide it" in margins.positive(on_boundary).reason


def test_a_decided_interval_carries_no_power_note():
    ci = intervals.Interval(mean=2.0, lo=1.5, hi=2.5, n=10, over="seeds")
    assert margins.positive(ci) == Decision(True, "CI above 0")


def test_powered_opens_with_headroom_and_names_the_seeds_it_needs():
    wide = intervals.Interval(mean=0.0, lo=-1.0, hi=1.0, n=10, over="seeds")
    found = margins.powered(wide, margin=1.0)
    assert found.holds is None and "about 40 seeds would give it" in found.reason  # 10 × (1/0.5)²
    assert found.facts == Facts(closed_by=Gate.POWER, needs=Needs(40, Over.SEEDS))
    narrow = intervals.Interval(mean=0.9, lo=0.5, hi=1.3, n=10, over="seeds")
    assert margins.powered(narrow, margin=1.0).holds is True
    with pytest.raises(ValueError):
        margins.powered(narrow, margin=0.0)


def test_enough_opens_at_the_count_needed_and_stays_closed_below():
    assert gates.enough(2, 2, "2 seeds", "1 seed: needs ≥ 2") == Decision(True, "2 seeds")
    assert gates.enough(5, 2, "5 seeds", "") == Decision(True, "5 seeds")
    assert gates.enough(1, 2, "1 seed", "1 seed: needs ≥ 2") == Decision(
        None, "1 seed: needs ≥ 2", Facts(closed_by=Gate.COUNT))
    assert gates.enough(0, 2, "", "none").holds is None


def test_condition_opens_on_the_callers_criterion_and_closes_with_its_reason():
    assert gates.condition(3 >= 2, "trained too little") == Decision(True, "")
    assert gates.condition(np.bool_(True), "x", "enough steps") == Decision(True, "enough steps")
    assert pair(gates.condition(1 >= 2, "trained too little")) == (None, "trained too little")
    assert gates.condition(np.bool_(False), "no reference").holds is None


def test_gated_returns_the_first_closed_gate_or_the_predicate_as_it_is():
    calls = []

    def predicate():
        calls.append(1)
        return Decision(True, "measured")

    assert pair(gates.gated([Decision(True, "open"), Decision(True, "")], predicate)) == (
        True, "measured")
    assert gates.gated([], lambda: Decision(False, "CI at or below 0")) == Decision(
        False, "CI at or below 0")
    calls.clear()

    def checks():
        yield gates.undecided("too few seeds", Gate.COUNT)
        raise AssertionError("a gate after a closed one is not evaluated")

    assert pair(gates.gated(checks(), predicate)) == (None, "too few seeds") and not calls


def test_symmetric_gate_decides_when_both_qualify_and_fails_a_subject_that_cannot():
    calls = []

    def predicate():
        calls.append(1)
        return Decision(True, "CI above +0.04")

    texts = {"fails": "not trainable", "closed": "reference does not fit", "neither": "neither"}
    assert gates.symmetric_gate(True, True, predicate, **texts) == Decision(True, "CI above +0.04")
    below = Decision(False, "CI below +0.04")
    assert gates.symmetric_gate(True, True, lambda: below, **texts) == below
    calls.clear()
    # the subject cannot qualify while the reference does: the claim fails, undecided otherwise
    assert gates.symmetric_gate(False, True, predicate, **texts) == Decision(False, "not trainable")
    assert pair(gates.symmetric_gate(True, False, predicate, **texts)) == (
        None, "reference does not fit")
    assert pair(gates.symmetric_gate(False, False, predicate, **texts)) == (None, "neither")
    assert not calls  # the predicate runs only when both qualify


def test_all_of_holds_when_every_part_holds_and_fails_when_one_fails():
    a, b, c = Decision(True, "a"), Decision(False, "b"), Decision(None, "c")
    assert gates.all_of([a, Decision(True, "b")]) == Decision(True, "a; b")
    assert gates.all_of([a, b, c]) == Decision(False, "a; b; c")
    assert gates.all_of([a, Decision(None, "b")]) == Decision(None, "a; b")
    assert gates.all_of(iter([a, Decision(None, "b")]), ", ") == Decision(None, "a, b")
    assert gates.all_of([]) == Decision(True, "")


def test_rank_association_holds_fails_and_stays_undecided_with_its_exact_p():
    x = np.arange(6.0)
    found = ranks.rank_association(x, -x, direction=-1)
    assert found.holds is True and "p = 0.00139" in found.reason  # 1/6! = 0.00139
    assert ranks.rank_association(x, x, direction=-1).holds is False
    assert ranks.rank_association(x, x, direction=+1).holds is True
    assert ranks.rank_association(x, [2, 5, 0, 3, 1, 4], direction=-1).holds is None
    few = ranks.rank_association([1, 2, 3], [3, 2, 1], direction=-1)
    assert few.holds is None and few.facts.closed_by == "count"
    assert ranks.rank_association([1, 2, np.nan], [3, 2, 1], -1).facts.closed_by == "count"
    with pytest.raises(ValueError, match="direction"):
        ranks.rank_association(x, x, direction=0)



def test_a_decision_is_a_value_whose_facts_take_part_in_equality():
    plain = Decision(None, "too few seeds")
    counted = gates.undecided("too few seeds", Gate.COUNT)
    assert plain != counted and counted == Decision(None, "too few seeds",
                                                    Facts(closed_by=Gate.COUNT))
    assert Decision(np.bool_(True), "x").holds is True  # a numpy verdict becomes a bool
    with pytest.raises(AttributeError):
        counted.holds = True  # type: ignore[misc]
    reworded = counted.with_reason("needs more seeds")
    assert reworded.facts == counted.facts and reworded.reason == "needs more seeds"


def test_the_vocabularies_refuse_a_word_outside_them():
    assert intervals.Interval(1.0, 0.0, 2.0, 3, "seed pairs").over is Over.SEED_PAIRS
    assert Needs(4, "examples").of is Over.EXAMPLES and f"{Over.HELD_OUT_TASKS}" == "held-out tasks"
    with pytest.raises(ValueError, match="seeds"):
        intervals.Interval(1.0, 0.0, 2.0, 3, "sedes")
    with pytest.raises(ValueError):
        Facts(closed_by="powre")
    # what raises each count: seeds for models and pairs, the chapter's evaluation set for examples
    assert {Over.SEEDS.raises, Over.SEED_PAIRS.raises, Over.MODELS.raises} == {"seeds"}
    assert Over.HELD_OUT_TASKS.raises == "n_test_tasks" and Over.EVALUATION_BATCHES.raises is None
