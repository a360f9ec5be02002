"""The onsets of the rises (:mod:`i2o.chapters.meta.mechanism_onsets`): which rise intervals count
as onsets, the signs counted there, and that the reading leaves the rule's verdict alone."""

import numpy as np

from i2o.chapters.meta import mechanism
from i2o.chapters.meta import mechanism_onsets as onsets
from i2o.chapters.meta import mechanism_probe as probing


def _run(losses, **fields):
    """Synthetic probes every 10 steps; by default −ĝ and Adam's step descend, no task is
    indefinite, no line search exhausted."""
    n = len(losses)
    defaults = {"descent_fd": 1.0, "adam_descent_fd": 1.0, "indefinite_share": 0.0,
                "last_trial_share": 0.0}
    values = {name: np.full(n, np.nan) for name in probing.FIELDS}
    for name, value in {**defaults, **fields}.items():
        values[name] = np.broadcast_to(np.asarray(value, float), (n,)).copy()
    return {"label": "m", "outer_steps": 10 * n, "steps": 10 * np.arange(1, n + 1),
            "loss": np.asarray(losses, float), **values}


#: a cascade: L doubles into checkpoints 3, 4 and 5 (onset at index 2, then two continuations),
#: falls back, and rises again from its low into the last checkpoint (a second onset at index 8).
CASCADE = [1.0, 0.5, 0.4, 1.0, 3.0, 7.0, 0.6, 0.45, 0.4, 1.0]


def _only_after_onsets(present, absent):
    return [present if i in (3, 4) else absent for i in range(len(CASCADE))]


def test_onsets_are_the_rises_that_start_near_the_lowest_loss_so_far():
    found = onsets.onsets([_run(CASCADE)])
    rises = [i for i in mechanism.intervals(_run(CASCADE)) if i.rise]
    assert len(rises) == 4 and found.count == 2  # continuations at L = 1.0 and 3.0 are not
    assert found.descending == 2 == found.adam_descending


def test_a_sign_only_after_the_onsets_is_named_by_the_rule_and_absent_at_every_onset():
    run = _run(CASCADE, indefinite_share=_only_after_onsets(0.5, 0.0))
    verdict = mechanism.name([run])
    assert verdict.named == ("a_prime",)  # 2 of 4 rise intervals, 0 calm: the rule names it
    found = onsets.onsets([run])
    assert found.signs["a_prime"] == 0 and found.count == 2
    assert "(a′) inner problem not strongly convex at 0" in onsets.describe(found)
    assert "does not change the verdict" in onsets.describe(found)


def test_a_sign_at_the_onsets_is_counted_there():
    at_onsets = [0.1 if i in (2, 8) else 0.0 for i in range(len(CASCADE))]
    found = onsets.onsets([_run(CASCADE, last_trial_share=at_onsets,
                                adam_descent_fd=[0.0 if i == 8 else 1.0 for i in range(10)])])
    assert found.signs == {"a": 0, "a_prime": 0, "c": 2}
    assert found.adam_descending == 1 and found.descending == 2


def test_no_rise_has_no_onset():
    found = onsets.onsets([_run([1.0, 0.9, 0.8, 1.5, 0.7])])  # 1.5 < 2 × 0.8: no rise
    assert found.count == 0 and "No rise started" in onsets.describe(found)


def test_the_report_gives_the_rules_sentence_then_the_onsets():
    run = _run(CASCADE, indefinite_share=_only_after_onsets(0.5, 0.0))
    first, second = onsets.report([run]).split("\n")
    assert first == mechanism.describe(mechanism.name([run]))
    assert second == onsets.describe(onsets.onsets([run]))
