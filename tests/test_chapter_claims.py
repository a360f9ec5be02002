"""The DEQ chapters' claims on doctored results (the shared bank, ``tests/bank.py``): each verdict
holds on one and fails on another, and a model that does not fit (or diverged) leaves the claims
undecided with the reason."""

from __future__ import annotations

import numpy as np
import pytest
from bank import (
    DROPPING,
    FITTED,
    FLAT,
    FLAT_LOSS,
    GAPS_PARAMS,
    GRID,
    IMPROVING,
    ITERS,
    N_TRAIN,
    PLATEAU,
    STABILITY_PARAMS,
    gap_results,
    gap_rows,
    gap_table,
    inverse_result,
    stability_run,
    stability_table,
)

from i2o.chapters.deq_gaps import claims as gaps_claims
from i2o.chapters.deq_gaps import prose as gaps_prose
from i2o.chapters.deq_gaps.tasks import TASKS
from i2o.chapters.stability import claims as stability_claims
from i2o.chapters.stability import prose as stability_prose
from i2o.verdicts import intervals
from i2o.verdicts.claims import Claims
from i2o.verdicts.curves import from_sweeps
from i2o.verdicts.prose import conclusions

PARAMS = STABILITY_PARAMS
table = stability_table


def stability_text(rows: Claims) -> str:
    """The chapter's conclusions, as the notebook writes them
    (:func:`i2o.verdicts.prose.conclusions`)."""
    return conclusions(rows, display=False)


def seeds(curve, **kw):
    return [stability_run(curve, s, **kw) for s in range(5)]


def test_stability_claims_hold_on_the_papers_picture():
    rows = table(seeds(PLATEAU), seeds(PLATEAU))
    for key in ("health", "fit", "not_more_stable", "equally_stable", "ift_no_gain",
                "ift_fewer_hurt", "ift_residual", "unrolled_no_gain"):
        assert rows[key].holds is True, (key, rows[key])
    assert "5+ fitting seeds per arm" in rows["not_more_stable"].check
    assert "discriminates" in rows["not_more_stable"].check
    assert "0.25 × the unrolled arm's mean" in rows["not_more_stable"].margin
    text = stability_text(rows)
    assert "not more stable" in text and "does not give a better classifier" in text
    assert stability_prose.paragraphs(rows) == [text]  # one paragraph


def test_stability_glued_best_gain_is_the_no_gain_rows_number():
    """The text's "best gain from more iterations" is the number the arm's row quotes: the
    largest mean over the fitting seeds (a seed that does not fit is left out of both)."""
    from i2o.chapters.stability.runs import StabilityResults, summarize
    from i2o.compute.chapter import Cost

    runs = {"ift": seeds(IMPROVING)[:4] + [stability_run(PLATEAU, 9, train_accuracy=0.5)],
            "unrolled": seeds(PLATEAU)}
    rows = table(runs["ift"], runs["unrolled"])
    results = StabilityResults(
        params=PARAMS, cost=Cost(1.0, 10, 0), runs=runs,
        summary={arm: summarize(found, ITERS, 18) for arm, found in runs.items()},
        train_seconds={"ift": 1.0, "unrolled": 1.0}, costs=None, train_n=18, n_parameters=1,
        n_parameters_tiny=1)
    glued = stability_claims.numbers(results)
    for arm in ("ift", "unrolled"):
        quoted = rows[f"{arm}_no_gain"].value.split(": ", 1)[1].split(" pt")[0]
        assert glued[f"stability-{arm}-gain-more"] == quoted
    assert float(glued["stability-ift-gain-more"]) > 5  # IMPROVING gains about 10 points


def test_stability_claims_fail_when_ift_is_more_stable_and_more_iterations_help():
    rows = table(seeds(PLATEAU), seeds(DROPPING))
    assert rows["not_more_stable"].holds is False
    assert rows["equally_stable"].holds is False
    rows = table(seeds(IMPROVING), seeds(IMPROVING))
    assert rows["ift_no_gain"].holds is False
    assert "do improve" in stability_text(rows)
    rows = table(seeds([0.70, 0.65, 0.60, 0.60, 0.60]), seeds(PLATEAU))
    assert rows["ift_fewer_hurt"].holds is False


