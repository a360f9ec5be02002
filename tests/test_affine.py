"""Tests of i2o.chapters.affine: the affine theory of Section 3 (Lemma A.2, Theorem 1,
Corollaries 1-2, Lemma 1, Theorem 2) and the sweeps behind Figure 1 and Figure G.3.
Budget: under 20 s."""

from __future__ import annotations

import numpy as np
import pytest

from i2o.chapters.affine import checks, runs, sweeps, theory
from i2o.compute import profiles
from i2o.compute.profiles import ParameterError


def _problem(seed: int = 0, **sizes) -> theory.AffineProblem:
    sizes = {"d_z": 5, "d_theta": 2, "rank_in": 4, "rank_out": 3, **sizes}
    return theory.random_problem(np.random.default_rng(seed), **sizes)


# --- the problem and its inner procedure -----------------------------------------------------


def test_problem_rejects_a_non_surjective_K_in():
    problem = _problem()
    K_in = problem.K_in.copy()
    K_in[-1] = K_in[0]
    with pytest.raises(ValueError, match="surjective"):
        theory.AffineProblem(K_in=K_in, B=K_in, U=problem.U, c=problem.c, K_out=problem.K_out,
                             omega=problem.omega, z0=problem.z0, eta=problem.eta)


def test_step_size_is_inverse_largest_eigenvalue_in_gradient_form():
    problem = _problem(gradient_form=True, eta_scale=0.5)
    largest = np.linalg.eigvalsh(problem.K_in @ problem.K_in.T).max()
    assert problem.eta == pytest.approx(0.5 / largest, rel=1e-12)


def test_general_B_has_eigenvalues_with_positive_real_part_and_iterates_converge():
    problem = _problem(seed=3, gradient_form=False)
    assert not np.allclose(problem.B, problem.K_in)
    assert np.linalg.eigvals(theory.inner_matrix(problem)).real.min() > 0
    iterates = theory.fixed_point_iterates(problem, np.ones(problem.d_theta), 3000)
    assert np.linalg.norm(problem.inner_map(iterates[-1], np.ones(problem.d_theta))) < 1e-8


@pytest.mark.parametrize("gradient_form", [True, False])
def test_lemma_A2_closed_form_equals_iterated_z_N(gradient_form):
    problem = _problem(seed=1, gradient_form=gradient_form)
    theta = np.random.default_rng(9).standard_normal(problem.d_theta)
    iterates = theory.fixed_point_iterates(problem, theta, 50)
    for n in (0, 1, 2, 7, 50):
        np.testing.assert_allclose(theory.closed_form_z(problem, theta, n), iterates[n],
                                   rtol=1e-10, atol=1e-12)
    A, r = theory.unrolled_linear_map(problem, 7)
    np.testing.assert_allclose(A @ theta + r, iterates[7], rtol=1e-10, atol=1e-12)


def test_lemma_A2_check_on_random_instances():
    assert checks.lemma_a2_check(seed=2, n_instances=8, n_max=30)["max_relative_error"] < 1e-9


# --- projectors, θ^{*,N}, D(N, ΔN), Theorem 1 ------------------------------------------------


def test_range_basis_of_product_detects_rank_loss_in_a_middle_factor():
    rng = np.random.default_rng(0)
    left, right = rng.standard_normal((6, 6)), rng.standard_normal((6, 4))
    middle = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 6))  # rank 2
    basis = theory.range_basis_of_product([left, middle, right])
    assert basis.shape == (6, 2)
    np.testing.assert_allclose(basis.T @ basis, np.eye(2), atol=1e-12)
    product = left @ middle @ right
    np.testing.assert_allclose(theory.project(basis, product), product, atol=1e-9)


def test_theta_star_is_the_minimum_norm_minimizer():
    problem = _problem(seed=4, d_theta=6, rank_in=3)  # d_θ > d_x: a kernel of minimizers
    theta = theory.theta_star(problem, 10)
    A, r = theory.unrolled_linear_map(problem, 10)
    gradient = (problem.K_out @ A).T @ (problem.K_out @ (A @ theta + r) - problem.omega)
    assert np.linalg.norm(gradient) < 1e-9
    kernel = np.linalg.svd(problem.K_out @ A)[2][3:]  # directions not changing the loss
    assert np.abs(kernel @ theta).max() < 1e-9


