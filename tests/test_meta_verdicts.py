"""The meta-learning chapter's claims: every predicate on doctored curves where it must hold, where
it must fail, and where its gates must leave it undecided; the per-set-BN floor's arithmetic."""


import numpy as np
import pytest
from bank import meta_curves

from i2o.chapters.meta import claims, floor

GRID = np.array([1, 2, 5, 10, 30, 100, 300, 1000, 3000, 10000])
LIMITS = claims.Thresholds(min_outer_steps=1000, fig4_min_outer_steps=1000, baseline_mse=3.0)


_curves = meta_curves


DECREASING = np.geomspace(0.6, 0.1, len(GRID))
U_SHAPE = np.array([0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.2, 0.3, 0.4, 0.45])
RISING = np.geomspace(0.6, 1.2, len(GRID))


def test_more_steps_help_holds_and_fails():
    assert claims.more_steps_help(_curves(DECREASING), LIMITS).holds is True
    assert claims.more_steps_help(_curves(RISING), LIMITS).holds is False
    flat = _curves(np.full(len(GRID), 0.5), noise=0.05)
    verdict = claims.more_steps_help(flat, LIMITS)
    assert verdict.holds is None and "would decide it" in verdict.reason  # no power is not a fail


def test_a_gain_below_the_noise_is_undecided_not_false():
    """A real but small gain (1 % of the level) under task noise ten times larger: the held-out
    interval contains 0; with 50 times the tasks it is decided."""
    small = np.r_[np.full(1, 0.5), np.full(len(GRID) - 1, 0.495)]
    verdict = claims.more_steps_help(_curves(small, noise=0.05, seed=1), LIMITS)
    assert verdict.holds is None and "contains 0" in verdict.reason
    many = claims.more_steps_help(_curves(small, noise=0.05, seed=1, n_tasks=10000), LIMITS)
    assert many.holds is True


SETTLING = np.array([0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.2, 0.25, 0.25, 0.25])  # dips, settles
FALLING_THEN_FLAT = np.array([0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.1, 0.1, 0.1])


def _tail_within_noise(curves, start, step=1e-3, spread=0.05, seed=0):
    """``curves`` whose counts from grid index ``start`` on are the last count's MSE plus
    ``step`` × (counts to the end) on average, with task noise of ``spread`` centred within each
    half of the tasks: each count's mean lies above the last by exactly that step (the last is
    the lowest), far within the noise."""
    rng = np.random.default_rng(seed)
    query = curves["query"]
    last = query.shape[1] - 1
    halves = np.arange(len(query)) % 2
    for k in range(start, last):
        noise = rng.normal(0, spread, len(query))
        for half in (0, 1):
            noise[halves == half] -= noise[halves == half].mean()
        query[:, k] = query[:, last] + step * (last - k) + noise
    return curves


def test_settled_from_is_the_first_count_within_resolution_of_the_last():
    curves = _curves(SETTLING, noise=0.0)
    choose = curves["query"][::2]
    start, intervals = claims.settled_from(choose)
    assert start == 7 and len(intervals) == len(GRID)  # 0.25 from k = 1,000 on
    assert intervals[6].hi < 0 and intervals[-1].lo == intervals[-1].hi == 0.0
    assert claims.settled_from(_curves(DECREASING, noise=0.0)["query"][::2])[0] == len(GRID) - 1


def test_maml_best_before_convergence_holds_when_the_curve_dips_then_settles_above_its_minimum():
    """The paper's picture: the MSE falls to a minimum at k* = 100, rises and settles at 0.25;
    at k_last, where the inner problem is solved, it is higher than at k* on the held-out
    tasks."""
    verdict = claims.best_before_convergence(_curves(SETTLING), LIMITS)
    assert verdict.holds is True
    assert all(text in verdict.reason for text in ("k* = 100", "k_last = 10000", "held-out"))


def test_maml_best_before_convergence_fails_when_the_best_is_at_the_end():
    """The MSE falls, then is flat within the noise from k = 300 on, lowest at the last count:
    k* = k_last, after k_conv = 300, whatever the difference."""
    curves = _tail_within_noise(_curves(FALLING_THEN_FLAT, noise=0.0), start=6)
    verdict = claims.best_before_convergence(curves, LIMITS)
    assert verdict.holds is False
    assert "k* = 10000" in verdict.reason and "short of" in verdict.reason


