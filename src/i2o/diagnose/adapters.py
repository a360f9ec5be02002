r"""How the diagnosis runs a model with ``N'`` forward iterations: the :class:`Adapter` protocol
and the adapters for hand-written layers and the book's own DEQs.

An adapter evaluates, for every batch ``(x, y)`` and every count ``N'`` of a grid, the metric of
the model's output when its forward solver runs exactly ``N'`` iterations (no early stop), and the
relative residual of the iterate ``z_{N'}`` it returns,

.. math::
    r(z) = \lVert f(z, x) - z \rVert / \lVert f(z, x) \rVert \quad \text{per example.}

With ``shared=True`` it does so in **one solve of** ``max N'`` **iterations per batch**, reading
the iterate each shorter solve would return (valid because with tolerance 0 the first ``n`` steps
of the solvers do not depend on their budget: :mod:`i2o.deq.sweep`); with ``shared=False``, one
solve per ``N'``.

- :class:`PlainDEQ`: any hand-written layer given as ``f(z, x)``, ``z0(x)`` and ``readout(z)``,
  solved with :mod:`i2o.deq`'s solvers (the book's sweep, :func:`i2o.deq.sweep_iterations`);
- :func:`from_book_deq`: the same for a layer run by the book's :class:`i2o.deq.DEQ` (its forward
  solver and its rule for the returned iterate);
- :class:`BookMDEQ`: the book's :class:`i2o.models.MDEQClassifier`;
- :class:`i2o.diagnose.torchdeq_model.TorchDEQModel`: a ``torch.nn.Module`` holding a torchdeq
  DEQ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from i2o.deq import DEQ, Probe, SolverSpec, sweep_iterations
from i2o.diagnose.metrics import Metric

Batch = tuple[Any, torch.Tensor]


@dataclass
class Swept:
    """Per-example results of one model on one evaluation set.

    Attributes:
        values: ``(n_examples, K)`` metric values at each ``N'`` of the grid.
        residual: ``(n_examples, K)`` relative residual of the returned iterate.
        solves: how many forward solves ran (one per batch when shared, else one per batch and N').
        evaluations: evaluations of ``f`` counted by the adapter (``nan`` when it cannot count).
    """

    values: np.ndarray
    residual: np.ndarray
    solves: int
    evaluations: float = float("nan")


@runtime_checkable
class Adapter(Protocol):
    """What :func:`i2o.diagnose.diagnose` needs from a model."""

    name: str

    def sweep(self, batches: Iterable[Batch], grid: list[int], metric: Metric,
              shared: bool) -> Swept:
        """Metric values and residuals at every ``N'`` of ``grid`` (increasing, ≥ 1)."""
        ...


def _sweep_probes(probes: Iterable[Probe], grid: list[int], spec: SolverSpec,
                  shared: bool, counter: list[int]) -> Swept:
    swept = sweep_iterations(probes, grid, spec, shared_solve=shared)
    batches = len(swept["batch_sizes"])
    return Swept(values=np.asarray(swept["metrics"]["metric"], dtype=float),
                 residual=np.asarray(swept["residual_rel"], dtype=float),
                 solves=batches if shared else batches * len(grid),
                 evaluations=float(counter[0]))


def _counted(g: Callable[[torch.Tensor], torch.Tensor], counter: list[int]
             ) -> Callable[[torch.Tensor], torch.Tensor]:
    def counted(z: torch.Tensor) -> torch.Tensor:
        counter[0] += 1
        return g(z)
    return counted


@dataclass
class PlainDEQ:
    """A hand-written fixed-point layer: ``z* = f(z*, x̃)`` with ``x̃ = inject(x)``, output
    ``readout(z*)``.

    Attributes:
        f: ``(z, x̃) -> z``, shape-preserving in ``z`` (a batch of states, shape ``(B, ...)``).
        z0: ``x̃ -> z_0``, the initial state of a batch (e.g. zeros).
        readout: ``z -> y_hat``, what the metric compares with the target.
        solver: the forward solver the model was trained with (its ``max_iter`` and ``tol`` are
            ignored: every ``N'`` runs exactly). Default: plain fixed-point iteration returning the
            last iterate, ``z_{k+1} = f(z_k, x̃)``.
        inject: ``x -> x̃`` (default: identity), e.g. an encoder computed once per batch.
        name: shown in the results.
    """

    f: Callable[[torch.Tensor, Any], torch.Tensor]
    z0: Callable[[Any], torch.Tensor]
    readout: Callable[[torch.Tensor], torch.Tensor]
    solver: SolverSpec = field(default_factory=lambda: SolverSpec(method="fixed_point",
                                                                  return_best=False))
    inject: Callable[[Any], Any] | None = None
    name: str = "plain DEQ"

    def __post_init__(self) -> None:
        for what in ("f", "z0", "readout"):
            if not callable(getattr(self, what)):
                raise TypeError(f"PlainDEQ.{what} must be callable; got "
                                f"{type(getattr(self, what)).__name__}")
        if not isinstance(self.solver, SolverSpec):
            raise TypeError(f"PlainDEQ.solver must be an i2o.deq.SolverSpec; got "
                            f"{type(self.solver).__name__}")

    def probes(self, batches: Iterable[Batch], metric: Metric, counter: list[int]):
        for x, y in batches:
            injected = x if self.inject is None else self.inject(x)
            z0 = self.z0(injected)

            def score(z, fz, y=y):
                return {"metric": metric(self.readout(z), y)}

            yield Probe(g=_counted(lambda z, injected=injected: self.f(z, injected), counter),
                        z0=z0, score=score)

    @torch.no_grad()
    def sweep(self, batches: Iterable[Batch], grid: list[int], metric: Metric,
              shared: bool) -> Swept:
        counter = [0]
        return _sweep_probes(self.probes(batches, metric, counter), grid, self.solver, shared,
                             counter)


def from_book_deq(deq: DEQ, f: Callable[[torch.Tensor, Any], torch.Tensor],
                  z0: Callable[[Any], torch.Tensor],
                  readout: Callable[[torch.Tensor], torch.Tensor],
                  inject: Callable[[Any], Any] | None = None, name: str = "i2o.deq.DEQ"
                  ) -> PlainDEQ:
    """A :class:`PlainDEQ` solved as the book's :class:`i2o.deq.DEQ` ``deq`` solves at evaluation:
    its forward solver, and its rule for the returned iterate (the unrolled mode returns the
    iterate it was trained on, the IFT mode the lowest-residual one). The iteration control is
    the solver's ``max_iter``, which the diagnosis sets to each ``N'``."""
    if not isinstance(deq, DEQ):
        raise TypeError(f"from_book_deq needs an i2o.deq.DEQ; got {type(deq).__name__}")
    spec = deq.forward_spec
    if spec.return_best is None:
        spec = replace(spec, return_best=spec.returns_best(differentiable=False))
    return PlainDEQ(f=f, z0=z0, readout=readout, solver=spec, inject=inject, name=name)


@dataclass
class BookMDEQ:
    """The book's multiscale DEQ classifier (:class:`i2o.models.MDEQClassifier`): per batch
    ``prepare`` (weights, masks, injection), the solve, then ``classify(z)``. Output: logits.

    ``solver`` defaults to the evaluation rule of the book's chapters: Broyden, relative residual,
    the lowest-residual iterate among ``z_0 … z_{N'}``.
    """

    model: torch.nn.Module
    solver: SolverSpec = field(default_factory=lambda: SolverSpec(method="broyden",
                                                                  return_best=True))
    name: str = "MDEQ (i2o.models)"

    def __post_init__(self) -> None:
        missing = [m for m in ("prepare", "classify") if not callable(getattr(self.model, m, None))]
        if missing:
            raise TypeError(f"BookMDEQ needs an i2o.models.MDEQClassifier (methods prepare and "
                            f"classify); {type(self.model).__name__} lacks {missing}")

    @torch.no_grad()
    def sweep(self, batches: Iterable[Batch], grid: list[int], metric: Metric,
              shared: bool) -> Swept:
        self.model.eval()
        counter = [0]
        device = next(self.model.parameters()).device

        def probes():
            for x, y in batches:
                f, injected, z0 = self.model.prepare(x.to(device))
                target = y.to(device)

                def score(z, fz, target=target):
                    return {"metric": metric(self.model.classify(z), target)}

                yield Probe(g=_counted(lambda z, f=f, injected=injected: f(z, injected), counter),
                            z0=z0, score=score)

        return _sweep_probes(probes(), grid, self.solver, shared, counter)