def test_stability_residual_check_reads_the_last_iterate():
    rows = table(seeds(PLATEAU, rising=True), seeds(PLATEAU))
    assert rows["ift_residual"].holds is False and rows["unrolled_residual"].holds is True


def test_stability_claims_use_the_models_that_fit_when_a_quorum_does():
    underfit = seeds(PLATEAU)
    underfit[2] = stability_run(DROPPING, 2, train_accuracy=0.41)  # excluded, so it cannot weigh
    rows = table(underfit, seeds(PLATEAU))
    assert rows["fit"].holds is True and "IFT 4/5" in rows["fit"].check
    assert "IFT seed 2 41.0%" in rows["fit"].check and "IFT seed 2" in rows["fit"].value
    assert "reached the cap without fitting: IFT seed 2" in rows["fit"].value
    for key in ("not_more_stable", "equally_stable", "ift_no_gain", "unrolled_fewer_hurt"):
        assert rows[key].holds is True, (key, rows[key])
    assert "over 4 seeds" in rows["ift_no_gain"].value
    assert "use those that do" in stability_text(rows)


def test_stability_claims_undecided_when_too_few_models_fit_or_one_diverged():
    underfit = seeds(PLATEAU)
    underfit[2]["train_accuracy"] = 0.41
    underfit[4]["train_accuracy"] = 0.87
    rows = table(underfit, seeds(PLATEAU))
    assert rows["fit"].holds is False
    for key in ("not_more_stable", "equally_stable", "ift_no_gain", "unrolled_fewer_hurt"):
        assert rows[key].holds is None
        assert "too few models fit" in rows[key].check and "IFT 3/5" in rows[key].check
        assert "41.0" in rows[key].check
    assert "not decided" in stability_text(rows)
    broken = seeds(PLATEAU)
    broken[0]["diverged"] = "loss became non-finite at step 7"
    rows = table(broken, seeds(PLATEAU))
    assert rows["health"].holds is False and rows["ift_no_gain"].holds is None
    assert "non-finite" in rows["ift_no_gain"].check
    assert "Warning" in stability_text(rows)


def test_stability_health_row_holds_without_a_flag_and_fails_with_one_on_any_model():
    assert table(seeds(PLATEAU), seeds(PLATEAU))["health"].holds is True
    unfit = seeds(PLATEAU)  # a model that does not fit is checked too
    unfit[3] = stability_run(PLATEAU, 3, train_accuracy=0.41, diverged="chance-level accuracy")
    health = table(seeds(PLATEAU), unfit)["health"]
    assert health.holds is False and health.value == "unrolled seed 3: chance-level accuracy"


def test_stability_memory_row_holds_when_unrolled_needs_more_and_fails_otherwise():
    def memory(unrolled, ift):
        costs = {"unrolled": {"peak_mb": unrolled}, "ift": {"peak_mb": ift}}
        return stability_claims.claims_table(PARAMS, {"ift": seeds(PLATEAU),
                                                      "unrolled": seeds(PLATEAU)}, costs)["memory"]

    row = memory(412.0, 37.0)
    assert row.holds is True and row.value.startswith("unrolled's peak above IFT's")
    assert row.check == "one measurement per arm"
    assert memory(412.5, 37.0) == row  # the measured peaks (costs) are not in the row
    assert memory(20.0, 37.0).holds is False
    assert memory(20.0, 37.0).value.startswith("unrolled's peak not above")
    assert memory(37.0, 37.0).holds is False  # as much is not more
    assert "memory" not in table(seeds(PLATEAU), seeds(PLATEAU)).by_id  # not measured: no row


def test_stability_one_seed_is_undecided():
    one = {**PARAMS, "fit_quorum": 1}
    rows = stability_claims.claims_table(one, {"ift": seeds(PLATEAU)[:1],
                                               "unrolled": seeds(PLATEAU)[:1]})
    assert rows["not_more_stable"].holds is None and "needs ≥ 2" in rows["not_more_stable"].check




