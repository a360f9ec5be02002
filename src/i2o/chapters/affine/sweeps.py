"""The arrays behind Figure 1 and Figure G.3: D(N, ΔN) and the lower bound of Theorem 1 swept
over N, ΔN and d_θ on random instances of :mod:`i2o.chapters.affine.theory`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from i2o.chapters.affine.theory import (
    RANK_RTOL,
    AffineProblem,
    Array,
    closed_form_E,
    closed_form_r,
    fixed_point_iterates,
    inner_matrix,
    loss_increase,
    negative_lower_bound,
    outer_losses_along_iterations,
    random_problem,
    theta_star,
)


def corollary1_sweep(
    *,
    seed: int,
    d_z: int,
    d_theta: int,
    rank_in: int,
    rank_out: int,
    n_list: Sequence[int],
    delta_n_min: int,
    delta_n_max: int,
    eta_scale: float = 1.0,
    rtol: float = RANK_RTOL,
) -> dict:
    """Figure 1 (left): D(N, ΔN) against ΔN for several N on one overparametrized instance.

    Returns ``delta_n`` (ΔN grid), ``loss_increase`` (len(n_list) × len(delta_n), NaN where
    N + ΔN < 0), ``negative_lower_bound`` per N (Theorem 1; 0 when U is surjective),
    ``train_loss`` ℓ(z_N(θ^{*,N})) per N, and the instance's ranks.
    """
    problem = random_problem(
        np.random.default_rng(seed), d_z=d_z, d_theta=d_theta, rank_in=rank_in,
        rank_out=rank_out, eta_scale=eta_scale,
    )
    delta_n = np.arange(delta_n_min, delta_n_max + 1)
    increases = np.stack([loss_increase(problem, n, delta_n, rtol) for n in n_list])
    bounds = np.array([negative_lower_bound(problem, n, rtol) for n in n_list])
    train_losses = np.array([
        outer_losses_along_iterations(problem, theta_star(problem, n, rtol), n)[-1] for n in n_list
    ])
    return {
        "n_list": np.asarray(n_list, dtype=int),
        "delta_n": delta_n,
        "loss_increase": increases,
        "negative_lower_bound": bounds,
        "train_loss": train_losses,
        "eta": problem.eta,
        "rank_U": int(np.linalg.matrix_rank(problem.U)),
        "d_x": problem.d_x,
    }


def limit_r(problem: AffineProblem) -> Array:
    """r_∞ = lim r_N = z_0 − K_inᵀ M⁻¹ (B z_0 + c) (the fixed point reached from z_0 at θ = 0)."""
    M = inner_matrix(problem)
    return problem.z0 - problem.K_in.T @ np.linalg.solve(M, problem.B @ problem.z0 + problem.c)


def max_squared_r(problem: AffineProblem, n_max: int) -> float:
    """max ‖r_N‖² over N = 0 … n_max and N = ∞ (‖r_max‖² of Corollary 2); r_N = z_N(θ = 0)."""
    r_sequence = fixed_point_iterates(problem, np.zeros(problem.d_theta), n_max)
    return max(float(np.max(np.sum(r_sequence**2, axis=1))), float(np.sum(limit_r(problem) ** 2)))


def _n_grid(n_max: int, n_points: int, must_include: Sequence[int]) -> Array:
    grid = np.unique(np.round(np.geomspace(1, n_max, n_points)).astype(int))
    return np.union1d(grid, np.asarray(must_include, dtype=int))


def lower_bound_sweep(
    *,
    seed: int,
    n_seeds: int,
    d_z: int,
    rank_in: int,
    rank_out: int,
    d_theta_max: int,
    n_max: int,
    n_points: int,
    n_reference: int,
    delta_n_max: int,
    eta_scale: float = 1.0,
    rtol: float = RANK_RTOL,
) -> dict:
    """Figure 1 (right) and Figure G.3: the negative lower bound over seeds, d_θ and N.

    For each seed s, one instance (K_in, B = K_in, c, K_out, ω, z_0) is drawn from
    ``default_rng([seed, s])``; for each d_θ a fresh Gaussian U is drawn from
    ``default_rng([seed, s, d_θ])`` (the expectation of Corollary 2 is over U). The N grid is
    log-spaced from 1 to ``n_max`` and always contains ``n_reference``.

    Returns ``nlb`` (n_seeds × d_theta_max × len(n)), the grid ``n`` and ``d_theta``, ``rank_C``
    = min(d_x, rank K_out) (the rank of C = K_out K_inᵀ almost surely), and for the check of
    Corollary 2 at N = ``n_reference``: ``min_loss_increase`` (n_seeds × d_theta_max, D(N, ΔN)
    minimized over ΔN ∈ [−N, delta_n_max]), its seed mean ``mean_min_loss_increase``,
    ``corollary2_bound`` per d_θ (the seed mean of −½ (1 − min(d_x, d_θ)/d_x)(ρ(K_out) ‖r_max‖²
    + ‖ω‖²), ‖r_max‖ the largest ‖r_N‖ over N ≤ n_max and N = ∞; NaN unless K_out is square),
    and ``isotropic_prediction`` per d_θ (the seed mean of ½ (1 − min(d_x, d_θ)/d_x)
    ‖K_out r_N − ω‖², the value Lemma A.4 would give if C E_N U were a Gaussian matrix).
    """
    n_values = _n_grid(n_max, n_points, [n_reference])
    d_thetas = np.arange(1, d_theta_max + 1)
    delta_n = np.arange(-n_reference, delta_n_max + 1)
    nlb = np.zeros((n_seeds, d_thetas.size, n_values.size))
    min_increase = np.zeros((n_seeds, d_thetas.size))
    cor2 = np.zeros((n_seeds, d_thetas.size))
    isotropic = np.zeros((n_seeds, d_thetas.size))
    for s in range(n_seeds):
        base = random_problem(
            np.random.default_rng([seed, s]), d_z=d_z, d_theta=1, rank_in=rank_in,
            rank_out=rank_out, eta_scale=eta_scale,
        )
        E_by_n = [closed_form_E(base, int(n)) for n in n_values]
        r_max_sq = max_squared_r(base, int(n_values.max()))
        spectral_radius = float(np.abs(np.linalg.eigvals(base.K_out)).max()) if (
            base.d_omega == base.d_z) else float("nan")
        reference_index = int(np.searchsorted(n_values, n_reference))
        v_ref = base.K_out @ closed_form_r(base, n_reference, E_by_n[reference_index]) - base.omega
        for j, d_theta in enumerate(d_thetas):
            U = np.random.default_rng([seed, s, int(d_theta)]).standard_normal(
                (base.d_x, int(d_theta))
            )
            problem = base.with_outer_variable_map(U)
            for k, (n, E) in enumerate(zip(n_values, E_by_n, strict=True)):
                nlb[s, j, k] = negative_lower_bound(problem, int(n), rtol, E)
            min_increase[s, j] = np.nanmin(loss_increase(problem, n_reference, delta_n, rtol))
            deficit = 1.0 - min(base.d_x, int(d_theta)) / base.d_x
            omega_sq = float(base.omega @ base.omega)
            cor2[s, j] = -0.5 * deficit * (spectral_radius * r_max_sq + omega_sq)
            isotropic[s, j] = 0.5 * deficit * float(v_ref @ v_ref)
    return {
        "n": n_values,
        "d_theta": d_thetas,
        "nlb": nlb,
        "n_reference": n_reference,
        "d_x": rank_in,
        "rank_C": min(rank_in, rank_out),
        "min_loss_increase": min_increase,
        "mean_min_loss_increase": min_increase.mean(axis=0),
        "corollary2_bound": cor2.mean(axis=0),
        "isotropic_prediction": isotropic.mean(axis=0),
    }


def lower_bound_summary(sweep: dict) -> dict:
    """Numbers behind the claims on a :func:`lower_bound_sweep` result.

    - ``mean_at_reference``: seed mean of the bound at N = n_reference, per d_θ;
    - ``spearman``: rank correlation of that mean with d_θ over d_θ < rank(C) (−1: shrinking);
    - ``zero_region_max``: largest bound over seeds and N for d_θ ≥ rank(C) (0 expected: then
      C E_N U spans range(C)), and ``zero_region_relative`` the same over the largest mean;
    - ``spread_all_n`` / ``spread_large_n``: median over seeds and d_θ < rank(C) of the relative
      spread (max − min)/mean of the bound over all N of the grid / over N ≥ n_reference.
    """
    from scipy.stats import spearmanr  # lazy: scipy.stats takes a second to import

    n, nlb, d_theta = sweep["n"], sweep["nlb"], sweep["d_theta"]
    reference = int(np.searchsorted(n, sweep["n_reference"]))
    mean_at_reference = nlb[:, :, reference].mean(axis=0)
    below = d_theta < sweep["rank_C"]
    zero_region_max = float(nlb[:, ~below, :].max()) if (~below).any() else float("nan")
    scale = float(mean_at_reference.max()) if mean_at_reference.size else float("nan")
    if below.sum() >= 2:
        spearman = float(spearmanr(d_theta[below], mean_at_reference[below]).statistic)
    else:
        spearman = float("nan")

    def median_spread(values: Array) -> float:
        if values.size == 0:
            return float("nan")
        spread = (values.max(axis=-1) - values.min(axis=-1)) / values.mean(axis=-1)
        return float(np.median(spread))

    return {
        "mean_at_reference": mean_at_reference,
        "spearman": spearman,
        "zero_region_max": zero_region_max,
        "zero_region_relative": zero_region_max / scale if scale > 0 else float("nan"),
        "spread_all_n": median_spread(nlb[:, below, :]),
        "spread_large_n": median_spread(nlb[:, below, :][..., n >= sweep["n_reference"]]),
    }