def test_training_loss_decomposes_as_in_the_proof_of_theorem_1():
    """ℓ(z_N(θ^{*,N})) = NLB + ½‖P(C)^⊥ (K_out z_0 − ω)‖² (Eq. 53): checks θ*, projectors, r_N."""
    for seed in range(6):
        problem = _problem(seed=seed, d_z=6, d_theta=2, rank_in=5, rank_out=4)
        n = 8
        train_loss = theory.outer_losses_along_iterations(
            problem, theory.theta_star(problem, n), n)[-1]
        C_basis = theory.range_basis(problem.K_out @ problem.K_in.T)
        outside = problem.K_out @ problem.z0 - problem.omega
        outside = outside - theory.project(C_basis, outside)
        expected = theory.negative_lower_bound(problem, n) + 0.5 * outside @ outside
        assert train_loss == pytest.approx(expected, rel=1e-9)


def test_theorem_1_bound_lies_below_D_on_random_instances():
    check = checks.theorem1_check(seed=5, n_instances=25)
    assert check["min_margin"] >= -1e-9
    assert check["min_loss_increase"] < -1e-3  # D really goes negative: the bound is not vacuous


def test_D_is_zero_at_delta_zero_and_nan_before_the_start():
    problem = _problem(seed=6)
    d = theory.loss_increase(problem, 5, np.array([-7, -5, 0, 3]))
    assert np.isnan(d[0]) and not np.isnan(d[1]) and d[2] == 0.0


# --- Corollaries 1 and 2 ---------------------------------------------------------------------


def test_corollary_1_D_is_nonnegative_when_U_is_surjective():
    check = checks.corollary1_check(seed=7, n_instances=25)
    assert check["min_loss_increase"] >= -1e-10
    assert check["max_negative_lower_bound"] < 1e-20


def test_corollary1_sweep_shapes_and_sign():
    sweep = sweeps.corollary1_sweep(seed=0, d_z=5, d_theta=4, rank_in=3, rank_out=4,
                                    n_list=[1, 10], delta_n_min=-15, delta_n_max=20)
    assert sweep["loss_increase"].shape == (2, 36)
    assert np.isnan(sweep["loss_increase"][0, 0]) and not np.isnan(sweep["loss_increase"][1, 5])
    assert np.nanmin(sweep["loss_increase"]) >= -1e-10
    assert np.nanmax(sweep["loss_increase"]) > 1e-3
    assert sweep["rank_U"] == sweep["d_x"] == 3


def test_lower_bound_vanishes_once_d_theta_reaches_rank_of_C():
    sweep = sweeps.lower_bound_sweep(seed=1, n_seeds=2, d_z=6, rank_in=5, rank_out=3,
                                     d_theta_max=6, n_max=40, n_points=5, n_reference=10,
                                     delta_n_max=20)
    assert sweep["nlb"].shape == (2, 6, sweep["n"].size) and 10 in sweep["n"]
    summary = sweeps.lower_bound_summary(sweep)
    assert summary["zero_region_relative"] < 1e-12  # d_θ ≥ rank(C) = 3
    assert (sweep["nlb"][:, :2, :] > 1e-6).all()  # d_θ < 3: positive
    assert np.isnan(sweep["corollary2_bound"]).all()  # K_out not square: Corollary 2 n/a


def test_corollary_2_quantities_in_the_strongly_convex_case():
    sweep = sweeps.lower_bound_sweep(seed=2, n_seeds=3, d_z=5, rank_in=5, rank_out=5,
                                     d_theta_max=6, n_max=30, n_points=4, n_reference=10,
                                     delta_n_max=20)
    assert np.isfinite(sweep["corollary2_bound"]).all()
    assert sweep["corollary2_bound"][-2:].tolist() == [0.0, 0.0]  # d_θ ≥ d_x
    # Theorem 1 on each sample: min over ΔN of D ≥ −bound at N = n_reference.
    reference = int(np.searchsorted(sweep["n"], 10))
    assert (sweep["min_loss_increase"] >= -sweep["nlb"][:, :, reference] - 1e-9).all()