def test_stability_comparison_is_undecided_where_accuracy_does_not_move_with_n():
    rows = table(seeds(FLAT, independent=True), seeds(FLAT, independent=True))
    for key in ("not_more_stable", "equally_stable"):
        assert rows[key].holds is None, (key, rows[key])
        assert "cannot discriminate" in rows[key].check and "could not fail" in rows[key].check
    for key in ("ift_no_gain", "unrolled_no_gain"):  # a one-point cost lost in the noise
        assert rows[key].holds is None and rows[key].facts.closed_by in ("reference",
                                                                         "resolution")
    # the same flat IFT against an unrolled arm that moves: decided, and IFT is more stable
    rows = table(seeds(FLAT), seeds(DROPPING))
    assert rows["not_more_stable"].holds is False
    flat = seeds(FLAT, independent=True)
    assert "cannot discriminate" in stability_text(table(flat, flat))


def test_stability_resolution_is_the_paired_standard_error_of_an_accuracy_change():
    from i2o.verdicts.curves import from_evaluations

    errors = np.zeros((1000, len(ITERS)), dtype=np.uint8)
    errors[:400, :] = 1
    errors[400:430, 0] = 1                # 30 images flip at N' = 3 only
    run = {"iterations": np.asarray(ITERS), "errors": errors, "residual_rel": np.ones(5),
           "trace_rel": np.ones(max(ITERS) + 1)}
    flips = np.r_[np.ones(30), np.zeros(970)]
    expected = 100 * flips.std(ddof=1) / np.sqrt(1000) / 4  # one count of four differs
    assert from_evaluations([run, run]).resolution(18) == pytest.approx(expected)
    # a flat arm whose images never flip has deviation 0: δ is the floor of an accuracy
    # change (0.1 points), which the resolution 0 discriminates: equally stable
    flat = seeds([0.60] * 5)
    for one in flat:
        one["test"]["errors"] = errors * 0
        one["test"]["accuracy"] = np.ones(len(ITERS))
    rows = table(flat, flat)
    assert rows["equally_stable"].holds is True and "floor 0.1" in rows["equally_stable"].margin


# -- deq_gaps -----------------------------------------------------------------------------------

def test_gap_claims_hold_and_fail():
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED)
    assert rows["classification_gate"].holds is True
    assert rows["classification_test_no_gain"].holds is True
    assert rows["classification_test_fewer_hurt"].holds is True
    assert rows["classification_residual"].holds is True
    assert "examples" in rows["classification_test_no_gain"].value
    assert "|gap at 1|" in rows["classification_test_no_gain"].margin
    rows = gap_rows([0.9, 0.5, 0.4, 0.2, 0.1], FITTED)
    assert rows["classification_test_no_gain"].holds is False
    rows = gap_rows([0.9, 0.5, 0.4, 0.2, 0.1], FITTED, rising=True)
    assert rows["classification_residual"].holds is False
    # a solver that does not converge beyond N: the rows on more iterations say nothing
    assert rows["classification_test_no_gain"].holds is None
    assert rows["classification_test_no_gain"].facts.closed_by == "convergence"
    slow = gap_rows([0.9, 0.5, 0.4, 0.2, 0.1], FITTED, traces=[(1.0, 0.3)])  # 3-fold in all
    assert slow["classification_residual"].holds is True  # the paper's guard: a fall
    assert slow["classification_tenfold"].holds is False  # the book's own, gating nothing
    assert slow["classification_test_no_gain"].facts.closed_by != "convergence"
    rows = gap_rows([0.2, 0.3, 0.4, 0.4, 0.4], FITTED)
    assert rows["classification_test_fewer_hurt"].holds is False


def test_training_data_claims_are_decided_on_the_training_loss():
    # 0 % training error at N and above: the error cannot improve, the loss can
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, train_loss=FLAT_LOSS)
    assert rows["classification_train_no_gain"].holds is True
    assert "training loss" in rows["classification_train_no_gain"].claim
    assert "training loss at N" in rows["classification_train_no_gain"].margin
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, train_loss=[6.0, 1.0, 0.2, 0.1, 0.08])
    assert rows["classification_train_no_gain"].holds is False  # the loss halves: a real gain
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, train_loss=[0.1, 0.15, 0.2, 0.2, 0.2])
    assert rows["classification_train_fewer_hurt"].holds is False


