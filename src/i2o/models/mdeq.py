"""The multiscale deep equilibrium classifier (MDEQ, Bai et al. 2020) used for Figure 5.

The network computes ``logits = head(z*)`` where ``z* = f_θ(z*, x)`` is the equilibrium of one
multiscale layer ``f_θ`` (Bai et al. 2020, Eq. 4–6; the paper's inner problem, Section 2):

- a stem (two 3×3 convolutions with batch norm) turns the image into the injection ``x``, fed to
  the highest-resolution branch only;
- ``f_θ`` applies, per branch ``i``, one residual block
  ``h_i = GN₃(ReLU(z_i + GN₂(drop(conv₂(ReLU(GN₁(conv₁ z_i)))) + x_i)))`` (expansion factor in the
  middle), then fuses all branches (stride-2 3×3 convolutions downwards, 1×1 convolution + nearest
  upsampling upwards) and post-processes each sum with ReLU → 1×1 convolution → GroupNorm;
- the head widens each branch with a bottleneck block, strides the high resolutions down, sums,
  projects to ``final_channels``, average-pools and classifies.

Weight normalisation (``w = g · v / ‖v‖`` per output channel) is recomputed and the variational
dropout mask (one mask per sample and channel, the same at every pixel and every iteration) is
drawn once per batch by :meth:`MDEQClassifier.reset`, as in the authors' code; ``f_θ`` then reuses
them at every solver iteration. The state ``z`` is handled flat, shape ``(batch, Σ_i C_i H_i W_i)``,
so that solvers know nothing about its multiscale structure.

``TINY`` is the public ``cls_mdeq_TINY.yaml`` (≈159K parameters); ``CPU_SMALL`` is a reduced
configuration for the CPU profiles, ``MICRO`` one for smoke runs and tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class MDEQConfig:
    """Architecture of a multiscale DEQ classifier (names follow ``cls_mdeq_*.yaml``)."""

    channels: tuple[int, ...] = (24, 24)        # NUM_CHANNELS, one entry per branch
    expansion: int = 5                          # EXPANSION_FACTOR of the residual block
    num_groups: int = 8                         # NUM_GROUPS of the GroupNorms
    dropout: float = 0.25                       # variational dropout rate inside f
    weight_norm: bool = True                    # WNORM
    head_channels: tuple[int, ...] = (8, 16)    # HEAD_CHANNELS (×4 by the bottleneck)
    final_channels: int = 200                   # FINAL_CHANSIZE
    num_classes: int = 10
    pretrain_layers: int = 10                   # NUM_LAYERS of the weight-tied warm-up network
    stem_downsample: int = 0                    # DOWNSAMPLE_TIMES (stride-2 stem convolutions)
    image_size: int = 32

    def __post_init__(self) -> None:
        if len(self.channels) != len(self.head_channels):
            raise ValueError(f"channels {self.channels} and head_channels {self.head_channels} "
                             "must have one entry per branch")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {self.dropout}")
        if self.stem_downsample not in (0, 1, 2):
            raise ValueError(f"stem_downsample must be 0, 1 or 2; got {self.stem_downsample}")
        for c in self.channels:
            if c % self.num_groups or (c * self.expansion) % self.num_groups or c % 2:
                raise ValueError(f"channels {c} (and ×expansion) must be divisible by "
                                 f"num_groups={self.num_groups} and by 2")

    def resolutions(self) -> list[int]:
        top = self.image_size // 2 ** self.stem_downsample
        return [top // 2 ** i for i in range(len(self.channels))]

    def state_size(self) -> int:
        """Length of the flat equilibrium state ``z``: Σ_i C_i · H_i · W_i."""
        return sum(c * r * r for c, r in zip(self.channels, self.resolutions(), strict=True))

    def as_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


#: The public CIFAR-10 TINY configuration used by the paper for Figure 5 (≈159K parameters).
TINY = MDEQConfig()
#: A reduced configuration for the CPU profiles: 16×16 and 8×8 branches, 16 channels, expansion 2,
#: TINY's head, and no dropout. With 160 training images it fits them (the quick profiles of both
#: DEQ chapters: ≥ 90 % training accuracy); with 1,000 images and 240 steps it underfitted
#: (training accuracy ≈ 0.4), and dropout 0.25 only slowed it further (test accuracy 33.4 % with
#: it, 35.6 % without, same seed; measured while choosing this configuration).
CPU_SMALL = MDEQConfig(channels=(16, 16), expansion=2, num_groups=4, head_channels=(8, 16),
                       final_channels=200, stem_downsample=1, dropout=0.0)
#: A minute configuration (8×8 and 4×4 branches, 8 channels) for smoke runs and tests.
MICRO = MDEQConfig(channels=(8, 8), expansion=2, num_groups=4, head_channels=(2, 4),
                   final_channels=16, stem_downsample=2)
CONFIGS: dict[str, MDEQConfig] = {"tiny": TINY, "cpu_small": CPU_SMALL, "micro": MICRO}


def config(name: str) -> MDEQConfig:
    if name not in CONFIGS:
        raise ValueError(f"unknown MDEQ configuration {name!r}; allowed: {', '.join(CONFIGS)}")
    return CONFIGS[name]


class NormedConv2d(nn.Module):
    """A bias-free convolution with optional weight normalisation ``w = g · v / ‖v‖`` (dim 0).

    The effective weight is computed by :meth:`refresh` (once per batch) and then reused, so that
    a solver running many iterations does not renormalise at every call.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, weight_norm: bool):
        super().__init__()
        conv = nn.Conv2d(in_channels, out_channels, kernel_size, bias=False)  # default init of v
        self.padding = kernel_size // 2
        self.weight_norm = weight_norm
        self.v = nn.Parameter(conv.weight.detach().clone())
        if weight_norm:
            self.g = nn.Parameter(self.v.detach().flatten(1).norm(dim=1))
        self._weight: torch.Tensor | None = None

    def refresh(self) -> None:
        if self.weight_norm:
            norm = self.v.flatten(1).norm(dim=1)
            self._weight = self.v * (self.g / norm).view(-1, 1, 1, 1)
        else:
            self._weight = self.v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._weight is None:
            raise RuntimeError("call refresh() (MDEQClassifier.reset) before using the layer")
        return F.conv2d(x, self._weight, padding=self.padding)


