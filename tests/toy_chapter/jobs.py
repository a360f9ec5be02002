"""The toy chapter's one cached computation: a fixed-point iteration on one random instance.

:class:`ResidualJob` (``residuals-seed<s>``) draws a contraction A (spectral norm
``contraction``) and b of dimension ``dim`` from its seed, iterates z ← A z + b from z_0 = 0 for
``test_iters`` steps and returns the relative residual ‖z_n − z*‖ / ‖z_0 − z*‖ at every n. Its
state is saved every :data:`CHECKPOINT_EVERY` steps under :meth:`i2o.compute.job.Job.checkpoints`,
so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from i2o.base import replicates
from i2o.compute.job import Job

from . import FIGURE

CHECKPOINT_EVERY = 5
_STATE = "state.npz"


@dataclass(frozen=True)
class ResidualJob(Job):
    """The residual curve of one seed: everything it depends on is a field."""

    figure: ClassVar[str] = FIGURE

    seed: int
    replicate: int
    dim: int
    contraction: float
    test_iters: int

    @property
    def name(self) -> str:
        return f"residuals-seed{self.seed}"

    def problem(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A (spectral norm ``contraction``), b and the fixed point z* = (I − A)⁻¹ b."""
        rng = np.random.default_rng(replicates.seed(self.seed, self.replicate))
        a = rng.standard_normal((self.dim, self.dim))
        a *= self.contraction / np.linalg.norm(a, 2)
        b = rng.standard_normal(self.dim)
        return a, b, np.linalg.solve(np.eye(self.dim) - a, b)

    def load(self) -> tuple[np.ndarray, list[float]]:
        """The saved iterate and the residuals so far; z_0 = 0 and ``[1.0]`` without a save."""
        path = self.checkpoints() / _STATE
        if not path.exists():
            return np.zeros(self.dim), [1.0]
        with np.load(path) as state:
            return state["z"], list(state["residuals"])

    def save(self, z: np.ndarray, residuals: list[float]) -> None:
        np.savez(self.checkpoints() / _STATE, z=z, residuals=np.asarray(residuals))

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        a, b, fixed_point = self.problem()
        z, residuals = self.load()
        scale = np.linalg.norm(fixed_point)
        while len(residuals) <= self.test_iters:
            z = a @ z + b
            residuals.append(float(np.linalg.norm(z - fixed_point) / scale))
            if len(residuals) % CHECKPOINT_EVERY == 0:
                self.save(z, residuals)
        return {"residuals": np.asarray(residuals[: self.test_iters + 1])}
