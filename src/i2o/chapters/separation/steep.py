r"""Steep functions (the paper's Theorem 2, the rebuttal's Figure 1), reconstructed.

Target on :math:`[0, 1]^d`: the rational function :math:`g_\delta(x) = \delta / (x_1 + \delta)`,
which depends on one coordinate and has slope :math:`-1/\delta` at :math:`x_1 = 0` (our choice of
"steep function"; the OpenReview page names a rational target without giving it). Training points
have :math:`x_1` log-uniform on :math:`[\delta/4, 1]` (samples near the steep part) and the other
coordinates uniform. A DEQ (lower-triangular ReLU DEQ of :mod:`.nets`) and an FNN of the same width
are trained on the same points; for each, the largest absolute parameter is recorded at the first
step where the training MSE falls below a common level (``level`` × the target's variance on the
training points): the "max |weight| at equal training loss" of the rebuttal's Figure 1, against d.
The paper expects it to grow with d for the FNN and to stay flat for the DEQ.

:func:`train_stack` trains the models of every seed at once (:mod:`.batched`, stacked weights):
the chapter's runs. :func:`train_model` trains one, through the book's training loop: the
reference the stacked runs are tested and benchmarked against.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from i2o.chapters.separation import FIGURE, batched, nets
from i2o.compute.job import Job
from i2o.train.loop import Plan, train_steps

KINDS = ("deq_lower", "fnn")


def steep_data(d: int, delta: float, size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (size, d))
    x[:, 0] = np.exp(rng.uniform(np.log(delta / 4), 0.0, size))
    y = delta / (x[:, 0] + delta)
    return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)


def max_abs_weight(model: torch.nn.Module) -> float:
    """Largest absolute entry of every parameter (the masked-out entries of a lower-triangular
    DEQ's V excluded: they are not weights of the network)."""
    values = []
    for name, param in model.named_parameters():
        if name == "V" and isinstance(model, nets.ReluDEQ):
            param = model.weight()
        values.append(float(param.detach().abs().max()))
    return max(values)


def train_model(kind: str, d: int, delta: float, width: int, depth: int, size: int,
                steps: int, lr: float, level: float, seed: int) -> dict[str, float]:
    """Train one model: ``reached`` (0/1), the step and max |weight| at the level, and at the
    end."""
    x, y = steep_data(d, delta, size, seed)
    model = nets.make_model(kind, d, width, depth, seed)
    variance = float(torch.var(y, unbiased=False))
    history: list[tuple[float, float]] = []
    plan = Plan(steps=steps, lr=lr, lr_min=lr / 100, clip=0.0, checkpoint_every=steps, seed=seed)

    def step_loss(_: int) -> tuple[torch.Tensor, dict[str, float]]:
        loss = torch.mean((model(x) - y) ** 2)
        history.append((float(loss.detach()), max_abs_weight(model)))
        return loss, {}

    start = time.perf_counter()
    train_steps(model, step_loss, plan)
    seconds = time.perf_counter() - start
    losses = np.array([h[0] for h in history])
    weights = np.array([h[1] for h in history])
    below = np.flatnonzero(losses <= level * variance)
    reached = len(below) > 0
    at = int(below[0]) if reached else len(losses) - 1
    return {"reached": int(reached), "step": at, "max_weight": float(weights[at]),
            "final_max_weight": max_abs_weight(model), "final_mse": nets.mse(model, x, y),
            "variance": variance, "seconds": seconds}


def train_stack(kind: str, d: int, delta: float, width: int, depth: int, size: int,
                steps: int, lr: float, level: float, seeds: list[int]) -> dict[str, np.ndarray]:
    """:func:`train_model` for every seed at once: each model starts from the same
    initialization and sees the same training points as alone, and follows its own Adam path
    (the loss is the sum of the per-model losses, Adam is elementwise), up to floating-point
    summation order. Returns each of :func:`train_model`'s numbers as an array over ``seeds``;
    ``seconds`` is the stack's wall time shared equally among its models."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    data = [steep_data(d, delta, size, seed) for seed in seeds]
    x = torch.stack([xs for xs, _ in data])
    y = torch.stack([ys for _, ys in data])
    models = [nets.make_model(kind, d, width, depth, seed) for seed in seeds]
    lower = kind == "deq_lower"
    weights = batched.stack_lower_deq(models) if lower else batched.stack_fnn(models)
    predict = batched.forward_lower_deq if lower else batched.forward
    losses = torch.empty(steps, len(seeds))
    max_weights = torch.empty(steps, len(seeds))

    def per_model_loss(step: int) -> torch.Tensor:
        per_model = torch.mean((predict(weights, x) - y) ** 2, dim=1)
        losses[step] = per_model.detach()
        max_weights[step] = batched.max_abs_weight(weights, lower)
        return per_model

    seconds = batched.adam_stack(weights, per_model_loss, steps, lr)
    with torch.no_grad():
        final_mse = torch.mean((predict(weights, x) - y) ** 2, dim=1)
    variance = torch.var(y, dim=1, unbiased=False)
    below = (losses <= level * variance).numpy()
    reached = below.any(axis=0)
    at = np.where(reached, below.argmax(axis=0), steps - 1)
    columns = np.arange(len(seeds))
    return {"reached": reached.astype(int), "step": at,
            "max_weight": max_weights.numpy()[at, columns].astype(float),
            "final_max_weight": batched.max_abs_weight(weights, lower).numpy().astype(float),
            "final_mse": final_mse.numpy().astype(float),
            "variance": variance.numpy().astype(float),
            "seconds": np.full(len(seeds), seconds / len(seeds))}


def slope(dims: np.ndarray, max_weights: np.ndarray) -> float:
    """Least-squares slope of log2(max |weight|) against d (bits per input dimension)."""
    return float(np.polyfit(np.asarray(dims, dtype=float), np.log2(max_weights), 1)[0])


@dataclass(frozen=True)
class SteepStack(Job):
    """The Section 2 runs of one model kind at input dimension ``d``, steepness δ = 2^-d (the
    rebuttal's pairing), every seed trained at once (:func:`train_stack`): arrays over seeds."""

    kind: str
    d: int
    seeds: tuple[int, ...]
    width: int
    depth: int
    size: int
    steps: int
    lr: float
    level: float
    figure: ClassVar[str] = FIGURE

    @property
    def name(self) -> str:
        return f"steep-{self.kind}-d{self.d}"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return train_stack(self.kind, self.d, 2.0 ** -self.d, self.width, self.depth, self.size,
                           self.steps, self.lr, self.level, list(self.seeds))
