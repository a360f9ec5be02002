"""Forward behaviour of the fixed-point solvers of :mod:`i2o.deq` (float64).

Budget: < 10 s at one thread.
"""

from __future__ import annotations

import math

import pytest
import torch

from i2o.deq import SolverSpec, solve
from i2o.deq.history import BufferStack, ListStack

DTYPE = torch.float64
SOLVER_SPECS = [
    pytest.param({"method": "fixed_point"}, id="fixed_point"),
    pytest.param({"method": "fixed_point", "beta": 0.7}, id="fixed_point-damped"),
    pytest.param({"method": "anderson"}, id="anderson"),
    pytest.param({"method": "anderson", "beta": 0.8, "m": 3}, id="anderson-mixed"),
    pytest.param({"method": "broyden"}, id="broyden-good"),
    pytest.param({"method": "broyden", "broyden_update": "bad"}, id="broyden-bad"),
    pytest.param({"method": "broyden", "memory": 4}, id="broyden-memory4"),
]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def contractive_affine(dim: int = 12, batch: int = 3, lipschitz: float = 0.8, seed: int = 0):
    """``g(z) = z A^T + b`` with ``||A||_2 = lipschitz``, and its exact fixed point."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(dim, dim, generator=generator, dtype=DTYPE)
    a = lipschitz * a / torch.linalg.matrix_norm(a, 2)
    b = torch.randn(batch, dim, generator=generator, dtype=DTYPE)
    direct = torch.linalg.solve(torch.eye(dim, dtype=DTYPE) - a, b.T).T
    return (lambda z: z @ a.T + b), direct


def contractive_tanh(dim: int = 12, batch: int = 3, lipschitz: float = 0.8, seed: int = 1):
    """``g(z) = tanh(z W^T + x)`` and its fixed point by Newton's method (quadratic convergence)."""
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(dim, dim, generator=generator, dtype=DTYPE)
    w = lipschitz * w / torch.linalg.matrix_norm(w, 2)
    x = torch.randn(batch, dim, generator=generator, dtype=DTYPE)

    def g(z: torch.Tensor) -> torch.Tensor:
        return torch.tanh(z @ w.T + x)

    z = torch.zeros(batch, dim, dtype=DTYPE)
    for _ in range(30):
        derivative = 1 - torch.tanh(z @ w.T + x) ** 2  # (B, D)
        jacobian = derivative[:, :, None] * w[None] - torch.eye(dim, dtype=DTYPE)
        z = z - torch.linalg.solve(jacobian, (g(z) - z).unsqueeze(-1)).squeeze(-1)
    return g, z


@pytest.mark.parametrize("options", SOLVER_SPECS)
@pytest.mark.parametrize("problem", [contractive_affine, contractive_tanh], ids=["affine", "tanh"])
def test_every_solver_reaches_the_direct_solution(options, problem):
    g, direct = problem()
    spec = SolverSpec(max_iter=200, tol=1e-13, stop_mode="rel", **options)
    result = solve(g, torch.zeros_like(direct), spec, differentiable=False)
    assert result.converged and not result.diverged and not result.nonfinite
    assert torch.allclose(result.z, direct, atol=1e-10, rtol=0)
    assert torch.allclose(result.fz, g(result.z), atol=0, rtol=0)


def test_quasi_newton_beats_fixed_point_iteration():
    g, _ = contractive_tanh(lipschitz=0.95)
    steps = {}
    for method in ("fixed_point", "anderson", "broyden"):
        spec = SolverSpec(method=method, max_iter=500, tol=1e-10)
        steps[method] = solve(g, torch.zeros(3, 12, dtype=DTYPE), spec).n_steps
    assert steps["broyden"] < steps["fixed_point"] and steps["anderson"] < steps["fixed_point"]


@pytest.mark.parametrize("options", SOLVER_SPECS)
@pytest.mark.parametrize("differentiable", [False, True])
def test_tolerance_zero_runs_exactly_max_iter_steps(options, differentiable):
    g, direct = contractive_affine()
    calls = []

    def counted(z):
        calls.append(1)
        return g(z)

    spec = SolverSpec(max_iter=40, tol=0.0, **options)
    result = solve(counted, torch.zeros_like(direct), spec, differentiable=differentiable)
    assert result.n_steps == 40
    assert len(calls) == 41
    assert len(result.trace_abs) == len(result.trace_rel) == 41
    assert not result.converged


