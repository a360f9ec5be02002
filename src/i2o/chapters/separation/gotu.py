r"""Generalization on the unseen (GOTU, Abbe et al. 2023) on the Boolean cube {±1}^d.

Two targets (the setups of the companion section of EXPERIMENTS.md, reconstructed):

- ``f1`` :math:`= x_0x_1 - 1.25\,x_1x_2 + 1.5\,x_2x_0`, seen on :math:`\{x_0x_1x_2 = 1\}` (half the
  cube), unseen on :math:`\{x_0x_1x_2 = -1\}`;
- ``f2`` :math:`= x_0x_1`, seen on :math:`\{x_0 = 1 \text{ or } x_1 = 1\}` (three quarters), unseen
  on :math:`\{x_0 = x_1 = -1\}`.

Models are trained on the whole seen part (or, when it is larger than the training size, on points
drawn uniformly from it), must fit the *whole* seen part, and are scored by their MSE on the *whole*
unseen part. Where the theory gives a value: an affine model that interpolates the seen part
is unique when the seen part's affine features are linearly independent, so every interpolating
affine model (the diagonal linear DEQ with bias, the diagonal linear network) must have that
interpolant's unseen MSE (:func:`affine_prediction`; e.g. on the seen part of f1,
:math:`x_0x_1 = x_2`, so the interpolant is :math:`x_2 - 1.25x_0 + 1.5x_1` and its unseen MSE is
:math:`4\,E[f_1^2] = 19.25`). The implicit bias decides nothing there; it would only between
several interpolants.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from i2o.base import runtime
from i2o.chapters.separation import FIGURE, batched, nets
from i2o.compute.job import Job

TARGETS = ("f1", "f2")
MODELS = ("linear_deq", "dln", "deq_contractive", "fnn")


def target(name: str, x: np.ndarray) -> np.ndarray:
    if name == "f1":
        return x[:, 0] * x[:, 1] - 1.25 * x[:, 1] * x[:, 2] + 1.5 * x[:, 2] * x[:, 0]
    if name == "f2":
        return x[:, 0] * x[:, 1]
    raise ValueError(f"unknown GOTU target {name!r}; allowed: {TARGETS}")


def seen(name: str, x: np.ndarray) -> np.ndarray:
    """Mask of the seen part of the cube for target ``name``."""
    if name == "f1":
        return x[:, 0] * x[:, 1] * x[:, 2] == 1
    return (x[:, 0] == 1) | (x[:, 1] == 1)


def cube(d: int) -> np.ndarray:
    """All 2^d points of {±1}^d (float64)."""
    return np.array(list(itertools.product((-1.0, 1.0), repeat=d)))


def sample_seen(name: str, d: int, size: int, seed: int) -> np.ndarray:
    """``size`` points uniform on the seen part: uniform cube points, the fixed coordinates then
    redrawn inside the seen part (x2 = x0x1 for f1; (x0, x1) uniform over its three seen pairs
    for f2)."""
    rng = np.random.default_rng(seed)
    x = rng.choice((-1.0, 1.0), size=(size, d))
    if name == "f1":
        x[:, 2] = x[:, 0] * x[:, 1]
    else:
        pairs = np.array([(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0)])
        x[:, :2] = pairs[rng.integers(0, 3, size)]
    return x


def training_points(name: str, d: int, size: int, seed: int) -> np.ndarray:
    """The training set: the whole seen part when it has at most ``size`` points (in cube
    order), else :func:`sample_seen`."""
    x = cube(d)
    seen_part = x[seen(name, x)]
    return seen_part if len(seen_part) <= size else sample_seen(name, d, size, seed)


#: A least-squares coefficient within this fraction of the largest one is 0 (rounding, not a sign).
ZERO_COEFFICIENT = 1e-9


def readout_signs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The linear DEQ's fixed readout: the signs (0 → +1) of the minimum-norm affine least-squares
    fit of the training data, so that β = a/(1 − w) can reach it (the authors' reply: −1 where
    the solution is negative).

    A coefficient is negative when it is below −:data:`ZERO_COEFFICIENT` × max|coefficient|: a
    coordinate the target does not depend on gets a coefficient of 0 up to rounding (±1e-16),
    whose sign would otherwise be the BLAS kernel's choice."""
    features = np.hstack([x, np.ones((len(x), 1))])
    coef, *_ = np.linalg.lstsq(features, y, rcond=None)
    weights = coef[:-1]
    tolerance = ZERO_COEFFICIENT * float(np.max(np.abs(weights), initial=0.0))
    return np.where(weights < -tolerance, -1.0, 1.0)


