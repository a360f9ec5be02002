"""Broyden forward solve of :mod:`i2o.deq` against torchdeq's ``broyden_solver`` (a peer used
only here).

Both solvers run the same procedure on the same contractive map: Broyden's first ("good") method
without line search, 18 steps (the paper's F_THRES), ``tol = 0``, relative residual, returning
the last iterate (torchdeq: ``return_final=True``), without autograd, one thread. Reported per map:
the median wall time of each over ``REPEATS`` (2) interleaved repetitions after one warm-up each,
their ratio (goal: ours <= 0.8 x torchdeq) and the relative distance between the two returned
points (equal up to rounding). Each run makes exactly 18 steps on the same input (``tol = 0``),
so repetitions differ only by the machine's noise; two per solver, interleaved, suffice for
ratios measured at 0.24-0.52, where the slowest peer run (5 s) dominates the module's time.

Maps (state sizes of the paper's Figure 5 model: TINY MDEQ, 24·32·32 + 24·16·16 = 30720 per sample):

- ``elementwise_tiny_b128``: ``tanh(0.5 roll(z) + x)`` on ``(128, 30720)``: a cheap map, so the time
  is the solver's own overhead at the full TINY batch;
- ``conv_tiny_b32``: ``tanh(conv3x3(z) + x)`` on two branches ``(32, 24, 32, 32)`` and
  ``(32, 24, 16, 16)`` flattened to ``(32, 30720)``, random kernels scaled down so that the map
  is contractive in practice: map and solver costs comparable;
- ``dense_tanh_b128``: ``tanh(z W^T + x)``, ``D = 1024``, ``||W||_2 = 0.9``: the classic toy DEQ.

Also reported, without a peer: the forward + backward time of a DEQ layer on ``conv_tiny_b32`` with
the IFT and the unrolled backward modes (the two arms of Figure 5).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from i2o.deq import DEQ, SolverSpec, solve

STEPS = 18
REPEATS = 2
PEER = "torchdeq 0.1.0 broyden_solver"


def elementwise_map(batch: int = 128, dim: int = 30720) -> tuple[Callable, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, dim, generator=generator)
    return (lambda z: torch.tanh(0.5 * z.roll(1, dims=-1) + x)), torch.zeros(batch, dim)


def two_branch_conv_map(batch: int = 32, channels: int = 24) -> tuple[Callable, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    shapes = [(channels, 32, 32), (channels, 16, 16)]
    sizes = [c * h * w for c, h, w in shapes]
    kernels = []
    for _ in shapes:
        kernel = torch.randn(channels, channels, 3, 3, generator=generator)
        kernels.append(0.9 * kernel / (kernel.flatten(1).norm(dim=1).max() * 3.0))
    inputs = [torch.randn(batch, *shape, generator=generator) for shape in shapes]

    def f(z: torch.Tensor) -> torch.Tensor:
        parts = torch.split(z, sizes, dim=1)
        out = []
        for part, shape, kernel, x in zip(parts, shapes, kernels, inputs, strict=True):
            conv = torch.nn.functional.conv2d(part.reshape(batch, *shape), kernel, padding=1)
            out.append(torch.tanh(conv + x).flatten(1))
        return torch.cat(out, dim=1)

    return f, torch.zeros(batch, sum(sizes))


def dense_tanh_map(batch: int = 128, dim: int = 1024) -> tuple[Callable, torch.Tensor]:
    generator = torch.Generator().manual_seed(2)
    w = torch.randn(dim, dim, generator=generator)
    w = 0.9 * w / torch.linalg.matrix_norm(w, 2)
    x = torch.randn(batch, dim, generator=generator)
    return (lambda z: torch.tanh(z @ w.T + x)), torch.zeros(batch, dim)


MAPS: dict[str, Callable[[], tuple[Callable, torch.Tensor]]] = {
    "elementwise_tiny_b128": elementwise_map,
    "conv_tiny_b32": two_branch_conv_map,
    "dense_tanh_b128": dense_tanh_map,
}


def _ours(f: Callable, z0: torch.Tensor) -> torch.Tensor:
    spec = SolverSpec(method="broyden", max_iter=STEPS, tol=0.0, stop_mode="rel", return_best=False)
    return solve(f, z0, spec, differentiable=False).z


def _torchdeq(f: Callable, z0: torch.Tensor) -> torch.Tensor:
    from torchdeq.solver.broyden import broyden_solver

    z, _, _ = broyden_solver(f, z0, max_iter=STEPS, tol=0.0, stop_mode="rel", return_final=True)
    return z


def _timed(fn: Callable[[], torch.Tensor]) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def compare(name: str, repeats: int = REPEATS) -> list[dict]:
    """Interleaved timings (ours, torchdeq, ours, ...) after one warm-up each; medians."""
    f, z0 = MAPS[name]()
    with torch.no_grad():
        z_ours, z_peer = _ours(f, z0), _torchdeq(f, z0)
        ours, peer = [], []
        for _ in range(repeats):
            ours.append(_timed(lambda: _ours(f, z0))[0])
            peer.append(_timed(lambda: _torchdeq(f, z0))[0])
        distance = (
            torch.linalg.vector_norm(z_ours - z_peer) / torch.linalg.vector_norm(z_peer)
        ).item()
        residual = (
            torch.linalg.vector_norm(f(z_ours) - z_ours) / torch.linalg.vector_norm(f(z_ours))
        ).item()
    t_ours, t_peer = statistics.median(ours), statistics.median(peer)
    note = (
        f"{STEPS} Broyden steps, tol 0, median of {repeats} interleaved runs, 1 thread, no autograd"
    )
    return [
        {
            "name": f"broyden_{name}_time",
            "value": t_ours,
            "unit": "s",
            "peer": PEER,
            "peer_value": t_peer,
            "ratio": t_ours / t_peer,
            "goal": "ratio <= 0.8",
            "note": note,
        },
        {
            "name": f"broyden_{name}_distance_to_torchdeq",
            "value": distance,
            "unit": "relative L2 distance between the two returned iterates",
            "note": f"relative residual of ours after {STEPS} steps: {residual:.2e}",
        },
    ]


def training_step_times(repeats: int = REPEATS) -> list[dict]:
    """Forward + backward of a DEQ layer on ``conv_tiny_b32``: IFT (B_THRES = 20) vs unrolled."""
    f, z0 = two_branch_conv_map()
    gain = torch.nn.Parameter(torch.tensor(1.0))
    forward = SolverSpec(method="broyden", max_iter=STEPS, tol=0.0)
    rows = []
    for backward in ("ift", "unrolled"):
        deq = DEQ(forward, backward=backward, backward_spec=SolverSpec(max_iter=20))
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            out, _ = deq(lambda z, x: gain * f(z), None, z0)
            out.sum().backward()
            times.append(time.perf_counter() - start)
        rows.append(
            {
                "name": f"deq_conv_tiny_b32_{backward}_forward_backward_time",
                "value": statistics.median(times[1:]),
                "unit": "s",
                "note": f"{STEPS} Broyden steps forward, median of {repeats} after a warm-up",
            }
        )
    return rows


def run() -> list[dict]:
    torch.set_num_threads(1)
    rows: list[dict] = []
    for name in MAPS:
        rows.extend(compare(name))
    rows.extend(training_step_times())
    return rows


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