def test_gap_claims_over_seeds_use_the_models_that_fit():
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, models=3)
    assert rows["classification_gate"].holds is True
    assert "over 3 seeds" in rows["classification_test_no_gain"].value
    assert rows["classification_test_fewer_hurt"].holds is True
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, models=3, shift=(0, 0, 0.3))
    assert rows["classification_gate"].holds is False
    assert rows["classification_test_no_gain"].holds is None
    check = rows["classification_test_no_gain"].check
    assert "too few models fit" in check and "2/3" in check and "seed 2" in check
    relaxed = {**GAPS_PARAMS, "fit_quorum": 2}
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, models=3, shift=(0, 0, 0.3),
                    params=relaxed)
    assert rows["classification_gate"].holds is True
    assert "over 2 seeds" in rows["classification_test_fewer_hurt"].value


def test_gap_claims_are_undecided_where_the_margin_is_below_the_resolution():
    # every count gets its own wrong images at the same rate: changes are noise, not an effect
    # (what one iteration costs is established, but a quarter of it is below the resolution)
    rows = gap_rows([0.55, 0.45, 0.40, 0.40, 0.40], FITTED, independent=True)
    assert rows["classification_test_fewer_hurt"].holds is None  # it reads δ too
    assert rows["classification_test_fewer_hurt"].facts.closed_by == "resolution"
    assert rows["classification_test_no_gain"].holds is None
    assert "cannot discriminate" in rows["classification_test_no_gain"].check
    assert rows["classification_test_no_gain"].facts.closed_by == "resolution"


def test_gap_claims_are_undecided_when_seeds_disagree_by_more_than_the_margin():
    # above N, one seed gains 15 points and another loses 15: an interval over three seeds as
    # wide as twice δ cannot decide "no improvement beyond δ"
    spread = [[0.9, 0.5, 0.4, 0.4, 0.4], [0.9, 0.5, 0.4, 0.25, 0.25], [0.9, 0.5, 0.4, 0.55, 0.55]]
    rows = gap_rows(spread, FITTED, models=3)
    assert rows["classification_test_no_gain"].holds is None
    assert "too little power: CI half-width" in rows["classification_test_no_gain"].check
    agreeing = gap_rows([[0.9, 0.5, 0.4, 0.4, 0.4]] * 3, FITTED, models=3)
    assert agreeing["classification_test_no_gain"].holds is True


def test_test_data_margin_needs_an_established_reference_effect():
    # what the fewest iterations cost on test data is not established (one seed gains at 1
    # iteration, two lose): a fraction of it is no margin, so δ is the metric's floor alone
    # (0.1 error points), here below one model's resolution: undecided, not decided on the
    # draw of seeds
    disagree = [[0.8, 0.5, 0.4, 0.4, 0.4], [0.3, 0.35, 0.4, 0.4, 0.4], [0.5, 0.45, 0.4, 0.4, 0.4]]
    rows = gap_rows(disagree, FITTED, models=3)
    assert rows["classification_test_fewer_hurt"].holds is not True
    assert rows["classification_test_no_gain"].holds is None
    assert "the metric's floor" in rows["classification_test_no_gain"].margin
    assert rows["classification_test_no_gain"].facts.closed_by == "resolution"
    # the training-data margin is the training loss: decided whatever the test curve does
    assert rows["classification_train_no_gain"].holds is True
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED)
    assert "reference effect is established" in rows["classification_test_no_gain"].check


def test_gap_claims_undecided_when_the_model_does_not_fit_or_diverged():
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], [0.9, 0.7, 0.6, 0.6, 0.6])
    assert rows["classification_gate"].holds is False
    assert rows["classification_test_no_gain"].holds is None
    assert "too few models fit" in rows["classification_test_no_gain"].check
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, losses=(2.3,) * 5 + (9.0,) * 5)
    assert rows["classification_test_no_gain"].holds is None
    assert "ended above its start" in rows["classification_test_no_gain"].check


def test_gap_prose_follows_the_rows():
    from i2o.verdicts.prose import sentence

    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], FITTED)
    assert "no improvement beyond" in gaps_prose.task_paragraph(rows, "classification")
    rows = gap_rows([0.9, 0.5, 0.4, 0.4, 0.4], [0.9, 0.7, 0.6, 0.6, 0.6])
    assert "Not in the regime" in gaps_prose.task_paragraph(rows, "classification")
    undecided = sentence(rows["classification_test_no_gain"], "yes", "no", "open")
    assert undecided.startswith("open (too few models fit")


