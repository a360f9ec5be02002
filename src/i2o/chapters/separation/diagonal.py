r"""Implicit bias of the diagonal linear DEQ (the paper's Theorem 3), against a convex solver.

Model: :math:`z = \operatorname{diag}(w) z + x`, :math:`f(x) = \langle \mathbf 1, z \rangle =
\langle \beta, x \rangle` with :math:`\beta_i = 1/(1 - w_i)`. Loss
:math:`L(w) = \frac1{2n}\|X\beta(w) - y\|^2` on n < d points. Since
:math:`\partial\beta_i/\partial w_i = \beta_i^2`, gradient flow on w moves β as
:math:`\dot\beta = -\beta^{\odot 4} \odot X^\top r / n` (r = Xβ − y), hence
:math:`\frac{d}{dt}\beta^{-3} = 3X^\top r/n`: :math:`\beta(t)^{-3} - \beta(0)^{-3} \in
\operatorname{range}(X^\top)` along the whole path, and β stays positive from a positive start.
A limit that interpolates therefore satisfies the KKT conditions of

.. math:: \min_\beta \; Q_\pm(\beta) = \sum_i \frac{1}{2\beta_i^2} \pm \frac{\beta_i}{\beta_i(0)^3}
          \quad\text{s.t. } X\beta = y,\ \beta > 0

with the **plus** sign (:math:`\nabla Q_+ = -\beta^{-3} + \beta(0)^{-3}`). The OpenReview
discussion writes the term with a minus sign in one place; :func:`argmin_q` solves both problems
independently (scipy: a feasible start from a linear program, then a trust-region Newton method on
the null-space coordinates) and the chapter reports which one gradient descent reaches.

The contrast: a diagonal linear network :math:`\beta = u^2 - v^2` (Woodworth et al., 2020) from a
small start ``u = v = α`` tends to the minimum-ℓ1 interpolant (sparse) as α → 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import linalg, optimize
from scipy.integrate import solve_ivp

from i2o.chapters.separation import FIGURE
from i2o.compute.job import Job


def make_problem(n: int, d: int, seed: int) -> dict[str, np.ndarray]:
    """Gaussian ``X`` (n × d), a positive ``β*`` drawn uniformly in [0.5, 1.5]^d, ``y = Xβ*``, and
    a positive start ``β(0)`` drawn uniformly in [0.5, 1.5]^d (a reconstructed setup: positive
    interpolants exist, away from the boundary β = 0 where gradient descent on w stalls)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    beta_star = rng.uniform(0.5, 1.5, d)
    return {"X": X, "y": X @ beta_star, "beta_star": beta_star,
            "beta0": rng.uniform(0.5, 1.5, d)}


def _lipschitz(X: np.ndarray) -> float:
    return float(np.linalg.eigvalsh(X.T @ X / len(X))[-1])


def gd_diagonal_deq(X: np.ndarray, y: np.ndarray, beta0: np.ndarray, lr_scale: float,
                    max_steps: int, tol: float) -> dict[str, np.ndarray | float | int]:
    r"""Gradient descent on w from :math:`w(0) = 1 - 1/\beta(0)`:
    :math:`w \leftarrow w - \eta_t\, \beta^2 \odot X^\top r / n` with
    :math:`\eta_t = \text{lr\_scale} / (\lambda_{\max}(X^\top X/n) \max_i \beta_i^4)` (the local
    curvature in β), until :math:`\|r\| \le \text{tol}\,\|y\|` or ``max_steps``."""
    n = len(X)
    lam = _lipschitz(X)
    w = 1.0 - 1.0 / beta0
    steps = 0
    for steps in range(max_steps + 1):  # noqa: B007 (steps is reported)
        beta = 1.0 / (1.0 - w)
        r = X @ beta - y
        if np.linalg.norm(r) <= tol * np.linalg.norm(y) or steps == max_steps:
            break
        eta = lr_scale / (lam * np.max(beta) ** 4)
        w = w - eta * beta ** 2 * (X.T @ r) / n
    beta = 1.0 / (1.0 - w)
    return {"beta": beta, "steps": steps,
            "relative_residual": float(np.linalg.norm(X @ beta - y) / np.linalg.norm(y))}


