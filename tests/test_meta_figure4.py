"""Figure 4's claim, per model: Kendall's τ between each model's ℓ(z_N) and its D(N, ΔN) at the
largest ΔN, with its exact null distribution, one-sided at 5 %; on doctored Figure 4 curves where
it must hold, fail, and be left undecided; the exact p-value against a brute-force enumeration."""

import dataclasses
import itertools
import math

import numpy as np
import pytest

from i2o.chapters.meta import claims
from i2o.verdicts import prose, ranks

LIMITS = claims.Thresholds(min_outer_steps=1000, fig4_min_outer_steps=1000, baseline_mse=3.0)
SIZES = (1, 2, 5, 10, 25)
GRID = np.array([1, 2, 4, 8, 16, 24, 32, 64, 128, 256, 1024])  # N = 16


def _model(size, loss, final, outer_steps=5000, **extra):
    """A Figure 4 model's curves: training loss ``loss`` at N and D rising to ``final``."""
    increase = np.interp(GRID, [16, 1024], [0.0, final])
    increase[GRID < 16] = 0.1  # fewer iterations than N: a higher loss
    return {"n_meta_batches": size, "loss_at_n": loss, "increase": increase, "grid": GRID,
            "inner_steps": 16, "outer_steps": outer_steps,
            "query": np.zeros((25 * size, len(GRID))), "n_diverged": 0, **extra}


def _models(losses, finals, **extra):
    """One model per (ℓ, D) pair, cycling through the training-set sizes, seeds counted per
    size."""
    per_set, seeds = {}, dict.fromkeys(SIZES, 0)
    for i, (loss, final) in enumerate(zip(losses, finals, strict=True)):
        size = SIZES[i % len(SIZES)]
        per_set[f"imaml-N16-lam8-set{size}-seed{seeds[size]}"] = _model(size, loss, final,
                                                                        **extra)
        seeds[size] += 1
    return per_set


def _association(n, slope, seed=0, spread=0.05):
    """ℓ log-spaced over n models and D = slope × its rank plus noise."""
    rng = np.random.default_rng(seed)
    losses = np.geomspace(0.01, 2.0, n)
    finals = slope * np.linspace(0.0, 1.0, n) + rng.normal(0, spread, n)
    return losses, finals


@pytest.mark.parametrize("n", [10, 15])
def test_fit_ordering_holds_over_every_model_when_lower_loss_means_higher_d(n):
    verdict = claims.fit_ordering(_models(*_association(n, slope=-1.0)), LIMITS)
    assert verdict.holds is True
    assert f"over {n} models" in verdict.reason and "every model counts" in verdict.reason
    assert verdict.reason.count("B = ") == n


@pytest.mark.parametrize("n", [10, 15])
def test_fit_ordering_fails_when_lower_loss_means_lower_d(n):
    verdict = claims.fit_ordering(_models(*_association(n, slope=+1.0)), LIMITS)
    assert verdict.holds is False


def test_fit_ordering_is_undecided_without_an_association():
    losses = np.geomspace(0.01, 2.0, 10)
    finals = np.array([0.3, 0.9, 0.1, 0.6, 0.5, 0.2, 0.8, 0.4, 0.0, 0.7])
    found = ranks.kendall(losses, finals)
    assert abs(found.tau) < 0.2
    verdict = claims.fit_ordering(_models(losses, finals), LIMITS)
    assert verdict.holds is None and verdict.facts.closed_by == "power"
    assert "more models (seeds per size) would decide it" in verdict.reason
    assert f"τ = {found.tau:+.3f}" in verdict.reason and "over 10 models" in verdict.reason
    assert f"{found.p_negative:.3g}" in verdict.reason


def test_a_non_finite_model_leaves_it_undecided_naming_it():
    losses, finals = _association(10, slope=-1.0)
    per_set = _models(losses, finals)
    per_set["imaml-N16-lam8-set5-seed1"]["loss_at_n"] = float("nan")
    verdict = claims.fit_ordering(per_set, LIMITS)
    assert verdict.holds is None
    assert "B = 5, seed 1" in verdict.reason and "non-finite" in verdict.reason
    per_set = _models(losses, finals)
    per_set["imaml-N16-lam8-set2-seed0"]["increase"][-1] = np.inf
    verdict = claims.fit_ordering(per_set, LIMITS)
    assert verdict.holds is None and "B = 2, seed 0" in verdict.reason


