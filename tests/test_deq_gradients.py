"""Gradients of :mod:`i2o.deq`: IFT (implicit) and unrolled backward modes (float64).

Budget: < 15 s at one thread.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from i2o.deq import DEQ, SolverSpec, solve

DTYPE = torch.float64
DIM, BATCH = 6, 2


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


class TanhLayer(nn.Module):
    """``f(z, x) = tanh(z W^T + x U^T + b)``, contractive in ``z`` (``||W||_2 = lipschitz``)."""

    def __init__(self, dim: int = DIM, lipschitz: float = 0.7, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        w = torch.randn(dim, dim, generator=generator, dtype=DTYPE)
        self.w = nn.Parameter(lipschitz * w / torch.linalg.matrix_norm(w, 2))
        self.u = nn.Parameter(torch.randn(dim, dim, generator=generator, dtype=DTYPE) / dim**0.5)
        self.b = nn.Parameter(0.1 * torch.randn(dim, generator=generator, dtype=DTYPE))

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(z @ self.w.T + x @ self.u.T + self.b)


def make_problem(seed: int = 0):
    generator = torch.Generator().manual_seed(seed + 100)
    f = TanhLayer(seed=seed)
    x = torch.randn(BATCH, DIM, generator=generator, dtype=DTYPE, requires_grad=True)
    weights = torch.randn(BATCH, DIM, generator=generator, dtype=DTYPE)
    return f, x, weights


def gradients(deq: DEQ, f: nn.Module, x: torch.Tensor, weights: torch.Tensor, output: str = "fz"):
    """Gradient of the loss ``<weights, DEQ output>`` w.r.t. ``f``'s parameters and ``x``."""
    f.zero_grad()
    x.grad = None
    out, stats = deq(f, x, torch.zeros(BATCH, DIM, dtype=DTYPE), output=output)
    (out * weights).sum().backward()
    grads = [p.grad.clone() for p in f.parameters()] + [x.grad.clone()]
    return grads, stats


def finite_difference(loss, tensor: torch.Tensor, direction: torch.Tensor, eps: float = 1e-6):
    with torch.no_grad():
        original = tensor.detach().clone()
        tensor.copy_(original + eps * direction)
        plus = loss()
        tensor.copy_(original - eps * direction)
        minus = loss()
        tensor.copy_(original)
    return (plus - minus) / (2 * eps)


CONVERGED = SolverSpec(method="broyden", max_iter=60, tol=1e-14)


@pytest.mark.parametrize("backward_method", ["broyden", "anderson", "fixed_point"])
@pytest.mark.parametrize("output", ["fz", "z"])
def test_ift_gradient_matches_finite_differences(backward_method, output):
    f, x, weights = make_problem()
    deq = DEQ(
        forward=CONVERGED,
        backward="ift",
        backward_spec=SolverSpec(method=backward_method, max_iter=200, tol=1e-14),
    )
    grads, stats = gradients(deq, f, x, weights, output=output)
    assert stats.backward is not None and stats.backward.converged

    def loss() -> float:
        with torch.no_grad():
            out, _ = deq(f, x, torch.zeros(BATCH, DIM, dtype=DTYPE), output=output)
        return (out * weights).sum().item()

    generator = torch.Generator().manual_seed(7)
    for tensor, grad in zip([*f.parameters(), x], grads, strict=True):
        direction = torch.randn(tensor.shape, generator=generator, dtype=DTYPE)
        expected = finite_difference(loss, tensor, direction)
        assert (grad * direction).sum().item() == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_ift_gradient_equals_the_gradient_of_the_converged_unrolled_procedure():
    f, x, weights = make_problem(seed=1)
    implicit, _ = gradients(
        DEQ(CONVERGED, backward="ift", backward_spec=SolverSpec(max_iter=100, tol=1e-14)),
        f,
        x,
        weights,
    )
    unrolled_spec = SolverSpec(method="broyden", max_iter=40, tol=0.0, return_best=False)
    unrolled, stats = gradients(DEQ(unrolled_spec, backward="unrolled"), f, x, weights)
    assert stats.forward.trace_rel[-1] < 1e-13
    for a, b in zip(implicit, unrolled, strict=True):
        assert torch.allclose(a, b, atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"method": "broyden"}, id="broyden-good"),
        pytest.param({"method": "broyden", "broyden_update": "bad"}, id="broyden-bad"),
        pytest.param({"method": "broyden", "memory": 2}, id="broyden-memory2"),
        pytest.param({"method": "anderson", "m": 3, "beta": 0.9}, id="anderson"),
        pytest.param({"method": "fixed_point", "beta": 0.8}, id="fixed_point"),
    ],
)
def test_unrolled_gradient_matches_finite_differences_of_the_same_n_step_procedure(options):
    """``gradcheck`` of ``(W, U, b, x) -> z_N``: N = 5 steps, not converged, tol = 0."""
    f, x, _ = make_problem(seed=2)
    spec = SolverSpec(max_iter=5, tol=0.0, return_best=False, **options)

    def n_step_procedure(w, u, b, x):
        def g(z):
            return torch.tanh(z @ w.T + x @ u.T + b)

        result = solve(g, torch.zeros(BATCH, DIM, dtype=DTYPE), spec, differentiable=True)
        assert result.n_steps == 5 and result.trace_rel[-1] > 1e-6
        return result.z

    inputs = [p.detach().clone().requires_grad_() for p in (f.w, f.u, f.b, x)]
    assert torch.autograd.gradcheck(n_step_procedure, inputs, eps=1e-6, atol=1e-8, rtol=1e-6)


