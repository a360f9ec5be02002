r"""Train R small ReLU networks at once, by stacked weights.

The R models (restarts or seeds) share the input ``x`` (n, d) and target ``y`` (n,), or each has
its own (``x`` of shape (R, n, d), ``y`` of shape (R, n)). Layer l of FNN r is
:math:`h^{(r)}_{l+1} = \mathrm{ReLU}(h^{(r)}_l W^{(r)}_l + b^{(r)}_l)`, computed for all r by one
batched matrix product (``torch.baddbmm``); the lower-triangular ReLU DEQ of :mod:`.nets`
(:func:`stack_lower_deq`) is its ``width``-step fixed-point iteration, exact because its ``W`` is
nilpotent, so that differentiating through the iterations gives the IFT gradient. The loss
minimized is :math:`\sum_r \mathrm{MSE}_r`: its gradient with respect to model r's weights is
the gradient of :math:`\mathrm{MSE}_r` alone, and Adam is elementwise, so each model follows
exactly the path it would follow if trained by itself (up to floating-point summation order).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch

from i2o.chapters.separation import nets
from i2o.train.schedule import adam, cosine_lr


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
    """Outputs of every FNN, shape (R, n); ``x`` is (n, d) shared or (R, n, d)."""
    h = x.expand(weights[0].shape[0], *x.shape) if x.dim() == 2 else x
    layers = len(weights) // 2
    for layer in range(layers):
        h = torch.baddbmm(weights[2 * layer + 1], h, weights[2 * layer])
        if layer < layers - 1:
            h = torch.relu(h)
    return h.squeeze(-1)


def per_model_mse(weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error of each model, shape (R,)."""
    return torch.mean((forward(weights, x) - y) ** 2, dim=1)


def adam_stack(weights: list[torch.Tensor], per_model_loss: Callable[[int], torch.Tensor],
               steps: int, lr: float) -> float:
    """Full-batch Adam on :math:`\\sum_r \\mathrm{loss}_r` for ``steps`` steps, learning rate
    cosine-annealed from ``lr`` to ``lr/100``; ``per_model_loss(step)`` returns the (R,) losses
    of that step (and may record them). Returns the wall seconds of the loop."""
    optimizer = adam(weights, lr=lr)
    start = time.perf_counter()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = cosine_lr(step, steps, lr, lr / 100)
        optimizer.zero_grad(set_to_none=True)
        per_model_loss(step).sum().backward()
        optimizer.step()
    return time.perf_counter() - start


def fit_stack(weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, steps: int,
              lr: float) -> torch.Tensor:
    """:func:`adam_stack` on every model's MSE; return the final training MSE of each model."""
    adam_stack(weights, lambda _: per_model_mse(weights, x, y), steps, lr)
    with torch.no_grad():
        return per_model_mse(weights, x, y)


def stack_fnn(models: Sequence[nets.FNN]) -> list[torch.Tensor]:
    """The weights of R :class:`~.nets.FNN` (same shape) in the layout of :func:`forward`, so
    that model r of the stack starts where ``models[r]`` starts."""
    def linears(model: nets.FNN) -> list[torch.nn.Linear]:
        return [m for m in model.body if isinstance(m, torch.nn.Linear)] + [model.head]

    layers = [linears(model) for model in models]
    stacks = []
    for layer in range(len(layers[0])):
        stacks.append(torch.stack([ls[layer].weight.detach().T for ls in layers]))
        stacks.append(torch.stack([ls[layer].bias.detach()[None] for ls in layers]))
    return [s.clone().requires_grad_(True) for s in stacks]


def stack_lower_deq(models: Sequence[nets.ReluDEQ]) -> list[torch.Tensor]:
    """The parameters ``[V, Uᵀ, b, headᵀ, head bias]`` of R lower-triangular
    :class:`~.nets.ReluDEQ` whose head reads ``[z*, x]``, each with a leading model axis (``V``
    unmasked, as the module stores it)."""
    for model in models:
        if model.structure != "lower" or not model.head_reads_input:
            raise ValueError("stack_lower_deq needs lower-triangular DEQs whose head reads x")
    return _stack_deq(models)


def _stack_deq(models: Sequence[nets.ReluDEQ]) -> list[torch.Tensor]:
    stacks = [torch.stack([m.V.detach() for m in models]),
              torch.stack([m.U.detach().T for m in models]),
              torch.stack([m.b.detach()[None] for m in models]),
              torch.stack([m.head.weight.detach().T for m in models]),
              torch.stack([m.head.bias.detach()[None] for m in models])]
    return [s.clone().requires_grad_(True) for s in stacks]


def lower_mask(width: int) -> torch.Tensor:
    """The strictly lower-triangular mask of ``W``."""
    return torch.tril(torch.ones(width, width), diagonal=-1)