def test_every_model_counts_whatever_it_learned_or_its_outer_loss_did():
    """A model above the task-agnostic MSE (it did not learn to use the support set) and one
    whose outer loss spiked both count; the spike is reported beside the model, with the point
    its training kept when the curves carry it."""
    losses, finals = _association(10, slope=-1.0)
    losses[-1] = 3.5  # not below the baseline of 3.0
    per_set = _models(losses, finals)
    spiked = np.r_[np.full(50, 0.1), np.full(50, 40.0)]
    per_set["imaml-N16-lam8-set1-seed0"].update(
        train_losses=spiked, selection="best", best_step=2000, best_loss=0.09, final_loss=41.0,
        peak_after_best=45.0)
    verdict = claims.fit_ordering(per_set, LIMITS)
    assert verdict.holds is True and "over 10 models" in verdict.reason
    assert "B = 1, seed 0: ℓ = 0.01" in verdict.reason
    assert "outer loss rose 0.1 → 40" in verdict.reason
    assert "kept step 2,000, training loss there 0.09, at the end 41, highest later 45" in \
        verdict.reason
    table = claims.figure4_table(per_set)
    assert table.count("\n") == 11 and "outer loss rose 0.1 → 40" in table


def test_a_model_kept_at_its_last_point_reports_no_kept_point():
    per_set = _models(*_association(10, slope=-1.0), selection="last", best_step=5000,
                      best_loss=float("nan"), final_loss=float("nan"))
    assert all(p.kept() == "" for p in claims.figure4_points(per_set))


def test_d_is_read_at_the_largest_delta_and_reported_near_n():
    point = claims.figure4_points(_models([0.1], [0.5]))[0]
    assert point.delta_max == 1024 - 16 and point.increase_at_max == pytest.approx(0.5)
    assert point.delta_near_n == 16  # N + ΔN = 32 is on the grid
    assert claims.near_n_index([1, 16, 28, 40, 256], 16) == 2  # 28 is nearer 32 on a log scale


def test_fit_ordering_gates():
    losses, finals = _association(10, slope=-1.0)
    short = claims.fit_ordering(_models(losses, finals, outer_steps=5), LIMITS)
    assert short.holds is None and "outer steps" in short.reason
    three = claims.fit_ordering(_models(losses[:3], finals[:3]), LIMITS)
    assert three.holds is None and "1/3!" in three.reason and "more models" in three.reason
    four = claims.fit_ordering(_models([0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]), LIMITS)
    assert four.holds is True  # p = 1/4! = 0.042
    tied = claims.fit_ordering(_models([0.1, 0.1, 0.3, 0.4, 0.5], [0.5, 0.4, 0.3, 0.2, 0.1]),
                               LIMITS)
    assert tied.holds is None and "tied" in tied.reason and "B = 1, seed 0" in tied.reason
    diverging = _models(losses, finals)
    for curves in diverging.values():
        curves["n_diverged"] = 25 * curves["n_meta_batches"]  # every training task
    assert claims.fit_ordering(diverging, LIMITS).holds is None


