r"""Theorem 1's construction: a width-m ReLU DEQ with a strictly lower-triangular W and 2^m pieces.

The tent map :math:`\Delta(x) = 2\sigma(x) - 4\sigma(x - \tfrac12)` maps [0, 1] onto itself in two
linear pieces; composed k times, :math:`\Delta^k` is a sawtooth with :math:`2^k` pieces
(Telgarsky, 2016). A DEQ :math:`z = \sigma(W z + u x + b)` with m neurons realizes
:math:`\Delta^m` with

.. math::
    W_{ti} = -2^{t-i+1}\ (i < t), \qquad u_t = 2^t, \qquad b_t = -1, \qquad
    y = 2^m x - \sum_{i=1}^m 2^{m-i+1} z_i .

Proof sketch (checked numerically by :func:`check_construction`): with
:math:`r_t = 2^t x - \sum_{i<t} 2^{t-i+1} z_i` one has :math:`z_t = \sigma(r_t - 1)` and
:math:`r_{t+1} = 2 r_t - 4\sigma(r_t - 1)`; if :math:`r_t = 2 s_t` with :math:`s_t \in [0, 1]` then
:math:`r_{t+1} = 2\Delta(s_t)`. Hence :math:`s_t = \Delta^{t-1}(x)` and
:math:`y = r_{m+1}/2 = \Delta^m(x)`. The readout uses the input as well as the fixed point (a
reconstructed detail: the OpenReview page does not give the paper's head). Because W is strictly
lower-triangular, fixed-point iteration from 0 reaches the fixed point exactly in m steps (the
authors' rebuttal says one step from a well-chosen start, at most m from 0).

Pieces are counted exactly on a dyadic grid: every breakpoint of the construction is a multiple of
:math:`2^{-m}`, all values are dyadic rationals computed without rounding in float64 (m ≤ 40), so
the slopes between consecutive grid points are exact and a piece is a maximal run of equal slopes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from i2o.chapters.separation import FIGURE, nets
from i2o.compute.job import Job
from i2o.deq import SolverSpec, solve


def tent(x: np.ndarray) -> np.ndarray:
    r""":math:`\Delta(x) = 2\sigma(x) - 4\sigma(x - 1/2)`."""
    return 2 * np.maximum(x, 0) - 4 * np.maximum(x - 0.5, 0)


def sawtooth(x: np.ndarray, k: int) -> np.ndarray:
    r""":math:`\Delta^k(x)`: :math:`2^k` linear pieces on [0, 1], values in [0, 1]."""
    y = np.asarray(x, dtype=np.float64)
    for _ in range(k):
        y = tent(y)
    return y


def construction(m: int) -> dict[str, np.ndarray]:
    """The weights of the width-``m`` DEQ (module docstring), float64."""
    if m < 1:
        raise ValueError(f"m must be ≥ 1; got {m}")
    t = np.arange(1, m + 1)
    W = np.where(t[:, None] > t[None, :], -(2.0 ** (t[:, None] - t[None, :] + 1)), 0.0)
    return {"W": W, "u": 2.0 ** t, "b": -np.ones(m), "a": -(2.0 ** (m - t + 1)),
            "c": np.array(2.0 ** m)}


def evaluate_construction(m: int, x: np.ndarray) -> tuple[np.ndarray, dict]:
    """Solve the width-``m`` DEQ at the points ``x`` with the book's fixed-point solver (m steps
    from 0, float64); return ``(y, solver statistics)``."""
    weights = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in construction(m).items()}
    xs = torch.as_tensor(np.asarray(x, dtype=np.float64))[:, None]

    def g(z: torch.Tensor) -> torch.Tensor:
        return torch.relu(z @ weights["W"].T + xs * weights["u"] + weights["b"])

    spec = SolverSpec(method="fixed_point", max_iter=m, tol=0.0, return_best=False)
    result = solve(g, torch.zeros(len(xs), m, dtype=torch.float64), spec, differentiable=False)
    y = result.z @ weights["a"] + weights["c"] * xs[:, 0]
    return y.numpy(), {"n_steps": result.n_steps, "residual_abs": result.residual_abs}


def count_pieces(x: np.ndarray, y: np.ndarray, rtol: float = 1e-9) -> int:
    """Maximal runs of equal slope of the piecewise-linear interpolation of ``(x, y)`` (sorted x).

    Exact when the grid contains every breakpoint and values are exact (module docstring); on
    any other grid it is an estimate (a breakpoint inside a grid interval counts twice)."""
    slopes = np.diff(y) / np.diff(x)
    scale = max(1.0, float(np.max(np.abs(slopes))))
    changes = np.abs(np.diff(slopes)) > rtol * scale
    return 1 + int(np.sum(changes))


def dyadic_grid(exponent: int) -> np.ndarray:
    """The ``2**exponent + 1`` points ``j / 2**exponent`` of [0, 1]."""
    return np.arange(2 ** exponent + 1, dtype=np.float64) / 2 ** exponent


def check_construction(m: int, refine: int = 2) -> dict[str, float]:
    """Build and solve the width-``m`` DEQ on the dyadic grid of spacing ``2^-(m+refine)``:
    its number of pieces, the largest deviation from Δ^m, the solver's steps and residual."""
    x = dyadic_grid(m + refine)
    y, stats = evaluate_construction(m, x)
    return {"m": m, "pieces": count_pieces(x, y),
            "max_error": float(np.max(np.abs(y - sawtooth(x, m)))),
            "n_steps": stats["n_steps"], "residual_abs": stats["residual_abs"],
            "grid_points": len(x)}


