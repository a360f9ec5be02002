"""DEQ reconstruction networks for an imaging inverse problem: direct form vs ELDER gradient form.

The inverse-problem task of the DEQ chapter (the paper's Figure G.4, after Zou et al. 2023, whose
ELDER networks the paper evaluates on single-image super-resolution). A clean image ``x`` is
observed through a linear operator ``A`` with noise, ``y = A x + σ ε``, and reconstructed as the
fixed point of a gradient step on a data term plus a learned prior term:

.. math::
    f_\\theta(z, y) = z - \\gamma \\big( A^\\top (A z - y) + \\tau\\, R_\\theta(z) \\big).

The two variants differ only in ``R_θ`` (Zou et al. 2023, Section 3):

- ``"deq"`` — the *direct* form, ``R_θ(z) = z - D_θ(z)`` with ``D_θ`` a small CNN (a learned
  denoiser, as in DEQ-RED; the prior's "gradient" is any network output);
- ``"elder"`` — the *gradient* form, ``R_θ(z) = ∇_z h_θ(z)`` with the explicit regulariser
  ``h_θ(z) = ½ ‖z − D_θ(z)‖²`` (per image), differentiated by autograd. Each iteration is then a
  true gradient step on ``½‖Az − y‖² + τ h_θ(z)``: the fixed point is a stationary point of an
  explicit objective.

``γ`` and ``τ`` are learned (kept positive through a softplus). ``D_θ`` is the same network in both
variants, so they have the same parameters. The iteration starts from ``z_0 = A⁺ y``.

Operators (:class:`Operator`): ``"sr2"``, ×2 super-resolution (``A`` = 2×2 average pooling,
``A⁺`` = nearest upsampling, ``A^⊤ = A⁺ / 4``), and ``"denoise"`` (``A = I``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

VARIANTS = ("deq", "elder")
OPERATORS = ("sr2", "denoise")


@dataclass(frozen=True)
class InverseConfig:
    """Architecture and forward model of :class:`ReconstructionDEQ`."""

    variant: str = "deq"        # "deq" (direct form) or "elder" (gradient of a regulariser)
    operator: str = "sr2"       # "sr2" (×2 super-resolution) or "denoise"
    noise: float = 0.01         # σ of the measurement noise (images in [0, 1])
    channels: int = 3           # image channels (3: RGB)
    width: int = 32             # hidden channels of D_θ
    depth: int = 3              # convolutions of D_θ
    step: float = 1.0           # initial γ
    weight: float = 0.5         # initial τ

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}; got {self.variant!r}")
        if self.operator not in OPERATORS:
            raise ValueError(f"operator must be one of {OPERATORS}; got {self.operator!r}")
        for name in ("channels", "width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"InverseConfig.{name} must be an integer ≥ 1; got {value!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 2:
            raise ValueError(f"InverseConfig.depth must be an integer ≥ 2; got {self.depth!r}")
        if not (self.noise >= 0 and self.step > 0 and self.weight > 0):
            raise ValueError(f"need noise ≥ 0, step > 0, weight > 0; got {self.noise}, "
                             f"{self.step}, {self.weight}")

    def as_dict(self) -> dict:
        return asdict(self)


class Operator:
    """The measurement operator ``A`` with its adjoint and a right inverse ``A⁺`` (``A A⁺ = I``)."""

    def __init__(self, name: str):
        if name not in OPERATORS:
            raise ValueError(f"operator must be one of {OPERATORS}; got {name!r}")
        self.name = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, 2) if self.name == "sr2" else x

    def adjoint(self, y: torch.Tensor) -> torch.Tensor:
        if self.name == "sr2":
            return F.interpolate(y, scale_factor=2, mode="nearest") / 4.0
        return y

    def pseudo_inverse(self, y: torch.Tensor) -> torch.Tensor:
        if self.name == "sr2":
            return F.interpolate(y, scale_factor=2, mode="nearest")
        return y

    def measure(self, x: torch.Tensor, noise: float,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """``y = A x + σ ε`` (``ε`` from ``generator`` so that test measurements are fixed)."""
        clean = self.forward(x)
        if noise == 0:
            return clean
        eps = torch.randn(clean.shape, generator=generator, dtype=clean.dtype)
        return clean + noise * eps.to(clean.device)


def _inverse_softplus(value: float) -> float:
    return math.log(math.expm1(value))


class Denoiser(nn.Module):
    """``D_θ``: ``depth`` 3×3 convolutions with ELU between them (smooth, so that the ELDER
    regulariser has a well-defined gradient and Hessian). No skip connection: at initialisation
    ``D_θ`` is small, ``R_θ(z) ≈ z`` and ``f_θ`` is a contraction (factor about ``1 − γτ`` on the
    null space of ``A``), so the DEQ starts well posed."""

    def __init__(self, channels: int, width: int, depth: int):
        super().__init__()
        sizes = [channels] + [width] * (depth - 1) + [channels]
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, padding=1)
                                   for a, b in zip(sizes[:-1], sizes[1:], strict=True))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = z
        for i, conv in enumerate(self.convs):
            out = conv(out)
            if i < len(self.convs) - 1:
                out = F.elu(out)
        return out


class ReconstructionDEQ(nn.Module):
    """The fixed-point map of the module docstring on flat states ``(B, C·H·W)``.

    Use: ``x = model.inject(y)`` (the measurement, kept as the injection), ``z0 =
    model.initial_state(x)``, then any solver on ``model.f(·, x)``; :meth:`image` reshapes a state.
    Being convolutional, a network trained on small crops applies to whole images.
    """

    def __init__(self, cfg: InverseConfig = InverseConfig()):
        super().__init__()
        self.cfg = cfg
        self.operator = Operator(cfg.operator)
        self.denoiser = Denoiser(cfg.channels, cfg.width, cfg.depth)
        self.raw_step = nn.Parameter(torch.tensor(_inverse_softplus(cfg.step)))
        self.raw_weight = nn.Parameter(torch.tensor(_inverse_softplus(cfg.weight)))

    @property
    def step(self) -> torch.Tensor:
        return F.softplus(self.raw_step)

    @property
    def weight(self) -> torch.Tensor:
        return F.softplus(self.raw_weight)

    def inject(self, y: torch.Tensor) -> torch.Tensor:
        """The measurement ``y`` itself is the injection (checked here)."""
        if y.dim() != 4 or y.shape[1] != self.cfg.channels:
            raise ValueError(f"measurements must have shape (B, {self.cfg.channels}, h, w); got "
                             f"{tuple(y.shape)}")
        return y

    def image(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """A flat state as a batch of images, their size given by the measurement ``y``."""
        scale = 2 if self.cfg.operator == "sr2" else 1
        return z.reshape(z.shape[0], y.shape[1], y.shape[2] * scale, y.shape[3] * scale)

    def initial_state(self, y: torch.Tensor) -> torch.Tensor:
        return self.operator.pseudo_inverse(y).flatten(1)

    def prior_gradient(self, img: torch.Tensor) -> torch.Tensor:
        """``R_θ(z)``: ``z − D_θ(z)`` (direct) or ``∇_z ½‖z − D_θ(z)‖²`` (ELDER)."""
        if self.cfg.variant == "deq":
            return img - self.denoiser(img)
        recording = torch.is_grad_enabled()
        with torch.enable_grad():
            point = img if (recording and img.requires_grad) else img.detach().requires_grad_()
            energy = 0.5 * (point - self.denoiser(point)).pow(2).sum()
            (gradient,) = torch.autograd.grad(energy, point, create_graph=recording)
        return gradient

    def energy(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-image objective ``½‖Az − y‖² + τ h_θ(z)`` of the ELDER variant (its fixed points are
        this objective's stationary points); for ``"deq"`` it is only the data term plus τ h."""
        img = self.image(z, y)
        data = 0.5 * (self.operator.forward(img) - y).pow(2).flatten(1).sum(1)
        prior = 0.5 * (img - self.denoiser(img)).pow(2).flatten(1).sum(1)
        return data + self.weight * prior

    def f(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``z − γ (Aᵀ(Az − y) + τ R_θ(z))`` on flat states; ``y`` from :meth:`inject`."""
        img = self.image(z, y)
        data = self.operator.adjoint(self.operator.forward(img) - y)
        update = data + self.weight * self.prior_gradient(img)
        return (img - self.step * update).flatten(1)


def psnr(estimate: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-image PSNR in dB for images in [0, 1], the estimate clipped to [0, 1] first."""
    mse = (estimate.clamp(0, 1) - target).pow(2).flatten(1).mean(1)
    return -10.0 * torch.log10(mse.clamp_min(1e-12))
