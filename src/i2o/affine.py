"""Affine implicit deep learning: the theory of Section 3 made executable (Figure 1, Figure G.3).

Setting (Assumptions 3.1-3.3 of the paper). The inner root-finding function and the outer loss are

    f(z, θ) = K_inᵀ (B z + U θ + c),                    (Eq. 7)
    ℓ(z)    = ½ ‖K_out z − ω‖²,                         (Eq. 8)

with K_in, B ∈ R^{d_x×d_z} (K_in surjective, so d_x ≤ d_z), U ∈ R^{d_x×d_θ}, c ∈ R^{d_x},
K_out ∈ R^{d_ω×d_z}, ω ∈ R^{d_ω}. The inner procedure is the fixed-point iteration (Eq. 6)

    z_{n+1} = z_n − η f(z_n, θ),   from a fixed z_0.

With M = B K_inᵀ (eigenvalues with positive real part), Lemma A.2/A.3 give the closed form

    z_N(θ) = K_inᵀ E_N U θ + r_N,  E_N = ((I − η M)^N − I) M⁻¹,  r_N = K_inᵀ E_N (B z_0 + c) + z_0,

so the outer problem min_θ ℓ(z_N(θ)) is a linear least-squares problem; θ^{*,N} is its
minimum-norm solution. The quantities studied are

    D(N, ΔN) = ℓ(z_{N+ΔN}(θ^{*,N})) − ℓ(z_N(θ^{*,N}))                       (Section 3)
    D(N, ΔN) ≥ −½ ‖(P(C) − P(C E_N U)) (K_out r_N − ω)‖²,  C = K_out K_inᵀ     (Theorem 1, Eq. 9)

where P(X) is the orthogonal projector on range(X); the right-hand side without its minus sign is
the "negative lower bound" plotted in Figure 1 (right) and Figure G.3. Corollary 1 (U surjective)
says the bound is 0, Corollary 2 bounds its expectation over a Gaussian U, Lemma 1 and Theorem 2
concern the practical implicit-differentiation descent of Eq. 12.

Everything is NumPy float64. Ranks are decided by singular values above ``rtol`` times the
largest one (``RANK_RTOL`` by default); projectors on ranges of products are built one factor at a
time (:func:`range_basis_of_product`) so that each rank decision only sees the conditioning of a
single factor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Array = np.ndarray

RANK_RTOL = 1e-10
"""Relative singular-value threshold below which a direction counts as outside a range."""


# --------------------------------------------------------------------------------------------
# The problem
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AffineProblem:
    """One affine bilevel problem (Assumptions 3.1-3.3) with its inner step size η."""

    K_in: Array  # (d_x, d_z), surjective
    B: Array  # (d_x, d_z); B = K_in when f is the gradient of F = ½‖K_in z + Uθ + c‖²
    U: Array  # (d_x, d_θ)
    c: Array  # (d_x,)
    K_out: Array  # (d_ω, d_z)
    omega: Array  # (d_ω,)
    z0: Array  # (d_z,)
    eta: float

    def __post_init__(self) -> None:
        d_x, d_z = self.K_in.shape
        expected = {
            "B": (d_x, d_z), "U": (d_x, self.U.shape[1]), "c": (d_x,),
            "K_out": (self.K_out.shape[0], d_z), "omega": (self.K_out.shape[0],), "z0": (d_z,),
        }
        for name, shape in expected.items():
            if getattr(self, name).shape != shape:
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected {shape}")
        if d_x > d_z or np.linalg.matrix_rank(self.K_in) < d_x:
            raise ValueError("K_in must be surjective (rank d_x ≤ d_z), Assumption 3.2")
        if not self.eta > 0:
            raise ValueError(f"eta must be positive, got {self.eta}")

    @property
    def d_x(self) -> int:
        return self.K_in.shape[0]

    @property
    def d_z(self) -> int:
        return self.K_in.shape[1]

    @property
    def d_theta(self) -> int:
        return self.U.shape[1]

    @property
    def d_omega(self) -> int:
        return self.K_out.shape[0]

    def inner_map(self, z: Array, theta: Array) -> Array:
        """f(z, θ) = K_inᵀ (B z + U θ + c) (Eq. 7)."""
        return self.K_in.T @ (self.B @ z + self.U @ theta + self.c)

    def outer_loss(self, z: Array) -> float:
        """ℓ(z) = ½ ‖K_out z − ω‖² (Eq. 8)."""
        residual = self.K_out @ z - self.omega
        return 0.5 * float(residual @ residual)

    def outer_gradient(self, z: Array) -> Array:
        """∇ℓ(z) = K_outᵀ (K_out z − ω)."""
        return self.K_out.T @ (self.K_out @ z - self.omega)

    def with_outer_variable_map(self, U: Array) -> AffineProblem:
        """The same problem with another U (another d_θ)."""
        return dataclasses.replace(self, U=np.asarray(U, dtype=np.float64))


def inner_matrix(problem: AffineProblem) -> Array:
    """M = B K_inᵀ ∈ R^{d_x×d_x}; Assumption 3.2 asks its eigenvalues to have positive real part."""
    return problem.B @ problem.K_in.T


def stable_step_size(matrix: Array, scale: float = 1.0) -> float:
    """Step size η = scale · min_i Re(λ_i) / |λ_i|² over the nonzero eigenvalues λ_i of ``matrix``.

    For a symmetric positive definite matrix this is scale / λ_max (the rule of Appendix B,
    η = 1/λ_max). For any matrix whose nonzero eigenvalues have positive real part and scale ≤ 1,
    |1 − η λ|² = 1 − 2ηRe λ + η²|λ|² ≤ 1 − ηRe λ < 1, so the iteration x ← (I − η·matrix) x
    contracts on the complement of the kernel.
    """
    eigenvalues = np.linalg.eigvals(matrix)
    magnitude = np.abs(eigenvalues)
    nonzero = magnitude > RANK_RTOL * max(float(magnitude.max(initial=0.0)), 1e-300)
    if not nonzero.any():
        raise ValueError("the matrix is zero: no step size makes sense")
    real = eigenvalues.real[nonzero]
    if (real <= 0).any():
        raise ValueError(
            f"an eigenvalue has non-positive real part ({real.min():.3g}): no stable step size"
        )
    return float(scale * np.min(real / magnitude[nonzero] ** 2))


# --------------------------------------------------------------------------------------------
# Generators
# --------------------------------------------------------------------------------------------


def random_problem(
    rng: np.random.Generator,
    *,
    d_z: int,
    d_theta: int,
    rank_in: int,
    rank_out: int,
    gradient_form: bool = True,
    eta_scale: float = 1.0,
) -> AffineProblem:
    """A random instance with chosen ranks; all entries i.i.d. N(0, 1).

    - inner: K_in ∈ R^{rank_in×d_z} (surjective, d_x = rank_in). The inner problem is strongly
      convex (F = ½‖K_in z + Uθ + c‖² has Hessian K_inᵀK_in ≻ 0) iff rank_in = d_z.
    - outer: K_out ∈ R^{rank_out×d_z}; ℓ is strongly convex iff rank_out = d_z (a rank-deficient
      square K_out gives the same ℓ up to a constant, so this shape loses no generality).
    - ``gradient_form``: B = K_in, i.e. f = ∇_z F (the case of Figure 1). Otherwise B is drawn so
      that B K_inᵀ = S + W with S symmetric positive definite and W skew-symmetric (eigenvalues
      with positive real part, Assumption 3.2), plus a random part vanishing on range(K_inᵀ).
    - η = eta_scale · min Re λ/|λ|² over the eigenvalues of B K_inᵀ (= eta_scale/λ_max in the
      gradient form); see :func:`stable_step_size`.
    """
    if not 1 <= rank_in <= d_z:
        raise ValueError(f"rank_in must be in [1, d_z={d_z}], got {rank_in}")
    if not 1 <= rank_out <= d_z:
        raise ValueError(f"rank_out must be in [1, d_z={d_z}], got {rank_out}")
    if d_theta < 1:
        raise ValueError(f"d_theta must be ≥ 1, got {d_theta}")
    K_in = rng.standard_normal((rank_in, d_z))
    if gradient_form:
        B = K_in.copy()
    else:
        G = rng.standard_normal((rank_in, rank_in))
        S = G @ G.T / rank_in + 0.1 * np.eye(rank_in)
        A = rng.standard_normal((rank_in, rank_in))
        W = (A - A.T) / 2
        gram = K_in @ K_in.T
        kernel_projector = np.eye(d_z) - K_in.T @ np.linalg.solve(gram, K_in)
        B = (S + W) @ np.linalg.solve(gram, K_in)
        B = B + rng.standard_normal((rank_in, d_z)) @ kernel_projector
    U = rng.standard_normal((rank_in, d_theta))
    c = rng.standard_normal(rank_in)
    K_out = rng.standard_normal((rank_out, d_z))
    omega = rng.standard_normal(rank_out)
    z0 = rng.standard_normal(d_z)
    eta = stable_step_size(B @ K_in.T, eta_scale)
    return AffineProblem(K_in=K_in, B=B, U=U, c=c, K_out=K_out, omega=omega, z0=z0, eta=eta)


def strongly_convex_problem(
    rng: np.random.Generator, *, d_z: int, d_theta: int, eta_scale: float = 1.0
) -> AffineProblem:
    """Inner and outer problems strongly convex: K_in, K_out square and invertible (Corollary 2)."""
    return random_problem(
        rng, d_z=d_z, d_theta=d_theta, rank_in=d_z, rank_out=d_z, eta_scale=eta_scale
    )


# --------------------------------------------------------------------------------------------
# Inner procedure: iterates and closed forms (Lemma A.2 / A.3)
# --------------------------------------------------------------------------------------------


def fixed_point_iterates(problem: AffineProblem, theta: Array, n_steps: int) -> Array:
    """z_0, …, z_{n_steps} of z_{n+1} = z_n − η f(z_n, θ) (Eq. 6), shape (n_steps + 1, d_z)."""
    iterates = np.empty((n_steps + 1, problem.d_z))
    z = problem.z0.astype(np.float64, copy=True)
    iterates[0] = z
    for n in range(n_steps):
        z = z - problem.eta * problem.inner_map(z, theta)
        iterates[n + 1] = z
    return iterates


def closed_form_E(problem: AffineProblem, n: int) -> Array:
    """E_N = ((I − η M)^N − I) M⁻¹ with M = B K_inᵀ (Lemma A.3); M⁻¹ commutes with (I − ηM)^N."""
    M = inner_matrix(problem)
    step = np.eye(problem.d_x) - problem.eta * M
    return np.linalg.solve(M, np.linalg.matrix_power(step, n) - np.eye(problem.d_x))


def closed_form_r(problem: AffineProblem, n: int, E: Array | None = None) -> Array:
    """r_N = K_inᵀ E_N (B z_0 + c) + z_0 (Lemma A.3)."""
    E = closed_form_E(problem, n) if E is None else E
    return problem.K_in.T @ E @ (problem.B @ problem.z0 + problem.c) + problem.z0


def closed_form_z(problem: AffineProblem, theta: Array, n: int) -> Array:
    """z_N(θ) = K_inᵀ E_N (U θ + B z_0 + c) + z_0 (Lemma A.2 with c replaced by U θ + c)."""
    E = closed_form_E(problem, n)
    shift = problem.U @ theta + problem.B @ problem.z0 + problem.c
    return problem.K_in.T @ E @ shift + problem.z0


def unrolled_linear_map(problem: AffineProblem, n: int) -> tuple[Array, Array]:
    """(A_N, r_N) with z_N(θ) = A_N θ + r_N and A_N = K_inᵀ E_N U (Eq. 15, Eq. 38)."""
    E = closed_form_E(problem, n)
    return problem.K_in.T @ E @ problem.U, closed_form_r(problem, n, E)


# --------------------------------------------------------------------------------------------
# Outer problem: θ^{*,N}, D(N, ΔN), Theorem 1
# --------------------------------------------------------------------------------------------


def theta_star(problem: AffineProblem, n: int, rtol: float = RANK_RTOL) -> Array:
    """θ^{*,N}: the minimum-norm minimizer of θ ↦ ℓ(z_N(θ)) = ½‖K_out A_N θ + K_out r_N − ω‖²."""
    A, r = unrolled_linear_map(problem, n)
    solution, *_ = np.linalg.lstsq(problem.K_out @ A, problem.omega - problem.K_out @ r, rcond=rtol)
    return solution


def outer_losses_along_iterations(problem: AffineProblem, theta: Array, n_steps: int) -> Array:
    """ℓ(z_n(θ)) for n = 0 … n_steps, the iterates computed by running Eq. 6."""
    iterates = fixed_point_iterates(problem, theta, n_steps)
    residuals = iterates @ problem.K_out.T - problem.omega
    return 0.5 * np.einsum("ij,ij->i", residuals, residuals)


def loss_increase(
    problem: AffineProblem, n: int, delta_ns: Sequence[int] | Array, rtol: float = RANK_RTOL
) -> Array:
    """D(N, ΔN) = ℓ(z_{N+ΔN}(θ^{*,N})) − ℓ(z_N(θ^{*,N})) for each ΔN (NaN where N + ΔN < 0).

    θ^{*,N} comes from the closed form; the losses come from actually running Eq. 6 with it.
    """
    delta_ns = np.asarray(delta_ns, dtype=int)
    losses = outer_losses_along_iterations(
        problem, theta_star(problem, n, rtol), n + max(int(delta_ns.max()), 0)
    )
    result = np.full(delta_ns.shape, np.nan)
    valid = n + delta_ns >= 0
    result[valid] = losses[n + delta_ns[valid]] - losses[n]
    return result


def range_basis(matrix: Array, rtol: float = RANK_RTOL) -> Array:
    """Orthonormal basis of range(matrix) from its SVD; rank = #{σ_i > rtol · σ_max}."""
    if matrix.size == 0:
        return np.zeros((matrix.shape[0], 0))
    left, singular_values, _ = np.linalg.svd(matrix, full_matrices=False)
    if singular_values[0] == 0:
        return np.zeros((matrix.shape[0], 0))
    rank = int(np.sum(singular_values > rtol * singular_values[0]))
    return left[:, :rank]