def test_corollary_2_fails_for_a_non_normal_K_out():
    """ρ(K_out) = 1e-3 while ‖K_out‖² is large: E_U[D] falls far below Corollary 2's constant."""
    problem = checks.nonnormal_outer_problem(np.random.default_rng(1), d_z=4)
    assert np.abs(np.linalg.eigvals(problem.K_out)).max() == pytest.approx(1e-3)
    assert np.linalg.matrix_rank(problem.K_out) == 4  # ℓ strongly convex: within the hypotheses
    check = checks.corollary2_check([problem], d_theta=1, n=10, delta_n_max=60, n_draws=60,
                                    seed=0)
    assert check["norm_squared"][0] > 1e3 * check["spectral_radius"][0]
    assert check["z_score"][0] < -5


def test_corollary_2_check_passes_on_a_gaussian_instance():
    problem = theory.strongly_convex_problem(np.random.default_rng(1), d_z=4, d_theta=1)
    check = checks.corollary2_check([problem], d_theta=1, n=10, delta_n_max=60, n_draws=40,
                                    seed=0)
    assert check["mean_d"][0] >= check["bound"][0]


# --- practical IFT descent (Eq. 12): Lemma 1 and Theorem 2 -----------------------------------


def test_ift_affine_system_matches_the_literal_direction_of_eq_12():
    problem = _problem(seed=8, d_z=5, d_theta=4, rank_in=3, rank_out=5)
    X, b = theory.ift_affine_system(problem, 6)
    theta = np.random.default_rng(1).standard_normal(problem.d_theta)
    np.testing.assert_allclose(theory.ift_direction(problem, theta, 6), X @ theta - b,
                               rtol=1e-9, atol=1e-10)


def test_theorem_2_ift_descent_converges_to_theta_star_when_U_is_surjective():
    check = checks.ift_check(seed=3, n_instances=6, n_list=(5, 50), max_steps=50_000)
    assert (check["n_converged"] >= 4).all()
    assert np.nanmax(check["max_relative_error"]) < 1e-6


def test_ift_descent_differs_from_theta_star_when_U_is_not_surjective():
    check = checks.ift_check(seed=4, n_instances=6, n_list=(2,), max_steps=50_000,
                             surjective_U=False)
    assert check["n_converged"][0] >= 4
    assert check["max_relative_error"][0] > 1e-3  # Theorem 2 needs its hypothesis


def test_lemma_1_needs_N_large_enough():
    """On this instance X_N has a negative eigenvalue for N ≤ 10 (Eq. 12 cannot converge with a
    constant step), and none from N = 20 on, where the descent reaches θ^{*,N} (Theorem 2)."""
    problem = _problem(seed=43, d_z=3, d_theta=3, rank_in=3, rank_out=3)
    for n in (1, 10):
        assert not theory.ift_is_stable(theory.ift_affine_system(problem, n)[0])
    with pytest.raises(ValueError, match="negative real part"):
        theory.ift_descent(problem, 1, 10)
    descent = theory.ift_descent(problem, 100, 100_000)
    assert descent.converged
    reference = theory.theta_star(problem, 100)
    assert np.linalg.norm(descent.theta - reference) < 1e-6 * np.linalg.norm(reference)


# --- parameters of the chapter ---------------------------------------------------------------


@pytest.mark.parametrize("overrides, named", [
    ({"n_seeds": -1}, "n_seeds"),
    ({"d_theta_max": 0}, "d_theta_max"),
    ({"left_n_list": [5, -2]}, "left_n_list"),
    ({"n_reference": "ten"}, "n_reference"),
    ({"eta_scale": 1.5}, "eta_scale"),
])
def test_manifest_schema_rejects_bad_parameters(overrides, named):
    with pytest.raises(ParameterError, match=named):
        profiles.resolve("affine", "smoke", **overrides)


def test_unknown_profile_is_rejected():
    with pytest.raises(ParameterError, match="profile"):
        profiles.resolve("affine", "huge")


@pytest.mark.parametrize("overrides, named", [
    ({"left_d_x": 6}, "left_d_x"),
    ({"g3_rank_out": 11}, "g3_rank_out"),
    ({"right_d_theta_panel": [1, 30]}, "right_d_theta_panel"),
])
def test_relations_between_parameters_are_checked(overrides, named):
    params = profiles.resolve("affine", "quick", **overrides)
    with pytest.raises(ParameterError, match=named):
        runs.check_params(params)


def test_every_profile_passes_the_relations():
    for profile in profiles.PROFILES:
        runs.check_params(profiles.resolve("affine", profile))