def affine_prediction(name: str, d: int, bias: bool) -> dict[str, float | bool]:
    """The affine interpolant of the target on the whole seen part (least squares on all its
    points): whether it interpolates, whether it is unique, and its MSE on the unseen part."""
    x = cube(d)
    f = target(name, x)
    mask = seen(name, x)
    features = np.hstack([x, np.ones((len(x), 1))]) if bias else x
    coef, *_ = np.linalg.lstsq(features[mask], f[mask], rcond=None)
    residual = float(np.sqrt(np.mean((features[mask] @ coef - f[mask]) ** 2)))
    rank = int(np.linalg.matrix_rank(features[mask]))
    return {"interpolates": residual < 1e-9, "unique": rank == features.shape[1],
            "unseen_mse": float(np.mean((features[~mask] @ coef - f[~mask]) ** 2)),
            "seen_rmse": residual}


def feature_density(features: np.ndarray) -> float:
    """Mean over samples of the participation ratio of |features| (see
    :func:`i2o.chapters.separation.diagonal.density`); 0 for an all-zero row."""
    a = np.abs(features)
    l1, l2 = a.sum(axis=1), (a ** 2).sum(axis=1)
    ratio = np.divide(l1 ** 2, l2 * a.shape[1], out=np.zeros_like(l1), where=l2 > 0)
    return float(ratio.mean())


def train_model(kind: str, name: str, d: int, train_size: int, width: int, depth: int,
                steps: int, lr: float, seed: int, alpha: float, gamma: float,
                heatmap_points: int) -> dict[str, object]:
    """Train one model on the seen part of target ``name`` (:func:`training_points`); its MSE on
    the training points, on the whole seen part (what the fit gate reads) and on the unseen
    part, its features on the first ``heatmap_points`` training points (the heatmaps) and their
    density over the whole seen part."""
    x_np = training_points(name, d, train_size, seed)
    all_x = cube(d)
    mask = seen(name, all_x)
    x = torch.as_tensor(x_np, dtype=torch.float32)
    y = torch.as_tensor(target(name, x_np), dtype=torch.float32)
    xs = torch.as_tensor(all_x[mask], dtype=torch.float32)
    ys = torch.as_tensor(target(name, all_x[mask]), dtype=torch.float32)
    xu = torch.as_tensor(all_x[~mask], dtype=torch.float32)
    yu = torch.as_tensor(target(name, all_x[~mask]), dtype=torch.float32)
    signs = (torch.as_tensor(readout_signs(x_np, target(name, x_np)))
             if kind == "linear_deq" else None)
    model = nets.make_model(kind, d, width, depth, seed, alpha=alpha, gamma=gamma, signs=signs)
    start = time.perf_counter()
    losses = nets.fit(model, x, y, steps, lr, seed)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        feats = model.features(x[:heatmap_points]).numpy()
        density = feature_density(model.features(xs).numpy())
    return {"train_mse": nets.mse(model, x, y), "seen_mse": nets.mse(model, xs, ys),
            "unseen_mse": nets.mse(model, xu, yu), "train_size": len(x_np),
            "seen_variance": float(torch.var(ys, unbiased=False)), "final_loss": losses[-1],
            "features": feats, "feature_density": density,
            "parameters": nets.free_parameters(model), "seconds": seconds}


