"""Evaluation data as batches ``(x, y)``: a loader, a pair of tensors, or a ``TensorDataset``.

:func:`batches` turns what the user has into a re-iterable :class:`Batches`, and refuses an empty
set (no batch, or a batch of zero examples) before any compute, with a message that says which
set was empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

DataLike = Any  # an iterable of (x, y) batches, a (x, y) tuple of tensors, or a TensorDataset


@dataclass
class Batches:
    """Re-iterable ``(x, y)`` batches of one evaluation set.

    Attributes:
        name: ``"test"`` or ``"training"``, for messages.
        source: tensors ``(x, y)`` split into ``batch_size`` rows, or an iterable of batches.
        batch_size: rows per batch when ``source`` is a pair of tensors.
        limit: keep at most this many examples (``None``: all).
    """

    name: str
    source: Any
    batch_size: int = 250
    limit: int | None = None

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        seen = 0
        for x, y in self._raw():
            if self.limit is not None:
                if seen >= self.limit:
                    return
                keep = min(int(y.shape[0]), self.limit - seen)
                x, y = _rows(x, keep), y[:keep]
            seen += int(y.shape[0])
            yield x, y

    def _raw(self) -> Iterator[tuple[Any, torch.Tensor]]:
        if isinstance(self.source, tuple) and len(self.source) == 2 and all(
                isinstance(t, torch.Tensor) for t in self.source):
            x, y = self.source
            for start in range(0, int(y.shape[0]), self.batch_size):
                yield x[start:start + self.batch_size], y[start:start + self.batch_size]
            return
        for batch in self.source:
            if not (isinstance(batch, list | tuple) and len(batch) >= 2):
                raise ValueError(f"{self.name} data: each batch must be a pair (x, y); got "
                                 f"{type(batch).__name__}")
            yield batch[0], batch[1]

    def first(self) -> tuple[Any, torch.Tensor]:
        """The first non-empty batch (for the checks made before any compute)."""
        for x, y in self:
            if int(y.shape[0]) > 0:
                return x, y
        raise ValueError(f"the {self.name} data is empty: the loader gave no example (check the "
                         "data path, the split and the loader's length)")


def _rows(x: Any, n: int) -> Any:
    if isinstance(x, torch.Tensor):
        return x[:n]
    if isinstance(x, list | tuple):
        return type(x)(_rows(part, n) for part in x)
    raise TypeError(f"inputs must be tensors (or tuples of tensors); got {type(x).__name__}")


def batches(data: DataLike, name: str, batch_size: int = 250,
            limit: int | None = None) -> Batches:
    """Wrap ``data`` as :class:`Batches` and check that it has at least one example."""
    if isinstance(data, Batches):
        return data
    if data is None:
        raise ValueError(f"no {name} data given")
    if isinstance(data, torch.utils.data.TensorDataset):
        data = tuple(data.tensors[:2])
    if isinstance(data, list) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data):
        data = tuple(data)
    if isinstance(data, tuple) and len(data) == 2 and all(isinstance(t, torch.Tensor)
                                                          for t in data):
        if data[0].shape[0] != data[1].shape[0]:
            raise ValueError(f"{name} data: {data[0].shape[0]} inputs but {data[1].shape[0]} "
                             "targets")
    elif not isinstance(data, Iterable):
        raise TypeError(f"{name} data must be a loader of (x, y) batches or a pair of tensors; "
                        f"got {type(data).__name__}")
    elif iter(data) is data:
        raise TypeError(f"{name} data is a one-shot iterator (a generator?): it is read more "
                        "than once; pass a DataLoader, a list of batches or a pair of tensors")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer ≥ 1; got {batch_size!r}")
    wrapped = Batches(name, data, batch_size, limit)
    wrapped.first()
    return wrapped
