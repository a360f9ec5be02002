"""The error floor that per-set batch normalization puts under every sinusoid model.

With ``normalization="per_set_bn"`` (:mod:`.mlp`) the query set is normalized with its own
statistics. The first hidden layer computes w_j x per unit and standardizes it over the set, so
the rest of the network sees the query inputs only through their *centred* positions
c_i = x_i − x̄ (the spread s enters only through √(w_j² s² + ε)); in the limit |w_j| s ≫ √ε it
sees only the *standardized* positions u_i = (x_i − x̄)/s. Whatever the network learned from the
support set, its prediction for query point i is a function of (c, support set) — or of
(u, support set) in the limit.

A lower bound on the test MSE of any such network: give it more than it has — the task in the
support set's own frame (the amplitude A, the spread s_s and the phase ψ = φ − x̄_s that the
support points determine exactly), so that only the two sets' positions are unknown. With every
x ~ U[−5, 5] and φ ~ U[0, π] independent:

- given the support's offsets and ψ, its mean x̄_s is uniform on the interval that keeps every
  support point in [−5, 5] and φ = ψ + x̄_s in [0, π];
- given the query's centred positions c, its mean x̄_q is uniform on the interval that keeps every
  x̄_q + c_i in [−5, 5]; given standardized positions u, (x̄_q, s_q) has density ∝ s_q^{n−2} on the
  region that keeps every x̄_q + s_q u_i in [−5, 5].

The best prediction of y_i = A sin(x̄_q + s_q u_i − ψ − x̄_s) is its posterior mean, and the floor
is the posterior variance averaged over points and tasks,

    floor = E_task [ (1/n) Σ_i Var(y_i | A, s_s, ψ, support offsets, query offsets) ],

computed by Monte Carlo over tasks, with the expectation over x̄_q in closed form
(E sin(X + t), E sin²(X + t) for X uniform on [a, b]) and quadratures over x̄_s and s_q. Knowing
more (the information the network has is a function of what is conditioned on here) can only
lower the error, so no per-set-BN network can go below this floor, however it is trained. A
network without normalization, or with ``joint_bn``, is not bound by it.

:class:`BNFloor` is the job that computes it for the chapter (with :func:`task_agnostic_mse`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, ClassVar, NamedTuple

import numpy as np

from i2o.chapters.meta import FIGURE
from i2o.chapters.meta.tasks import AMPLITUDE_RANGE, INPUT_RANGE, PHASE_RANGE
from i2o.compute.job import Job


class Floor(NamedTuple):
    centred: float  # the network sees x − x̄ (BN with ε > 0: the spread is kept)
    standardized: float  # the network sees (x − x̄)/s (the limit |w| s ≫ √ε)
    standard_error: float  # Monte Carlo standard error (the larger of the two)
    target_variance: float  # E[y²] = E[A²]/2: the MSE of predicting 0


def _uniform_moments(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """E sin(X + t) and E sin²(X + t) for X ~ U[a, b] (broadcast)."""
    width = b - a
    first = (np.cos(a + t) - np.cos(b + t)) / width
    second = 0.5 - (np.sin(2 * (b + t)) - np.sin(2 * (a + t))) / (4 * width)
    return first, second


def _mean_variance(query: np.ndarray, support_low: np.ndarray, support_high: np.ndarray,
                   amplitude: np.ndarray, psi: np.ndarray, scales: np.ndarray,
                   weights: np.ndarray, n_shifts: int) -> np.ndarray:
    """Per task, the posterior variance of y_i = A sin(x̄_q + s_q·query_i − ψ − x̄_s) averaged over
    points: x̄_s uniform on [support_low, support_high] (midpoint rule, ``n_shifts`` nodes), s_q on
    ``scales`` with ``weights`` (tasks × scales), x̄_q uniform on its feasible interval."""
    low, high = INPUT_RANGE
    spread = query[:, None, :] * scales[:, :, None]  # tasks × scales × points
    a = low - spread.min(axis=2, keepdims=True)
    b = high - spread.max(axis=2, keepdims=True)
    feasible = (b > a)[..., 0]
    b = np.where(b > a, b, a + 1.0)  # any width on infeasible scales: their weight is 0
    w = np.where(feasible, weights, 0.0)
    w = w / w.sum(axis=1, keepdims=True)
    nodes = (np.arange(n_shifts) + 0.5) / n_shifts
    shifts = support_low[:, None] + (support_high - support_low)[:, None] * nodes  # tasks × k
    mean = np.zeros(query.shape)
    mean_square = np.zeros(query.shape)
    for k in range(n_shifts):
        t = spread - (psi + shifts[:, k])[:, None, None]
        first, second = _uniform_moments(a, b, t)
        mean += np.einsum("ts,tsp->tp", w, first) / n_shifts
        mean_square += np.einsum("ts,tsp->tp", w, second) / n_shifts
    return (amplitude[:, None] ** 2 * (mean_square - mean ** 2)).mean(axis=1)


def _query_scales(offsets: np.ndarray, n_scales: int) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature nodes and weights of s_q given standardized offsets: density ∝ s^{n−2} × the
    length of x̄_q's interval, on (0, s_max) where that interval closes."""
    width = INPUT_RANGE[1] - INPUT_RANGE[0]
    extent = offsets.max(axis=1) - offsets.min(axis=1)
    fractions = (np.arange(n_scales) + 0.5) / n_scales
    scales = (width / extent)[:, None] * fractions[None, :]
    interval = np.clip(width - scales * extent[:, None], 0.0, None)
    return scales, scales ** (offsets.shape[1] - 2) * interval


