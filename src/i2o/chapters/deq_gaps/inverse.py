"""The imaging inverse problem (the paper's Figure G.4): DEQ vs ELDER reconstruction of CIFAR-10.

Clean CIFAR-10 images in ``[0, 1]`` are observed as ``y = A x + σ ε`` (×2 super-resolution or
denoising, :mod:`i2o.models.inverse`) and reconstructed by the fixed point of a gradient step on a
data term and a learned prior, in its direct (``"deq"``) or gradient (``"elder"``, Zou et al.
2023) form. Both are trained with a fixed number ``N`` of fixed-point iterations and implicit
(IFT) gradients on the mean squared error of ``f(z_N)``, on random ``crop × crop`` patches of the
training images (the networks are convolutional: evaluation is on whole 32×32 test images, with
measurement noise drawn once from a fixed seed). The metric is the negative PSNR (dB, lower is
better) of ``f(z_N)``, per image.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from i2o.base import replicates, runtime
from i2o.chapters.deq_gaps import FIGURE
from i2o.chapters.deq_gaps.jobs import check_reference, history_arrays
from i2o.compute.job import Job
from i2o.data.cifar10 import load_cifar10
from i2o.deq import DEQ, Probe, SolverSpec, sweep_iterations
from i2o.deq.reference import reference_solve
from i2o.models.inverse import InverseConfig, ReconstructionDEQ, psnr
from i2o.models.parameters import count_parameters
from i2o.train.loop import Plan, train_steps
from i2o.train.seeding import seed_everything

BACKWARDS = ("ift", "unrolled")
#: the solver of training and of the sweep: fixed-point iteration (undamped)
METHOD = "fixed_point"


@dataclass(frozen=True, kw_only=True)
class InverseJob(Job):
    """One reconstruction network trained on patches of ``train_size`` CIFAR-10 training images
    and swept on ``eval_size`` whole test images and ``eval_size`` whole training images (the
    jobs ``inverse-deq`` and ``inverse-elder``)."""

    figure: ClassVar[str] = FIGURE

    variant: str = "deq"              # "deq" or "elder"
    operator: str = "sr2"
    noise: float = 0.01
    width: int = 32
    depth: int = 3
    #: training's solver: N = ``forward_spec.max_iter`` fixed-point iterations, ``tol = 0``
    forward_spec: SolverSpec = SolverSpec(method=METHOD, max_iter=10, tol=0.0)
    backward: str = "ift"
    #: the IFT adjoint's solver
    backward_spec: SolverSpec = SolverSpec(method=METHOD, max_iter=20, tol=0.0)
    steps: int = 300
    batch_size: int = 32
    crop: int = 16
    lr: float = 3e-3
    seed: int = 0
    grid: tuple[int, ...]             # the swept counts N + ΔN
    train_size: int                   # training images the patches are cut from
    eval_size: int                    # whole test images evaluated, and as many training images
    reference_iters: int = 0          # cap of the converged reference solve on test data (0: none)
    replicate: int = 0                # redraws the measurement noise of the evaluation

    def __post_init__(self) -> None:
        self.config()  # validates variant, operator, sizes
        if self.backward not in BACKWARDS:
            raise ValueError(f"backward must be one of {BACKWARDS}; got {self.backward!r}")
        if self.crop < 4 or self.crop % 2 or self.crop > 32:
            raise ValueError(f"crop must be an even integer in [4, 32]; got {self.crop}")
        for name in ("forward_spec", "backward_spec"):
            if not isinstance(getattr(self, name), SolverSpec):
                raise TypeError(f"{name} must be a SolverSpec; got "
                                f"{type(getattr(self, name)).__name__}")
        check_reference(self.reference_iters, self.train_iters)

    @property
    def name(self) -> str:
        return f"inverse-{self.variant}"

    @property
    def train_iters(self) -> int:
        """``N``: the forward solver's iterations in training."""
        return self.forward_spec.max_iter

    def config(self) -> InverseConfig:
        return InverseConfig(variant=self.variant, operator=self.operator, noise=self.noise,
                             width=self.width, depth=self.depth)

    def deq(self) -> DEQ:
        return DEQ(forward=self.forward_spec, backward=self.backward,
                   backward_spec=self.backward_spec, output="fz")

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        """Train the network on patches of the first ``train_size`` CIFAR-10 training images;
        sweep it, with the solver it was trained with, on the first ``eval_size`` whole test
        images and ``eval_size`` whole training images, the measurement noise drawn once per
        split (:data:`NOISE_SEED`, redrawn by the replicate)."""
        train, test = load_cifar10("train"), load_cifar10("test")
        images = to_unit(train.images[:self.train_size])
        model, history = train_reconstruction(self, images, self.checkpoints(), progress)
        spec = self.deq().forward_spec
        out: dict[str, Any] = {"history": history_arrays(history),
                               "n_parameters": count_parameters(model)}
        for split, clean in (("test", to_unit(test.images[:self.eval_size])),
                             ("train", images[:self.eval_size])):
            y = noisy_measurements(model, clean, self.noise,
                                   seed=replicates.seed(NOISE_SEED, self.replicate))
            out[split] = sweep_iterations(inverse_probes(model, clean, y), self.grid, spec)
            out[f"{split}_baseline_neg_psnr"] = baseline_neg_psnr(model, clean, y)
            if split == "test" and self.reference_iters:
                out["test_reference"] = reference_solve(inverse_probes(model, clean, y), spec,
                                                        self.reference_iters)
        return out


