"""Accuracy and fixed-point residuals of a trained DEQ classifier for each test-time N.

For a number of inner iterations ``N`` the prediction is ``head(z_N)``, where ``z_N`` is what the
solver returns after ``N`` steps with no early stop (``tol = 0``): the iterate of lowest relative
residual among ``z_0 … z_N`` (the rule of the DEQ code's Broyden solver, used for both training
arms at test time; ``return_best=False`` takes ``z_N`` itself). This is the quantity of the paper's
Figure 5 (and, as a gap ``err(N + ΔN) − err(N)``, of Figure 2).

Both chapters evaluate through the one generic sweep, :func:`i2o.deq.sweep_iterations`:
:func:`classification_probes` plugs the classifier into it (per image: 0/1 error and
cross-entropy), and :func:`evaluate_iterations` reduces its per-example output to the numbers the
stability chapter plots.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from i2o.base import allocator
from i2o.base.progress import Progress
from i2o.deq import Probe, SolverSpec, sweep_iterations
from i2o.models.mdeq import MDEQClassifier


def classification_probes(model: MDEQClassifier, images: torch.Tensor, labels: torch.Tensor,
                          batch_size: int = 250) -> Iterator[Probe]:
    """Probes over ``images`` (standardised tensors) with metrics ``error`` (0/1) and ``loss``
    (cross-entropy) of ``head(z)`` — the solver's iterate, as the authors' evaluation does."""
    if images.shape[0] != labels.shape[0] or images.shape[0] == 0:
        raise ValueError(f"need as many labels as images (> 0); got {images.shape[0]} images and "
                         f"{labels.shape[0]} labels")
    device = next(model.parameters()).device
    model.eval()
    starts = range(0, images.shape[0], batch_size)
    for start in Progress.over(starts, "evaluate", unit="batch"):
        batch = images[start:start + batch_size].to(device)
        wanted = labels[start:start + batch_size].to(device)
        f, x, z0 = model.prepare(batch)

        def score(z: torch.Tensor, fz: torch.Tensor, wanted=wanted) -> dict[str, torch.Tensor]:
            logits = model.classify(z)
            return {"error": (logits.argmax(1) != wanted).double(),
                    "loss": F.cross_entropy(logits, wanted, reduction="none")}

        yield Probe(g=lambda z, f=f, x=x: f(z, x), z0=z0, score=score)


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
    - ``trace_rel``: mean relative residual of each iterate ``z_0 … z_{max N}`` (one solve);
    - ``errors``: per image and count, 1 when ``head(z_N)`` is wrong (``uint8``, images × counts),
      for paired comparisons between counts on the same images.
    """
    device = next(model.parameters()).device
    if device.type == "cpu":
        allocator.keep_freed_memory()
    spec = SolverSpec(method=method, max_iter=1, tol=0.0, stop_mode=stop_mode,
                      return_best=return_best)
    swept = sweep_iterations(classification_probes(model, images, labels, batch_size),
                             iterations, spec, shared_solve=shared_solve)
    sizes = swept["batch_sizes"]
    batch_of_example = np.repeat(np.arange(len(sizes)), sizes)
    batch_abs = np.sqrt(np.stack([np.bincount(batch_of_example, weights=np.square(column))
                                  for column in swept["residual_abs"].T], axis=1))
    return {
        "iterations": swept["iterations"],
        "accuracy": 1.0 - swept["metrics"]["error"].mean(axis=0),
        "loss": swept["metrics"]["loss"].mean(axis=0),
        "residual_rel": swept["batch_residual_rel"].mean(axis=0),
        "residual_abs": batch_abs.mean(axis=0),
        "residual_rel_max": swept["batch_residual_rel"].max(axis=0),
        "trace_rel": swept["trace_rel"].mean(axis=0),
        "errors": swept["metrics"]["error"].astype(np.uint8),
    }