def test_maml_best_before_convergence_fails_when_the_held_out_tasks_reach_lower_at_convergence():
    """k* = 100 lies before k_conv = 1,000 on the choosing tasks, but on the held-out tasks the
    curve keeps falling: MSE(k_conv) − MSE(k*) lies below 0."""
    curves = _curves(SETTLING, noise=0.0)
    held_out = _curves(FALLING_THEN_FLAT, noise=0.0)["query"]
    curves["query"][1::2] = held_out[1::2]
    verdict = claims.best_before_convergence(curves, LIMITS)
    assert verdict.holds is False
    assert "k* = 100" in verdict.reason and "k_last = 10000" in verdict.reason
    assert "CI [-" in verdict.reason or "[-0." in verdict.reason


def test_maml_best_before_convergence_is_undecided_while_the_inner_problem_is_not_solved():
    """The support loss falls only a hundredfold over the sweep: the median task's gradient norm
    ends at 0.05 × its start, above 10⁻³; undecided, with the count that would reach it."""
    slow = _curves(SETTLING, mean_support=np.geomspace(1.0, 1e-2, len(GRID)))
    verdict = claims.best_before_convergence(slow, LIMITS)
    assert verdict.holds is None and "not solved" in verdict.reason
    assert "a longer sweep would decide it" in verdict.reason and "inner steps" in verdict.reason
    # solved (the default support curve), the MSE still falling at the end: the best is at
    # convergence, and the claim fails
    assert claims.best_before_convergence(_curves(DECREASING), LIMITS).holds is False


def test_best_before_convergence_is_undecided_when_the_rise_is_within_the_noise():
    """k* = 100 on the choosing tasks (noise-free), but the rise to k_last, 0.001, is far below
    the held-out tasks' noise: undecided, not a fail, with the held-out tasks that would decide
    it."""
    shallow = np.r_[U_SHAPE[:6], np.full(4, U_SHAPE[5] + 1e-3)]
    curves = _curves(shallow, noise=0.0)
    held_out = np.arange(len(curves["query"])) % 2 == 1
    noise = np.random.default_rng(0).normal(0, 0.05, (held_out.sum(), 10))
    curves["query"][held_out] += noise - noise.mean(axis=0)  # each count's mean kept: the rise
    verdict = claims.best_before_convergence(curves, LIMITS)
    assert verdict.holds is None and "k* = 100" in verdict.reason and "straddles" in verdict.reason
    assert verdict.facts.needs is not None and verdict.facts.needs.of == "held-out tasks"


def _imaml(converged_query):
    """iMAML curves over U_SHAPE whose converged inner problem (the L-BFGS solution) has the
    test MSE ``converged_query`` × each task's level."""
    curves = _curves(U_SHAPE, seed=3)
    curves["method"] = "imaml"
    level = curves["query"][:, 5:6] / U_SHAPE[5]
    curves["query_reference"] = np.repeat(converged_query * level, len(GRID), axis=1)
    curves["objective_reference"] = np.full_like(curves["query"], 2.0)
    curves["objective"] = np.full_like(curves["query"], 2.001)  # a stalled solver: never within
    return curves


def test_imaml_best_before_convergence_compares_with_the_converged_solution():
    verdict = claims.best_before_convergence(_imaml(0.45), LIMITS)  # rises to convergence
    assert verdict.holds is True and "MSE(converged)" in verdict.reason
    assert "5.0e-04 (relative)" in verdict.reason  # how far k* is from convergence, reported
    verdict = claims.best_before_convergence(_imaml(0.05), LIMITS)  # converged is better
    assert verdict.holds is False
    rising = _imaml(0.45)
    rising["query"][:, -1] = 0.05 * rising["query"][:, 5] / U_SHAPE[5]  # the best count is k_max
    rising["query_reference"] = rising["query"][:, -1:].repeat(len(GRID), axis=1) + np.random.\
        default_rng(1).normal(0, 0.05, (len(rising["query"]), 1))  # converged: no worse
    verdict = claims.best_before_convergence(rising, LIMITS)
    assert verdict.holds is False and "k* = 10000" in verdict.reason
    assert "nearest convergence" in verdict.reason
    early = _imaml(0.45)  # k* = 100, and the converged MSE within the noise of it
    early["query_reference"] = early["query"][:, 5:6].repeat(len(GRID), axis=1) + np.random.\
        default_rng(2).normal(0, 0.05, (len(early["query"]), 1))
    verdict = claims.best_before_convergence(early, LIMITS)
    assert verdict.holds is None and "k* = 100" in verdict.reason and "contains 0" in verdict.reason
    missing = _imaml(0.45)
    missing["query_reference"][:] = np.nan
    verdict = claims.best_before_convergence(missing, LIMITS)
    assert verdict.holds is None and "reference_iters = 0" in verdict.reason


