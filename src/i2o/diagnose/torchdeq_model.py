r"""The adapter for a ``torch.nn.Module`` whose forward pass runs a torchdeq DEQ (locuslab's
``torchdeq``: ``deq = get_deq(...)``, ``z_out, info = deq(func, z_init)`` inside ``forward``).

The iteration control is torchdeq's own: at evaluation (``model.eval()``) a torchdeq DEQ solves
with ``deq.eval_f_max_iter`` function evaluations and stops early below ``deq.f_tol``. For every
``N'`` the adapter runs the model's unchanged forward pass with

- ``shared=False``: ``eval_f_max_iter = N'`` and ``f_tol = 0`` (exactly ``N'`` evaluations), the
  DEQ's own forward pass, once per ``N'``;
- ``shared=True``: one call of the DEQ's solver ``deq.f_solver`` of ``max N'`` evaluations per
  batch with torchdeq's ``indexing`` argument set to the grid, which returns the iterate a solve of
  each ``N'`` returns (for torchdeq's fixed-point, Anderson and Broyden solvers the first ``n``
  steps of a tolerance-0 solve do not depend on its budget). The model's forward pass is then run
  once per ``N'`` with the DEQ *replaying* the stored iterate instead of solving: the layers before
  and after the DEQ run ``K`` times, the solve once. The model must be deterministic in evaluation
  mode and call its DEQ once per forward pass (checked: a second call refuses). Two details of
  torchdeq 0.1.0 are followed: Broyden stores the iterate of ``n`` steps under index ``n + 1``
  (:data:`INDEX_SHIFT`), and Anderson returns ``z_0`` for budgets 1 and 2 (:func:`_fill_unvisited`);
  the tests check both modes agree for the three solvers.

Both modes restore the DEQ's attributes afterwards. The residual of the returned iterate is
measured with one more evaluation of the DEQ's function per ``N'``:
``r = ‖f(z) − z‖ / ‖f(z)‖`` per example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from i2o.diagnose.adapters import Batch, Swept
from i2o.diagnose.metrics import Metric

#: torchdeq 0.1.0's ``broyden_solver`` stores, under index ``n + 1``, the iterate it returns after
#: ``n`` steps (its other solvers store it under ``n``): the grid is shifted accordingly.
INDEX_SHIFT = {"broyden_solver": 1}


def _fill_unvisited(trajectory: list[Any], z0: Any, count: int) -> list[Any]:
    """Counts a torchdeq solver never reaches in its loop (Anderson's first two evaluations are
    outside it) are the smallest of the grid; a solve of that budget returns its initial
    ``lowest`` iterate, ``z_0``."""
    if len(trajectory) > count:
        raise RuntimeError(f"torchdeq's solver returned {len(trajectory)} iterates for a grid "
                           f"of {count} counts")
    return [z0] * (count - len(trajectory)) + trajectory


def find_deqs(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The torchdeq DEQ modules (``torchdeq.core.DEQBase``) inside ``model``, by name."""
    try:
        from torchdeq.core import DEQBase  # lazy: torchdeq is optional
    except ImportError as error:  # pragma: no cover - torchdeq is a declared extra
        raise ImportError("the torchdeq adapter needs torchdeq (pip install torchdeq==0.1.0)"
                          ) from error
    return [(name or "<model>", module) for name, module in model.named_modules()
            if isinstance(module, DEQBase)]


def _flat(z: Any) -> torch.Tensor:
    if isinstance(z, torch.Tensor):
        return z.flatten(1) if z.dim() >= 2 else z.reshape(-1, 1)
    return torch.cat([_flat(part) for part in z], dim=1)


def _relative_residual(z: Any, fz: Any) -> np.ndarray:
    z, fz = _flat(z).double(), _flat(fz).double()
    absolute = torch.linalg.vector_norm(fz - z, dim=1)
    scale = torch.linalg.vector_norm(fz, dim=1)
    rel = torch.where(scale > 0, absolute / scale.clamp_min(1e-300),
                      torch.where(absolute > 0, torch.inf, 0.0))
    return rel.cpu().numpy()


