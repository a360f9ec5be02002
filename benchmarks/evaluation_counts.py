r"""Counting what a DEQ computation does with ``f``, and timing those evaluations alone: the floor
of ``bench_floor.py``.

A model class is wrapped by :func:`counting` into a subclass whose ``inject`` (called once per
training step, and once per batch of a sweep) starts a new :class:`Counts`, and whose ``f`` counts
and calls the model's own:

- ``F₀``: evaluations of ``f`` without autograd (the IFT forward solve),
- ``F₁``: evaluations recorded by autograd (``f(z*)`` of the IFT arm, every iterate of the
  unrolled arm, the Jacobian penalty's ``f(z*)``),
- ``V``: VJPs, i.e. gradients that passed back through an output of ``f`` (a hook on it),
- ``P ≤ V``: those that went on through ``f`` to its parameters ``θ`` and its injection ``x`` (a
  hook on a view of ``x`` passed to that evaluation); the other ``V − P`` stopped at ``z`` (the
  adjoint solve's ``uᵀ ∂f/∂z``).

The floor of one step's counts (:func:`floor_seconds`) is, on the same batch, ``F₀`` evaluations of
``f`` from the initial state without autograd, ``F₁`` evaluations chained with autograd (``z_{k+1}
= f(z_k, x)`` from a leaf ``z_0``, ``x`` detached into a leaf), ``V − P`` VJPs ``uᵀ ∂f/∂z`` through
the first of them and one backward of ``u`` from the ``P``-th through the chain (``P`` VJPs ``uᵀ
∂f/∂(z, θ, x)``), ``u`` random. Expected counts per step (the entries' notes give the counted
ones): IFT arm ``F₀ = N + 1``, ``F₁ = 1``, ``V = B + 2``, ``P = 1``; unrolled arm ``F₀ = 0``,
``F₁ = V = P = N + 1``; the language model's IFT step with the Jacobian penalty ``F₀ = N + 1``,
``F₁ = 2``, ``V = N + 3``, ``P = 2``, where the penalty's second-order backward (``∂/∂θ`` of
``‖εᵀ ∂f/∂z‖²``) is counted as one of the ``P`` and its excess over a VJP is overhead. The
counting wrapper itself (a Python call and two hooks per recorded evaluation) is not in the floor.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


class Counts:
    """What one training step (or one sweep batch) did with ``f`` (module docstring)."""

    def __init__(self, given: torch.Tensor) -> None:
        self.given = given  # the batch handed to ``inject`` (images or tokens)
        self.plain = 0      # F₀: evaluations without autograd
        self.graphed = 0    # F₁: evaluations recorded by autograd
        self.vjps = 0       # V: gradients through an output of f
        self.onward = 0     # P: backward passes that went on through f to θ and x

    def key(self) -> tuple[int, int, int, int]:
        return self.plain, self.graphed, self.vjps, self.onward

    def describe(self) -> str:
        if not (self.graphed or self.vjps or self.onward):
            return f"{self.plain} evaluations of f, all without autograd"
        return (f"{self.plain} evaluations of f without autograd and {self.graphed} with, "
                f"{self.vjps} VJPs through f's outputs of which {self.onward} went on to f's "
                f"parameters and injection")


class Counter:
    """One :class:`Counts` per call of ``inject`` (once per training step, once per sweep batch)."""

    def __init__(self) -> None:
        self.counts: list[Counts] = []

    def begin(self, given: torch.Tensor) -> None:
        self.counts.append(Counts(given.detach()))

    def call(self, f: Callable, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        counts = self.counts[-1]
        if not torch.is_grad_enabled():
            counts.plain += 1
            return f(z, x)
        counts.graphed += 1
        if x.requires_grad:
            x = x.view_as(x)  # this evaluation's own handle on the injection

            def onward(_grad: torch.Tensor) -> None:
                counts.onward += 1

            x.register_hook(onward)
        out = f(z, x)
        if out.requires_grad:
            def through(_grad: torch.Tensor) -> None:
                counts.vjps += 1

            out.register_hook(through)
        return out


def counting(cls: type, counter: Counter) -> type:
    """A subclass of the model ``cls`` whose ``f`` and ``inject`` report to ``counter``."""

    class Counted(cls):
        def inject(self, given: torch.Tensor) -> torch.Tensor:
            counter.begin(given)
            return super().inject(given)

        def f(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return counter.call(super().f, z, x)

    Counted.__name__ = Counted.__qualname__ = f"Counted{cls.__name__}"
    return Counted


def timed_counts(history: dict, counter: Counter, total: int) -> list[Counts]:
    """The counts of the timed steps (all but the first, untimed), once the training loop is
    checked to have made ``total`` steps and as many injections."""
    if len(history["seconds"]) != total or len(counter.counts) != total:
        raise RuntimeError(f"expected {total} steps and as many injections; got "
                           f"{len(history['seconds'])} steps, {len(counter.counts)} injections")
    return counter.counts[1:]


def floor_seconds(f: Callable, x: torch.Tensor, z0: torch.Tensor, counts: Counts) -> float:
    """Wall time of ``counts``'s evaluations of ``f`` and VJPs, alone (module docstring)."""
    x = x.detach().requires_grad_()  # the floor's backward stops at the injection
    cotangent = torch.randn_like(z0)
    direct = max(counts.vjps - counts.onward, 0)
    chained = min(counts.onward, counts.graphed)
    extra = counts.onward - chained
    began = time.perf_counter()
    with torch.no_grad():
        z = z0
        for _ in range(counts.plain):
            z = f(z, x)
    start = z.detach().requires_grad_()
    outs, z = [], start
    for _ in range(counts.graphed):
        z = f(z, x)
        outs.append(z)
    for _ in range(direct):
        torch.autograd.grad(outs[0], start, cotangent, retain_graph=True)
    for k in range(extra):
        torch.autograd.backward(outs[0], cotangent, retain_graph=chained > 0 or k < extra - 1)
    if chained:
        torch.autograd.backward(outs[chained - 1], cotangent)
    return time.perf_counter() - began


def counts_note(counts: list[Counts], what: str) -> str:
    """The counts of every timed step (or batch), as the entry's note."""
    distinct: dict[tuple, Counts] = {}
    for c in counts:
        distinct.setdefault(c.key(), c)
    said = "; ".join(c.describe() for c in distinct.values())
    every = "every one of the" if len(distinct) == 1 else "the"
    return f"counted by wrapping f, {every} {len(counts)} {what}: {said}"