def flow_diagonal_deq(X: np.ndarray, y: np.ndarray, beta0: np.ndarray, tol: float,
                      rtol: float = 1e-12, max_time: float = 1e9) -> dict[str, np.ndarray | float]:
    r"""The gradient *flow* :math:`\dot w = -\beta^2 \odot X^\top r / n` (what Theorem 3 is
    about), integrated by scipy (DOP853, relative tolerance ``rtol``) over doubling time spans
    until :math:`\|r\| \le \text{tol}\,\|y\|`. Gradient descent with step η follows it up to
    O(η), so its limit misses the flow's by a distance proportional to η."""
    n = len(X)

    def field(_: float, w: np.ndarray) -> np.ndarray:
        beta = 1.0 / (1.0 - w)
        return -beta ** 2 * (X.T @ (X @ beta - y)) / n

    w, t, evaluations = 1.0 - 1.0 / beta0, 0.0, 0
    span = 1.0
    while True:
        sol = solve_ivp(field, (t, t + span), w, method="DOP853", rtol=rtol, atol=rtol * 1e-2)
        w, t, evaluations = sol.y[:, -1], t + span, evaluations + sol.nfev
        beta = 1.0 / (1.0 - w)
        residual = float(np.linalg.norm(X @ beta - y) / np.linalg.norm(y))
        if residual <= tol or t >= max_time or not sol.success:
            break
        span *= 2
    return {"beta": beta, "time": t, "evaluations": evaluations, "relative_residual": residual}


def stationarity(X: np.ndarray, beta: np.ndarray, beta0: np.ndarray, sign: int) -> float:
    r"""Relative norm of the part of :math:`\nabla Q_\pm(\beta)` in null(X): 0 exactly when β
    satisfies the KKT conditions of :math:`\min Q_\pm` on :math:`\{X\beta = y\}`. Decides,
    without any solver, whether a point can be the argmin."""
    grad = -beta ** -3.0 + sign * beta0 ** -3.0
    N = linalg.null_space(X)
    return float(np.linalg.norm(N.T @ grad) / np.linalg.norm(grad))


def gd_diagonal_net(X: np.ndarray, y: np.ndarray, alpha: float, lr_scale: float,
                    max_steps: int, tol: float) -> dict[str, np.ndarray | float | int]:
    """Gradient descent on (u, v) of β = u² − v² from u = v = α (step scaled by the local
    curvature, as :func:`gd_diagonal_deq`)."""
    n, d = X.shape
    lam = _lipschitz(X)
    u, v = np.full(d, alpha), np.full(d, alpha)
    steps = 0
    for steps in range(max_steps + 1):  # noqa: B007
        r = X @ (u ** 2 - v ** 2) - y
        if np.linalg.norm(r) <= tol * np.linalg.norm(y) or steps == max_steps:
            break
        g = X.T @ r / n
        eta = lr_scale / (4 * lam * max(np.max(u ** 2 + v ** 2), alpha ** 2))
        u, v = u - eta * 2 * u * g, v + eta * 2 * v * g
    beta = u ** 2 - v ** 2
    return {"beta": beta, "steps": steps,
            "relative_residual": float(np.linalg.norm(X @ beta - y) / np.linalg.norm(y))}


def q_objective(beta: np.ndarray, beta0: np.ndarray, sign: int) -> float:
    r""":math:`Q_\pm(\beta) = \sum_i 1/(2\beta_i^2) \pm \beta_i/\beta_i(0)^3` (``sign`` = ±1)."""
    return float(np.sum(0.5 / beta ** 2 + sign * beta / beta0 ** 3))


