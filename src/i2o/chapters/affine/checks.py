"""The paper's statements checked on random small instances (shown in the chapter, run in the
tests): Lemma A.2, Theorem 1, Corollaries 1 and 2, Lemma 1 and Theorem 2."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from i2o.chapters.affine.sweeps import max_squared_r
from i2o.chapters.affine.theory import (
    RANK_RTOL,
    AffineProblem,
    closed_form_z,
    fixed_point_iterates,
    ift_affine_system,
    ift_descent,
    ift_is_stable,
    loss_increase,
    negative_lower_bound,
    random_problem,
    theta_star,
)


def _random_check_problem(
    rng: np.random.Generator, *, surjective_U: bool | None = None,
    strongly_convex_outer: bool = False, gradient_form: bool | None = None,
) -> AffineProblem:
    """A small instance with random dimensions and ranks for the checks below."""
    d_z = int(rng.integers(2, 9))
    rank_in = int(rng.integers(1, d_z + 1))
    rank_out = d_z if strongly_convex_outer else int(rng.integers(1, d_z + 1))
    if surjective_U is None:
        d_theta = int(rng.integers(1, d_z + 3))
    elif surjective_U:
        d_theta = int(rng.integers(rank_in, rank_in + 3))
    else:
        rank_in = max(rank_in, 2)
        d_z = max(d_z, rank_in)
        d_theta = int(rng.integers(1, rank_in))
    if gradient_form is None:
        gradient_form = bool(rng.integers(2))
    return random_problem(
        rng, d_z=d_z, d_theta=d_theta, rank_in=rank_in, rank_out=rank_out,
        gradient_form=gradient_form, eta_scale=float(rng.uniform(0.3, 1.0)),
    )


def lemma_a2_check(seed: int, n_instances: int, n_max: int = 60) -> dict:
    """Lemma A.2: the closed form z_N equals the iterated z_N; max relative error over instances
    (general B and gradient form, random θ) and N = 0 … n_max."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(n_instances):
        problem = _random_check_problem(rng)
        theta = rng.standard_normal(problem.d_theta)
        iterates = fixed_point_iterates(problem, theta, n_max)
        for n in range(n_max + 1):
            closed = closed_form_z(problem, theta, n)
            error = np.linalg.norm(closed - iterates[n]) / max(np.linalg.norm(iterates[n]), 1e-300)
            worst = max(worst, float(error))
    return {"max_relative_error": worst, "n_instances": n_instances, "n_max": n_max}


def theorem1_check(seed: int, n_instances: int, n_list: Sequence[int] = (1, 3, 10, 30),
                   delta_n_max: int = 60, rtol: float = RANK_RTOL) -> dict:
    """Theorem 1: D(N, ΔN) ≥ −NLB(N) for every ΔN ∈ [−N, delta_n_max] on random instances.

    Returns the smallest margin min(D + NLB) (≥ 0 when the theorem holds, up to rounding), the
    smallest D, and the fraction of (instance, N) pairs where the bound is tight to 1e-9 at the
    best ΔN.
    """
    rng = np.random.default_rng(seed)
    margins, min_d, tight = [], [], 0
    for _ in range(n_instances):
        problem = _random_check_problem(rng)
        for n in n_list:
            d = loss_increase(problem, n, np.arange(-n, delta_n_max + 1), rtol)
            bound = negative_lower_bound(problem, n, rtol)
            margin = float(np.nanmin(d) + bound)
            margins.append(margin)
            min_d.append(float(np.nanmin(d)))
            tight += margin < 1e-9 * max(bound, 1.0) and bound > 1e-9
    return {
        "min_margin": min(margins),
        "min_loss_increase": min(min_d),
        "n_pairs": len(margins),
        "n_tight": tight,
    }


def corollary1_check(seed: int, n_instances: int, n_list: Sequence[int] = (1, 3, 10, 30),
                     delta_n_max: int = 60, rtol: float = RANK_RTOL) -> dict:
    """Corollary 1: with U surjective, min over ΔN ∈ [−N, delta_n_max] of D(N, ΔN) ≥ 0 (to
    rounding), and the Theorem 1 bound vanishes; worst values over random instances."""
    rng = np.random.default_rng(seed)
    min_d, max_bound = np.inf, 0.0
    for _ in range(n_instances):
        problem = _random_check_problem(rng, surjective_U=True)
        for n in n_list:
            d = loss_increase(problem, n, np.arange(-n, delta_n_max + 1), rtol)
            min_d = min(min_d, float(np.nanmin(d)))
            max_bound = max(max_bound, negative_lower_bound(problem, n, rtol))
    return {"min_loss_increase": min_d, "max_negative_lower_bound": max_bound}


