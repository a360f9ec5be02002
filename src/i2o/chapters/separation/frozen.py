r"""The frozen-coordinate GOTU task: where the linear DEQ's implicit bias decides the unseen error.

On the cube :math:`\{\pm1\}^d` the seen part is :math:`\{x_0 = 1\}` and the target is
:math:`f(x) = c + \sum_{i \ge 1} a_i x_i`, so :math:`\hat f(\emptyset) = c` (the Fourier
coefficient on ∅ of the authors' reply) and :math:`f` ignores :math:`x_0`. On the seen part
:math:`x_0` is the constant 1, so a linear model with a bias, :math:`g(x) = \langle\beta, x\rangle
+ b`, interpolates for every split :math:`\beta_0 + b = c` (with :math:`\beta_i = a_i`): the
interpolant is *not* unique, and on the unseen part (:math:`x_0 = -1`) its error is
:math:`(b - \beta_0 - c)^2 = 4\beta_0^2`. Which split training picks is the implicit bias.

- **Diagonal linear network** without bias, :math:`\beta = u^2 - v^2`: :math:`x_0` is its only
  constant, so :math:`\beta_0 = c` and its unseen MSE is :math:`4c^2 = 4\hat f(\emptyset)^2`.
- **Diagonal linear DEQ with bias**, :math:`z = \operatorname{diag}(w) z + x`,
  :math:`g = \langle s, z\rangle + b` with the readout :math:`s = \pm1` fixed (the authors' reply),
  so :math:`\beta_i = s_i/(1 - w_i)`. Under gradient flow on :math:`(w, b)` of the mean squared
  error with residuals :math:`r`, :math:`\dot\beta = -2(X^\top r/n)\odot\beta^{4}` (the authors'
  flow) and :math:`\dot b = -2\,\overline{r}`. Since :math:`x_0 \equiv 1` on the training data,
  :math:`(X^\top r/n)_0 = \overline{r}`, hence

  .. math:: \frac{d}{dt}\bigl(\beta_0^{-3} + 3b\bigr) = 0,

  a conserved quantity. From :math:`w = 0, b = 0` (:math:`\beta_0(0) = 1`), the limit that
  interpolates satisfies :math:`\beta_0^{-3} + 3(c - \beta_0) = 1`, whose left side decreases in
  :math:`\beta_0 > 0`: one root :math:`\beta_0^\star`, and the predicted unseen MSE is
  :math:`4\beta_0^{\star 2}`.

**Which is lower?** :math:`\beta_0^\star < c` exactly when :math:`c^{-3} < 1`: the DEQ generalizes
better on the unseen part than the diagonal network when :math:`\hat f(\emptyset) > \beta_0(0) =
1`, equally at :math:`\hat f(\emptyset) = 1`, and worse below. (Derived here from the flow the
authors state; the OpenReview page does not give the paper's statement of the comparison.)

Both models are trained by full-batch gradient descent with a small constant step in float64 (the
discretization of the flow the theory is about); the drift of the conserved quantity is recorded.
The seen part is a whole sub-cube, so :math:`\sum_k x_{ki} = 0` for :math:`i \ge 1` and the mean
residual is :math:`\beta_0 + b - c`: :math:`\beta_0` and :math:`b` follow the same path whatever
the :math:`a_i`, and the test does not vary between seeds.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from i2o.chapters.separation import FIGURE
from i2o.compute.job import Job


def cube(d: int) -> np.ndarray:
    """All 2^d points of {±1}^d (float64)."""
    return np.array(list(itertools.product((-1.0, 1.0), repeat=d)))


def coefficients(d: int, seed: int, low: float = 0.6, high: float = 1.5) -> np.ndarray:
    """``a_1 … a_{d-1}``: random signs times magnitudes uniform on [low, high] (a DEQ with a ±1
    readout reaches |a_i| ≥ low with ``w_i = 1 − 1/|a_i|`` inside (−1, 1))."""
    rng = np.random.default_rng(seed)
    return rng.choice((-1.0, 1.0), d - 1) * rng.uniform(low, high, d - 1)


def task(d: int, mean: float, seed: int) -> dict[str, np.ndarray]:
    """Seen and unseen points and targets of the task with ``f̂(∅) = mean``."""
    x = cube(d)
    a = coefficients(d, seed)
    y = mean + x[:, 1:] @ a
    seen = x[:, 0] == 1
    return {"x_seen": x[seen], "y_seen": y[seen], "x_unseen": x[~seen], "y_unseen": y[~seen],
            "a": a}


def predicted_beta0(mean: float, beta0_start: float = 1.0, bias_start: float = 0.0) -> float:
    """The root ``β₀ > 0`` of ``β₀⁻³ + 3(c − β₀) = β₀(0)⁻³ + 3 b(0)`` (bisection; the left side
    decreases in β₀)."""
    conserved = beta0_start ** -3 + 3 * bias_start

    def g(beta: float) -> float:
        return beta ** -3 + 3 * (mean - beta) - conserved

    lo, hi = 1e-6, max(2.0, abs(mean) + 2.0)
    while g(hi) > 0:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if g(mid) > 0 else (lo, mid)
    return 0.5 * (lo + hi)


def predictions(mean: float) -> dict[str, float]:
    """Unseen MSE predicted for the linear DEQ with bias (``4 β₀*²``) and for the diagonal
    linear network without bias (``4 c²``)."""
    beta0 = predicted_beta0(mean)
    return {"beta0": beta0, "linear_deq": 4 * beta0 ** 2, "dln": 4 * mean ** 2}


def train_linear_deq(x: np.ndarray, y: np.ndarray, signs: np.ndarray, lr: float, steps: int,
                     tol: float) -> dict[str, object]:
    """Gradient descent on ``(w, b)`` of ``mean((⟨s, x/(1 − w)⟩ + b − y)²)`` from ``w = 0,
    b = 0``; stops when the MSE is at most ``tol``. Returns β, b, the steps taken and the largest
    drift of ``β₀⁻³ + 3b`` from its start."""
    w, b = np.zeros(x.shape[1]), 0.0
    conserved0 = (signs[0] / (1 - w[0])) ** -3 + 3 * b
    drift, taken = 0.0, 0
    while taken < steps:
        beta = signs / (1 - w)
        r = x @ beta + b - y
        if np.mean(r ** 2) <= tol:
            break
        taken += 1
        grad_beta = 2 * (x.T @ r) / len(y)
        w = w - lr * grad_beta * signs / (1 - w) ** 2
        b = b - lr * 2 * float(np.mean(r))
        drift = max(drift, abs((signs[0] / (1 - w[0])) ** -3 + 3 * b - conserved0))
    beta = signs / (1 - w)
    return {"beta": beta, "bias": b, "steps": taken, "conserved_drift": drift,
            "train_mse": float(np.mean((x @ beta + b - y) ** 2))}


def train_dln(x: np.ndarray, y: np.ndarray, alpha: float, lr: float, steps: int, tol: float
              ) -> dict[str, object]:
    """Gradient descent on ``(u, v)`` of ``mean((⟨u² − v², x⟩ − y)²)`` from ``u = v = α``."""
    u, v = np.full(x.shape[1], alpha), np.full(x.shape[1], alpha)
    taken = 0
    while taken < steps:
        r = x @ (u ** 2 - v ** 2) - y
        if np.mean(r ** 2) <= tol:
            break
        taken += 1
        g = 2 * (x.T @ r) / len(y)
        u, v = u - lr * 2 * u * g, v + lr * 2 * v * g
    beta = u ** 2 - v ** 2
    return {"beta": beta, "bias": 0.0, "steps": taken,
            "train_mse": float(np.mean((x @ beta - y) ** 2))}


def experiment(d: int, mean: float, seed: int, alpha: float, lr: float, steps: int, tol: float
               ) -> dict[str, object]:
    """Both models on the task with ``f̂(∅) = mean``: their training and unseen MSE, ``β₀``, the
    steps taken, and the predictions."""
    data = task(d, mean, seed)
    signs = np.concatenate([[1.0], np.where(data["a"] < 0, -1.0, 1.0)])
    start = time.perf_counter()
    fitted = {"linear_deq": train_linear_deq(data["x_seen"], data["y_seen"], signs, lr, steps,
                                             tol),
              "dln": train_dln(data["x_seen"], data["y_seen"], alpha, lr, steps, tol)}
    out: dict[str, object] = {"prediction": predictions(mean), "mean": mean,
                              "seen_variance": float(np.var(data["y_seen"])),
                              "seconds": time.perf_counter() - start}
    for kind, fit in fitted.items():
        beta, bias = np.asarray(fit["beta"]), float(fit["bias"])
        out[kind] = {"train_mse": fit["train_mse"], "steps": fit["steps"],
                     "beta0": float(beta[0]), "bias": bias,
                     "unseen_mse": float(np.mean((data["x_unseen"] @ beta + bias
                                                  - data["y_unseen"]) ** 2)),
                     "conserved_drift": float(fit.get("conserved_drift", np.nan))}
    return out


@dataclass(frozen=True)
class Frozen(Job):
    """The task for every ``f̂(∅)`` of ``means`` and every seed: ``{"c<i>": {"mean",
    "prediction", "seen_variance", "seconds", "linear_deq": arrays over seeds, "dln": …}}``."""

    seeds: tuple[int, ...]
    d: int
    alpha: float
    means: tuple[float, ...]
    lr: float
    steps: int
    tol: float
    figure: ClassVar[str] = FIGURE

    @property
    def name(self) -> str:
        return "frozen"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, mean in enumerate(self.means):
            runs = [experiment(self.d, float(mean), seed, self.alpha, self.lr, self.steps,
                               self.tol) for seed in self.seeds]
            entry: dict[str, Any] = {"mean": float(mean), "prediction": runs[0]["prediction"],
                                     "seen_variance": np.array([r["seen_variance"]
                                                                for r in runs]),
                                     "seconds": float(sum(r["seconds"] for r in runs))}
            for kind in ("linear_deq", "dln"):
                entry[kind] = {key: np.array([r[kind][key] for r in runs])
                               for key in runs[0][kind]}
            out[f"c{i}"] = entry
        return out