def _positive_feasible(X: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """A point of {Xβ = y} maximizing min_i β_i (capped at 1), by linear programming; ``None``
    when no strictly positive interpolant exists."""
    n, d = X.shape
    cost = np.zeros(d + 1)
    cost[-1] = -1.0  # maximize t subject to β ≥ t
    a_eq = np.hstack([X, np.zeros((n, 1))])
    a_ub = np.hstack([-np.eye(d), np.ones((d, 1))])
    res = optimize.linprog(cost, A_ub=a_ub, b_ub=np.zeros(d), A_eq=a_eq, b_eq=y,
                           bounds=[(None, None)] * d + [(None, 1.0)], method="highs")
    if res.status != 0 or res.x[-1] <= 0:
        return None
    return res.x[:d]


def argmin_q(X: np.ndarray, y: np.ndarray, beta0: np.ndarray, sign: int,
             blowup: float = 1e6) -> dict[str, np.ndarray | float | bool | str]:
    """Solve ``min Q_sign(β) s.t. Xβ = y, β > 0`` with scipy, independently of any training.

    Reduced coordinates β = β_f + N c (N an orthonormal basis of null(X), β_f a positive feasible
    point from :func:`_positive_feasible`); scipy's ``trust-exact`` minimizes over c, with the
    objective +∞ outside β > 0 (such steps are rejected, which keeps the iterates feasible).
    ``found`` is False when no positive interpolant exists, when the solver fails, or when β grows
    past ``blowup`` (the problem is unbounded below: possible with the minus sign)."""
    start = _positive_feasible(X, y)
    if start is None:
        return {"found": False, "reason": "no positive interpolant", "beta": np.full(len(beta0),
                                                                                        np.nan)}
    N = linalg.null_space(X)
    k = beta0 ** -3.0

    def beta_of(c: np.ndarray) -> np.ndarray:
        return start + N @ c

    def fun(c: np.ndarray) -> float:
        beta = beta_of(c)
        return np.inf if np.any(beta <= 0) else q_objective(beta, beta0, sign)

    def jac(c: np.ndarray) -> np.ndarray:
        beta = beta_of(c)
        if np.any(beta <= 0):
            return np.zeros_like(c)
        return N.T @ (-beta ** -3.0 + sign * k)

    def hess(c: np.ndarray) -> np.ndarray:
        beta = beta_of(c)
        if np.any(beta <= 0):
            return np.eye(len(c))
        return N.T @ (3.0 * beta[:, None] ** -4.0 * N)

    res = optimize.minimize(fun, np.zeros(N.shape[1]), jac=jac, hess=hess, method="trust-exact",
                            options={"gtol": 1e-13, "maxiter": 2000})
    beta = beta_of(res.x)
    if not np.all(np.isfinite(beta)) or np.max(np.abs(beta)) > blowup:
        return {"found": False, "reason": f"β grew past {blowup:g}: unbounded below",
                "beta": beta}
    grad = float(np.linalg.norm(jac(res.x)))
    if not res.success and grad > 1e-6:
        return {"found": False, "reason": f"solver: {res.message} (|∇| = {grad:.2e})",
                "beta": beta}
    return {"found": True, "reason": "", "beta": beta, "gradient_norm": grad}


def density(beta: np.ndarray) -> float:
    r"""Participation ratio :math:`(\|\beta\|_1/\|\beta\|_2)^2 / d` ∈ [1/d, 1]: 1 when every
    entry has the same magnitude, 1/d for a single non-zero entry."""
    beta = np.abs(np.asarray(beta, dtype=np.float64))
    return float(np.sum(beta) ** 2 / np.sum(beta ** 2) / len(beta))


def kkt_residual(X: np.ndarray, beta: np.ndarray, beta0: np.ndarray) -> float:
    r"""Relative size of the part of :math:`\beta^{-3} - \beta(0)^{-3}` outside range(Xᵀ) (0 on
    the gradient-flow path; the plus-sign KKT condition)."""
    v = beta ** -3.0 - beta0 ** -3.0
    projected = X.T @ np.linalg.lstsq(X.T, v, rcond=None)[0]
    return float(np.linalg.norm(v - projected) / max(np.linalg.norm(v), 1e-300))


def experiment(n: int, d: int, seed: int, lr_scale: float, max_steps: int,
               tol: float, alpha: float) -> dict[str, object]:
    """Everything Section 3 reports for one random problem."""
    prob = make_problem(n, d, seed)
    X, y, beta0 = prob["X"], prob["y"], prob["beta0"]
    deq = gd_diagonal_deq(X, y, beta0, lr_scale, max_steps, tol)
    flow = flow_diagonal_deq(X, y, beta0, tol)
    dln = gd_diagonal_net(X, y, alpha, lr_scale, max_steps, tol)
    out: dict[str, object] = {"problem": prob, "deq": deq, "flow": flow, "dln": dln,
                              "kkt_residual": kkt_residual(X, flow["beta"], beta0)}

    def distance(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    for sign, name in ((1, "plus"), (-1, "minus")):
        sol = argmin_q(X, y, beta0, sign)
        found = bool(sol["found"])
        out[name] = {"found": found, "reason": sol["reason"], "beta": sol["beta"],
                     "distance": distance(flow["beta"], sol["beta"]) if found else np.inf,
                     "distance_gd": distance(deq["beta"], sol["beta"]) if found else np.inf,
                     "stationarity": stationarity(X, flow["beta"], beta0, sign),
                     "q_flow": q_objective(flow["beta"], beta0, sign),
                     "q_argmin": q_objective(sol["beta"], beta0, sign) if found else np.nan}
    out["density_deq"] = density(flow["beta"])
    out["density_dln"] = density(dln["beta"])
    out["density_truth"] = density(prob["beta_star"])
    return out


@dataclass(frozen=True)
class Diagonal(Job):
    """Section 3: :func:`experiment` for every seed of ``seeds`` (one random problem each), and
    the seconds it took."""

    seeds: tuple[int, ...]
    n: int
    d: int
    lr_scale: float
    max_steps: int
    tol: float
    alpha: float
    figure: ClassVar[str] = FIGURE

    @property
    def name(self) -> str:
        return "diagonal"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        start = time.perf_counter()
        out = {f"s{seed}": experiment(self.n, self.d, seed, self.lr_scale, self.max_steps,
                                      self.tol, self.alpha) for seed in self.seeds}
        return {**out, "seconds": time.perf_counter() - start}
