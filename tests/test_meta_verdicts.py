"""The meta-learning chapter's claims: every predicate on doctored curves where it must hold, where
it must fail, and where its gates must leave it undecided; the per-set-BN floor's arithmetic."""

import dataclasses

import numpy as np
import pytest
from bank import meta_curves

from i2o import gates
from i2o.chapters.meta import claims, floor

GRID = np.array([1, 2, 5, 10, 30, 100, 300, 1000, 3000, 10000])
LIMITS = claims.Thresholds(min_outer_steps=1000, fig4_min_outer_steps=1000, baseline_mse=3.0)


_curves = meta_curves


DECREASING = np.geomspace(0.6, 0.1, len(GRID))
U_SHAPE = np.array([0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.2, 0.3, 0.4, 0.45])
RISING = np.geomspace(0.6, 1.2, len(GRID))


def test_more_steps_help_holds_and_fails():
    assert claims.more_steps_help(_curves(DECREASING), LIMITS)[0] is True
    assert claims.more_steps_help(_curves(RISING), LIMITS)[0] is False
    flat = _curves(np.full(len(GRID), 0.5), noise=0.05)
    verdict = claims.more_steps_help(flat, LIMITS)
    assert verdict[0] is None and "would decide it" in verdict[1]  # no power is not a fail


def test_a_gain_below_the_noise_is_undecided_not_false():
    """A real but small gain (1 % of the level) under task noise ten times larger: the held-out
    interval contains 0; with 50 times the tasks it is decided."""
    small = np.r_[np.full(1, 0.5), np.full(len(GRID) - 1, 0.495)]
    verdict = claims.more_steps_help(_curves(small, noise=0.05, seed=1), LIMITS)
    assert verdict[0] is None and "contains 0" in verdict[1]
    many = claims.more_steps_help(_curves(small, noise=0.05, seed=1, n_tasks=10000), LIMITS)
    assert many[0] is True


def test_best_before_convergence_holds_and_fails():
    verdict = claims.best_before_convergence(_curves(U_SHAPE), LIMITS)
    assert verdict[0] is True and "held-out" in verdict[1]
    late = claims.best_before_convergence(_curves(DECREASING), LIMITS)  # k* = k_max ≥ k_conv
    assert late[0] is False and "too little power" not in late[1]


def test_best_before_convergence_is_undecided_when_the_rise_is_within_the_noise():
    """k* = 100 lies before k_conv = 300 on the choosing tasks (noise-free), but the rise to
    k_conv, 0.001, is far below the held-out tasks' noise: undecided, not a fail."""
    shallow = np.r_[U_SHAPE[:6], np.full(4, U_SHAPE[5] + 1e-3)]
    curves = _curves(shallow, noise=0.0)
    held_out = np.arange(len(curves["query"])) % 2 == 1
    curves["query"][held_out] += np.random.default_rng(0).normal(0, 0.05, (held_out.sum(), 10))
    verdict = claims.best_before_convergence(curves, LIMITS)
    assert verdict[0] is None and "k* = 100" in verdict[1] and "contains 0" in verdict[1]


def test_best_before_convergence_needs_a_converged_inner_problem():
    slow = np.geomspace(1.0, 1e-2, len(GRID))  # the gradient falls only 10-fold by k_max
    verdict = claims.best_before_convergence(_curves(U_SHAPE, mean_support=slow), LIMITS)
    assert verdict[0] is None and "has not converged" in verdict[1]


def test_an_interpolating_maml_model_converges_by_its_gradient():
    """Support loss → 0 with a relative change of 40 % per grid step to the end (the old
    relative-change rule never met), gradient 10⁻⁴ of its start: converged, and decided."""
    interpolating = 0.6 ** np.arange(len(GRID), dtype=float) * 1e-2
    interpolating[6:] *= 1e-3
    curves = _curves(U_SHAPE, mean_support=interpolating)
    assert np.all(np.abs(np.diff(curves["support"][:, -2:], axis=1)) >
                  0.3 * curves["support"][:, -2:-1])
    converged = claims.converged_tasks(curves, LIMITS)
    assert converged[:, -1].all() and not converged[:, 0].any()
    verdict = claims.best_before_convergence(curves, LIMITS)
    assert verdict[0] is True and "k_conv = 300" in verdict[1]