def range_basis_of_product(factors: Sequence[Array], rtol: float = RANK_RTOL) -> Array:
    """Orthonormal basis of range(F_1 F_2 … F_k), built right to left.

    range(F_1 … F_k) = F_1 (… F_k(R^n)): starting from a basis Q of range(F_k), take a basis of
    range(F_{k−1} Q), and so on. Each rank decision then involves the conditioning of one factor
    restricted to an orthonormal basis, instead of the product of all condition numbers.
    """
    basis = range_basis(factors[-1], rtol)
    for factor in reversed(factors[:-1]):
        basis = range_basis(factor @ basis, rtol)
    return basis


def project(basis: Array, vector: Array) -> Array:
    """Orthogonal projection of ``vector`` on the span of the orthonormal columns of ``basis``."""
    return basis @ (basis.T @ vector)


def negative_lower_bound(
    problem: AffineProblem, n: int, rtol: float = RANK_RTOL, E: Array | None = None
) -> float:
    """½ ‖(P(C) − P(C E_N U)) (K_out r_N − ω)‖² with C = K_out K_inᵀ (Theorem 1, Eq. 9).

    Theorem 1 says D(N, ΔN) ≥ −(this value) for every ΔN.
    """
    E = closed_form_E(problem, n) if E is None else E
    v = problem.K_out @ closed_form_r(problem, n, E) - problem.omega
    C_basis = range_basis_of_product([problem.K_out, problem.K_in.T], rtol)
    CEU_basis = range_basis_of_product([problem.K_out, problem.K_in.T, E, problem.U], rtol)
    difference = project(C_basis, v) - project(CEU_basis, v)
    return 0.5 * float(difference @ difference)


