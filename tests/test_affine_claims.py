"""Tests of i2o.chapters.affine (jobs, runs, claims, figures): the affine chapter's
computations, quoted numbers, claims verdicts and figures, on smoke-sized results (some doctored
to make a claim fail), and the gate its verdicts use (:func:`i2o.verdicts.gates.compare`). Budget:
under 10 s."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat
import numpy as np
import pytest

from i2o.chapters.affine import claims as affine_claims
from i2o.chapters.affine import figures as affine_figures
from i2o.chapters.affine import jobs as affine_jobs
from i2o.chapters.affine import runs as affine_runs
from i2o.compute import profiles
from i2o.compute.job import Job
from i2o.verdicts import gates

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "affine.ipynb"

# The verdicts of the smoke profile: seed means and Monte Carlo claims are undecided with 2 seeds
# and 20 draws; everything else is decided.
SMOKE_VERDICTS = [True, True, True, None, True, None, None, None, None, True, True, True]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[profiles.Params, affine_runs.AffineResults]:
    """Smoke parameters and their results in the cache's stored form, as the notebook gets them."""
    base = tmp_path_factory.mktemp("affine-claims")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("I2O_RESULTS_DIR", str(base / "results"))
        patch.setenv("I2O_BUILD_DIR", str(base / "_build"))
        params = profiles.resolve("affine", "smoke")
        return params, affine_runs.collect(params)


def _doctored(results: affine_runs.AffineResults, **changes) -> affine_runs.AffineResults:
    """``results`` with deep copies of some fields, some of their entries replaced:
    ``field={"key": value}`` or ``checks={"ift": {...}}``."""
    replaced = {}
    for name, updates in changes.items():
        value = copy.deepcopy(getattr(results, name))
        for key, new in updates.items():
            if isinstance(new, dict):
                value[key] = {**value[key], **new}
            else:
                value[key] = new
        replaced[name] = value
    return dataclasses.replace(results, **replaced)


def _with(results: affine_runs.AffineResults, **changes) -> affine_runs.AffineResults:
    """``results`` with some parameters changed (only the claims read them)."""
    return dataclasses.replace(results, params=results.params.with_(**changes))


def _verdicts(results) -> list[bool | None]:
    return [row.holds for row in affine_claims.claims(results).rows]


def _row(results, starts: str):
    table = affine_claims.claims(results)
    rows = [row for row in table.rows if row.claim.startswith(starts)]
    assert len(rows) == 1, starts
    return rows[0]


# --- affine_runs -----------------------------------------------------------------------------


def test_collect_returns_the_stored_form_and_reads_back_the_same(smoke, tmp_path, monkeypatch):
    params, results = smoke
    assert results.left["d_x"] == params["left_d_x"] and isinstance(results.left["d_x"], int)
    assert results.right["nlb"].shape[:2] == (params["n_seeds"], params["d_theta_max"])
    assert results.g3["rank_C"] == min(params["g3_d_x"], params["g3_rank_out"])
    assert results.cor2["z_score"].shape == (params["cor2_instances"],)
    assert results.params is params and results.cost.jobs == 5
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    again = affine_runs.collect(params)
    assert again.cost.computed == 5
    assert affine_runs.collect(params).cost.computed == 0  # read back
    np.testing.assert_array_equal(again.right["nlb"], results.right["nlb"])
    np.testing.assert_array_equal(again.left["loss_increase"], results.left["loss_increase"])


def test_jobs_are_keyed_by_the_parameters_they_use():
    params = profiles.resolve("affine", "smoke")
    jobs = affine_runs.jobs(params)
    assert [job.name for job in jobs] == ["corollary1", "corollary2", "figure-g3", "checks",
                                          "corollary2-nonnormal"]
    assert all(isinstance(job, Job) and job.figure == "affine" for job in jobs)
    left, right, g3, checks, cor2 = jobs
    assert left.left_n_list == tuple(params["left_n_list"]) and "cor2_n" not in left.key()
    assert right.key()["right_d_z"] == params["right_d_z"] and "g3_d_z" not in right.key()
    assert cor2.key()["cor2_draws"] == params["cor2_draws"] and "n_seeds" not in cor2.key()
    # a parameter enters the key of the jobs that use it, and only theirs
    changed = affine_runs.jobs(params.with_(cor2_draws=params["cor2_draws"] + 1))
    assert [a == b for a, b in zip(jobs, changed, strict=True)] == [True] * 4 + [False]
    changed = affine_runs.jobs(params.with_(replicate=1))
    assert not any(a == b for a, b in zip(jobs, changed, strict=True))
    assert g3.draw_seed == right.draw_seed == params["seed"] and checks.ift_max_steps > 0
    # the jobs' module does not import what plots or judges them (their cache key would)
    assert affine_jobs.__name__ == left.module