def _brute_force(x, y):
    """P(τ ≤ observed) and P(τ ≥ observed) over every ordering of y, by enumeration."""
    def tau(a, b):
        pairs = list(itertools.combinations(range(len(a)), 2))
        return sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i, j in pairs) / len(pairs)

    observed = tau(x, y)
    taus = np.array([tau(x, np.asarray(perm)) for perm in itertools.permutations(y)])
    return observed, np.mean(taus <= observed + 1e-12), np.mean(taus >= observed - 1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_exact_p_value_matches_brute_force_enumeration_for_six_models(seed):
    rng = np.random.default_rng(seed)
    x = rng.random(6)
    y = -x + rng.normal(0, 0.3, 6)
    observed, p_negative, p_positive = _brute_force(x, y)
    found = ranks.kendall(x, y)
    assert found.tau == pytest.approx(observed)
    assert found.p_negative == pytest.approx(p_negative)
    assert found.p_positive == pytest.approx(p_positive)


@pytest.mark.parametrize("n", [10, 15])
def test_exact_p_value_at_ten_and_fifteen_models(n):
    """A perfect reversal is one ordering in n!; the p-values of both sides sum to 1 + P(τ =
    observed)."""
    x = np.arange(n, dtype=float)
    found = ranks.kendall(x, -x)
    assert found.tau == pytest.approx(-1.0)
    assert found.p_negative == pytest.approx(1 / math.factorial(n))
    assert found.p_positive == pytest.approx(1.0)
    rng = np.random.default_rng(n)
    found = ranks.kendall(rng.random(n), rng.random(n))
    assert 1.0 < found.p_negative + found.p_positive <= 1.0 + 0.2


def _with_figure4(results, per_set, **extra):
    results.figure4.update(per_set)
    for curves in results.figure4.values():
        curves.update(method="imaml", train_losses=np.full(100, 0.5), **extra)
    return results


def test_figure_4_prose_reads_for_every_verdict():
    from bank import meta_results

    enough = 30000  # beyond the smoke profile's fig4_min_outer_steps_to_decide
    for slope, verdict, word in ((-1.0, True, "**holds**"), (+1.0, False, "**fails**"),
                                 (0.0, None, "is **undecided**")):
        losses, finals = _association(10, slope=slope, spread=0.0 if slope else 0.3, seed=3)
        results = _with_figure4(meta_results(), _models(losses, finals, outer_steps=enough))
        table = claims.claims(results)
        row = table["figure4/fit-ordering"]
        assert row.holds is verdict
        text = prose.conclusions(table, "figure4", display=False)
        assert text.startswith(f"- *{claims.FIT_ORDERING_CLAIM}*: {word} — Kendall τ")


def test_figure_4_undecided_below_the_paper_scale_names_the_paper_run():
    from bank import meta_results

    losses = np.geomspace(0.01, 2.0, 10)
    finals = np.array([0.3, 0.9, 0.1, 0.6, 0.5, 0.2, 0.8, 0.4, 0.0, 0.7])
    results = _with_figure4(meta_results(), _models(losses, finals, outer_steps=30000),
                            train_cpu_seconds_per_step=0.01)
    table = claims.claims(results)
    row = table["figure4/fit-ordering"]
    assert row.holds is None and row.decided_by == "make fig-meta PROFILE=paper"
    assert "the paper profile" in table.remedies[row.id].describe()
    decided = claims.claims(_with_figure4(meta_results(), _models(
        *_association(10, slope=-1.0), outer_steps=30000)))
    assert decided["figure4/fit-ordering"].holds is True
    assert "figure4/fit-ordering" not in decided.remedies


def test_figure_4_undecided_at_the_paper_scale_names_no_run_and_says_what_would_decide_it():
    from bank import meta_results

    from i2o.compute import profiles

    results = dataclasses.replace(meta_results(), params=profiles.resolve("meta", "paper"))
    losses = np.geomspace(0.01, 2.0, 15)
    finals = np.array([0.3, 0.9, 0.1, 0.6, 0.5, 0.2, 0.8, 0.4, 0.0, 0.7, 0.35, 0.65, 0.15, 0.85,
                       0.45])
    table = claims.claims(_with_figure4(results, _models(losses, finals, outer_steps=70000),
                                        train_cpu_seconds_per_step=0.01))
    row = table["figure4/fit-ordering"]
    assert row.holds is None and row.id not in table.remedies
    assert "more models (seeds per size) would decide it" in row.check


def test_figure_4_numbers():
    losses, finals = _association(10, slope=-1.0)
    numbers = claims.figure4_numbers(_models(losses, finals, outer_steps=30000))
    assert numbers["meta-fig4-models"] == 10 and numbers["meta-fig4-seeds"] == 2
    assert numbers["meta-fig4-outer-steps"] == 30000
    assert numbers["meta-fig4-max-delta"] == 1008 and numbers["meta-fig4-near-n-delta"] == 16
    found = ranks.kendall(losses, finals)
    assert numbers["meta-fig4-tau"] == found.tau
    assert numbers["meta-fig4-p-negative"] == found.p_negative
    losses[0] = np.nan
    assert "meta-fig4-tau" not in claims.figure4_numbers(_models(losses, finals))


def test_figure_4_draws_every_model_and_the_association():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from i2o.chapters.meta import figures

    per_set = _models(*_association(10, slope=-1.0))
    fig = figures.figure_4(per_set)
    curves, scatter = fig.axes[:2]
    assert len(curves.get_lines()) >= 10 and "Kendall τ" in scatter.get_title()
    plt.close(fig)
    per_set["imaml-N16-lam8-set1-seed0"]["loss_at_n"] = float("nan")
    fig = figures.figure_4(per_set)
    assert "undefined" in fig.axes[1].get_title()
    plt.close(fig)


def test_the_reading_is_the_mean_of_d_over_every_positive_delta_not_the_largest():
    """D̄ (READING.md, Figure 4): a model whose D is high over the curve but falls back at the
    largest ΔN ranks by its whole curve."""
    curves = _model(1, 0.1, 0.5)
    curves["increase"] = np.where(GRID > 16, 1.0, curves["increase"])
    curves["increase"][-1] = 0.0
    point = claims.figure4_point("imaml-N16-lam8-set1-seed0", curves)
    above = GRID[GRID > 16].size
    assert point.mean_increase == pytest.approx((above - 1) / above)
    assert point.increase_at_max == 0.0


def _by_size(direction, n=15, seed=0):
    rng = np.random.default_rng(seed)
    per_set = {}
    for i in range(n):
        size = SIZES[i % len(SIZES)]
        final = direction * np.log(size) + rng.normal(0, 0.05)
        per_set[f"imaml-N16-lam8-set{size}-seed{i // len(SIZES)}"] = _model(
            size, float(np.geomspace(0.01, 2.0, n)[i]), float(final))
    return per_set


def test_size_ordering_holds_when_fewer_meta_batches_mean_higher_d():
    found = claims.size_ordering(_by_size(-1.0), LIMITS)
    assert found.holds is True and "τ-b" in found.reason


def test_size_ordering_fails_when_more_meta_batches_mean_higher_d_and_needs_models():
    assert claims.size_ordering(_by_size(+1.0), LIMITS).holds is False
    few = claims.size_ordering(_by_size(-1.0, n=5), LIMITS)
    assert few.holds is None and few.facts.closed_by == "count"
