"""The gates of training to the regime and of comparisons that can fail (i2o.verdicts.gates): a fit
quorum that opens on the models that fit and names the others, a margin that is a fraction of a
measured reference effect, and a comparison decided only when its margin is above the measurement's
resolution. Each one opens (holds) on one doctored input and closes (fails) on another."""

from __future__ import annotations

import numpy as np
import pytest

from i2o.verdicts import gates, intervals, margins

NAMES = {"IFT": [f"seed {s}" for s in range(5)], "unrolled": [f"seed {s}" for s in range(5)]}


def test_fit_quorum_opens_on_the_models_that_fit_and_names_the_others():
    scores = {"IFT": [0.95, 0.99, 0.869, 0.97, 0.93], "unrolled": [0.91] * 5}
    opened, masks = gates.fit_quorum(scores, 0.9, 4, NAMES)
    assert opened.holds is True and opened.facts.not_fitting == ("IFT seed 2 86.9%",)
    assert masks["IFT"].tolist() == [True, True, False, True, True] and masks["unrolled"].all()
    reason = opened.reason
    assert "IFT 4/5" in reason and "IFT seed 2 86.9%" in reason and "the claims use these" in reason


def test_fit_quorum_closes_with_the_count_when_too_few_fit():
    scores = {"IFT": [0.95, 0.5, 0.869, 0.97, float("nan")], "unrolled": [0.91] * 5}
    closed, masks = gates.fit_quorum(scores, 0.9, 4, NAMES)
    assert closed.holds is None and masks["IFT"].sum() == 2
    reason = closed.reason
    assert "too few models fit" in reason and "IFT 2/5" in reason and "needs 4" in reason
    assert "seed 4 nan%" in reason  # a non-finite score never fits
    lower = {"lm": [1.2, 1.4, 1.6]}
    opened, masks = gates.fit_quorum(lower, 1.5, 2, criterion="training NLL",
                                     higher_is_better=False, unit="", scale=1.0)
    assert opened.holds is True and masks["lm"].tolist() == [True, True, False]
    assert gates.fit_quorum(lower, 1.5, 3, higher_is_better=False)[0].holds is None


def test_fit_quorum_refuses_a_bad_quorum_or_names():
    with pytest.raises(ValueError, match="quorum"):
        gates.fit_quorum({"a": [1.0]}, 0.9, 0)
    with pytest.raises(ValueError, match="names"):
        gates.fit_quorum({"a": [1.0, 1.0]}, 0.9, 1, {"a": ["one"]})


def test_relative_margin_is_a_fraction_of_the_reference_effect():
    assert margins.relative_margin(0.25, -12.0) == pytest.approx(3.0)
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="fraction"):
            margins.relative_margin(bad, 1.0)
    with pytest.raises(ValueError, match="not finite"):
        margins.relative_margin(0.25, float("nan"))


def test_resolves_opens_above_the_resolution_and_closes_below():
    opened = gates.resolves(3.0, 1.58, "25 % of 12 points", "one accuracy")
    assert opened.holds is True and "discriminates" in opened.reason
    closed = gates.resolves(0.4, 1.58, "25 % of 1.6 points", "one accuracy")
    assert closed.holds is None and closed.facts.closed_by == "resolution"
    assert "cannot discriminate" in closed.reason and "could not fail" in closed.reason
    # a closed gate leaves even a predicate that would hold undecided
    assert gates.gated([closed], gates.Decision(True, "CI inside"), quote=True).holds is None
    with pytest.raises(ValueError, match="resolution"):
        gates.resolves(1.0, -1.0)
    assert gates.resolves(0.0, 0.0).holds is None  # no effect at all: nothing to compare against
    assert gates.resolves(0.1, 0.0).holds is True  # an exact measurement resolves any δ > 0


def test_a_comparison_against_a_relative_margin_holds_and_fails():
    # deviations (points) per seed of two arms; margin: 25 % of the reference arm's mean
    reference = np.array([10.0, 11.0, 9.0, 10.5, 9.5])
    margin = margins.relative_margin(0.25, reference.mean())
    same = intervals.difference(reference + 0.3, reference)
    assert margins.not_below(same, margin).holds is True
    assert margins.equivalent(same, margin).holds is True
    calmer = intervals.difference(reference * 0.3, reference)
    assert margins.not_below(calmer, margin).holds is False
    assert margins.equivalent(calmer, margin).holds is False