def test_maml_converges_when_the_median_task_has():
    """A fifth of the tasks never reach 1 % of their starting gradient (a long tail): the inner
    problem still converges, at the median task's count, and the claim is decided."""
    curves = _curves(U_SHAPE)
    curves["grad_norm"][:40] = np.maximum(curves["grad_norm"][:40], 0.03)
    verdict = claims.best_before_convergence(curves, LIMITS)
    assert verdict[0] is True and "k_conv = 300 (80% of tasks" in verdict[1]
    ninety = claims.Thresholds(**{**LIMITS.__dict__, "min_converged_fraction": 0.9})
    assert claims.best_before_convergence(curves, ninety)[0] is None


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
    assert verdict[0] is True and "MSE(converged)" in verdict[1]
    assert "5.0e-04 (relative)" in verdict[1]  # how far k* is from convergence, reported
    verdict = claims.best_before_convergence(_imaml(0.05), LIMITS)  # converged is better
    assert verdict[0] is False
    rising = _imaml(0.45)
    rising["query"][:, -1] = 0.05 * rising["query"][:, 5] / U_SHAPE[5]  # the best count is k_max
    rising["query_reference"] = rising["query"][:, -1:].repeat(len(GRID), axis=1) + np.random.\
        default_rng(1).normal(0, 0.05, (len(rising["query"]), 1))  # converged: no worse
    verdict = claims.best_before_convergence(rising, LIMITS)
    assert verdict[0] is False and "k* = 10000" in verdict[1]
    assert "nearest convergence" in verdict[1]
    early = _imaml(0.45)  # k* = 100, and the converged MSE within the noise of it
    early["query_reference"] = early["query"][:, 5:6].repeat(len(GRID), axis=1) + np.random.\
        default_rng(2).normal(0, 0.05, (len(early["query"]), 1))
    verdict = claims.best_before_convergence(early, LIMITS)
    assert verdict[0] is None and "k* = 100" in verdict[1] and "contains 0" in verdict[1]
    missing = _imaml(0.45)
    missing["query_reference"][:] = np.nan
    verdict = claims.best_before_convergence(missing, LIMITS)
    assert verdict[0] is None and "reference_iters = 0" in verdict[1]


@pytest.mark.parametrize("predicate", [claims.more_steps_help,
                                       claims.best_before_convergence])
def test_gates_leave_claims_undecided(predicate):
    short = predicate(_curves(U_SHAPE, outer_steps=10), LIMITS)
    assert short[0] is None and "outer steps" in short[1]
    unlearned = predicate(_curves(U_SHAPE * 10), LIMITS)
    assert unlearned[0] is None and "not learned" in unlearned[1]
    diverging = _curves(U_SHAPE)
    diverging["query"][:20, -1] = np.nan  # 10 % of the tasks
    verdict = predicate(diverging, LIMITS)
    assert verdict[0] is None and "diverged" in verdict[1]
    few = _curves(U_SHAPE)
    few["query"][:3, -1] = np.inf  # 1.5 %: excluded and reported, still decided
    verdict = predicate(few, LIMITS)
    assert verdict[0] is not None and "3 of 200 tasks diverged" in verdict[1]


def test_held_out_choice_is_not_fooled_by_noise():
    """A flat curve with large noise: picking k* on the same tasks would often find a 'gain';
    picking it on the other half rarely does."""
    decided = [claims.more_steps_help(_curves(np.full(len(GRID), 0.5), noise=0.2, seed=s),
                                        LIMITS)[0] for s in range(20)]
    assert sum(v is True for v in decided) <= 3