def test_gap_conclusions_are_the_chapter_paragraphs_one_per_task_and_the_sweep():
    table = Claims("deq_gaps", "quick")
    for task in TASKS:
        table.add("gate", True, "fit", id=f"{task}_gate")
        for split in ("test", "train"):
            table.add("fewer", True, "v", id=f"{task}_{split}_fewer_hurt")
            table.add("no gain", True, "v", id=f"{task}_{split}_no_gain")
        table.add("residual", True, "r", id=f"{task}_residual")
    table.add("overparam", None, "R", check="x", id="overparam")
    table.facts["overparam_in_regime"] = {"threshold": 90.0, "sizes": [40]}
    text = conclusions(table, display=False)
    paragraphs = gaps_prose.paragraphs(table)
    assert text == "\n\n".join(paragraphs) and len(paragraphs) == 5
    assert "\n\n- " in paragraphs[0]  # a title, then a sentence per item
    assert text.startswith("**CIFAR-10 MDEQ.**")
    assert text.endswith("Sizes in the regime (training accuracy ≥ 90 %): 40 images.")


@pytest.mark.parametrize("task, fit", [("language", 1.2), ("deq", 3.0)])
def test_regression_fit_criteria(task, fit):
    from i2o.verdicts.curves import Curves

    def constant(level):
        values = np.full((1, 2, len(GRID)), level)
        return Curves(np.asarray(GRID), values, np.full_like(values, 0.01), -1.0)

    result = {"train_baseline_neg_psnr": -18.0}
    score = gaps_claims.fit_score(task, result, constant(-20.0), constant(fit), N_TRAIN)
    opened, mask = gaps_claims.fit_check(task, [score], GAPS_PARAMS)
    assert opened.holds is True and mask.tolist() == [True]
    bad = dict(GAPS_PARAMS, lm_fit_nll=1.0, inv_fit_db=5.0)
    assert gaps_claims.fit_check(task, [score], bad)[0].holds is None
    if task == "deq":
        assert "has learned" in gaps_claims.fit_check(task, [score], GAPS_PARAMS)[0].reason


def test_inverse_gate_says_has_learned_and_whether_the_regime_was_reached():
    for train_psnr, test_psnr, reached in ((30.0, 26.0, True), (26.0, 26.0, False)):
        table = gap_table([inverse_result(train_psnr, test_psnr)], task="deq")
        gate = table["deq_gate"]
        assert gate.holds is True and "has learned" in gate.claim
        expected = "regime reached" if reached else "regime not reached"
        assert expected in gate.value and expected in gate.check
        assert gate.facts.regime_reached is reached
        assert "regime" not in gate.claim.split("(")[0]  # the claim's text does not vary
        assert table["deq_test_fewer_hurt"].holds is True
        assert "over 200 examples" in table["deq_test_no_gain"].value


def overparam_rows(increases, losses=None, best_error=0.0):
    """Doctored overparametrization sizes, one model each: size ``40 · 4^k`` with training loss
    ``losses[k]`` at N (default 0.01 · 10^k: the smallest set fits best) whose training loss rises
    by ``increases[k]`` at the largest count; the best-fitting model's training error at N is
    ``best_error``."""
    from i2o.chapters.deq_gaps.curves import GapCurve

    its = np.asarray(GRID)
    losses = losses or [0.01 * 10 ** k for k in range(len(increases))]

    def curve(increase, level):
        gap = np.r_[np.zeros(len(GRID) - 1), increase]
        return GapCurve("x", "m", N_TRAIN, its, level + gap, gap, np.full(len(GRID), 0.001),
                        np.full(len(GRID), 0.01), n=400)

    return [{"size": 40 * 4 ** k, "loss_at_n": loss, "train_loss": curve(rise, loss),
             "train_error": curve(0.0, best_error if k == 0 else 48.0)}
            for k, (rise, loss) in enumerate(zip(increases, losses, strict=True))]


