"""An undecided row says what would decide it: the command a chapter prints passes the chapter's
own checks, asks for the count the row needs (with headroom), and costs it at the measured rate;
a count the manifest refuses gives no command."""

from __future__ import annotations

import math
import shlex

import numpy as np
import pytest
from bank import DROPPING, STABILITY_PARAMS, gap_results, gap_table, stability_run, stability_table

from i2o.compute import door, profiles
from i2o.verdicts import deciding
from i2o.verdicts.decision import Needs, Over
from i2o.verdicts.prose import conclusions


def overrides_of(command: str) -> tuple[str, str, dict]:
    """The figure, profile and parameters of a printed ``make fig-…`` command."""
    words = shlex.split(command)
    assert words[0] == "make" and words[1].startswith("fig-")
    settings = dict(w.split("=", 1) for w in words[2:])
    pairs = shlex.split(settings["P"])
    assert pairs[::3] == ["-p"] * (len(pairs) // 3)
    figure = words[1][4:]
    return figure, settings["PROFILE"], profiles.read_overrides(
        figure, [[pairs[i + 1], pairs[i + 2]] for i in range(0, len(pairs), 3)])


def noisy_arms():
    rng = np.random.default_rng(7)

    def arm():
        return [stability_run(DROPPING, s, shift=rng.normal(0, 0.06, 5) * (np.arange(5) != 2))
                for s in range(5)]

    runs = arm(), arm()
    for run in (*runs[0], *runs[1]):
        run.update(train_seconds=100.0, eval_seconds=10.0)
    return runs


def test_every_printed_command_passes_the_chapters_checks():
    table = stability_table(*noisy_arms())
    assert table.remedies, "the doctored noisy run leaves rows open for want of seeds"
    for id, remedy in table.remedies.items():
        row = table[id]
        assert row.holds is None and row.decided_by == remedy.command()
        figure, profile, overrides = overrides_of(remedy.command())
        assert (figure, profile) == ("stability", "quick")
        door.enter(figure, profile, **overrides)  # the chapter's checks: no ParameterError
        seeds = overrides["seeds"]
        assert seeds[:5] == [0, 1, 2, 3, 4] and len(seeds) == len(set(seeds))
        assert len(seeds) >= deciding.HEADROOM * row.facts.needs.count
        assert remedy.seconds == pytest.approx((len(seeds) - 5) * 220.0)  # both arms, per seed
    text = conclusions(table, display=False)
    assert "What would decide the rows this run leaves open" in text
    assert next(iter(table.remedies.values())).command() in text


def test_a_task_trained_per_seed_asks_for_more_seeds():
    spread = [[0.9, 0.5, 0.4, 0.4, 0.4], [0.9, 0.5, 0.4, 0.25, 0.25], [0.9, 0.5, 0.4, 0.55, 0.55]]
    results = gap_results(spread, [0.9, 0.3, 0.02, 0.02, 0.02], models=3)
    table = gap_table(results, {**_gaps_params(), "seeds": [0, 1, 2]})
    remedy = table.remedies["classification_test_no_gain"]
    figure, profile, overrides = overrides_of(remedy.command())
    assert figure == "deq_gaps" and len(overrides["seeds"]) > 3
    door.enter(figure, profile, **overrides)


def _gaps_params():
    from bank import GAPS_PARAMS

    return {**GAPS_PARAMS, "profile": "quick"}


def test_remedies_refused_by_the_manifest_or_not_about_counts_give_no_command():
    params = {**STABILITY_PARAMS}
    assert deciding.more_seeds("stability", params, None, 1.0) is None
    assert deciding.more_seeds("stability", params, Needs(3, "seeds"), 1.0) is None  # has 5
    assert deciding.more_seeds("stability", params, Needs(8, "examples"), 1.0) is None
    limit = profiles.entry("stability")["parameters"]["test_size"]["max"]
    assert deciding.more_examples("stability", params, Needs(10 * limit, "examples"),
                                  "test_size") is None
    found = deciding.more_examples("stability", params, Needs(1600, "examples"), "test_size",
                                   100.0, 20.0)
    assert dict(found.overrides) == {"test_size": 2000}
    assert found.seconds == pytest.approx(100.0 + 20.0 * (2000 / 1000 - 1))
    assert math.isnan(deciding.more_examples("stability", params, Needs(1600, "examples"),
                                             "test_size").seconds)


def test_what_an_interval_is_over_names_the_parameter_that_decides_it():
    """More seeds decide a count of seeds, seed pairs or models; an evaluation set decides a count
    of examples; a count of evaluation batches names no parameter, so no remedy."""
    params = {**STABILITY_PARAMS}
    for over in (Over.SEEDS, Over.SEED_PAIRS, Over.MODELS):
        found = deciding.more_seeds("stability", params, Needs(8, over), 1.0)
        assert found is not None and len(dict(found.overrides)["seeds"]) == 10  # 1.25 × 8
        assert deciding.more_examples("stability", params, Needs(1600, over), "test_size") is None
    assert deciding.more_examples("stability", params, Needs(1600, Over.EVALUATION_BATCHES),
                                  "test_size") is None
    assert deciding.more_seeds("stability", params, Needs(8, Over.EVALUATION_BATCHES), 1.0) is None
    # units a parameter raises in every chapter are remedied by that parameter only
    assert deciding.more_examples("stability", params, Needs(1600, Over.HELD_OUT_TASKS),
                                  "test_size") is None


def test_a_remedy_that_is_another_profile_names_it_and_its_cost():
    remedy = deciding.Remedy("meta", "paper", (), 7200.0)
    assert remedy.command() == "make fig-meta PROFILE=paper"
    assert remedy.describe() == ("the paper profile; about 2.0 h of compute at this run's "
                                 "measured rate: `make fig-meta PROFILE=paper`")


def test_a_remedy_writes_its_seeds_as_a_range_and_hides_a_command_too_long_to_read():
    few = deciding.Remedy("stability", "quick", (("seeds", [0, 1, 2, 3, 4, 5, 6, 7]),), 660.0,
                          1100.0)
    assert few.sizes() == "8 seeds (0–7)"
    assert few.describe().endswith(f": `{few.command()}`")
    many = deciding.Remedy("stability", "quick", (("seeds", list(range(400))),), 9000.0, 1100.0)
    assert len(many.command()) > deciding.COMMAND_CHARS
    assert many.describe() == ("400 seeds (0–399); about 2.5 h of compute at this run's measured "
                               "rate (`make claims` prints the command)")
    assert deciding.Remedy("x", "quick", (("seeds", [0, 2, 5]),), 1.0).sizes() == "3 seeds"


def test_a_remedy_beyond_ten_times_the_run_is_not_decidable_at_this_scale():
    costly = deciding.Remedy("stability", "quick", (("seeds", list(range(1922))),),
                             1917 * 220.0, 5 * 220.0)
    assert not costly.at_scale
    assert costly.describe().startswith("not decidable at this scale: needs 1922 seeds "
                                        "(0–1921), about 117.2 CPU-hours")
    assert "make fig" not in costly.describe()
    assert deciding.Remedy("x", "quick", (), 1e9).at_scale  # this run's cost unknown: shown


def test_the_verdict_cell_holds_the_verdict_alone_and_the_remedy_goes_under_the_check():
    table = stability_table(*noisy_arms())
    shown = table.to_html()
    assert "(run make" not in shown and "undecided</td>" in shown
    assert shown.count("What would decide it:") == len(table.remedies)
    assert "(run make" in table.to_text()  # the text and the JSON keep the command