@pytest.mark.parametrize("predicate", [claims.more_steps_help,
                                       claims.best_before_convergence])
def test_gates_leave_claims_undecided(predicate):
    short = predicate(_curves(SETTLING, outer_steps=10), LIMITS)
    assert short.holds is None and "outer steps" in short.reason
    unlearned = predicate(_curves(SETTLING * 10), LIMITS)
    assert unlearned.holds is None and "not learned" in unlearned.reason
    diverging = _curves(SETTLING)
    diverging["query"][:20, -1] = np.nan  # 10 % of the tasks
    verdict = predicate(diverging, LIMITS)
    assert verdict.holds is None and "diverged" in verdict.reason
    few = _curves(SETTLING)
    few["query"][:3, -1] = np.inf  # 1.5 %: excluded and reported, still decided
    verdict = predicate(few, LIMITS)
    assert verdict.holds is not None and "3 of 200 tasks diverged" in verdict.reason


def test_held_out_choice_is_not_fooled_by_noise():
    """A flat curve with large noise: picking k* on the same tasks would often find a 'gain';
    picking it on the other half rarely does."""
    decided = [claims.more_steps_help(_curves(np.full(len(GRID), 0.5), noise=0.2, seed=s),
                                        LIMITS).holds for s in range(20)]
    assert sum(v is True for v in decided) <= 3


def test_above_floor_holds_and_fails():
    curves = _curves(U_SHAPE + 2.0)
    assert claims.above_floor(curves, floor=1.7, floor_se=0.02).holds is True
    assert claims.above_floor(curves, floor=2.5, floor_se=0.02).holds is False


def test_uniform_moments_match_quadrature():
    a, b, t = np.array(-1.3), np.array(2.1), np.array(0.7)
    x = np.linspace(a, b, 200_001)
    first, second = floor._uniform_moments(a, b, t)
    assert first == pytest.approx(np.mean(np.sin(x + t)), abs=2e-5)
    assert second == pytest.approx(np.mean(np.sin(x + t) ** 2), abs=2e-5)


def test_floor_and_baselines():
    assert floor.target_variance() == pytest.approx(4.2517, abs=1e-4)
    rng = np.random.default_rng(0)
    amplitude = rng.uniform(0.1, 5.0, 400_000)
    x, phase = rng.uniform(-5, 5, 400_000), rng.uniform(0, np.pi, 400_000)
    y = amplitude * np.sin(x - phase)
    best = -2 * 2.55 / np.pi * np.cos(x)
    assert floor.task_agnostic_mse() == pytest.approx(np.mean((y - best) ** 2), rel=0.01)
    found = floor.per_set_bn_floor(n_tasks=300, n_scales=24, n_shifts=16)
    # the floor is between "knowing everything" (0) and "predicting 0"; standardizing loses more
    assert 1.3 < found.centred < 2.1 and 1.6 < found.standardized < 2.5
    assert found.centred < found.standardized < found.target_variance
    with pytest.raises(ValueError):
        floor.per_set_bn_floor(n_tasks=1)


@pytest.mark.parametrize("override, word", [({"fig4_seeds": [0, 0, 1]}, "fig4_seeds"),
                                            ({"fig4_meta_batches": [5]}, "fig4_meta_batches"),
                                            ({"maml_inner_steps": [1, 1]}, "maml_inner_steps")])
def test_chapter_parameters_checked_before_compute(override, word):
    from i2o.compute import door, profiles

    with pytest.raises(profiles.ParameterError, match=word):
        door.enter("meta", "smoke", **override)
    with pytest.raises(profiles.ParameterError, match="normalization"):
        profiles.resolve("meta", "smoke", normalization="batch")