def test_above_floor_holds_and_fails():
    curves = _curves(U_SHAPE + 2.0)
    assert claims.above_floor(curves, floor=1.7, floor_se=0.02)[0] is True
    assert claims.above_floor(curves, floor=2.5, floor_se=0.02)[0] is False


def _figure4(final_by_size, loss_by_size, seeds=3, outer_steps=5000, n_grid=5):
    per_set = {}
    rng = np.random.default_rng(1)
    for size, final, loss in zip([1, 2, 5, 10, 25], final_by_size, loss_by_size, strict=False):
        for seed in range(seeds):
            increase = np.linspace(0.0, final, n_grid) + rng.normal(0, 1e-3, n_grid)
            increase[0] = 0.0
            per_set[f"set{size}-seed{seed}"] = {
                "n_meta_batches": size, "loss_at_n": loss + rng.normal(0, 1e-3),
                "increase": increase, "grid": np.arange(16, 16 + n_grid), "inner_steps": 16,
                "outer_steps": outer_steps, "query": np.zeros((25 * size, n_grid)),
                "n_diverged": 0}
    return per_set


def test_fit_ordering_holds_fails_and_needs_power():
    loss = [0.1, 0.2, 0.4, 0.8, 1.2]
    assert claims.fit_ordering(_figure4([0.5, 0.4, 0.3, 0.2, 0.1], loss), LIMITS)[0] is True
    assert claims.fit_ordering(_figure4([0.1, 0.2, 0.3, 0.4, 0.5], loss), LIMITS)[0] is False
    one_swap = [0.5, 0.4, 0.3, 0.1, 0.2]  # ρ = −0.9: still holds (false-positive rate 0.042)
    assert claims.fit_ordering(_figure4(one_swap, loss), LIMITS)[0] is True
    two_swaps = [0.4, 0.5, 0.3, 0.1, 0.2]  # ρ = −0.8: not told from a random ordering
    verdict = claims.fit_ordering(_figure4(two_swaps, loss), LIMITS)
    assert verdict[0] is None and "would decide it" in verdict[1]
    reversed_one_swap = [0.1, 0.2, 0.3, 0.5, 0.4]  # ρ = +0.9: the opposite ordering, decided
    assert claims.fit_ordering(_figure4(reversed_one_swap, loss), LIMITS)[0] is False
    few_seeds = claims.fit_ordering(_figure4([0.5, 0.4, 0.3, 0.2, 0.1], loss, seeds=2), LIMITS)
    assert few_seeds[0] is None and "seed" in few_seeds[1]
    three_sizes = claims.fit_ordering(_figure4([0.5, 0.4, 0.3], loss[:3]), LIMITS)
    assert three_sizes[0] is None and "false-positive rate" in three_sizes[1]
    short = claims.fit_ordering(_figure4([0.5, 0.4, 0.3, 0.2, 0.1], loss, outer_steps=5),
                                  LIMITS)
    assert short[0] is None


def test_fit_ordering_counts_only_models_that_meta_learned():
    """A model whose training loss at N is not below the task-agnostic MSE has not learned to use
    the support set: with fewer than 3 such seeds at a size the ordering is undecided."""
    decreasing = [0.5, 0.4, 0.3, 0.2, 0.1]
    unlearned = claims.fit_ordering(_figure4(decreasing, [0.1, 0.2, 0.4, 0.8, 3.5]), LIMITS)
    assert unlearned[0] is None and "B = 25: 0 of 3" in unlearned[1]
    assert "meta-learned" in unlearned[1]
    increasing = claims.fit_ordering(_figure4(decreasing[::-1], [0.1, 0.2, 0.4, 0.8, 2.9]), LIMITS)
    assert increasing[0] is False  # all below the baseline of 3.0: decided, and it fails