# --------------------------------------------------------------------------------------------
# Practical implicit differentiation (Eq. 12, Lemma 1, Theorem 2)
# --------------------------------------------------------------------------------------------


def ift_direction_matrix(problem: AffineProblem, rtol: float = RANK_RTOL) -> Array:
    """S = ∂_z f^† ∂_θ f = (K_inᵀ B)^† K_inᵀ U ∈ R^{d_z×d_θ}, pseudo-inverse as in Eq. 12."""
    jacobian_z = problem.K_in.T @ problem.B
    jacobian_theta = problem.K_in.T @ problem.U
    return np.linalg.pinv(jacobian_z, rtol=rtol) @ jacobian_theta


def ift_direction(problem: AffineProblem, theta: Array, n: int, rtol: float = RANK_RTOL) -> Array:
    """p_N(θ) = −(∂_z f(z_N, θ)^† ∂_θ f(z_N, θ))ᵀ ∇ℓ(z_N(θ)) (Eq. 12); z_N by running Eq. 6."""
    z_n = fixed_point_iterates(problem, theta, n)[-1]
    return -ift_direction_matrix(problem, rtol).T @ problem.outer_gradient(z_n)


def ift_affine_system(
    problem: AffineProblem, n: int, rtol: float = RANK_RTOL
) -> tuple[Array, Array]:
    """(X_N, b_N) with p_N(θ) = X_N θ − b_N (Appendix C, Eq. 80), from the closed form of z_N."""
    S = ift_direction_matrix(problem, rtol)
    A, r = unrolled_linear_map(problem, n)
    K_out = problem.K_out
    X = -S.T @ K_out.T @ K_out @ A
    b = S.T @ K_out.T @ (K_out @ r - problem.omega)
    return X, b


