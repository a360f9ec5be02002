"""Accuracy and fixed-point residuals of a trained DEQ classifier for each test-time N.

For a number of inner iterations ``N`` the prediction is ``head(z_N)``, where ``z_N`` is what the
solver returns after ``N`` steps with no early stop (``tol = 0``): the iterate of lowest relative
residual among ``z_0 … z_N`` (the rule of the DEQ code's Broyden solver, used for both training
arms at test time; ``return_best=False`` takes ``z_N`` itself). This is the quantity of the paper's
Figure 5 (and, as a gap ``acc(N + ΔN) − acc(N)``, of Figure 2).

Solvers without early stopping are deterministic in their first ``N`` steps whatever their budget,
so one solve of ``max(N)`` steps yields every ``z_N``: :func:`evaluate_iterations` records the
iterates the solver evaluates ``f`` at (``shared_solve=True``, the default) instead of solving once
per ``N``; ``shared_solve=False`` solves separately for each ``N`` (the tests check they agree).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from i2o.deq import SolverSpec, solve
from i2o.models.mdeq import MDEQClassifier
from i2o.train.allocator import keep_freed_memory


def _check_iterations(iterations: Sequence[int]) -> list[int]:
    its = [int(n) for n in iterations]
    if not its or any(n < 0 for n in its):
        raise ValueError(f"test iterations must be a non-empty list of integers ≥ 0; got {its}")
    return its


def _chosen_index(trace: list[float], n: int, return_best: bool) -> int:
    """Index of the iterate a solve of ``n`` steps returns, from the trace of a longer solve."""
    last = min(n, len(trace) - 1)
    finite = [t for t in range(last + 1) if np.isfinite(trace[t])]
    if not finite:
        return 0
    if not return_best:
        return finite[-1]
    return min(finite, key=lambda t: (trace[t], t))


def _solve_batch(f, x: torch.Tensor, z0: torch.Tensor, its: list[int], method: str,
                 stop_mode: str, return_best: bool, shared_solve: bool
                 ) -> tuple[list[tuple[torch.Tensor, float, float]], list[float]]:
    """For one batch: (iterate, rel. residual, abs. residual) returned for each N, and the trace."""
    longest = max(its)

    def spec(n: int) -> SolverSpec:
        return SolverSpec(method=method, max_iter=n, tol=0.0, stop_mode=stop_mode,
                          return_best=return_best)

    if not shared_solve:
        chosen = []
        for n in its:
            result = solve(lambda z: f(z, x), z0, spec(n))
            chosen.append((result.z, result.residual_rel, result.residual_abs))
        return chosen, solve(lambda z: f(z, x), z0, spec(longest)).trace_rel

    iterates: list[torch.Tensor] = []

    def g(z: torch.Tensor) -> torch.Tensor:
        iterates.append(z)
        return f(z, x)

    result = solve(g, z0, spec(longest))
    if len(iterates) != len(result.trace_rel):
        raise RuntimeError(f"solver {method!r} evaluated f {len(iterates)} times for "
                           f"{len(result.trace_rel)} iterates; use shared_solve=False")
    trace = result.trace_rel if stop_mode == "rel" else result.trace_abs
    chosen = []
    for n in its:
        t = _chosen_index(trace, n, return_best)
        chosen.append((iterates[t], result.trace_rel[t], result.trace_abs[t]))
    return chosen, result.trace_rel


@torch.no_grad()
def evaluate_iterations(
    model: MDEQClassifier,
    images: torch.Tensor,
    labels: torch.Tensor,
    iterations: Sequence[int],
    method: str = "broyden",
    stop_mode: str = "rel",
    return_best: bool = True,
    batch_size: int = 250,
    shared_solve: bool = True,
) -> dict[str, np.ndarray]:
    """Test accuracy and residuals of ``model`` for every inner-iteration count in ``iterations``.

    Returns arrays indexed like ``iterations``:

    - ``accuracy``: fraction of ``labels`` predicted right with ``head(z_N)``;
    - ``loss``: mean cross-entropy;
    - ``residual_rel`` / ``residual_abs``: per-batch ``‖f(z_N) − z_N‖ / ‖f(z_N)‖`` and
      ``‖f(z_N) − z_N‖`` (batch-level, as the solvers measure them), averaged over batches;
    - ``residual_rel_max``: the largest batch relative residual;
    - ``trace_rel``: mean relative residual of each iterate ``z_0 … z_{max N}`` (one solve).
    """
    its = _check_iterations(iterations)
    if images.shape[0] != labels.shape[0] or images.shape[0] == 0:
        raise ValueError(f"need as many labels as images (> 0); got {images.shape[0]} images and "
                         f"{labels.shape[0]} labels")
    device = next(model.parameters()).device
    if device.type == "cpu":
        keep_freed_memory()
    model.eval()
    longest = max(its)
    correct = np.zeros(len(its))
    loss_sum = np.zeros(len(its))
    rel = np.zeros(len(its))
    absolute = np.zeros(len(its))
    rel_max = np.zeros(len(its))
    trace_sum = np.zeros(longest + 1)
    batches = 0
    for start in range(0, images.shape[0], batch_size):
        x_img = images[start:start + batch_size].to(device)
        y = labels[start:start + batch_size].to(device)
        f, x, z0 = model.prepare(x_img)

        chosen, trace = _solve_batch(f, x, z0, its, method, stop_mode, return_best,
                                     shared_solve)
        padded = np.full(longest + 1, trace[-1] if trace else np.nan)
        padded[:len(trace)] = trace[:longest + 1]
        trace_sum += padded
        for i, (z, r_rel, r_abs) in enumerate(chosen):
            logits = model.classify(z)
            correct[i] += float((logits.argmax(1) == y).sum())
            loss_sum[i] += float(torch.nn.functional.cross_entropy(logits, y, reduction="sum"))
            rel[i] += r_rel
            absolute[i] += r_abs
            rel_max[i] = max(rel_max[i], r_rel)
        batches += 1
    n_images = images.shape[0]
    return {
        "iterations": np.asarray(its),
        "accuracy": correct / n_images,
        "loss": loss_sum / n_images,
        "residual_rel": rel / batches,
        "residual_abs": absolute / batches,
        "residual_rel_max": rel_max,
        "trace_rel": trace_sum / batches,
    }