def test_fit_ordering_names_the_models_set_aside_and_the_seeds_that_would_decide():
    """Models that did not meta-learn are named with their loss at N and the largest rise of their
    outer loss; the gate's facts give the seeds per size at which every size would have 3 that
    learned, at the rate each size had (1 of 3 at B = 25: 9 seeds)."""
    decreasing = [0.5, 0.4, 0.3, 0.2, 0.1]
    per_set = _figure4(decreasing, [0.1, 0.2, 0.4, 0.8, 0.9])
    spiked = np.r_[np.full(50, 0.1), np.full(50, 40.0)]
    for seed in (0, 1):
        per_set[f"set25-seed{seed}"].update(loss_at_n=35.0, train_losses=spiked)
    verdict = claims.fit_ordering(per_set, LIMITS)
    assert verdict[0] is None and "B = 25: 1 of 3" in verdict[1]
    assert "set25 seed 0: training loss at N 35" in verdict[1]
    assert "from 0.1 up to 40" in verdict[1]
    assert verdict.facts.needs == gates.Needs(9, "seeds per training-set size")
    every_one = claims.fit_ordering(_figure4(decreasing, [0.1, 0.2, 0.4, 0.8, 0.9]), LIMITS)
    assert every_one[0] is True and every_one.facts.needs is None


def test_seeds_to_learn():
    assert claims.seeds_to_learn({1: 3, 2: 1}, {1: 3, 2: 3}, 3) == 9
    assert claims.seeds_to_learn({1: 3, 2: 3}, {1: 3, 2: 3}, 3) == 3
    assert claims.seeds_to_learn({1: 2, 2: 0}, {1: 2, 2: 2}, 3) == 6  # pooled 1 of 2 for B = 2
    assert claims.seeds_to_learn({1: 0, 2: 0}, {1: 3, 2: 3}, 3) is None


def test_largest_rise():
    low, high = claims.largest_rise(np.r_[np.full(40, 1.0), np.full(40, 0.1), np.full(20, 30.0)])
    assert (low, high) == pytest.approx((0.1, 30.0))
    falling = np.linspace(1.0, 0.1, 100)
    low, high = claims.largest_rise(falling)
    assert high < low  # no rise: the caller says nothing
    assert np.isnan(claims.largest_rise(np.ones(5))[0])


def test_spearman_false_positive_rate():
    assert claims.spearman_false_positive_rate(5, -0.9) == pytest.approx(5 / 120)
    assert claims.spearman_false_positive_rate(5, -0.7) == pytest.approx(14 / 120)
    assert claims.spearman_false_positive_rate(4, -0.9) == pytest.approx(1 / 24)
    assert claims.spearman_false_positive_rate(3, -0.9) == pytest.approx(1 / 6)


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
    from i2o import door, profiles

    with pytest.raises(profiles.ParameterError, match=word):
        door.enter("meta", "smoke", **override)
    with pytest.raises(profiles.ParameterError, match="normalization"):
        profiles.resolve("meta", "smoke", normalization="batch")


def test_a_model_is_judged_only_once_its_outer_loss_has_settled():
    limits = claims.Thresholds(min_outer_steps=1000, baseline_mse=3.0, plateau_window=0.1,
                               plateau_rtol=0.05)
    settled = _curves(U_SHAPE)
    settled["train_losses"] = np.r_[np.linspace(4.0, 0.5, 4000), np.full(1000, 0.5)]
    assert claims.plateau(settled["train_losses"], 0.1) == pytest.approx(0.0)
    assert claims.best_before_convergence(settled, limits)[0] is True
    moving = _curves(U_SHAPE)
    moving["train_losses"] = np.linspace(4.0, 0.5, 5000)  # a tenth of its fall in each tenth
    assert claims.plateau(moving["train_losses"], 0.1) == pytest.approx(0.111, abs=1e-3)
    verdict = claims.best_before_convergence(moving, limits)
    assert verdict[0] is None and "has not settled" in verdict[1]
    assert "more outer steps would decide it" in verdict[1]


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
    from i2o import profiles, prose
    from i2o.chapter import Cost
    from i2o.chapters.meta import runs

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

    from i2o import deciding, door, prose

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


