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


# --- The problem ----------------------------------------------------------------------------------


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


# --- Generators -----------------------------------------------------------------------------------


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


# --- Inner procedure: iterates and closed forms (Lemma A.2 / A.3) ---------------------------------


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


# --- Outer problem: θ^{*,N}, D(N, ΔN), Theorem 1 --------------------------------------------------


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


# --- Practical implicit differentiation (Eq. 12, Lemma 1, Theorem 2) ------------------------------


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