class VariationalDropout2d(nn.Module):
    """Dropout with one mask per (sample, channel), shared by every pixel and every iteration."""

    def __init__(self, rate: float):
        super().__init__()
        self.rate = rate
        self.mask: torch.Tensor | None = None

    def reset(self, batch: int, channels: int, like: torch.Tensor) -> None:
        if self.training and self.rate > 0:
            keep = torch.empty(batch, channels, 1, 1, dtype=like.dtype, device=like.device)
            self.mask = keep.bernoulli_(1 - self.rate) / (1 - self.rate)
        else:
            self.mask = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.rate == 0:
            return x
        if self.mask is None or self.mask.shape[0] != x.shape[0]:
            raise RuntimeError("dropout mask not drawn for this batch: call reset() first")
        return x * self.mask


class ResidualBlock(nn.Module):
    """``GN₃(ReLU(z + GN₂(drop(conv₂ ReLU(GN₁ conv₁ z)) + x)))``; conv₁ widens by ``expansion``."""

    def __init__(self, channels: int, cfg: MDEQConfig):
        super().__init__()
        inner = channels * cfg.expansion
        self.conv1 = NormedConv2d(channels, inner, 3, cfg.weight_norm)
        self.gn1 = nn.GroupNorm(cfg.num_groups, inner)
        self.conv2 = NormedConv2d(inner, channels, 3, cfg.weight_norm)
        self.gn2 = nn.GroupNorm(cfg.num_groups, channels)
        self.gn3 = nn.GroupNorm(cfg.num_groups, channels)
        self.drop = VariationalDropout2d(cfg.dropout)
        self.channels = channels

    def forward(self, z: torch.Tensor, injection: torch.Tensor | None) -> torch.Tensor:
        out = F.relu(self.gn1(self.conv1(z)))
        out = self.drop(self.conv2(out))
        if injection is not None:
            out = out + injection
        out = self.gn2(out)
        return self.gn3(F.relu(out + z))