def sawtooth_data(k: int, train_size: int, test_size: int, seed: int
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training points drawn uniformly on [0, 1] (seeded), test points on a uniform grid; targets
    Δ^k (float32 tensors, inputs of shape (n, 1))."""
    rng = np.random.default_rng(seed)
    x_train = np.sort(rng.uniform(0.0, 1.0, train_size))
    x_test = (np.arange(test_size) + 0.5) / test_size

    def pair(x: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.as_tensor(x, dtype=torch.float32)[:, None],
                torch.as_tensor(sawtooth(x, k), dtype=torch.float32))

    return (*pair(x_train), *pair(x_test))


def spread_kinks(model: torch.nn.Module, seed: int) -> None:
    r"""Put the kink of every unit of the first layer (the input injection of a DEQ) inside the
    data interval [0, 1]: unit j gets weight :math:`s_j \bar w` and bias :math:`-s_j \bar w k_j`,
    with a random sign :math:`s_j`, :math:`k_j \sim U(0, 1)` and :math:`\bar w` the mean |weight|
    of the default initialization (drawn from ``seed``). With PyTorch's default initialization a
    1-D input puts most kinks outside [0, 1] and many units are dead or linear on the data; the
    same rule is applied to every model of the section."""
    if isinstance(model, nets.FNN):
        weight, bias = model.body[0].weight, model.body[0].bias
    elif isinstance(model, nets.ReluDEQ):
        weight, bias = model.U, model.b
    else:
        raise TypeError(f"spread_kinks needs an FNN or a ReluDEQ; got {type(model).__name__}")
    if weight.shape[1] != 1:
        raise ValueError(f"spread_kinks is for 1-D inputs; got {weight.shape[1]} inputs")
    generator = torch.Generator().manual_seed(seed)
    n = weight.shape[0]
    sign = torch.where(torch.rand(n, generator=generator) < 0.5, -1.0, 1.0)
    kink = torch.rand(n, generator=generator)
    with torch.no_grad():
        scale = weight.abs().mean()
        weight.copy_((sign * scale).to(weight.dtype)[:, None])
        bias.copy_((-sign * scale * kink).to(bias.dtype))


def train_model(kind: str, width: int, depth: int, k: int, seed: int, train_size: int,
                test_size: int, steps: int, lr: float) -> dict[str, float]:
    """Train one model (``deq_lower``, ``deq_contractive`` or ``fnn``, kinks spread by
    :func:`spread_kinks`) on Δ^k by Adam; its train/test MSE, size and cost."""
    x, y, x_test, y_test = sawtooth_data(k, train_size, test_size, seed)
    model = nets.make_model(kind, 1, width, depth, seed)
    spread_kinks(model, seed)
    start = time.perf_counter()
    losses = nets.fit(model, x, y, steps, lr, seed)
    seconds = time.perf_counter() - start
    flops = (nets.flops_deq(1, width, model.iterations) if kind.startswith("deq")
             else nets.flops_fnn(1, width, depth))
    return {"train_mse": nets.mse(model, x, y), "test_mse": nets.mse(model, x_test, y_test),
            "target_variance": float(torch.var(y_test, unbiased=False)),
            "parameters": nets.free_parameters(model), "flops": flops,
            "final_loss": losses[-1], "seconds": seconds}


def fit_lbfgs(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, max_iter: int) -> float:
    """Minimize the training MSE by full-batch L-BFGS with a strong-Wolfe line search (at most
    ``max_iter`` iterations); return the final training MSE."""
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=max_iter, history_size=20,
                                  tolerance_grad=1e-12, tolerance_change=1e-16,
                                  line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.mean((model(x) - y) ** 2)
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return float(torch.mean((model(x) - y) ** 2))


def train_restarts(kind: str, width: int, depth: int, k: int, seed: int, train_size: int,
                   test_size: int, restarts: int, max_iter: int) -> dict[str, object]:
    """Fit one model ``restarts`` times from independent initializations by float64 L-BFGS on the
    data of ``seed``: every restart's train/test MSE, the median test MSE and the test MSE of
    the restart with the lowest training MSE ("best of R", the reading of an expressivity claim:
    what the architecture *can* fit, not what one optimizer run finds)."""
    x, y, x_test, y_test = (t.double() for t in sawtooth_data(k, train_size, test_size, seed))
    train, test = [], []
    start = time.perf_counter()
    for r in range(restarts):
        model = nets.make_model(kind, 1, width, depth, seed * restarts + r).double()
        spread_kinks(model, seed * restarts + r)
        train.append(fit_lbfgs(model, x, y, max_iter))
        test.append(nets.mse(model, x_test, y_test))
    best = int(np.nanargmin(train))
    return {"train_mse": np.array(train), "test_mse": np.array(test),
            "best_train_mse": train[best], "best_test_mse": test[best],
            "median_test_mse": float(np.median(test)), "median_train_mse": float(np.median(train)),
            "target_variance": float(torch.var(y_test, unbiased=False)),
            "seconds": time.perf_counter() - start}


# --- the section's jobs (cache entries) ----------------------------------------------------------

@dataclass(frozen=True)
class Construction(Job):
    """Theorem 1's construction checked for every m of ``m`` (:func:`check_construction`)."""

    m: tuple[int, ...]
    figure: ClassVar[str] = FIGURE

    @property
    def name(self) -> str:
        return "construction"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        rows = [check_construction(m) for m in self.m]
        return {key: np.array([row[key] for row in rows]) for key in rows[0]}


@dataclass(frozen=True)
class _SawtoothFit(Job):
    """One model of ``kind`` fitted to Δ^k on the data of ``seed`` (the fields every Section 1
    fit shares)."""

    k: int
    kind: str
    width: int
    depth: int
    seed: int
    train_size: int
    test_size: int
    figure: ClassVar[str] = FIGURE

    @property
    def model(self) -> str:
        return f"k{self.k}-{self.kind}-w{self.width}-L{self.depth}-s{self.seed}"


@dataclass(frozen=True)
class SawtoothModel(_SawtoothFit):
    """One model trained by Adam on Δ^k (:func:`train_model`)."""

    steps: int
    lr: float

    @property
    def name(self) -> str:
        return f"saw-{self.model}"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return train_model(self.kind, self.width, self.depth, self.k, self.seed,
                           self.train_size, self.test_size, self.steps, self.lr)


@dataclass(frozen=True)
class SawtoothRestarts(_SawtoothFit):
    """``restarts`` float64 L-BFGS fits of one model on seed ``seed``'s data of Δ^k
    (:func:`train_restarts`)."""

    restarts: int
    max_iter: int

    @property
    def name(self) -> str:
        return f"saw-lbfgs-{self.model}"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return train_restarts(self.kind, self.width, self.depth, self.k, self.seed,
                              self.train_size, self.test_size, self.restarts, self.max_iter)
