"""What the chapter's jobs share: one DEQ trained with ``N`` iterations, then swept over ``N + ΔN``.

A job is a frozen value (:class:`i2o.compute.job.Job`) of one of three classes, each defined with
the task it computes: :class:`.classification.ClassificationJob` (``classification``),
:class:`.language.LanguageJob` (``language``) and :class:`.inverse.InverseJob`
(``inverse-deq``, ``inverse-elder``). Its fields are its cache key: the task's hyper-parameters,
its forward and backward :class:`i2o.deq.SolverSpec` (built once, by :func:`.runs.build_jobs`,
where the manifest's N becomes ``max_iter``), the sweep's grid, the evaluation sizes and the
replicate. The job's ``seed`` is already the replicate's (:func:`i2o.base.replicates.seed`); the
replicate also redraws the fixed seeds of the evaluation subsets and of the measurement noise.
Training checkpoints go to the job's :meth:`i2o.compute.job.Job.checkpoints`, so an interrupted job
resumes and a finished one costs a file read. Every job returns plain arrays: the sweeps on test
and training data (:func:`i2o.deq.sweep_iterations`), the training history (:func:`history_arrays`)
and the model's size (:func:`i2o.models.parameters.count_parameters`); with ``reference_iters > 0``,
also a converged reference solve on test data (``test_reference``, :mod:`i2o.deq.reference`).
"""

from __future__ import annotations

import numpy as np


def history_arrays(history: dict[str, list]) -> dict[str, np.ndarray]:
    """The numeric series of a training history, as float arrays (what the cache stores)."""
    return {k: np.asarray(v, dtype=float) for k, v in history.items()
            if isinstance(v, list) and v and all(isinstance(x, int | float) for x in v)}


def check_reference(reference_iters: int, train_iters: int) -> None:
    """``reference_iters`` (the reference solve's cap, :mod:`i2o.deq.reference`) is 0 (none) or
    an integer above ``N``; a clear error otherwise."""
    if isinstance(reference_iters, bool) or not isinstance(reference_iters, int) or (
            reference_iters != 0 and reference_iters <= train_iters):
        raise ValueError(f"reference_iters must be 0 (no reference solve) or an integer above "
                         f"N = {train_iters}; got {reference_iters!r}")