def _downsample(c_in: int, c_out: int, steps: int, groups: int) -> nn.Sequential:
    """``steps`` stride-2 3×3 convolutions with GroupNorm (ReLU between them)."""
    layers: list[nn.Module] = []
    for k in range(steps):
        last = k == steps - 1
        out = c_out if last else c_in
        layers += [nn.Conv2d(c_in, out, 3, stride=2, padding=1, bias=False),
                   nn.GroupNorm(groups, out)]
        if not last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _upsample(c_in: int, c_out: int, steps: int, groups: int) -> nn.Sequential:
    """1×1 convolution, GroupNorm, nearest upsampling by 2^steps."""
    return nn.Sequential(nn.Conv2d(c_in, c_out, 1, bias=False), nn.GroupNorm(groups, c_out),
                         nn.Upsample(scale_factor=2 ** steps, mode="nearest"))


class MultiscaleLayer(nn.Module):
    """The DEQ layer ``f_θ(z, x)`` acting on the list of branch states (Bai et al. 2020, Fig. 1)."""

    def __init__(self, cfg: MDEQConfig):
        super().__init__()
        n = len(cfg.channels)
        self.blocks = nn.ModuleList(ResidualBlock(c, cfg) for c in cfg.channels)
        self.fuse = nn.ModuleList()
        for i in range(n):
            row = nn.ModuleList()
            for j in range(n):
                if i == j:
                    row.append(nn.Identity())
                elif j < i:
                    row.append(_downsample(cfg.channels[j], cfg.channels[i], i - j, cfg.num_groups))
                else:
                    row.append(_upsample(cfg.channels[j], cfg.channels[i], j - i, cfg.num_groups))
            self.fuse.append(row)
        self.post_conv = nn.ModuleList(NormedConv2d(c, c, 1, cfg.weight_norm) for c in cfg.channels)
        self.post_norm = nn.ModuleList(nn.GroupNorm(cfg.num_groups // 2, c, affine=False)
                                       for c in cfg.channels)

    def reset(self, batch: int, like: torch.Tensor) -> None:
        for block, post in zip(self.blocks, self.post_conv, strict=True):
            block.conv1.refresh()
            block.conv2.refresh()
            block.drop.reset(batch, block.channels, like)
            post.refresh()

    def forward(self, zs: list[torch.Tensor], injection: torch.Tensor) -> list[torch.Tensor]:
        hs = [block(z, injection if i == 0 else None)
              for i, (block, z) in enumerate(zip(self.blocks, zs, strict=True))]
        out = []
        for i in range(len(hs)):
            total = sum(self.fuse[i][j](h) for j, h in enumerate(hs))
            out.append(self.post_norm[i](self.post_conv[i](F.relu(total))))
        return out


class Bottleneck(nn.Module):
    """The head's bottleneck block: 1×1 → 3×3 → 1×1 (×4 channels), non-affine batch norms."""

    expansion = 4

    def __init__(self, c_in: int, width: int):
        super().__init__()
        c_out = width * self.expansion
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width, affine=False)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width, affine=False)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out, affine=False)
        self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + self.shortcut(x))


class ClassificationHead(nn.Module):
    """Widen each branch, stride the finest branch down onto the coarsest, pool, classify."""

    def __init__(self, cfg: MDEQConfig):
        super().__init__()
        widths = [w * Bottleneck.expansion for w in cfg.head_channels]
        self.widen = nn.ModuleList(
            Bottleneck(c, w) for c, w in zip(cfg.channels, cfg.head_channels, strict=True))
        self.down = nn.ModuleList(
            nn.Sequential(nn.Conv2d(widths[i], widths[i + 1], 3, stride=2, padding=1),
                          nn.BatchNorm2d(widths[i + 1]), nn.ReLU())
            for i in range(len(widths) - 1))
        self.final = nn.Sequential(nn.Conv2d(widths[-1], cfg.final_channels, 1),
                                   nn.BatchNorm2d(cfg.final_channels), nn.ReLU())
        self.classifier = nn.Linear(cfg.final_channels, cfg.num_classes)

    def forward(self, zs: list[torch.Tensor]) -> torch.Tensor:
        y = self.widen[0](zs[0])
        for i, down in enumerate(self.down):
            y = self.widen[i + 1](zs[i + 1]) + down(y)
        y = self.final(y).mean(dim=(2, 3))
        return self.classifier(y)