def ift_check(seed: int, n_instances: int, n_list: Sequence[int] = (1, 5, 20, 100, 1000),
              max_steps: int = 100_000, surjective_U: bool = True,
              rtol: float = RANK_RTOL) -> dict:
    """Lemma 1 and Theorem 2 on random instances with ℓ strongly convex and f = ∇_z F.

    For each instance and N: whether X_N has only eigenvalues with nonnegative real part (then
    Eq. 12 converges with a constant step, Lemma 1; otherwise it diverges); when it does, Eq. 12 is
    run from θ = 0 and compared with the minimum-norm θ^{*,N} (Theorem 2 says equal when U is
    surjective; from θ = 0 the descent stays in range(Uᵀ), where θ^{*,N} lives).

    Returns per N (arrays aligned with ``n``): ``n_stable`` (instances where Eq. 12 can converge),
    ``n_converged`` and ``max_relative_error`` ‖θ_IFT − θ^{*,N}‖/‖θ^{*,N}‖ over converged runs
    (NaN if none), ``max_steps_used``; and ``n_instances``.
    """
    rng = np.random.default_rng(seed)
    problems = [
        _random_check_problem(rng, surjective_U=surjective_U, strongly_convex_outer=True,
                              gradient_form=True)
        for _ in range(n_instances)
    ]
    n_stable, n_converged, max_error, max_used = [], [], [], []
    for n in n_list:
        stable = converged = used = 0
        errors = []
        for problem in problems:
            X, _ = ift_affine_system(problem, n, rtol)
            if not ift_is_stable(X):
                continue
            stable += 1
            descent = ift_descent(problem, n, max_steps, rtol=rtol)
            used = max(used, descent.n_steps)
            if not descent.converged:
                continue
            converged += 1
            reference = theta_star(problem, n, rtol)
            errors.append(float(np.linalg.norm(descent.theta - reference))
                          / max(float(np.linalg.norm(reference)), 1e-300))
        n_stable.append(stable)
        n_converged.append(converged)
        max_error.append(max(errors) if errors else np.nan)
        max_used.append(used)
    return {
        "n": np.asarray(n_list, dtype=int),
        "n_instances": n_instances,
        "n_stable": np.asarray(n_stable),
        "n_converged": np.asarray(n_converged),
        "max_relative_error": np.asarray(max_error),
        "max_steps_used": np.asarray(max_used),
    }


def nonnormal_outer_problem(
    rng: np.random.Generator, *, d_z: int, spectral_radius: float = 1e-3,
    off_diagonal_scale: float = 3.0, eta_scale: float = 1.0,
) -> AffineProblem:
    """An instance within the hypotheses of Corollary 2 whose K_out is far from normal.

    K_in square Gaussian (invertible), B = K_in, ω = 0, and K_out = ρ I + T with T strictly upper
    triangular Gaussian (scaled): K_out is invertible (ℓ strongly convex) with spectral radius
    ρ(K_out) = ``spectral_radius`` while ‖K_out‖₂ is of order ``off_diagonal_scale`` · √d_z.
    """
    problem = random_problem(rng, d_z=d_z, d_theta=1, rank_in=d_z, rank_out=d_z,
                             eta_scale=eta_scale)
    K_out = spectral_radius * np.eye(d_z) + off_diagonal_scale * np.triu(
        rng.standard_normal((d_z, d_z)), 1)
    return dataclasses.replace(problem, K_out=K_out, omega=np.zeros(d_z))


def corollary2_check(
    problems: Sequence[AffineProblem], *, d_theta: int, n: int, delta_n_max: int,
    n_draws: int, seed: int, n_max_r: int = 5000, rtol: float = RANK_RTOL,
) -> dict:
    """Corollary 2 (Eq. 11) per instance, the expectation over U estimated by Monte Carlo.

    For each instance (U ignored and redrawn), E_U[D(N, ΔN)] is estimated by the mean over
    ``n_draws`` Gaussian U ∈ R^{d_x×d_θ} for every ΔN ∈ [−N, delta_n_max]; the worst ΔN is
    compared with Corollary 2's constant −½(1 − min(d_x, d_θ)/d_x)(ρ(K_out)‖r_max‖² + ‖ω‖²),
    ‖r_max‖² the largest ‖r_N‖² over N ≤ n_max_r and N = ∞.

    Returns per instance: ``mean_d`` (the smallest mean over ΔN), ``standard_error`` (of that
    mean), ``bound`` (the constant, ≤ 0), ``spectral_radius`` ρ(K_out), ``norm_squared``
    ‖K_out‖₂², and ``z_score`` = (mean_d − bound) / standard_error (very negative: the corollary
    fails beyond Monte Carlo error).
    """
    delta_n = np.arange(-n, delta_n_max + 1)
    out = {k: np.zeros(len(problems)) for k in
           ("mean_d", "standard_error", "bound", "spectral_radius", "norm_squared", "z_score")}
    for i, base in enumerate(problems):
        rng = np.random.default_rng([seed, i])
        samples = np.array([
            loss_increase(base.with_outer_variable_map(rng.standard_normal((base.d_x, d_theta))),
                          n, delta_n, rtol)
            for _ in range(n_draws)
        ])
        means = samples.mean(axis=0)
        worst = int(np.argmin(means))
        rho = float(np.abs(np.linalg.eigvals(base.K_out)).max())
        deficit = 1.0 - min(base.d_x, d_theta) / base.d_x
        bound = -0.5 * deficit * (rho * max_squared_r(base, n_max_r)
                                  + float(base.omega @ base.omega))
        error = float(samples[:, worst].std(ddof=1) / np.sqrt(n_draws))
        out["mean_d"][i] = means[worst]
        out["standard_error"][i] = error
        out["bound"][i] = bound
        out["spectral_radius"][i] = rho
        out["norm_squared"][i] = float(np.linalg.norm(base.K_out, 2) ** 2)
        margin = means[worst] - bound
        out["z_score"][i] = margin / error if error > 0 else np.copysign(np.inf, margin)
    return out


def corollary2_nonnormal_check(
    *, seed: int, n_instances: int, d_z: int, n: int, delta_n_max: int, n_draws: int,
    eta_scale: float = 1.0, rtol: float = RANK_RTOL,
) -> dict:
    """:func:`corollary2_check` at d_θ = 1 on ``n_instances`` :func:`nonnormal_outer_problem`
    instances (instance i drawn from ``default_rng([seed, i])``)."""
    problems = [
        nonnormal_outer_problem(np.random.default_rng([seed, i]), d_z=d_z, eta_scale=eta_scale)
        for i in range(n_instances)
    ]
    return corollary2_check(problems, d_theta=1, n=n, delta_n_max=delta_n_max, n_draws=n_draws,
                            seed=seed + 1, rtol=rtol)