def test_overparametrization_claim_is_a_rank_association_across_sizes():
    def decide(rows):
        table = Claims("deq_gaps", "quick")
        gaps_claims.add_overparam_claim(table, rows, GAPS_PARAMS)
        return table["overparam"]

    held = decide(overparam_rows([0.05, 0.04, 0.03, 0.02, 0.01]))  # lower loss, higher D
    assert held.holds is True and "in the regime" in held.check and "40 images" in held.check
    assert "Kendall's τ = -1.00 over 5 models" in held.check
    # scale-free: the same ordering whatever the sizes' loss levels
    assert decide(overparam_rows([0.05, 0.04, 0.03, 0.02, 0.01],
                                 [1e-6, 1e-3, 0.1, 1.0, 2.0])).holds is True
    assert decide(overparam_rows([0.01, 0.02, 0.03, 0.04, 0.05])).holds is False
    assert decide(overparam_rows([0.03, 0.05, 0.01, 0.04, 0.02])).holds is None
    few = decide(overparam_rows([0.03, 0.02, 0.01]))  # 3 models cannot reach p ≤ 0.05
    assert few.holds is None and "3 models cannot reach" in few.check
    outside = decide(overparam_rows([0.05, 0.04, 0.03, 0.02, 0.01], best_error=30.0))
    assert outside.holds is None and "does not fit" in outside.check


def test_stability_comparison_reads_power_only_where_its_interval_straddles_its_bound():
    rng = np.random.default_rng(7)

    def noisy(curve):
        shifts = [rng.normal(0, 0.06, len(ITERS)) * (np.asarray(ITERS) != 18) for _ in range(5)]
        return [stability_run(curve, s, shift=shift) for s, shift in enumerate(shifts)]

    rows = table(noisy(DROPPING), noisy(DROPPING))
    key = "equally_stable"  # its wide interval straddles ±δ: closed by power
    assert rows[key].holds is None, (key, rows[key])
    assert "too little power: CI half-width" in rows[key].check
    assert "seed pairs would give it" in rows[key].check
    assert rows[key].facts.closed_by == "power" and rows[key].facts.needs.of == "seed pairs"
    # the same interval clears −δ: "not more stable" is decided whatever its width (principle 3)
    assert rows["not_more_stable"].holds is True
    assert "too little power" not in rows["not_more_stable"].check
    # the same arms measured without seed noise are decided
    assert table(seeds(DROPPING), seeds(DROPPING))["equally_stable"].holds is True


def test_stability_comparison_pairs_the_arms_by_seed():
    rng = np.random.default_rng(3)
    shifts = [rng.normal(0, 0.1, len(ITERS)) * (np.asarray(ITERS) != 18) for _ in range(5)]

    def arm(curve, jitter=0.0):  # the seed moves both arms alike
        return [stability_run(curve, s, shift=shift + rng.normal(0, jitter, len(ITERS)))
                for s, shift in enumerate(shifts)]

    rows = table(arm(DROPPING), arm(DROPPING, jitter=0.002))
    assert rows["equally_stable"].holds is True, rows["equally_stable"]
    assert "over 5 seed pairs" in rows["equally_stable"].value
    # unpaired, the same numbers spread by the seeds' shifts would not be powered
    ift, unrolled = (stability_claims.per_seed(a, ITERS, 18)["deviation"]
                     for a in (arm(DROPPING), arm(DROPPING)))
    welch = intervals.difference(100 * ift, 100 * unrolled)
    assert (welch.hi - welch.lo) / 2 > 0.5 * float(rows["equally_stable"].margin[1:5])
    # a seed that fits in one arm only leaves its pair out
    one_short = arm(DROPPING)
    one_short[1]["train_accuracy"] = 0.5
    rows = table(one_short, arm(DROPPING))
    assert "over 4 seed pairs" in rows["not_more_stable"].value