class MDEQClassifier(nn.Module):
    """Stem → equilibrium of :class:`MultiscaleLayer` → :class:`ClassificationHead`.

    The equilibrium itself is found by the caller (a solver from :mod:`i2o.deq`, or the unrolled
    warm-up of :meth:`unrolled_state`); this module provides the pieces:
    :meth:`reset` (once per batch), :meth:`inject`, :meth:`f` (flat state),
    :meth:`initial_state`, :meth:`classify`.
    """

    def __init__(self, cfg: MDEQConfig = TINY):
        super().__init__()
        self.cfg = cfg
        c0 = cfg.channels[0]
        stem: list[nn.Module] = []
        for k in range(2):
            stride = 2 if cfg.stem_downsample > k else 1
            stem += [nn.Conv2d(3 if k == 0 else c0, c0, 3, stride=stride, padding=1, bias=False),
                     nn.BatchNorm2d(c0), nn.ReLU()]
        self.stem = nn.Sequential(*stem)
        self.layer = MultiscaleLayer(cfg)
        self.head = ClassificationHead(cfg)
        self._shapes = [(c, r, r) for c, r in zip(cfg.channels, cfg.resolutions(), strict=True)]
        self._init_weights()
        self.to(memory_format=torch.channels_last)

    def _init_weights(self) -> None:
        """As the authors' code: plain convolutions N(0, 0.01); weight-normed ones keep theirs."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.normal_(module.weight, 0.0, 0.01)
                if module.bias is not None:
                    nn.init.normal_(module.bias, 0.0, 0.01)
            elif isinstance(module, nn.BatchNorm2d) and module.affine:
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    # -- flat state ---------------------------------------------------------------------------
    def split(self, z: torch.Tensor) -> list[torch.Tensor]:
        """Flat state (B, D) → list of branch tensors (B, C_i, H_i, W_i), as channels-last views.

        The flat layout of each branch is (H, W, C): the views cost no copy and every layer of
        ``f`` then runs on channels-last tensors, the fast path of oneDNN convolutions on CPU.
        """
        sizes = [c * h * w for c, h, w in self._shapes]
        return [part.reshape(z.shape[0], h, w, c).permute(0, 3, 1, 2)
                for part, (c, h, w) in zip(torch.split(z, sizes, dim=1), self._shapes, strict=True)]

    @staticmethod
    def join(zs: list[torch.Tensor]) -> torch.Tensor:
        """Inverse of :meth:`split` (no copy for channels-last inputs but the concatenation)."""
        return torch.cat([z.permute(0, 2, 3, 1).reshape(z.shape[0], -1) for z in zs], dim=1)

    # -- the pieces of the DEQ ------------------------------------------------------------------
    def reset(self, batch: int, like: torch.Tensor) -> None:
        """Recompute the weight-normalised weights and draw this batch's dropout masks."""
        self.layer.reset(batch, like)

    def inject(self, images: torch.Tensor) -> torch.Tensor:
        """The input injection ``x`` (fed to the finest branch), shape (B, C_0, H_0, W_0)."""
        return self.stem(images.contiguous(memory_format=torch.channels_last))

    def f(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The fixed-point map ``f_θ(z, x)`` on flat states."""
        return self.join(self.layer(self.split(z), x))

    def initial_state(self, x: torch.Tensor) -> torch.Tensor:
        """``z_0 = 0``."""
        return x.new_zeros(x.shape[0], self.cfg.state_size())

    def classify(self, z: torch.Tensor) -> torch.Tensor:
        return self.head(self.split(z))

    def unrolled_state(self, x: torch.Tensor, layers: int | None = None) -> torch.Tensor:
        """``f_θ`` applied ``layers`` times from zero: the weight-tied warm-up network."""
        z = self.initial_state(x)
        for _ in range(self.cfg.pretrain_layers if layers is None else layers):
            z = self.f(z, x)
        return z

    def prepare(self, images: torch.Tensor) -> tuple[Callable, torch.Tensor, torch.Tensor]:
        """``(f, x, z0)`` for a batch: resets masks/weights, computes the injection."""
        x = self.inject(images)
        self.reset(images.shape[0], x)
        return self.f, x, self.initial_state(x)