def to_unit(images: np.ndarray) -> torch.Tensor:
    """``uint8`` images (n, 32, 32, 3) → float tensor (n, 3, 32, 32) in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0).permute(0, 3, 1, 2)


def train_reconstruction(job: InverseJob, images: torch.Tensor,
                         checkpoint_dir: Path | str | None = None,
                         progress: bool | None = None
                         ) -> tuple[ReconstructionDEQ, dict[str, list[float]]]:
    """Seed, build and train (or resume) the network of ``job`` on ``images`` (n, 3, 32, 32)."""
    seed_everything(job.seed)
    device = runtime.device()
    model = ReconstructionDEQ(job.config()).to(device)
    deq = job.deq()
    n, _, height, width = images.shape

    def step_loss(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        generator = torch.Generator().manual_seed(job.seed * 1_000_003 + step)
        index = torch.randint(0, n, (job.batch_size,), generator=generator)
        top = torch.randint(0, height - job.crop + 1, (1,), generator=generator).item()
        left = torch.randint(0, width - job.crop + 1, (1,), generator=generator).item()
        clean = images[index, :, top:top + job.crop, left:left + job.crop].to(device)
        y = model.operator.measure(clean, job.noise, generator)
        x = model.inject(y)
        out, stats = deq(model.f, x, model.initial_state(y))
        loss = (model.image(out, y) - clean).pow(2).mean()
        return loss, {"residual_rel": stats.forward.residual_rel,
                      "step_size": float(model.step.detach()),
                      "prior_weight": float(model.weight.detach())}

    plan = Plan(steps=job.steps, lr=job.lr, seed=job.seed)
    history = train_steps(model, step_loss, plan, checkpoint_dir, progress, job.variant)
    return model, history


#: The seed of the measurement noise of the evaluation images (replicate 0).
NOISE_SEED = 12345


def noisy_measurements(model: ReconstructionDEQ, images: torch.Tensor, noise: float,
                      seed: int = NOISE_SEED) -> torch.Tensor:
    """``y = A x + σ ε`` for every image at once, the noise drawn from ``seed`` (the same for
    every model and every ``N``)."""
    return model.operator.measure(images, noise, torch.Generator().manual_seed(seed))


def inverse_probes(model: ReconstructionDEQ, images: torch.Tensor, measurements: torch.Tensor,
                   batch_size: int = 100) -> Iterator[Probe]:
    """Probes over ``images`` and their ``measurements`` (:func:`noisy_measurements`). Metrics per
    image: ``neg_psnr`` (dB) and ``mse`` of ``f(z)`` clipped to [0, 1]."""
    device = next(model.parameters()).device
    model.eval()
    for start in range(0, images.shape[0], batch_size):
        clean = images[start:start + batch_size].to(device)
        y = measurements[start:start + batch_size].to(device)
        x = model.inject(y)

        def score(z: torch.Tensor, fz: torch.Tensor, clean=clean, y=y) -> dict[str, torch.Tensor]:
            estimate = model.image(fz, y)
            return {"neg_psnr": -psnr(estimate, clean),
                    "mse": (estimate.clamp(0, 1) - clean).pow(2).flatten(1).mean(1)}

        yield Probe(g=lambda z, x=x: model.f(z, x), z0=model.initial_state(y), score=score)


def baseline_neg_psnr(model: ReconstructionDEQ, images: torch.Tensor,
                      measurements: torch.Tensor) -> float:
    """Mean negative PSNR of the initial guess ``A⁺ y`` (no learning at all), for reference."""
    return float((-psnr(model.operator.pseudo_inverse(measurements), images)).mean())
