"""The affine chapter's five cached computations, as jobs (:class:`i2o.compute.job.Job`).

Each job's fields are the chapter parameters its result depends on, under the same names; its
cache key is those fields and the source of this module's import closure (theory, sweeps,
checks), so editing a figure or a claim never recomputes it.

- :class:`Corollary1Job` (``corollary1``): :func:`.sweeps.corollary1_sweep`, D(N, ΔN) on one
  instance with U surjective (Figure 1 left);
- :class:`Corollary2Job` (``corollary2``): :func:`.sweeps.lower_bound_sweep` with K_in and K_out
  square, both problems strongly convex (Figure 1 right);
- :class:`FigureG3Job` (``figure-g3``): the same sweep with neither problem strongly convex;
- :class:`ChecksJob` (``checks``): Lemma A.2, Theorem 1, Corollary 1, Lemma 1 and Theorem 2 on
  random instances;
- :class:`NonnormalJob` (``corollary2-nonnormal``): :func:`.checks.corollary2_nonnormal_check`,
  Corollary 2 with a non-normal K_out.

Every job draws from ``replicates.seed(seed, replicate)`` (Figure G.3 from that seed + 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from i2o.base import replicates
from i2o.chapters.affine import FIGURE, checks, sweeps
from i2o.compute.job import Job


@dataclass(frozen=True)
class AffineJob(Job):
    """What every job of the chapter depends on: the seed of its draws and the inner step and
    rank tolerance of every computation."""

    figure: ClassVar[str] = FIGURE
    entry: ClassVar[str]

    seed: int
    replicate: int
    eta_scale: float
    rank_rtol: float

    @property
    def name(self) -> str:
        return self.entry

    @property
    def draw_seed(self) -> int:
        """The seed of the job's random instances at its replicate."""
        return replicates.seed(self.seed, self.replicate)


@dataclass(frozen=True)
class Corollary1Job(AffineJob):
    """Figure 1 (left): D(N, ΔN) against ΔN for each N of ``left_n_list`` on one instance."""

    entry: ClassVar[str] = "corollary1"

    left_d_z: int
    left_d_theta: int
    left_d_x: int
    left_rank_out: int
    left_n_list: tuple[int, ...]
    delta_n_min: int
    delta_n_max: int

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return sweeps.corollary1_sweep(
            seed=self.draw_seed, d_z=self.left_d_z, d_theta=self.left_d_theta,
            rank_in=self.left_d_x, rank_out=self.left_rank_out, n_list=self.left_n_list,
            delta_n_min=self.delta_n_min, delta_n_max=self.delta_n_max,
            eta_scale=self.eta_scale, rtol=self.rank_rtol)


@dataclass(frozen=True)
class LowerBoundJob(AffineJob):
    """The grid of a :func:`.sweeps.lower_bound_sweep` (seeds, N, ΔN), shared by Figure 1 right
    and Figure G.3."""

    n_seeds: int
    n_max: int
    n_points: int
    n_reference: int
    delta_n_max: int

    def sweep(self, seed: int, d_z: int, rank_in: int, rank_out: int,
              d_theta_max: int) -> dict[str, Any]:
        return sweeps.lower_bound_sweep(
            seed=seed, d_z=d_z, rank_in=rank_in, rank_out=rank_out, d_theta_max=d_theta_max,
            n_seeds=self.n_seeds, n_max=self.n_max, n_points=self.n_points,
            n_reference=self.n_reference, delta_n_max=self.delta_n_max,
            eta_scale=self.eta_scale, rtol=self.rank_rtol)


@dataclass(frozen=True)
class Corollary2Job(LowerBoundJob):
    """Figure 1 (right): K_in and K_out square (``right_d_z``), both problems strongly convex."""

    entry: ClassVar[str] = "corollary2"

    right_d_z: int
    d_theta_max: int

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return self.sweep(self.draw_seed, self.right_d_z, self.right_d_z, self.right_d_z,
                          self.d_theta_max)


@dataclass(frozen=True)
class FigureG3Job(LowerBoundJob):
    """Figure G.3: neither problem strongly convex (``g3_d_x`` < ``g3_d_z``, rank K_out
    ``g3_rank_out``)."""

    entry: ClassVar[str] = "figure-g3"

    g3_d_z: int
    g3_d_x: int
    g3_rank_out: int
    g3_d_theta_max: int

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return self.sweep(self.draw_seed + 1, self.g3_d_z, self.g3_d_x, self.g3_rank_out,
                          self.g3_d_theta_max)


@dataclass(frozen=True)
class ChecksJob(AffineJob):
    """Lemma A.2, Theorem 1, Corollary 1 and Eq. 12 (U surjective or not) on
    ``n_check_instances`` random instances each."""

    entry: ClassVar[str] = "checks"

    n_check_instances: int
    ift_max_steps: int

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        seed, n, rtol = self.draw_seed, self.n_check_instances, self.rank_rtol
        return {
            "lemma_a2": checks.lemma_a2_check(seed, n),
            "theorem1": checks.theorem1_check(seed, n, rtol=rtol),
            "corollary1": checks.corollary1_check(seed, n, rtol=rtol),
            "ift": checks.ift_check(seed, n, max_steps=self.ift_max_steps, rtol=rtol),
            "ift_not_surjective": checks.ift_check(seed, n, max_steps=self.ift_max_steps,
                                                   surjective_U=False, rtol=rtol),
        }


@dataclass(frozen=True)
class NonnormalJob(AffineJob):
    """Corollary 2 with a non-normal K_out: ``cor2_instances`` instances, E_U estimated by
    ``cor2_draws`` draws."""

    entry: ClassVar[str] = "corollary2-nonnormal"

    cor2_instances: int
    cor2_d_z: int
    cor2_n: int
    cor2_draws: int
    delta_n_max: int

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return checks.corollary2_nonnormal_check(
            seed=self.draw_seed, n_instances=self.cor2_instances, d_z=self.cor2_d_z,
            n=self.cor2_n, delta_n_max=self.delta_n_max, n_draws=self.cor2_draws,
            eta_scale=self.eta_scale, rtol=self.rank_rtol)