@pytest.mark.parametrize("stop_mode", ["rel", "abs"])
@pytest.mark.parametrize("method", ["fixed_point", "anderson", "broyden"])
def test_stops_at_the_first_iterate_below_tolerance(method, stop_mode):
    g, direct = contractive_tanh()
    spec = SolverSpec(method=method, max_iter=200, tol=1e-6, stop_mode=stop_mode)
    result = solve(g, torch.zeros_like(direct), spec)
    trace = result.trace_rel if stop_mode == "rel" else result.trace_abs
    assert result.converged and trace[-1] < 1e-6
    assert all(r >= 1e-6 for r in trace[:-1])
    assert result.n_steps == len(trace) - 1


def test_residuals_are_batch_level_norms():
    g, direct = contractive_affine()
    z0 = torch.zeros_like(direct)
    result = solve(g, z0, SolverSpec(method="fixed_point", max_iter=3))
    g0 = g(z0)
    assert math.isclose(result.trace_abs[0], torch.linalg.vector_norm(g0 - z0).item())
    assert math.isclose(result.trace_rel[0], 1.0)  # z0 = 0: ||g(0) - 0|| / ||g(0)||
    z1 = g0
    expected_rel = (torch.linalg.vector_norm(g(z1) - z1) / torch.linalg.vector_norm(g(z1))).item()
    assert math.isclose(result.trace_rel[1], expected_rel, rel_tol=1e-12)


def test_broyden_first_step_is_a_fixed_point_step():
    g, direct = contractive_tanh()
    z0 = torch.randn(direct.shape, dtype=DTYPE, generator=torch.Generator().manual_seed(3))
    for update in ("good", "bad"):
        spec = SolverSpec(method="broyden", max_iter=1, return_best=False, broyden_update=update)
        result = solve(g, z0, spec)
        assert torch.allclose(result.z, g(z0), atol=1e-15, rtol=0)  # z0 + (g(z0) - z0)


def test_good_broyden_solves_a_linear_system_in_at_most_twice_its_dimension():
    """Gay (1979): on an affine problem, Broyden's first method terminates in <= 2 n steps."""
    g, direct = contractive_affine(dim=6, batch=2)
    spec = SolverSpec(method="broyden", max_iter=12, tol=0.0, return_best=False)
    result = solve(g, torch.zeros_like(direct), spec)
    assert torch.allclose(result.z, direct, atol=1e-9, rtol=0)


@pytest.mark.parametrize("method", ["anderson", "broyden"])
def test_each_sample_has_its_own_quasi_newton_state(method):
    """Solving a batch equals solving its samples one by one (tol = 0 fixes the step count)."""
    g, direct = contractive_tanh(batch=3)
    spec = SolverSpec(method=method, max_iter=15, return_best=False)
    batched = solve(g, torch.zeros_like(direct), spec).z
    for b in range(3):

        def single(z, b=b):
            padded = torch.zeros_like(direct)
            padded[b] = z[0]
            return g(padded)[b : b + 1]

        alone = solve(single, torch.zeros_like(direct[b : b + 1]), spec).z
        assert torch.allclose(batched[b : b + 1], alone, atol=1e-12, rtol=0)


@pytest.mark.parametrize("options", SOLVER_SPECS)
def test_with_and_without_autograd_the_iterates_agree(options):
    g, direct = contractive_tanh()
    spec = SolverSpec(max_iter=12, return_best=False, **options)
    plain = solve(g, torch.zeros_like(direct), spec, differentiable=False)
    recorded = solve(g, torch.zeros_like(direct), spec, differentiable=True)
    assert not plain.z.requires_grad
    assert torch.allclose(plain.z, recorded.z, atol=1e-12, rtol=0)
    assert plain.trace_rel == pytest.approx(recorded.trace_rel, rel=1e-9)