def test_figure_4_undecided_below_the_paper_scale_names_the_paper_run():
    from bank import meta_results

    results = meta_results()
    two_swaps = [0.4, 0.5, 0.3, 0.1, 0.2]  # ρ = −0.8: undecided
    enough = 30000  # beyond the smoke profile's fig4_min_outer_steps_to_decide
    results.figure4.update(_figure4(two_swaps, [0.1, 0.2, 0.4, 0.8, 1.2], outer_steps=enough))
    for curves in results.figure4.values():
        curves.update(method="imaml", train_cpu_seconds_per_step=0.01,
                      train_losses=np.full(100, 0.5))
    table = claims.claims(results)
    row = table["figure4/fit-ordering"]
    assert row.holds is None and "would decide it" in row.check
    assert row.decided_by == "make fig-meta PROFILE=paper"
    assert "the paper profile" in table.remedies[row.id].describe()
    one_swap = [0.5, 0.4, 0.3, 0.1, 0.2]  # decided: nothing to name
    results.figure4.clear()
    results.figure4.update(_figure4(one_swap, [0.1, 0.2, 0.4, 0.8, 1.2], outer_steps=enough))
    for curves in results.figure4.values():
        curves.update(method="imaml", train_losses=np.full(100, 0.5))
    decided = claims.claims(results)
    assert decided["figure4/fit-ordering"].holds is True
    assert "figure4/fit-ordering" not in decided.remedies


def test_figure_4_undecided_at_the_paper_scale_for_want_of_learned_models_names_more_seeds():
    """At the paper profile a Figure 4 ordering left open because too few models per size
    meta-learned names fig4_seeds raised (headroom 1.25 × 9 = 12 seeds), costed per model; an
    ordering open at the paper scale for another reason names nothing."""
    from bank import meta_results

    from i2o import deciding, door, profiles

    results = meta_results()
    results = dataclasses.replace(results, params=profiles.resolve("meta", "paper"))
    decreasing = [0.5, 0.4, 0.3, 0.2, 0.1]
    results.figure4.update(_figure4(decreasing, [0.1, 0.2, 0.4, 0.8, 0.9], outer_steps=70000))
    for curves in results.figure4.values():
        curves.update(method="imaml", train_cpu_seconds_per_step=0.01, seconds=5.0,
                      train_losses=np.full(100, 0.5))
    for seed in (0, 1):
        results.figure4[f"set25-seed{seed}"]["loss_at_n"] = 35.0
    table = claims.claims(results)
    row = table["figure4/fit-ordering"]
    assert row.holds is None and row.facts.needs.count == 9
    remedy = table.remedies[row.id]
    assert remedy.overrides == (("fig4_seeds", list(range(12))),)
    assert remedy.seconds == pytest.approx(9 * 5 * (0.01 * 70000 + 5.0))
    assert row.decided_by == remedy.command() == (
        "make fig-meta PROFILE=paper P=\"-p fig4_seeds '[0,1,2,3,4,5,6,7,8,9,10,11]'\"")
    door.enter("meta", "paper", fig4_seeds=list(range(12)))
    assert deciding.HEADROOM * 9 <= 12
    two_swaps = [0.4, 0.5, 0.3, 0.1, 0.2]  # every model learned, ρ = −0.8: no count to name
    results.figure4.clear()
    results.figure4.update(_figure4(two_swaps, [0.1, 0.2, 0.4, 0.8, 0.9], outer_steps=70000))
    for curves in results.figure4.values():
        curves.update(method="imaml", train_losses=np.full(100, 0.5))
    undecided = claims.claims(results)
    assert undecided["figure4/fit-ordering"].holds is None
    assert "figure4/fit-ordering" not in undecided.remedies


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