@dataclass
class TorchDEQModel:
    """A model holding one torchdeq DEQ; ``model(x)`` (or ``forward(model, x)``) gives ``y_hat``.

    Attributes:
        model: the ``nn.Module``; set to evaluation mode for the diagnosis.
        deq: which DEQ module (a name of ``model.named_modules()``) when the model has several;
            ``None``: the only one (none, or several without a name, is refused).
        forward: ``(model, x) -> y_hat`` when the model's output is not ``y_hat`` itself (e.g.
            ``lambda m, x: m(x)[0]``).
        name: shown in the results.
    """

    model: torch.nn.Module
    deq: str | None = None
    forward: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None
    name: str = "torchdeq model"

    def __post_init__(self) -> None:
        if not isinstance(self.model, torch.nn.Module):
            raise TypeError(f"TorchDEQModel needs a torch.nn.Module; got "
                            f"{type(self.model).__name__}")
        found = find_deqs(self.model)
        if not found:
            raise ValueError(
                f"no iteration control found: {type(self.model).__name__} holds no torchdeq DEQ "
                "module (torchdeq.core.DEQBase, made by torchdeq.get_deq). For a hand-written "
                "layer use i2o.diagnose.PlainDEQ(f, z0, readout)")
        if self.deq is None and len(found) > 1:
            raise ValueError(f"the model holds {len(found)} torchdeq DEQs "
                             f"({', '.join(n for n, _ in found)}): name one with deq=...")
        chosen = [m for n, m in found if self.deq is None or n == self.deq]
        if not chosen:
            raise ValueError(f"no torchdeq DEQ named {self.deq!r}; the model has "
                             f"{', '.join(n for n, _ in found)}")
        self.module = chosen[0]

    @property
    def train_iters(self) -> int:
        """``N`` as torchdeq stores it: the training forward budget ``f_max_iter``."""
        return int(self.module.f_max_iter)

    def _output(self, x: Any) -> torch.Tensor:
        return self.forward(self.model, x) if self.forward is not None else self.model(x)

    @contextmanager
    def _patched(self, solve: Callable[..., tuple[list[Any], dict]]):
        """Replace the DEQ's forward pass by ``solve`` (an instance attribute), and restore it."""
        deq = self.module
        saved = (deq.eval_f_max_iter, deq.f_tol)
        deq.forward = solve
        try:
            yield deq
        finally:
            del deq.forward
            deq.eval_f_max_iter, deq.f_tol = saved

    @torch.no_grad()
    def sweep(self, batches: Iterable[Batch], grid: list[int], metric: Metric,
              shared: bool) -> Swept:
        self.model.eval()
        device = next(self.model.parameters()).device
        values, residuals, solves = [], [], 0
        for x, y in batches:
            x = x.to(device) if isinstance(x, torch.Tensor) else x
            y = y.to(device)
            rows, res = (self._shared(x, y, grid, metric) if shared
                         else self._one_per_n(x, y, grid, metric))
            values.append(np.stack(rows, axis=1))
            residuals.append(np.stack(res, axis=1))
            solves += 1 if shared else len(grid)
        return Swept(values=np.concatenate(values), residual=np.concatenate(residuals),
                     solves=solves)

    def _one_per_n(self, x, y, grid, metric) -> tuple[list[np.ndarray], list[np.ndarray]]:
        from torchdeq.utils.layer_utils import deq_decorator

        deq = self.module
        original = type(deq).forward
        rows, res, seen = [], [], []

        def solve(func, z_init, solver_kwargs=None, **kwargs):
            kwargs_ = {k: v for k, v in (solver_kwargs or {}).items() if k != "f_max_iter"}
            z_out, info = original(deq, func, z_init, solver_kwargs=kwargs_, **kwargs)
            deq_func, _ = deq_decorator(func, z_init, no_stat=deq.no_stat)
            z = z_out[-1]
            vec = z if isinstance(z, torch.Tensor) or not hasattr(deq_func, "list2vec") \
                else deq_func.list2vec(z)
            seen.append(_relative_residual(vec, deq_func(vec)))
            return z_out, info

        with self._patched(solve):
            for n in grid:
                deq.eval_f_max_iter, deq.f_tol = int(n), 0.0
                seen.clear()
                rows.append(metric(self._output(x), y).cpu().numpy())
                if len(seen) != 1:
                    raise RuntimeError(f"the model called its DEQ {len(seen)} times in one "
                                       "forward pass; the diagnosis needs exactly one")
                res.append(seen[0])
        return rows, res

    def _shared(self, x, y, grid, metric) -> tuple[list[np.ndarray], list[np.ndarray]]:
        from torchdeq.utils.layer_utils import deq_decorator

        deq = self.module
        stored: dict[str, Any] = {}
        calls = [0]

        def solve(func, z_init, solver_kwargs=None, **kwargs):
            calls[0] += 1
            if "trajectory" not in stored:
                deq_func, z_vec = deq_decorator(func, z_init, no_stat=deq.no_stat)
                options = {k: v for k, v in (solver_kwargs or {}).items() if k != "f_max_iter"}
                shift = INDEX_SHIFT.get(getattr(deq.f_solver, "__name__", ""), 0)
                _, trajectory, info = deq.f_solver(
                    deq_func, x0=z_vec, max_iter=max(grid), tol=0.0, stop_mode=deq.f_stop_mode,
                    indexing=[n + shift for n in grid], **options)
                trajectory = _fill_unvisited(list(trajectory), z_vec, len(grid))
                stored.update(trajectory=trajectory, info=info, func=deq_func,
                              residual=[_relative_residual(z, deq_func(z)) for z in trajectory])
            index = calls[0] - 1
            if index >= len(grid):
                raise RuntimeError("the model called its DEQ more than once per forward pass; "
                                   "use shared=False (one solve per N')")
            return [stored["func"].vec2list(stored["trajectory"][index])], stored["info"]

        rows = []
        with self._patched(solve):
            for k in range(len(grid)):
                rows.append(metric(self._output(x), y).cpu().numpy())
                if calls[0] != k + 1:
                    raise RuntimeError(f"the model called its DEQ {calls[0] - k} times in one "
                                       "forward pass; the diagnosis needs exactly one")
        return rows, list(stored["residual"])