def test_returned_iterate_is_lowest_or_last():
    g, direct = contractive_tanh()
    oscillating_start = 5 * torch.ones_like(direct)
    best = solve(g, oscillating_start, SolverSpec(method="broyden", max_iter=8, return_best=True))
    assert best.residual_rel == min(best.trace_rel) == best.lowest_rel
    assert best.step == best.lowest_step
    last = solve(g, oscillating_start, SolverSpec(method="broyden", max_iter=8, return_best=False))
    assert last.step == last.n_steps == 8
    default = SolverSpec(method="broyden", max_iter=8)
    assert default.returns_best(differentiable=False)
    assert not default.returns_best(differentiable=True)
    assert SolverSpec(tol=1e-3).returns_best(differentiable=True)


@pytest.mark.parametrize("method", ["fixed_point", "anderson", "broyden"])
def test_divergence_is_flagged(method):
    def expanding(z):
        return 1.5 * z + 1.0

    result = solve(
        expanding, torch.zeros(2, 4, dtype=DTYPE), SolverSpec(method=method, max_iter=30)
    )
    if method == "fixed_point":
        assert result.diverged and not result.nonfinite
    else:  # quasi-Newton methods solve this affine map (fixed point -2): no false alarm
        assert not result.diverged
        assert torch.allclose(result.z, torch.full_like(result.z, -2.0), atol=1e-8)


@pytest.mark.parametrize("method", ["fixed_point", "anderson", "broyden"])
@pytest.mark.parametrize("differentiable", [False, True])
def test_non_finite_values_stop_the_solve_and_are_flagged(method, differentiable):
    g, direct = contractive_tanh()
    calls = []

    def breaks_at_fifth_call(z):
        calls.append(1)
        out = g(z)
        return out * math.nan if len(calls) == 5 else out

    spec = SolverSpec(method=method, max_iter=20)
    result = solve(
        breaks_at_fifth_call, torch.zeros_like(direct), spec, differentiable=differentiable
    )
    assert result.nonfinite and result.diverged
    assert result.n_steps == 4 and len(calls) == 5
    assert math.isnan(result.trace_abs[-1])
    assert torch.isfinite(result.z).all() and torch.isfinite(result.fz).all()


def test_overflow_to_infinity_is_flagged():
    result = solve(
        lambda z: 1e200 * z + 1.0,
        torch.ones(1, 3, dtype=DTYPE),
        SolverSpec(method="fixed_point", max_iter=10),
    )
    assert result.nonfinite and result.diverged and torch.isfinite(result.z).all()


def test_zero_iterations_returns_the_initial_guess():
    g, direct = contractive_affine()
    z0 = torch.ones_like(direct)
    result = solve(g, z0, SolverSpec(method="broyden", max_iter=0))
    assert result.n_steps == 0 and torch.equal(result.z, z0) and len(result.trace_rel) == 1


def test_multidimensional_states_keep_their_shape():
    def g(z):
        return 0.5 * torch.roll(z, 1, dims=-1) + 1.0

    z0 = torch.zeros(2, 3, 4, 5, dtype=DTYPE)
    result = solve(g, z0, SolverSpec(method="broyden", max_iter=60, tol=1e-12))
    assert result.z.shape == z0.shape
    assert torch.allclose(result.z, torch.full_like(z0, 2.0), atol=1e-10)


@pytest.mark.parametrize("stack_type", ["buffer", "list"])
def test_stacks_compute_dots_and_combinations_and_drop_the_oldest(stack_type):
    generator = torch.Generator().manual_seed(0)
    vectors = [torch.randn(2, 5, dtype=DTYPE, generator=generator) for _ in range(4)]
    if stack_type == "buffer":
        stack = BufferStack(vectors[0], memory=3)
    else:
        stack = ListStack(vectors[0], memory=3)
    for v in vectors:
        stack.push(v)
    by_id = dict(enumerate(vectors))
    assert sorted(stack.ids()) == [1, 2, 3] and stack.size == 3  # the first push was dropped
    kept = [by_id[i] for i in stack.ids()]
    x = torch.randn(2, 5, dtype=DTYPE, generator=generator)
    coeffs = torch.randn(2, 3, dtype=DTYPE, generator=generator)
    expected_dots = torch.stack([(v * x).sum(1) for v in kept], dim=1)
    expected_combination = x - 2.0 * sum(coeffs[:, i : i + 1] * v for i, v in enumerate(kept))
    assert torch.allclose(stack.dots(x), expected_dots)
    assert torch.allclose(stack.combine(coeffs, base=x, alpha=-2.0), expected_combination)