def ift_is_stable(X: Array, tol: float = 1e-9) -> bool:
    """Whether every eigenvalue of X_N has real part ≥ −tol · max |λ| (then a constant step α_N
    makes Eq. 12 converge; with one negative real part it diverges from almost every θ^0)."""
    eigenvalues = np.linalg.eigvals(X)
    scale = float(np.abs(eigenvalues).max(initial=0.0))
    return bool(eigenvalues.real.min(initial=0.0) >= -tol * scale)


@dataclass(frozen=True)
class IftDescent:
    """Result of the practical IFT descent θ^{T+1} = θ^T − α_N p_N(θ^T) (Eq. 12)."""

    theta: Array  # final θ
    step_size: float  # α_N
    n_steps: int  # steps run
    converged: bool  # ‖p_N(θ^T)‖ ≤ tol · ‖p_N(θ^0)‖
    relative_direction_norm: float  # ‖p_N(θ^T)‖ / ‖p_N(θ^0)‖


def ift_descent(
    problem: AffineProblem,
    n: int,
    max_steps: int,
    theta0: Array | None = None,
    step_scale: float = 1.0,
    tol: float = 1e-12,
    rtol: float = RANK_RTOL,
) -> IftDescent:
    """Run Eq. 12 from θ^0 (zero by default) until ‖p_N(θ^T)‖ ≤ tol · ‖p_N(θ^0)‖ or max_steps.

    p_N is affine in θ (Appendix C), so the descent runs on (X_N, b_N) from
    :func:`ift_affine_system`; α_N = step_scale · min Re λ/|λ|² over the nonzero eigenvalues of
    X_N (the choice α_N = 1/(λ_max + ε) of the proof of Lemma 1, written for complex eigenvalues).
    Raises ``ValueError`` when X_N has an eigenvalue with negative real part (no α_N works).
    """
    X, b = ift_affine_system(problem, n, rtol)
    if not ift_is_stable(X):
        raise ValueError(f"X_N has an eigenvalue with negative real part at N={n}: Eq. 12 diverges")
    alpha = stable_step_size(X, step_scale)
    theta = np.zeros(problem.d_theta) if theta0 is None else np.asarray(theta0, dtype=np.float64)
    direction = X @ theta - b
    initial_norm = max(float(np.linalg.norm(direction)), 1e-300)
    threshold = (tol * initial_norm) ** 2
    steps = 0
    while steps < max_steps and direction @ direction > threshold:
        theta = theta - alpha * direction
        direction = X @ theta - b
        steps += 1
    relative = float(np.linalg.norm(direction)) / initial_norm
    return IftDescent(
        theta=theta, step_size=alpha, n_steps=steps, converged=relative <= tol,
        relative_direction_norm=relative,
    )