def test_gap_residual_check_is_an_interval_over_models_naming_the_ones_that_rose():
    def rows(*traces):
        found = gap_table(gap_results([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, models=3,
                                      traces=traces))
        return found["classification_residual"]

    row = rows((1.0, 1e-3), (1.0, 2e-3), (1.0, 5e-4))
    assert row.holds is True and "over 3 models" in row.value
    row = rows((1.0, 1e-3), (1.0, 2e-3), (1e-3, 10.0))
    assert row.holds is None and "rose for seed 2" in row.value
    assert rows((1e-3, 1.0), (1e-3, 2.0), (1e-3, 0.5)).holds is False


def test_gap_values_print_on_the_scale_of_the_curve():
    from i2o.verdicts.curves import Curves

    def at_level(level):
        values = np.full((1, 2, len(GRID)), level)
        return Curves(np.asarray(GRID), values, np.zeros_like(values), -1.0)

    assert gaps_claims.digits_of(at_level(1.3), N_TRAIN) == 3
    assert gaps_claims.digits_of(at_level(0.0025), N_TRAIN) == 5  # 1.2e-4 prints as +0.00012
    assert gaps_claims.digits_of(at_level(0.0), N_TRAIN) == 3


def test_test_data_rows_are_read_only_on_models_that_beat_their_baseline():
    # principle 4: the same curves, once against a baseline the models beat (80 % error against
    # their 40 %) and once against one they do not (a linear classifier at 39 %)
    results = gap_results([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, models=3)
    beaten = gap_table(results, baseline=[80.0] * 3)
    assert beaten["classification_generalises"].holds is True
    assert beaten["classification_test_no_gain"].holds is True
    lost = gap_table(results, baseline=[39.0] * 3)
    row = lost["classification_generalises"]
    assert row.holds is None and row.facts.closed_by == "regime"
    assert "does not generalise beyond a linear classifier" in row.check
    for key in ("classification_test_no_gain", "classification_test_fewer_hurt"):
        assert lost[key].holds is None and lost[key].facts.closed_by == "regime", key
    # the training-data rows do not need it
    assert lost["classification_train_no_gain"].holds is True
    # no baseline fitted: undecided, saying so
    table = Claims("deq_gaps", "quick")
    curves = {key: from_sweeps([r[split] for r in results], metric, -1.0, transform)
              for key, (split, metric, transform) in {
                  "test": ("test", "error", "percent"), "train": ("train", "error", "percent"),
                  "train_loss": ("train", "loss", "mean")}.items()}
    gaps_claims.task_claims(table, "classification", results, curves, GAPS_PARAMS, N_TRAIN,
                            [0, 1, 2], None)
    assert table["classification_generalises"].holds is None
    assert "no baseline" in table["classification_generalises"].check


def test_a_reconstruction_network_must_beat_its_initial_guess_on_test_images():
    result = inverse_result(26.0, 26.0)
    assert gap_table([result], task="deq")["deq_generalises"].holds is True  # −26 < −20 dB
    worse = {**result, "test_baseline_neg_psnr": -27.0}  # A⁺y reconstructs better
    table = gap_table([worse], task="deq")
    assert table["deq_generalises"].holds is None
    assert table["deq_test_fewer_better"].holds is None
    assert table["deq_test_fewer_better"].facts.closed_by == "regime"


def test_baseline_values_read_each_tasks_baseline_in_its_curves_units():
    pixels = [{"test_error": np.array([1.0, 0.0, 1.0, 1.0])}, {"test_error": np.zeros(4)}]
    assert gaps_claims.baseline_values("classification", [{}, {}],
                                       {"classification": pixels}) == [75.0, 0.0]
    assert gaps_claims.baseline_values("classification", [{}], {"classification": pixels}) \
        is None  # one baseline per seed, or none
    bigram = {"test_nll": np.log([2.0, 2.0])}
    assert gaps_claims.baseline_values("language", [{}, {}], {"language": bigram}) == \
        pytest.approx([2.0, 2.0])
    assert gaps_claims.baseline_values("language", [{}], None) is None
    assert gaps_claims.baseline_values("elder", [{"test_baseline_neg_psnr": -21.0}], None) == \
        [-21.0]


def test_gap_prose_says_when_a_test_curve_is_not_read():
    results = gap_results([0.9, 0.5, 0.4, 0.4, 0.4], FITTED, models=3)
    read = gaps_prose.task_paragraph(gap_table(results, baseline=[80.0] * 3), "classification")
    assert "so its test curve is read" in read and "On test data, more iterations" in read
    unread = gaps_prose.task_paragraph(gap_table(results, baseline=[39.0] * 3),
                                       "classification")
    assert "Its test curve is not read" in unread and "On test data, more" not in unread
    assert "On training data (training loss), more iterations" in unread
