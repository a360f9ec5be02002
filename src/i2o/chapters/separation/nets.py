r"""The chapter's small models, their forward cost, and one training recipe.

- :class:`ReluDEQ`: :math:`z^\star = \sigma(W z^\star + U x + b)`, output
  :math:`y = a^\top z^\star + c^\top x + d` (a linear head on the fixed point and the input; a
  reconstructed choice). Two structures of ``W``:

  * ``"lower"``: strictly lower-triangular ``W`` (the class of Theorem 1). The map is nilpotent in
    ``z``: fixed-point iteration from 0 is exact after ``width`` steps, and so is the adjoint
    equation of the IFT backward pass; the fixed point is unique for every ``W``.
  * ``"contractive"``: dense ``W = \gamma V / \max(1, \|V\|_F)`` with ``γ < 1``, so
    :math:`\|W\|_2 \le \gamma` and the ReLU map is a contraction (a unique fixed point, found by
    plain fixed-point iteration, which converges linearly at rate ≤ γ; its adjoint equation is a
    contraction too); another reconstructed choice, for a well-posed "vanilla" DEQ. Plain
    iteration rather than Anderson acceleration: these maps contract fast (about 11 iterations
    to 1e-6 after training at γ = 0.9, width 32), so Anderson's per-sample least-squares solve
    would cost more than the iterations it saves (about 4× the training time, for the same
    fixed points to the tolerance).

  Both are solved with the book's :class:`i2o.deq.DEQ` (IFT backward).
- :class:`FNN`: ``depth`` hidden ReLU layers of ``width`` units and a linear output.
- :class:`LinearDEQ`: the diagonal linear DEQ :math:`z = \operatorname{diag}(w) z + x`,
  :math:`y = a^\top z + c`, i.e. :math:`y = \sum_i a_i x_i / (1 - w_i) + c`.
- :class:`DiagonalNet`: the diagonal linear network :math:`y = \langle u^2 - v^2, x\rangle`
  (Woodworth et al., 2020).

:func:`fit` trains any of them on a regression set with the book's one loop
(:func:`i2o.train.loop.train_steps`, full batch, Adam, cosine learning rate).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from i2o.deq import DEQ, SolverSpec
from i2o.models.parameters import count_parameters
from i2o.train.loop import Plan, train_steps

Structure = Literal["lower", "contractive"]
STRUCTURES = ("lower", "contractive")


class ReluDEQ(nn.Module):
    """A ReLU DEQ of ``width`` neurons on ``d_in`` inputs (module docstring)."""

    def __init__(self, d_in: int, width: int, structure: Structure = "lower",
                 gamma: float = 0.9, max_iter: int = 200, tol: float = 1e-6,
                 head_reads_input: bool = True) -> None:
        super().__init__()
        if structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}; got {structure!r}")
        self.structure, self.gamma, self.width, self.d_in = structure, gamma, width, d_in
        self.head_reads_input = head_reads_input
        self.V = nn.Parameter(torch.randn(width, width) / width ** 0.5)
        if structure == "lower":
            self.U = nn.Parameter(torch.randn(width, d_in) / d_in ** 0.5)
            self.b = nn.Parameter(0.1 * torch.randn(width))
        else:  # the input injection initialized like an FNN's first layer (nn.Linear's rule)
            injection = nn.Linear(d_in, width)
            self.U = nn.Parameter(injection.weight.detach().clone())
            self.b = nn.Parameter(injection.bias.detach().clone())
        self.head = nn.Linear(width + (d_in if head_reads_input else 0), 1)
        if structure == "lower":
            self.register_buffer("mask", torch.tril(torch.ones(width, width), diagonal=-1))
            exact = SolverSpec(method="fixed_point", max_iter=width, tol=0.0, return_best=False)
            self.deq = DEQ(forward=exact, backward="ift", backward_spec=exact)
            self.iterations = width
        else:
            picard = SolverSpec(method="fixed_point", max_iter=max_iter, tol=tol)
            self.deq = DEQ(forward=picard, backward="ift", backward_spec=picard)
            self.iterations = max_iter

    def weight(self) -> torch.Tensor:
        """The ``W`` of the cell (masked, or rescaled to Frobenius norm ≤ γ)."""
        if self.structure == "lower":
            return self.V * self.mask
        return self.gamma * self.V / torch.clamp(torch.linalg.norm(self.V), min=1.0)

    def cell(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(z @ self.weight().T + x @ self.U.T + self.b)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The fixed point ``z*`` (batch × width)."""
        z0 = torch.zeros(x.shape[0], self.width, dtype=x.dtype, device=x.device)
        z, _ = self.deq(self.cell, x, z0)
        return z

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.features(x)
        return self.head(torch.cat([z, x], dim=1) if self.head_reads_input else z).squeeze(1)