# --------------------------------------------------------------------------------------------
# Sweeps producing the figures' arrays
# --------------------------------------------------------------------------------------------


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
    from scipy.stats import spearmanr

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


def check_sizes(params: dict) -> None:
    """Relations between the chapter's parameters that a per-parameter schema cannot express.

    Raises :class:`i2o.profiles.ParameterError` naming the parameter, before any compute.
    """
    from i2o.profiles import ParameterError

    rules = [
        ("left_d_x", params["left_d_x"] <= params["left_d_z"],
         f"≤ left_d_z = {params['left_d_z']} (K_in must be surjective, Assumption 3.2)"),
        ("left_rank_out", params["left_rank_out"] <= params["left_d_z"],
         f"≤ left_d_z = {params['left_d_z']}"),
        ("g3_d_x", params["g3_d_x"] <= params["g3_d_z"],
         f"≤ g3_d_z = {params['g3_d_z']} (K_in must be surjective, Assumption 3.2)"),
        ("g3_rank_out", params["g3_rank_out"] <= params["g3_d_z"],
         f"≤ g3_d_z = {params['g3_d_z']}"),
        ("right_d_theta_panel", max(params["right_d_theta_panel"]) <= params["d_theta_max"],
         f"a list of values ≤ d_theta_max = {params['d_theta_max']}"),
        ("g3_d_theta_panel", max(params["g3_d_theta_panel"]) <= params["g3_d_theta_max"],
         f"a list of values ≤ g3_d_theta_max = {params['g3_d_theta_max']}"),
    ]
    for name, ok, allowed in rules:
        if not ok:
            raise ParameterError(f"parameter {name!r} of figure 'affine' must be {allowed}; "
                                 f"got {params[name]!r}")


# --------------------------------------------------------------------------------------------
# Checks of the paper's statements on random instances (shown in the chapter, run in the tests)
# --------------------------------------------------------------------------------------------


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