def test_a_finished_solves_buffers_serve_the_next_solve_of_that_shape_and_change_no_bit():
    """Without autograd a solve's stacks take their storage from the pool of spare buffers and
    give it back when dropped: the next solve of that shape reuses it (no new pages to map), two
    live stacks never share one, the pool stays small, and the iterates are those of a solve on
    fresh buffers. With deterministic mode's NaN fill on, every buffer is new."""
    from i2o.deq import history

    history._SPARE.clear()
    g, _ = contractive_tanh(dim=12, batch=3)
    spec = SolverSpec(method="broyden", max_iter=9, tol=0.0)
    first = solve(g, torch.zeros(3, 12, dtype=DTYPE), spec, differentiable=False)
    key = ((3, 8, 12), DTYPE, torch.device("cpu"))  # memory: the 8 updates of 9 steps
    spares = history._SPARE[key]
    assert len(spares) == 2  # us and vs, given back
    kept = {t.data_ptr() for t in spares}
    for buffer in spares:
        buffer.fill_(math.nan)  # a spare holds whatever its last solve left
    like = torch.zeros(3, 12, dtype=DTYPE)
    one, two = BufferStack(like, 8), BufferStack(like, 8)
    assert {one._buffer.data_ptr(), two._buffer.data_ptr()} == kept and not history._SPARE[key]
    del one, two
    again = solve(g, torch.zeros(3, 12, dtype=DTYPE), spec, differentiable=False)
    assert torch.equal(first.z, again.z) and first.trace_abs == again.trace_abs
    for steps in range(2, 10):  # many shapes (memory: steps - 1): the pool keeps a few
        solve(g, torch.zeros(3, 12, dtype=DTYPE), SolverSpec(method="broyden", max_iter=steps,
                                                             tol=0.0), differentiable=False)
    assert len(history._SPARE) <= history._SPARE_SHAPES
    assert all(len(v) <= history._SPARE_PER_SHAPE for v in history._SPARE.values())
    filling = torch.utils.deterministic.fill_uninitialized_memory
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
        history._give_back(torch.zeros(3, 8, 12, dtype=DTYPE))
        assert torch.isnan(BufferStack(like, 8)._buffer).all()
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = filling


def test_list_stack_products_are_differentiable_through_every_vector():
    generator = torch.Generator().manual_seed(1)
    vectors = [
        torch.randn(2, 4, dtype=DTYPE, generator=generator, requires_grad=True) for _ in range(3)
    ]
    x = torch.randn(2, 4, dtype=DTYPE, generator=generator, requires_grad=True)
    coeffs = torch.randn(2, 2, dtype=DTYPE, generator=generator, requires_grad=True)

    def products(x, coeffs, *vectors):
        stack = ListStack(x.detach(), memory=2)
        for v in vectors:
            stack.push(v)
        return stack.dots(x), stack.combine(coeffs, base=x, alpha=-0.5)

    assert torch.autograd.gradcheck(products, (x, coeffs, *vectors))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"method": "newton"}, "method"),
        ({"max_iter": -1}, "max_iter"),
        ({"max_iter": 2.5}, "max_iter"),
        ({"tol": -1e-3}, "tol"),
        ({"tol": math.nan}, "tol"),
        ({"stop_mode": "max"}, "stop_mode"),
        ({"beta": 0.0}, "beta"),
        ({"m": 0}, "m"),
        ({"memory": 0}, "memory"),
        ({"broyden_update": "ugly"}, "broyden_update"),
        ({"divergence_factor": 1.0}, "divergence_factor"),
    ],
)
def test_bad_specs_are_rejected_naming_the_parameter(options, named):
    with pytest.raises(ValueError, match=f"SolverSpec.{named}"):
        SolverSpec(**options)


def test_solve_rejects_maps_that_change_the_shape():
    with pytest.raises(ValueError, match="shape"):
        solve(lambda z: z[:, :2], torch.zeros(2, 3), SolverSpec(max_iter=2))