def test_compare_holds_and_fails():
    assert gates.compare(1e-12, "<", 1e-9) == gates.Decision(True, "1e-12 < 1e-09")
    assert gates.compare(2e-9, "<", 1e-9) == gates.Decision(False, "2e-09 is not < 1e-09")
    assert gates.compare(-1.0, ">=", -1.0).holds is True
    assert gates.compare(3, "==", 3).holds is True and gates.compare(2, "==", 3).holds is False
    assert gates.compare(np.array([1.0, 2.0]), ">", 0.5) == gates.Decision(
        True, "all 2 values > 0.5")
    assert gates.compare(np.array([1.0, 0.0, 0.2]), ">", 0.5) == gates.Decision(
        False, "2 of 3 values not > 0.5")
    assert gates.compare(np.zeros((2, 0)), ">", 1.0).holds is True  # nothing to violate it
    assert gates.compare(float("nan"), "<", 1.0).holds is False  # NaN satisfies no relation
    assert gates.compare(np.array([1.0, np.nan]), "<=", 2.0).holds is False
    # as a gate: a failed comparison closes it
    assert gates.gated([gates.compare(2, "==", 3)], gates.Decision(True, "ok"), quote=True) == (
        gates.Decision(None, "2 is not = 3"))
    with pytest.raises(ValueError, match="relation"):
        gates.compare(1.0, "≤", 2.0)


# --- claims: the real smoke verdicts, then doctored results -----------------------------------


def test_smoke_results_give_the_expected_verdicts(smoke):
    _, results = smoke
    table = affine_claims.claims(results)
    assert table.profile == "smoke" and table.figure == "affine"
    assert [row.holds for row in table.rows] == SMOKE_VERDICTS
    undecided = [row for row in table.rows if row.holds is None]
    assert all(row.decided_by == "quick" for row in undecided)


def test_claims_are_written_as_json(smoke, tmp_path, monkeypatch):
    _, results = smoke
    monkeypatch.setenv("I2O_BUILD_DIR", str(tmp_path))
    path = affine_claims.claims(results).write()
    assert [row["holds"] for row in json.loads(path.read_text())] == SMOKE_VERDICTS


def test_corollary1_fails_when_D_is_negative_with_U_surjective(smoke):
    _, results = smoke
    assert results.left["rank_U"] == results.left["d_x"]
    increase = results.left["loss_increase"].copy()
    increase[0, -1] = -1e-6
    row = _row(_doctored(results, left={"loss_increase": increase}), "Corollary 1")
    assert row.holds is False and "-1.0e-06" in row.value


def test_corollary1_is_undecided_when_U_is_not_surjective(smoke):
    _, results = smoke
    row = _row(_doctored(results, left={"rank_U": results.left["d_x"] - 1}), "Corollary 1")
    assert row.holds is None and "left_d_x" in row.decided_by


def test_theorem1_and_lemma_A2_fail_beyond_rounding(smoke):
    _, results = smoke
    doctored = _doctored(results, checks={"theorem1": {"min_margin": -1e-6},
                                          "lemma_a2": {"max_relative_error": 1e-6}})
    assert _row(doctored, "Theorem 1").holds is False
    assert _row(doctored, "Lemma A.2").holds is False
    rounding = _doctored(results, checks={"theorem1": {"min_margin": -1e-12}})
    assert _row(rounding, "Theorem 1").holds is True


def test_enough_seeds_decides_the_seed_mean_claims_both_ways(smoke):
    _, results = smoke
    with_seeds = _with(results, n_seeds=affine_claims.MIN_SEEDS)  # only the decision reads it
    verdicts = _verdicts(with_seeds)
    # shrinks (Spearman −1 in smoke), flat for N ≥ n_reference (0.19), not flat over all N (1.34)
    assert verdicts[3:7] == [True, True, True, False]
    assert verdicts[7] is True  # Corollary 2 on Gaussian instances
    shuffled = results.right["nlb"][:, ::-1, :].copy()  # the bound now grows with d_θ
    assert _verdicts(_doctored(with_seeds, right={"nlb": shuffled}))[3] is False