class FNN(nn.Module):
    """``depth`` hidden ReLU layers of ``width`` units, then a linear output."""

    def __init__(self, d_in: int, width: int, depth: int) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth must be ≥ 1; got {depth}")
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Linear(d_in if i == 0 else width, width), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, 1)
        self.width, self.depth, self.d_in = width, depth, d_in

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The last hidden layer."""
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)).squeeze(1)


class LinearDEQ(nn.Module):
    r"""Diagonal linear DEQ with a readout and a bias: :math:`y = \sum_i a_i x_i/(1-w_i) + c`.

    The readout :math:`a` is fixed at ``signs`` (±1, the authors' reply: an entry of −1 where the
    solution is negative) or, without ``signs``, trainable from 1. Starts at ``w = 0`` (so
    β = a/(1−w) = a) and ``c = 0``; the fixed point of :math:`z = \operatorname{diag}(w) z + x` is
    computed in closed form, :math:`z_i = x_i/(1-w_i)`.
    """

    def __init__(self, d_in: int, signs: torch.Tensor | None = None) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(d_in))
        if signs is None:
            self.a = nn.Parameter(torch.ones(d_in))
        else:
            if signs.shape != (d_in,) or not bool(torch.all(signs.abs() == 1)):
                raise ValueError(f"signs must be ±1 of shape ({d_in},); got {signs}")
            self.register_buffer("a", signs.to(torch.float32))
        self.c = nn.Parameter(torch.zeros(()))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return x / (1.0 - self.w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x) @ self.a + self.c


class DiagonalNet(nn.Module):
    r"""Diagonal linear network :math:`y = \langle u^2 - v^2, x \rangle`, ``u = v = α`` at start."""

    def __init__(self, d_in: int, alpha: float = 0.1) -> None:
        super().__init__()
        self.u = nn.Parameter(torch.full((d_in,), float(alpha)))
        self.v = nn.Parameter(torch.full((d_in,), float(alpha)))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return x * (self.u ** 2 - self.v ** 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x).sum(dim=1)


def flops_fnn(d_in: int, width: int, depth: int) -> int:
    """Multiply-adds ×2 of one forward pass of :class:`FNN` (biases and ReLUs not counted)."""
    return 2 * (d_in * width + (depth - 1) * width * width + width)


def flops_deq(d_in: int, width: int, iterations: int) -> int:
    """Forward cost of :class:`ReluDEQ`: the input injection ``Ux`` once, ``iterations``
    applications of the dense ``W`` (as computed), and the head."""
    return 2 * (d_in * width + iterations * width * width + width + d_in)


def free_parameters(model: nn.Module) -> int:
    """The parameters of ``model`` that training can set: every one, less the ``w(w + 1)/2``
    entries a strictly lower-triangular ``W`` of width ``w`` holds at 0."""
    total = count_parameters(model, trainable_only=False)
    if isinstance(model, ReluDEQ) and model.structure == "lower":
        return total - model.width * (model.width + 1) // 2
    return total


def make_model(kind: str, d_in: int, width: int = 0, depth: int = 1, seed: int = 0,
               alpha: float = 0.1, gamma: float = 0.9, signs: torch.Tensor | None = None
               ) -> nn.Module:
    """A freshly initialized model of ``kind`` in ``deq_lower``, ``deq_contractive``, ``fnn``,
    ``linear_deq``, ``dln`` (initialization drawn from ``seed``). The contractive DEQ (the GOTU
    model) reads its output from ``z*`` alone; ``signs`` fixes the linear DEQ's readout."""
    torch.manual_seed(seed)
    if kind == "deq_lower":
        return ReluDEQ(d_in, width, "lower")
    if kind == "deq_contractive":
        return ReluDEQ(d_in, width, "contractive", gamma=gamma, head_reads_input=False)
    if kind == "fnn":
        return FNN(d_in, width, depth)
    if kind == "linear_deq":
        return LinearDEQ(d_in, signs)
    if kind == "dln":
        return DiagonalNet(d_in, alpha)
    raise ValueError(f"unknown model kind {kind!r}")


def fit(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float,
        seed: int = 0) -> list[float]:
    """Minimize the mean squared error on ``(x, y)`` (full batch) for ``steps`` Adam steps with a
    cosine learning rate from ``lr`` to ``lr/100``; return the training-loss history."""
    plan = Plan(steps=steps, lr=lr, lr_min=lr / 100, clip=0.0, checkpoint_every=steps, seed=seed)

    def step_loss(_: int) -> tuple[torch.Tensor, dict[str, float]]:
        return torch.mean((model(x) - y) ** 2), {}

    return train_steps(model, step_loss, plan)["loss"]


def mse(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(torch.mean((model(x) - y) ** 2))