def test_a_model_is_judged_only_once_its_outer_loss_has_settled():
    limits = claims.Thresholds(min_outer_steps=1000, baseline_mse=3.0, plateau_window=0.1,
                               plateau_rtol=0.05)
    settled = _curves(SETTLING)
    settled["train_losses"] = np.r_[np.linspace(4.0, 0.5, 4000), np.full(1000, 0.5)]
    assert claims.plateau(settled["train_losses"], 0.1) == pytest.approx(0.0)
    assert claims.best_before_convergence(settled, limits).holds is True
    moving = _curves(SETTLING)
    moving["train_losses"] = np.linspace(4.0, 0.5, 5000)  # a tenth of its fall in each tenth
    assert claims.plateau(moving["train_losses"], 0.1) == pytest.approx(0.111, abs=1e-3)
    verdict = claims.best_before_convergence(moving, limits)
    assert verdict.holds is None and "has not settled" in verdict.reason
    assert "more outer steps would decide it" in verdict.reason


def test_a_loss_falling_towards_zero_along_a_power_law_settles():
    """An interpolating model's loss ∝ 1/t keeps losing about a tenth of its value per tenth of
    its training (a rule on its level alone would never call it settled), but what is left to
    fall is a vanishing share of its whole fall."""
    steps = np.arange(5000)
    losses = 4.0 / (1 + steps / 50)
    tenth = len(steps) // 10
    relative = 1 - losses[-tenth:].mean() / losses[-2 * tenth:-tenth].mean()
    assert relative > 0.05
    assert claims.plateau(losses, 0.1) < 0.01
    assert claims.plateau(np.full(100, 4.2), 0.1) == 0.0  # stuck: settled, judged by the baseline
    rising_then_falling = np.r_[np.linspace(3, 5, 80), np.linspace(5, 4, 20)]
    assert claims.plateau(rising_then_falling, 0.1) > 0.1  # no whole fall: its level decides


def test_one_claims_table_with_sections_and_its_conclusions():
    """``claims.claims`` records every verdict as a row (the paper's claims, then the ablation's
    and the check of λ), each section's ids in ``facts``; the chapter's prose writes one line per
    row of a section, with the reason of an undecided one."""
    from i2o.chapters.meta import runs
    from i2o.compute import profiles
    from i2o.compute.chapter import Cost
    from i2o.verdicts import prose

    params = profiles.resolve("meta", "smoke", min_outer_steps_to_decide=1000)
    maml, imaml = _curves(U_SHAPE), _curves(U_SHAPE, outer_steps=10)
    imaml["method"] = "imaml"
    ablation = {**_curves(U_SHAPE + 2.0), "normalization": "per_set_bn"}
    for curves in (maml, imaml, ablation):
        curves["train_losses"] = np.full(100, 0.5)  # settled
    row = {"signal": 0.02, "ratio": 1.5, "n_batches": 20}
    results = runs.MetaResults(
        params=params, cost=Cost(0.0, 0, 0),
        figure3={"maml-N1-online-seed0": maml, "imaml-N1-lam8-online-seed0": imaml},
        figure4={}, ablation={"maml-N1-per_set_bn-online-seed0": ablation},
        floor={"centred": 1.7, "standard_error": 0.02, "task_agnostic": 3.0},
        noise={"maml-N1": {**row, "noise": 0.01}, "imaml-lam8": {**row, "noise": 0.015}})
    table = claims.claims(results)
    assert [r.claim.split(":")[0] for r in table.rows] == [
        "MAML (N = 1)", "MAML (N = 1)", "iMAML (N = 1)", "iMAML (N = 1)",
        "MAML (N = 1, per_set_bn)", "MAML (N = 1, per_set_bn)", "MAML (N = 1, per_set_bn)",
        "iMAML (λ = 8)"]
    # one writer: each row's reason (quoting its measurement) in check, its section a field
    assert all(r.check and r.value == "" and r.margin == "" and r.decided_by == ""
               for r in table.rows)
    assert {r.section for r in table.rows} <= set(table.facts["sections"])
    assert table.facts["sections"]["figure4"] == []
    assert table["ablation/maml-N1-per_set_bn-online/above-floor"].holds is True
    assert table["noise/usable-meta-gradient"].holds is True
    lines = prose.conclusions(table, "figure3", display=False).split("\n")
    assert lines[0] == f"- *{table.rows[0].claim}*: **holds** — {table.rows[0].check}."
    undecided = table.rows[2]  # iMAML trained 10 outer steps: not enough to decide
    assert undecided.holds is None and "outer steps" in undecided.check
    assert lines[2] == f"- *{undecided.claim}*: is **undecided** — {undecided.check}."
    assert prose.conclusions(table, "figure4", display=False) == (
        "- (no claim in this section for these parameters)")


