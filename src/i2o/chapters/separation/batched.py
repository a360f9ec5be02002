r"""Train R small fully connected ReLU networks at once, by stacked weights.

The R models (restarts or seeds) share the input ``x`` (n, d) and target ``y`` (n,). Layer l of
model r is :math:`h^{(r)}_{l+1} = \mathrm{ReLU}(h^{(r)}_l W^{(r)}_l + b^{(r)}_l)`, computed for all
r by one batched matrix product (``torch.baddbmm``). The loss minimized is
:math:`\sum_r \mathrm{MSE}_r`: its gradient with respect to model r's weights is the gradient of
:math:`\mathrm{MSE}_r` alone, and Adam is elementwise, so each model follows exactly the path it
would follow if trained by itself (up to floating-point summation order).
"""

from __future__ import annotations

import math

import torch


def init_stack(d_in: int, width: int, depth: int, seeds: list[int]
               ) -> list[torch.Tensor]:
    """Weights ``[W_0, b_0, …, W_depth, b_depth]``, each with a leading model axis of len(seeds);
    model r drawn from ``seeds[r]`` with PyTorch's ``nn.Linear`` law U(−1/√fan_in, 1/√fan_in)."""
    sizes = [d_in] + [width] * depth + [1]
    stacks: list[list[torch.Tensor]] = [[] for _ in range(2 * (depth + 1))]
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        for layer, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            bound = 1.0 / math.sqrt(fan_in)
            w = (torch.rand(fan_in, fan_out, generator=generator) * 2 - 1) * bound
            b = (torch.rand(1, fan_out, generator=generator) * 2 - 1) * bound
            stacks[2 * layer].append(w)
            stacks[2 * layer + 1].append(b)
    return [torch.stack(s).requires_grad_(True) for s in stacks]


def forward(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Outputs of every model, shape (R, n)."""
    h = x.expand(weights[0].shape[0], *x.shape)
    layers = len(weights) // 2
    for layer in range(layers):
        h = torch.baddbmm(weights[2 * layer + 1], h, weights[2 * layer])
        if layer < layers - 1:
            h = torch.relu(h)
    return h.squeeze(-1)


def per_model_mse(weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error of each model, shape (R,)."""
    return torch.mean((forward(weights, x) - y) ** 2, dim=1)


def fit_stack(weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, steps: int,
              lr: float) -> torch.Tensor:
    """Full-batch Adam on :math:`\\sum_r \\mathrm{MSE}_r` for ``steps`` steps, learning rate
    cosine-annealed from ``lr`` to ``lr/100``; return the final training MSE of each model."""
    optimizer = torch.optim.Adam(weights, lr=lr)
    lr_min = lr / 100

    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_min + 0.5 * (lr - lr_min) * (1 + math.cos(math.pi * step / steps))
        optimizer.zero_grad()
        per_model_mse(weights, x, y).sum().backward()
        optimizer.step()
    with torch.no_grad():
        return per_model_mse(weights, x, y)