def test_unrolled_gradient_flows_through_the_low_rank_updates():
    """Detaching Broyden's stored factors changes the gradient: it is not a fixed-point unroll."""
    f, x, weights = make_problem(seed=3)
    spec = SolverSpec(method="broyden", max_iter=6, return_best=False)
    unrolled, _ = gradients(DEQ(spec, backward="unrolled"), f, x, weights)
    with torch.no_grad():
        plain_fixed_point = SolverSpec(method="fixed_point", max_iter=6, return_best=False)
        z_broyden = solve(lambda z: f(z, x), torch.zeros(BATCH, DIM, dtype=DTYPE), spec).z
        z_fixed = solve(
            lambda z: f(z, x), torch.zeros(BATCH, DIM, dtype=DTYPE), plain_fixed_point
        ).z
    assert not torch.allclose(z_broyden, z_fixed)
    assert all(torch.isfinite(g).all() for g in unrolled)


def test_deq_outputs_and_statistics():
    f, x, weights = make_problem(seed=4)
    deq = DEQ(CONVERGED, backward="ift", backward_spec=SolverSpec(max_iter=30, tol=1e-12))
    z0 = torch.zeros(BATCH, DIM, dtype=DTYPE)
    fz, stats = deq(f, x, z0)
    z, _ = deq(f, x, z0, output="z")
    with torch.no_grad():
        z_eval, eval_stats = deq(f, x, z0, output="z")
    assert torch.allclose(fz, f(stats.forward.z, x))
    assert torch.allclose(z, stats.forward.z) and torch.allclose(z_eval, z)
    assert fz.requires_grad and z.requires_grad and not z_eval.requires_grad
    assert stats.backward is None and eval_stats.forward.converged
    (fz * weights).sum().backward()
    assert stats.backward is not None and stats.backward.n_steps <= 30
    assert x.grad is not None and all(p.grad is not None for p in f.parameters())


def test_unrolled_deq_returns_the_same_iterate_with_and_without_autograd():
    f, x, _ = make_problem(seed=5)
    deq = DEQ(SolverSpec(method="broyden", max_iter=5), backward="unrolled", output="z")
    z0 = torch.zeros(BATCH, DIM, dtype=DTYPE)
    trained, train_stats = deq(f, x, z0)
    with torch.no_grad():
        evaluated, eval_stats = deq(f, x, z0)
    assert train_stats.forward.step == eval_stats.forward.step == 5
    assert torch.allclose(trained, evaluated, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"backward": "phantom"}, "backward"),
        ({"output": "both"}, "output"),
    ],
)
def test_bad_deq_arguments_are_rejected(kwargs, named):
    with pytest.raises(ValueError, match=f"DEQ {named}"):
        DEQ(**kwargs)


def test_ift_output_is_freed_after_backward():
    """The IFT hook and the output it is attached to must not keep each other alive (a leak of
    one DEQ output per training step before the hook dropped its reference)."""
    import gc
    import weakref

    from i2o.deq import DEQ, SolverSpec

    linear = torch.nn.Linear(6, 6)
    deq = DEQ(forward=SolverSpec(method="broyden", max_iter=5, tol=0.0), backward="ift")
    x = torch.randn(3, 6)
    out, _ = deq(lambda z, inp: torch.tanh(0.3 * linear(z) + inp), x, torch.zeros_like(x))
    out.sum().backward()
    alive = weakref.ref(out)
    del out
    gc.collect()
    assert alive() is None
    assert linear.weight.grad is not None
