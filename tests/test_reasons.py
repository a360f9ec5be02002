"""Reword every gate reason and no conclusion changes: the verdicts, their typed facts and the
chapters' prose (less the reasons it quotes whole) are the same, so no conclusion reads a reason's
wording. Doctored results from the shared bank (``tests/bank.py``) put each chapter through its
branches: the paper's picture, its opposite, a model that does not fit, one that diverged, too
little power, a margin below the resolution, a regime not reached."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest
from bank import (
    DROPPING,
    FITTED,
    FLAT,
    IMPROVING,
    PLATEAU,
    diagnose_results,
    gap_results,
    gap_table,
    inverse_result,
    meta_results,
    stability_run,
    stability_seeds,
    stability_table,
)

from i2o.chapters.diagnose import claims as diagnose_claims
from i2o.chapters.meta import claims as meta_claims
from i2o.verdicts import gates, margins, ranks, rule
from i2o.verdicts.claims import Claims
from i2o.verdicts.prose import conclusions


def _reword(decision: object) -> object:
    """A decision whose reason reads differently (reversed, in brackets); anything else as is."""
    if isinstance(decision, gates.Decision) and decision.reason:
        return gates.Decision(decision.holds, f"⟪{decision.reason[::-1]}⟫", decision.facts)
    if isinstance(decision, tuple) and decision and isinstance(decision[0], gates.Decision):
        return (_reword(decision[0]), *decision[1:])
    return decision


#: the functions that write a reason (the combinators only join them)
WRITERS = {gates: ("fit_gate", "fit_quorum", "resolves", "health_gate", "compare", "condition",
                   "symmetric_gate", "undecided"),
           margins: ("equivalent", "above", "not_below", "positive", "negative", "powered",
                     "lower_than", "undecided"),
           ranks: ("rank_association", "undecided"),
           rule: ("help_beyond", "hurt_beyond", "no_difference", "fewer_hurt")}


@pytest.fixture
def reworded(monkeypatch):
    """Within the test, every reason-writing function of :data:`WRITERS` rewords its reasons."""
    def patch():
        for module, names in WRITERS.items():
            for name in names:
                original = getattr(module, name)
                assert inspect.isfunction(original), name

                @functools.wraps(original)
                def wrapper(*args, _original=original, **kwargs):
                    return _reword(_original(*args, **kwargs))

                monkeypatch.setattr(module, name, wrapper)
    return patch


def noisy(curve, seed):
    rng = np.random.default_rng(seed)
    return [stability_run(curve, s, shift=rng.normal(0, 0.06, 5) * (np.arange(5) != 2))
            for s in range(5)]


def _underfit(curve):
    runs = stability_seeds(curve)
    runs[2]["train_accuracy"], runs[4]["train_accuracy"] = 0.41, 0.87
    return runs


def _one_underfit(curve):
    runs = stability_seeds(curve)
    runs[2]["train_accuracy"] = 0.41
    return runs


def _diverged(curve):
    runs = stability_seeds(curve)
    runs[0]["diverged"] = "loss became non-finite at step 7"
    return runs


SCENARIOS = {
    "stability paper": lambda: stability_table(stability_seeds(PLATEAU), stability_seeds(PLATEAU)),
    "stability opposite": lambda: stability_table(stability_seeds(IMPROVING),
                                                  stability_seeds(DROPPING)),
    "stability one underfit": lambda: stability_table(_one_underfit(PLATEAU),
                                                      stability_seeds(PLATEAU)),
    "stability too few fit": lambda: stability_table(_underfit(PLATEAU), stability_seeds(PLATEAU)),
    "stability diverged": lambda: stability_table(_diverged(PLATEAU), stability_seeds(PLATEAU)),
    "stability no power": lambda: stability_table(noisy(DROPPING, 7), noisy(DROPPING, 8)),
    "stability flat": lambda: stability_table(stability_seeds(FLAT, independent=True),
                                              stability_seeds(FLAT, independent=True)),
    "gaps paper": lambda: gap_table(gap_results([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, models=3)),
    "gaps opposite": lambda: gap_table(gap_results([0.9, 0.5, 0.4, 0.2, 0.1], FITTED,
                                                   rising=True)),
    "gaps not fitting": lambda: gap_table(gap_results([0.9, 0.5, 0.4, 0.4, 0.4], FITTED,
                                                      models=3, shift=(0, 0, 0.3))),
    "gaps seeds disagree": lambda: gap_table(gap_results(
        [[0.9, 0.5, 0.4, 0.4, 0.4], [0.9, 0.5, 0.4, 0.25, 0.25], [0.9, 0.5, 0.4, 0.55, 0.55]],
        FITTED, models=3)),
    "gaps below resolution": lambda: gap_table(gap_results([0.55, 0.45, 0.4, 0.4, 0.4], FITTED,
                                                           independent=True)),
    "gaps regime reached": lambda: gap_table([inverse_result(30.0, 26.0)], task="deq"),
    "gaps regime not reached": lambda: gap_table([inverse_result(26.0, 26.0)], task="deq"),
    "diagnose help": lambda: diagnose_claims.claims(diagnose_results(+0.3)),
    "diagnose hurt": lambda: diagnose_claims.claims(diagnose_results(-0.3)),
    "diagnose not fitting": lambda: diagnose_claims.claims(diagnose_results(+0.3, fits=False)),
    "meta": lambda: meta_claims.claims(meta_results()),
    "meta rising, below the floor": lambda: meta_claims.claims(
        meta_results(np.geomspace(0.6, 1.2, 10), imaml_outer_steps=5000, floor=2.9)),
}


def _prose(table: Claims) -> str:
    if table.figure == "deq_gaps":  # one task's rows: that task's paragraph
        from i2o.chapters.deq_gaps import prose

        task = next(iter(table.by_id)).split("_")[0]
        return prose.task_paragraph(table, task)
    return conclusions(table, display=False)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_rewording_every_reason_changes_no_conclusion(scenario, reworded):
    before = SCENARIOS[scenario]()
    text = _prose(before)
    reworded()
    after = SCENARIOS[scenario]()
    assert [r.id for r in after.rows] == [r.id for r in before.rows]
    assert [r.holds for r in after.rows] == [r.holds for r in before.rows]
    assert [r.facts for r in after.rows] == [r.facts for r in before.rows]
    changed = {b.check: a.check for b, a in zip(before.rows, after.rows, strict=True) if b.check}
    assert any(b != a for b, a in changed.items()), "nothing was reworded"
    for old in sorted(changed, key=len, reverse=True):  # the reasons, quoted whole
        text = text.replace(old, changed[old])
    assert _prose(after) == text


def test_the_scenarios_reach_every_verdict_and_the_gates_that_close_them():
    rows = [row for make in SCENARIOS.values() for row in make().rows]
    assert {row.holds for row in rows} == {True, False, None}
    closed = {row.facts.closed_by for row in rows if row.holds is None}
    # "reference" closes only a margin without a floor, and every chapter's margin has one
    assert {"fit", "health", "power", "resolution", "convergence"} <= closed
    assert any(row.facts.not_fitting for row in rows)
    assert {row.facts.regime_reached for row in rows} >= {True, False}