def test_a_row_short_of_held_out_tasks_names_the_run_that_decides_it():
    """A real but small gain under task noise: the held-out interval contains 0, the row's facts
    count the held-out tasks it needs, and the chapter names ``n_test_tasks`` at twice that (the
    held-out tasks are half of them) with headroom; the command passes the chapter's door. A
    decided row names nothing."""
    from bank import meta_results

    from i2o.compute import door
    from i2o.verdicts import deciding, prose

    results = meta_results()
    small = np.r_[np.full(1, 0.5), np.full(len(GRID) - 1, 0.495)]
    maml = {**_curves(small, noise=0.05, seed=1), "train_losses": np.full(100, 0.5),
            "seconds": 10.0}
    results.figure3["maml-N1-online-seed0"] = maml
    table = claims.claims(results)
    row = table["figure3/maml-N1-online/more-steps"]
    assert row.holds is None and row.facts.needs.of == "held-out tasks"
    remedy = table.remedies[row.id]
    wanted = int(np.ceil(deciding.HEADROOM * 2 * row.facts.needs.count))
    assert remedy.overrides == (("n_test_tasks", wanted),) and wanted > 200
    assert row.decided_by == remedy.command() == (
        f'make fig-meta PROFILE=smoke P="-p n_test_tasks {wanted}"')
    door.enter("meta", "smoke", n_test_tasks=wanted)
    assert "n_test_tasks" in prose.conclusions(table, "figure3", display=False)
    decided = table["ablation/maml-N1-per_set_bn-online/above-floor"]
    assert decided.holds is True and decided.id not in table.remedies


def test_a_claim_has_the_same_id_at_every_replicate():
    """A replicate redraws the models' seeds, which their labels carry; the rows' ids leave the
    seed out, so that the Robustness page matches a claim across replicates."""
    from bank import meta_results

    first = meta_results()
    redrawn = meta_results()
    for section in (redrawn.figure3, redrawn.ablation):
        for name in list(section):
            section[name.replace("-seed0", "-seed1614212611")] = section.pop(name)
    ids = [row.id for row in claims.claims(first).rows]
    assert ids == [row.id for row in claims.claims(redrawn).rows]
    assert not any("seed" in id for id in ids)


@pytest.mark.parametrize("case, verdict, word", [("settling", True, "**holds**"),
                                                 ("best at the end", False, "**fails**"),
                                                 ("still moving", None, "is **undecided**")])
def test_maml_best_before_convergence_prose_reads_for_every_verdict(case, verdict, word):
    """The chapter's conclusion of the row: the claim (convergence as the sweep's last count,
    where the inner problem is solved), its verdict and its reason."""
    from bank import meta_results

    from i2o.verdicts import prose

    curves = {"settling": lambda: _curves(SETTLING),
              "best at the end": lambda: _tail_within_noise(
                  _curves(FALLING_THEN_FLAT, noise=0.0), start=6),
              "still moving": lambda: _curves(
                  SETTLING, mean_support=np.geomspace(1.0, 1e-2, len(GRID)))}[case]()
    results = meta_results()
    results.figure3["maml-N1-online-seed0"] = {**curves, "train_losses": np.full(100, 0.5)}
    table = claims.claims(results)
    row = table["figure3/maml-N1-online/best-before-convergence"]
    assert row.holds is verdict
    assert "before convergence (before the sweep's last count" in row.claim
    lines = prose.conclusions(table, "figure3", display=False).split("\n")
    assert f"- *{row.claim}*: {word} — {row.check}." in lines