def train_deq_stack(name: str, d: int, train_size: int, width: int, steps: int, lr: float,
                    seeds: list[int], gamma: float, heatmap_points: int) -> dict[str, np.ndarray]:
    """:func:`train_model` of the contractive ReLU DEQ for every seed at once (stacked weights,
    :func:`~.batched.forward_contractive_deq`): each model starts from the initialization
    :func:`~.nets.make_model` gives it, sees its own training points and follows its own Adam
    path (the loss is the sum of the per-model losses, Adam is elementwise), so the stack
    computes what the models alone compute up to the solvers' tolerance and floating-point
    summation order; on CUDA when PyTorch sees a GPU. Returns each of :func:`train_model`'s
    numbers as an array over ``seeds`` (``features``: seeds × heatmap points × width);
    ``seconds`` is the stack's wall time shared equally among its models."""
    device = runtime.device()

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32, device=device)

    train = [training_points(name, d, train_size, seed) for seed in seeds]
    x, y = tensor(np.stack(train)), tensor(np.stack([target(name, t) for t in train]))
    all_x = cube(d)
    mask = seen(name, all_x)
    xs, ys = tensor(all_x[mask]), tensor(target(name, all_x[mask]))
    xu, yu = tensor(all_x[~mask]), tensor(target(name, all_x[~mask]))
    models = [nets.make_model("deq_contractive", d, width, 1, seed, gamma=gamma)
              for seed in seeds]
    weights = [w.detach().to(device).requires_grad_(True)
               for w in batched.stack_contractive_deq(models)]

    def predict(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return batched.forward_contractive_deq(weights, inputs, gamma)

    last = torch.zeros(len(seeds), device=device)

    def per_model_loss(_: int) -> torch.Tensor:
        nonlocal last
        per_model = torch.mean((predict(x)[0] - y) ** 2, dim=1)
        last = per_model.detach()
        return per_model

    seconds = batched.adam_stack(weights, per_model_loss, steps, lr)
    with torch.no_grad():
        def mse(inputs: torch.Tensor, targets: torch.Tensor) -> np.ndarray:
            return torch.mean((predict(inputs)[0] - targets) ** 2, dim=1).cpu().numpy(
            ).astype(float)

        features = predict(x[:, :heatmap_points])[1].cpu().numpy()
        seen_features = predict(xs)[1].cpu().numpy()
        return {"train_mse": mse(x, y), "seen_mse": mse(xs, ys), "unseen_mse": mse(xu, yu),
                "train_size": np.full(len(seeds), x.shape[1]),
                "seen_variance": np.full(len(seeds), float(torch.var(ys, unbiased=False))),
                "final_loss": last.cpu().numpy().astype(float), "features": features,
                "feature_density": np.array([feature_density(f) for f in seen_features]),
                "parameters": np.full(len(seeds), nets.free_parameters(models[0])),
                "seconds": np.full(len(seeds), seconds / len(seeds))}


# --- the section's jobs (cache entries) ----------------------------------------------------------

@dataclass(frozen=True)
class GotuModel(Job):
    """One model of ``kind`` trained on target ``target`` (:func:`train_model`). The fields a kind
    does not use are ``None`` (:meth:`of`), so that they are not part of its key."""

    target: str
    kind: str
    seed: int
    d: int
    train_size: int
    steps: int
    lr: float
    heatmap_points: int
    width: int | None = None  # the ReLU DEQ's and the FNN's
    depth: int | None = None  # the FNN's
    gamma: float | None = None  # the ReLU DEQ's
    alpha: float | None = None  # the diagonal linear network's
    figure: ClassVar[str] = FIGURE

    @classmethod
    def of(cls, target: str, kind: str, seed: int, d: int, train_size: int, steps: int,
           lr: float, heatmap_points: int, width: int, depth: int, gamma: float,
           alpha: float) -> GotuModel:
        """The job of one model, with the parameters its kind uses."""
        return cls(target, kind, seed, d, train_size, steps, lr, heatmap_points,
                   width=width if kind in ("deq_contractive", "fnn") else None,
                   depth=depth if kind == "fnn" else None,
                   gamma=gamma if kind == "deq_contractive" else None,
                   alpha=alpha if kind == "dln" else None)

    @property
    def name(self) -> str:
        return f"gotu-{self.target}-{self.kind}-s{self.seed}"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return train_model(self.kind, self.target, self.d, self.train_size, self.width,
                           self.depth, self.steps, self.lr, self.seed, self.alpha, self.gamma,
                           self.heatmap_points)


@dataclass(frozen=True)
class GotuDeqStack(Job):
    """The contractive ReLU DEQs of one target, every seed trained at once
    (:func:`train_deq_stack`): arrays over seeds."""

    target: str
    seeds: tuple[int, ...]
    d: int
    train_size: int
    width: int
    steps: int
    lr: float
    gamma: float
    heatmap_points: int
    figure: ClassVar[str] = FIGURE

    @property
    def name(self) -> str:
        return f"gotu-{self.target}-deq_contractive"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return train_deq_stack(self.target, self.d, self.train_size, self.width, self.steps,
                               self.lr, list(self.seeds), self.gamma, self.heatmap_points)
