r"""Per-sample stacks of past vectors: the storage behind Anderson's history and Broyden's low-rank
inverse-Jacobian factors.

A stack holds, for each of the ``B`` samples of a batch, the last ``memory`` pushed vectors of
dimension ``D`` (older ones are dropped). The solvers need two batched operations:

.. math::
    \mathrm{dots}(x)_{b,i} = \langle s_{b,i}, x_b \rangle, \qquad
    \mathrm{combine}(c, y, \alpha)_b = y_b + \alpha \sum_i c_{b,i}\, s_{b,i}.

Two implementations share that interface:

* :class:`BufferStack` (no autograd): a ``(B, memory, D)`` ring buffer written in place; both
  operations are single ``bmm`` calls on contiguous rows.
* :class:`ListStack` (autograd through every stored vector, the unrolled mode): a list of the pushed
  ``(B, D)`` tensors, never written in place, used term by term (``vecdot``, ``addcmul``). Stacking
  the list for one ``bmm`` would save a stacked copy for backward at every call, making memory
  quadratic in the number of steps. A variant with custom autograd functions on a detached mirror
  buffer was measured (TINY-sized state, 18 Broyden steps, forward + backward): no faster, because
  backward is dominated by accumulating the gradient of every stored vector at every later product,
  and it needs 20% more memory.

``ids()`` names the stored vectors by push count, in the order ``dots`` returns them.
"""

from __future__ import annotations

from typing import Protocol

import torch


class VectorStack(Protocol):
    """Interface shared by :class:`BufferStack` and :class:`ListStack`."""

    size: int

    def push(self, vectors: torch.Tensor) -> None:
        """Store ``vectors`` (B, D); beyond ``memory`` stored vectors, drop the oldest."""
        ...

    def ids(self) -> list[int]:
        """Push counts (0, 1, ...) of the stored vectors, in the order of :meth:`dots`."""
        ...

    def dots(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, size)`` inner products of each stored vector with ``x`` (B, D)."""
        ...

    def combine(
        self, coeffs: torch.Tensor, base: torch.Tensor | None = None, alpha: float = 1.0
    ) -> torch.Tensor:
        """``base + alpha * sum_i coeffs[:, i] * stored_i``; ``base=None`` means zero."""
        ...


def _dots(stored: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # (B, 1, D) @ (B, D, n): several times faster on CPU than (B, n, D) @ (B, D, 1).
    return torch.bmm(x.unsqueeze(1), stored.transpose(1, 2)).squeeze(1)


def _combination(stored: torch.Tensor, coeffs: torch.Tensor) -> torch.Tensor:
    return torch.bmm(coeffs.unsqueeze(1), stored).squeeze(1)


#: Buffers of finished solves, by (shape, dtype, device), handed to the next solve of that shape.
_SPARE: dict[tuple, list[torch.Tensor]] = {}
_SPARE_SHAPES, _SPARE_PER_SHAPE = 4, 2


def _take(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """A ``shape`` buffer: a spare one when a finished solve left one, else a new one.

    A sweep solves batch after batch with buffers of tens of megabytes, which the C allocator
    maps afresh for each solve; writing into new pages costs about twice the writes themselves.
    Only slots a solve has written are ever read, so what a spare holds changes no number. With
    deterministic mode's NaN fill on (:func:`i2o.train.seeding.fill_uninitialized`), every buffer
    is new and filled, so that a read of an unwritten slot shows.
    """
    if torch.utils.deterministic.fill_uninitialized_memory and \
            torch.are_deterministic_algorithms_enabled():
        return like.new_empty(shape)
    spares = _SPARE.get((shape, like.dtype, like.device))
    return spares.pop() if spares else like.new_empty(shape)


def _give_back(buffer: torch.Tensor) -> None:
    key = (tuple(buffer.shape), buffer.dtype, buffer.device)
    if key not in _SPARE and len(_SPARE) >= _SPARE_SHAPES:
        _SPARE.pop(next(iter(_SPARE)))  # the shape spared longest ago
    spares = _SPARE.setdefault(key, [])
    if len(spares) < _SPARE_PER_SHAPE:
        spares.append(buffer)


class BufferStack:
    """Ring buffer ``(B, memory, D)`` written in place; for solves without autograd. Its storage
    goes back to a small pool when the stack is dropped (:func:`_take`)."""

    def __init__(self, like: torch.Tensor, memory: int) -> None:
        batch, dim = like.shape
        self.memory = memory
        self.size = 0
        self._pushes = 0
        self._slot_ids: list[int] = []
        self._buffer = _take((batch, memory, dim), like)

    def __del__(self) -> None:
        buffer = getattr(self, "_buffer", None)
        if buffer is not None and not buffer.requires_grad:
            _give_back(buffer)

    def push(self, vectors: torch.Tensor) -> None:
        slot = self._pushes % self.memory
        self._buffer[:, slot].copy_(vectors)
        if slot < len(self._slot_ids):
            self._slot_ids[slot] = self._pushes
        else:
            self._slot_ids.append(self._pushes)
        self._pushes += 1
        self.size = len(self._slot_ids)

    def ids(self) -> list[int]:
        return list(self._slot_ids)

    def dots(self, x: torch.Tensor) -> torch.Tensor:
        return _dots(self._buffer[:, : self.size], x)

    def combine(
        self, coeffs: torch.Tensor, base: torch.Tensor | None = None, alpha: float = 1.0
    ) -> torch.Tensor:
        combination = _combination(self._buffer[:, : self.size], coeffs)
        if base is None:
            return combination if alpha == 1.0 else combination.mul_(alpha)
        # bmm then add: faster on CPU than baddbmm, which first copies base into a new output.
        return torch.add(base, combination, alpha=alpha)


class ListStack:
    """List of ``(B, D)`` tensors never modified in place; autograd flows through every one."""

    def __init__(self, like: torch.Tensor, memory: int) -> None:
        self.memory = memory
        self.size = 0
        self._dropped = 0
        self._tensors: list[torch.Tensor] = []

    def push(self, vectors: torch.Tensor) -> None:
        self._tensors.append(vectors)
        if len(self._tensors) > self.memory:
            self._tensors.pop(0)
            self._dropped += 1
        self.size = len(self._tensors)

    def ids(self) -> list[int]:
        return list(range(self._dropped, self._dropped + self.size))

    def dots(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.linalg.vecdot(stored, x) for stored in self._tensors], dim=1)

    def combine(
        self, coeffs: torch.Tensor, base: torch.Tensor | None = None, alpha: float = 1.0
    ) -> torch.Tensor:
        out = base
        for i, stored in enumerate(self._tensors):
            weight = coeffs[:, i : i + 1]
            if out is None:
                out = (alpha * weight) * stored
            else:
                out = torch.addcmul(out, weight, stored, value=alpha)
        if out is None:
            raise ValueError("combine() on an empty stack needs a base")
        return out


def make_stack(like: torch.Tensor, memory: int, pushes: int, differentiable: bool) -> VectorStack:
    """A :class:`ListStack` when autograd must flow through the stack, else a :class:`BufferStack`;
    at most ``min(memory, pushes)`` vectors are kept (``pushes``: how many the solver will push)."""
    memory = max(1, min(memory, pushes))
    return ListStack(like, memory) if differentiable else BufferStack(like, memory)
