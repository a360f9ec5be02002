r"""A small convolutional DEQ written with torchdeq, as a user of that library would write it.

``u = stem(x)`` (a stride-2 3×3 convolution: 32×32 → 16×16, ``c`` channels, GroupNorm), then the
equilibrium ``z* = f(z*, u)`` with

.. math::
    f(z, u) = \mathrm{GN}\big(\mathrm{ReLU}(W_2\, \mathrm{ReLU}(W_1 z) + u)\big),

solved by a torchdeq DEQ (``get_deq(core="indexing", ift=True, f_solver=..., f_max_iter=N)``):
``N`` forward iterations in training, gradient by implicit differentiation with ``N`` backward
iterations, and ``logits = head(pool(z*))`` (average-pooled to 4×4, then linear). Nothing here
knows about :mod:`i2o.diagnose`: the diagnosis finds the DEQ by itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SOLVERS = ("fixed_point_iter", "anderson", "broyden")


class ConvDEQ(nn.Module):
    """Stem → torchdeq equilibrium of one residual-style block → pooled linear head."""

    def __init__(self, channels: int, train_iters: int, solver: str = "anderson",
                 classes: int = 10, groups: int = 4):
        super().__init__()
        from torchdeq import get_deq  # lazy: torchdeq is optional (the bench extra)

        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}; got {solver!r}")
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, stride=2, padding=1, bias=False),
                                  nn.GroupNorm(groups, channels))
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = nn.GroupNorm(groups, channels)
        self.head = nn.Linear(16 * channels, classes)
        for conv in (self.conv1, self.conv2):
            nn.init.normal_(conv.weight, 0.0, 0.01)
        self.deq = get_deq(core="indexing", ift=True, f_solver=solver, f_max_iter=train_iters,
                           b_solver="fixed_point_iter", b_max_iter=train_iters, f_tol=1e-3)

    def f(self, z: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return self.norm(F.relu(self.conv2(F.relu(self.conv1(z))) + u))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self.stem(x)
        z_out, _ = self.deq(lambda z: self.f(z, u), torch.zeros_like(u))
        return self.head(F.adaptive_avg_pool2d(z_out[-1], 4).flatten(1))


def step_loss(model: ConvDEQ, images: torch.Tensor, labels: torch.Tensor, batch_size: int,
              seed: int):
    """``step_loss(t)`` for :func:`i2o.train.loop.train_steps`: the cross-entropy of the batch of
    step ``t``, drawn from a permutation fixed by ``(seed, epoch)`` (so a resumed run sees the same
    batches)."""
    n = images.shape[0]
    per_epoch = -(-n // batch_size)

    def loss(t: int):
        epoch, index = divmod(t, per_epoch)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
        rows = order[index * batch_size:(index + 1) * batch_size]
        logits = model(images[rows])
        value = F.cross_entropy(logits, labels[rows])
        correct = float((logits.argmax(1) == labels[rows]).float().mean())
        return value, {"accuracy": correct}

    return loss