def forward_lower_deq(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    r"""Outputs of every stacked lower-triangular DEQ, shape (R, n): from :math:`z = 0`,
    ``width`` steps of :math:`z \leftarrow \sigma(z W^\top + x U^\top + b)` reach the fixed
    point exactly, then :math:`y = [z^\star, x]\,a + c`."""
    v, u_t, b, head, bias = weights
    width = v.shape[-1]
    x = x.expand(v.shape[0], *x.shape) if x.dim() == 2 else x
    w_t = (v * lower_mask(width).to(v)).transpose(1, 2)
    injection = torch.baddbmm(b, x, u_t)
    z = torch.relu(injection)  # the first step from z = 0
    for _ in range(width - 1):
        z = torch.relu(torch.baddbmm(injection, z, w_t))
    return torch.baddbmm(bias, torch.cat([z, x], dim=2), head).squeeze(-1)


def max_abs_weight(weights: list[torch.Tensor], lower_deq: bool = False) -> torch.Tensor:
    """Largest absolute parameter of each stacked model, shape (R,) (a lower-triangular DEQ's
    masked-out entries of ``V`` excluded)."""
    if lower_deq:
        weights = [weights[0] * lower_mask(weights[0].shape[-1]).to(weights[0]), *weights[1:]]
    return torch.stack([w.detach().abs().flatten(1).amax(dim=1) for w in weights]).amax(dim=0)




def stack_contractive_deq(models: Sequence[nets.ReluDEQ]) -> list[torch.Tensor]:
    """The parameters ``[V, Uᵀ, b, headᵀ, head bias]`` of R contractive
    :class:`~.nets.ReluDEQ` whose head reads ``z*`` alone, each with a leading model axis."""
    for model in models:
        if model.structure != "contractive" or model.head_reads_input:
            raise ValueError("stack_contractive_deq needs contractive DEQs whose head reads z* "
                             "alone")
    return _stack_deq(models)


def _relative_residuals(new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """Per model, ‖new − old‖ / ‖new‖ over its whole batch (the book's ``"rel"`` residual)."""
    norms = torch.linalg.vector_norm(new.flatten(1), dim=1)
    return torch.linalg.vector_norm((new - old).flatten(1), dim=1) / norms.clamp_min(1e-30)


def _iterate(step: Callable[[torch.Tensor], torch.Tensor], start: torch.Tensor, tol: float,
             max_iter: int) -> torch.Tensor:
    """Fixed-point iteration of ``step`` from ``start`` until every model's relative residual is
    below ``tol`` (or ``max_iter`` steps)."""
    current = start
    for _ in range(max_iter):
        new = step(current)
        done = bool((_relative_residuals(new, current) < tol).all())
        current = new
        if done:
            break
    return current


def forward_contractive_deq(weights: list[torch.Tensor], x: torch.Tensor, gamma: float,
                            tol: float = 1e-6, max_iter: int = 200
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Outputs (R, n) and fixed points (R, n, width) of every stacked contractive DEQ,
    :math:`z^\star = \sigma(z^\star W^\top + x U^\top + b)` with
    :math:`W = \gamma V / \max(1, \|V\|_F)`, then :math:`y = z^\star a + c`.

    The fixed point is found by fixed-point iteration without a graph; one more application of
    the map carries the graph, and its gradient is replaced by the implicit one: the cotangent
    :math:`g` of :math:`z^\star` becomes :math:`u = (I - J)^{-\top} g`, solved by iterating
    :math:`u \leftarrow g + J^\top u` with :math:`J^\top u = (D u) W`, where ``D`` is the
    ReLU's active set at :math:`z^\star` (a contraction too: :math:`\|J\|_2 \le \gamma`).
    Both solves stop when every model's relative residual is below ``tol``."""
    v, u_t, b, head, bias = weights
    x = x.expand(v.shape[0], *x.shape) if x.dim() == 2 else x
    norms = torch.linalg.matrix_norm(v).clamp_min(1.0)
    w = gamma * v / norms[:, None, None]
    w_t = w.transpose(1, 2)
    injection = torch.baddbmm(b, x, u_t)
    with torch.no_grad():
        z = _iterate(lambda z: torch.relu(torch.baddbmm(injection, z, w_t)),
                     torch.zeros(*x.shape[:2], v.shape[-1], dtype=x.dtype,
                                 device=x.device), tol, max_iter)
    pre = torch.baddbmm(injection, z, w_t)
    z_star = torch.relu(pre)
    if z_star.requires_grad:
        active = (pre > 0).to(pre.dtype).detach()
        w_fixed = w.detach()

        def implicit(g: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return _iterate(lambda u: g + torch.bmm(active * u, w_fixed), g, tol, max_iter)

        z_star.register_hook(implicit)
    return torch.baddbmm(bias, z_star, head).squeeze(-1), z_star