def test_nonnormal_corollary2_fails_beyond_five_standard_errors(smoke):
    _, results = smoke
    with_draws = _with(results, cor2_draws=affine_claims.MIN_DRAWS)
    statement = "Corollary 2 holds when K_out is non-normal"
    assert _row(results, statement).holds is None
    assert _row(with_draws, statement).holds is True  # smoke's worst z is about −1.9
    z = results.cor2["z_score"].copy()
    z[1] = -6.0
    assert _row(_doctored(with_draws, cor2={"z_score": z}), statement).holds is False
    assert affine_claims.numbers(_doctored(results, cor2={"z_score": z}))[
        "affine-cor2nn-z"] == -6.0


def test_figure_g3_fails_when_the_bound_is_not_zero_from_rank_C_on(smoke):
    _, results = smoke
    assert _row(results, "Figure G.3").holds is True
    nlb = results.g3["nlb"].copy()
    nlb[:, results.g3["rank_C"] - 1, :] = nlb[:, 0, :]
    assert _row(_doctored(results, g3={"nlb": nlb}), "Figure G.3").holds is False
    surjective_at_rank_C = _doctored(results, g3={"d_x": results.g3["rank_C"]})
    assert _row(surjective_at_rank_C, "Figure G.3").holds is False
    nlb = results.g3["nlb"].copy()
    nlb[0, 0, 0] = 0.0  # zero below rank C
    row = _row(_doctored(results, g3={"nlb": nlb}), "Figure G.3")
    assert row.holds is False and "positive below: False" in row.value


def test_lemma1_fails_when_stability_is_lost_and_theorem2_undecided_without_convergence(smoke):
    _, results = smoke
    ift = results.checks["ift"]
    assert _row(results, "Lemma 1").holds is True
    too_few = np.full_like(ift["n_stable"], int(0.8 * ift["n_instances"]))  # monotone, < 90 %
    not_monotone = np.full_like(ift["n_stable"], ift["n_instances"])
    not_monotone[1] -= 1
    for stable in (too_few, not_monotone):
        assert _row(_doctored(results, checks={"ift": {"n_stable": stable}}),
                    "Lemma 1").holds is False
    none_converged = {"n_converged": np.zeros_like(ift["n_converged"]),
                      "max_relative_error": np.full(ift["n"].shape, np.nan)}
    row = _row(_doctored(results, checks={"ift": none_converged}), "Theorem 2")
    assert row.holds is None and row.decided_by == "quick"


# --- quoted numbers and tables ------------------------------------------------------------------


def test_every_glue_name_of_the_chapter_is_provided(smoke):
    params, results = smoke
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    used = set(re.findall(r"\{glue:text\}`([^`:]+)", markdown))
    numbers = affine_claims.numbers(results)
    assert used and used <= set(numbers)
    assert all(isinstance(v, int | float) for v in numbers.values())
    assert numbers["affine-left-rank-u"] == params["left_d_x"]
    assert numbers["affine-g3-rank-c"] == min(params["g3_d_x"], params["g3_rank_out"])


def test_tables_list_every_instance_and_every_N(smoke):
    _, results = smoke
    cor2_lines = affine_claims.corollary2_table(results.cor2).splitlines()
    assert len(cor2_lines) == 1 + results.cor2["z_score"].size
    worst = int(np.argmin(results.cor2["z_score"]))
    assert cor2_lines[1].split()[0] == str(worst)
    checks_lines = affine_claims.checks_table(results.checks).splitlines()
    n_values = results.checks["ift"]["n"]
    assert [int(line.split()[0]) for line in checks_lines[-n_values.size:]] == list(n_values)


# --- figures ------------------------------------------------------------------------------------


def test_figures_have_the_expected_axes_and_curves(smoke):
    params, results = smoke
    left = affine_figures.figure_1_left(results.left, params)
    (ax,) = left.axes
    assert len(ax.get_lines()) == len(params["left_n_list"]) + 2  # + the ΔN = 0 and D = 0 lines
    right = affine_figures.figure_1_right(results.right, params)
    assert len(right.axes) == 2
    # left panel: seed mean, Lemma A.4 line (K_in invertible), rank C line
    assert len(right.axes[0].get_lines()) == 3
    lines = len(params["right_d_theta_panel"]) * (params["n_seeds"] + 1)
    assert len(right.axes[1].get_lines()) == lines
    g3 = affine_figures.figure_g3(results.g3, params)
    assert len(g3.axes) == 2
    assert len(g3.axes[0].get_lines()) == 2  # no Lemma A.4 line: K_in not invertible
    assert len(g3.axes[1].get_lines()) == len(params["g3_d_theta_panel"]) * (params["n_seeds"] + 1)
    for fig in (left, right, g3):
        plt.close(fig)
