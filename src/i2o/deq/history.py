"""Per-sample stacks of past vectors: the storage behind Anderson's history and Broyden's low-rank
inverse-Jacobian factors.

A stack holds, for each of the ``B`` samples of a batch, up to ``capacity`` vectors of dimension ``D``
(slots ``0 .. size-1``; once full, :meth:`push` overwrites the oldest slot). Two operations, batched
over samples, are all the solvers need:

.. math::
    \\mathrm{dots}(x)_{b,i} = \\langle s_{b,i}, x_b \\rangle, \\qquad
    \\mathrm{combine}(c, y, \\alpha)_b = y_b + \\alpha \\sum_i c_{b,i}\\, s_{b,i}.

Two implementations share that interface:

* :class:`BufferStack` (no autograd): one preallocated ``(B, capacity, D)`` buffer written in place;
  both operations are single batched matrix products (``bmm``/``baddbmm``) on contiguous rows.
* :class:`ListStack` (autograd through every stored vector): a Python list of ``(B, D)`` tensors,
  never written in place, combined term by term. Stacking the list into one tensor would be faster
  per call but each stacked copy would be saved for backward, making memory quadratic in the number
  of solver steps; term by term, autograd only saves references to tensors that exist anyway.
"""

from __future__ import annotations

from typing import Protocol

import torch


class VectorStack(Protocol):
    """Interface shared by :class:`BufferStack` and :class:`ListStack`."""

    capacity: int
    size: int

    def push(self, vectors: torch.Tensor) -> int:
        """Store ``vectors`` (B, D) in the next slot (overwriting the oldest when full); return it."""
        ...

    def dots(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, size)`` inner products of each stored vector with ``x`` (B, D)."""
        ...

    def combine(
        self, coeffs: torch.Tensor, base: torch.Tensor | None = None, alpha: float = 1.0
    ) -> torch.Tensor:
        """``base + alpha * sum_i coeffs[:, i] * slot_i``; ``base=None`` means zero."""
        ...


class BufferStack:
    """Preallocated ``(B, capacity, D)`` stack, written in place; for solves without autograd."""

    def __init__(self, like: torch.Tensor, capacity: int) -> None:
        batch, dim = like.shape
        self.capacity = capacity
        self.size = 0
        self._next = 0
        self._buffer = like.new_empty((batch, capacity, dim))

    def push(self, vectors: torch.Tensor) -> int:
        slot = self._next
        self._buffer[:, slot].copy_(vectors)
        self._next = (slot + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return slot

    def dots(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bmm(self._buffer[:, : self.size], x.unsqueeze(-1)).squeeze(-1)

    def combine(
        self, coeffs: torch.Tensor, base: torch.Tensor | None = None, alpha: float = 1.0
    ) -> torch.Tensor:
        stored = self._buffer[:, : self.size]
        if base is None:
            out = torch.bmm(coeffs.unsqueeze(1), stored)
            return out.squeeze(1) if alpha == 1.0 else out.squeeze(1).mul_(alpha)
        return torch.baddbmm(base.unsqueeze(1), coeffs.unsqueeze(1), stored, alpha=alpha).squeeze(1)


class ListStack:
    """List of ``(B, D)`` tensors never modified in place; autograd flows through every slot."""

    def __init__(self, like: torch.Tensor, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._next = 0
        self._vectors: list[torch.Tensor] = []

    def push(self, vectors: torch.Tensor) -> int:
        slot = self._next
        if slot < len(self._vectors):
            self._vectors[slot] = vectors
        else:
            self._vectors.append(vectors)
        self._next = (slot + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return slot

    def dots(self, x: torch.Tensor) -> torch.Tensor:
        columns = [torch.einsum("bd,bd->b", stored, x) for stored in self._vectors]
        return torch.stack(columns, dim=1)

    def combine(
        self, coeffs: torch.Tensor, base: torch.Tensor | None = None, alpha: float = 1.0
    ) -> torch.Tensor:
        out = base
        for i, stored in enumerate(self._vectors):
            scale = coeffs[:, i : i + 1]
            if out is None:
                out = scale * stored if alpha == 1.0 else (alpha * scale) * stored
            else:
                out = torch.addcmul(out, scale, stored, value=alpha)
        if out is None:
            raise ValueError("combine() on an empty stack needs a base")
        return out


def make_stack(like: torch.Tensor, capacity: int, differentiable: bool) -> VectorStack:
    """A :class:`ListStack` when autograd must flow through the stack, a :class:`BufferStack` else."""
    return ListStack(like, capacity) if differentiable else BufferStack(like, capacity)