def per_set_bn_floor(n_tasks: int = 4000, n_points: int = 10, seed: int = 0,
                     n_scales: int = 64, n_shifts: int = 48) -> Floor:
    """The floor under the query MSE of per-set-BN networks (Monte Carlo over ``n_tasks``
    tasks with ``n_points`` support and ``n_points`` query points)."""
    if n_tasks < 2 or n_points < 2:
        raise ValueError(f"need n_tasks ≥ 2 and n_points ≥ 2; got {n_tasks}, {n_points}")
    rng = np.random.default_rng(seed)
    amplitude = rng.uniform(*AMPLITUDE_RANGE, n_tasks)
    phase = rng.uniform(*PHASE_RANGE, n_tasks)
    x_support = rng.uniform(*INPUT_RANGE, (n_tasks, n_points))
    x_query = rng.uniform(*INPUT_RANGE, (n_tasks, n_points))
    mean_s = x_support.mean(axis=1)
    psi = phase - mean_s
    spread_s = x_support - mean_s[:, None]

    def support_interval(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        low = np.maximum(INPUT_RANGE[0] - offsets.min(axis=1), PHASE_RANGE[0] - psi)
        high = np.minimum(INPUT_RANGE[1] - offsets.max(axis=1), PHASE_RANGE[1] - psi)
        return low, high

    centred = x_query - x_query.mean(axis=1, keepdims=True)
    one = np.ones((n_tasks, 1))
    kept = _mean_variance(centred, *support_interval(spread_s), amplitude, psi, one, one,
                          n_shifts)
    standardized = centred / centred.std(axis=1, keepdims=True)
    scales, weights = _query_scales(standardized, n_scales)
    # the support's spread s_s is known in its own frame: its offsets are spread_s exactly
    lost = _mean_variance(standardized, *support_interval(spread_s), amplitude, psi, scales,
                          weights, n_shifts)
    target_variance = float(np.mean(amplitude ** 2) / 2)
    se = max(kept.std(ddof=1), lost.std(ddof=1)) / np.sqrt(n_tasks)
    return Floor(float(kept.mean()), float(lost.mean()), float(se), target_variance)


def task_agnostic_mse() -> float:
    """The MSE of the best predictor that ignores the support set, m(x) = E[y | x] (exact).

    E[A sin(x − φ)] over φ ~ U[0, π] is −(2/π) E[A] cos x, so with x ~ U[−5, 5]
    MSE = E[y²] − E[m(x)²] = E[A²]/2 − (2 E[A]/π)² E[cos² x]. A meta-learner whose test MSE at
    its training N is not below this has not learned to use the support set."""
    (a_low, a_high), (x_low, x_high) = AMPLITUDE_RANGE, INPUT_RANGE
    mean_a = (a_low + a_high) / 2
    mean_a2 = (a_high ** 3 - a_low ** 3) / (3 * (a_high - a_low))
    mean_cos2 = 0.5 + (np.sin(2 * x_high) - np.sin(2 * x_low)) / (4 * (x_high - x_low))
    return float(mean_a2 / 2 - (2 * mean_a / np.pi) ** 2 * mean_cos2)


def target_variance() -> float:
    """E[y²] = E[A²]/2: the MSE of predicting 0 (exact)."""
    a_low, a_high = AMPLITUDE_RANGE
    return float((a_high ** 3 - a_low ** 3) / (3 * (a_high - a_low)) / 2)


@dataclasses.dataclass(frozen=True)
class BNFloor(Job):
    """The per-set-BN floor over ``n_tasks`` tasks drawn from ``seed``: ``{"centred",
    "standardized", "standard_error", "target_variance", "task_agnostic", "seconds"}``."""

    figure: ClassVar[str] = FIGURE

    n_tasks: int
    seed: int

    @property
    def name(self) -> str:
        return "bn-floor"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        start = time.perf_counter()
        values = per_set_bn_floor(n_tasks=self.n_tasks, seed=self.seed)._asdict()
        return {**values, "task_agnostic": task_agnostic_mse(),
                "seconds": time.perf_counter() - start}
