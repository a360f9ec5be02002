"""A small character-level DEQ transformer (after Bai et al. 2019, "Deep Equilibrium Models").

The language model of the DEQ chapter (a small stand-in for the paper's WikiText-103
DEQ-Transformer, Figure 2). For a window of ``T`` characters with embeddings
``e_t + p_t`` (token plus learned position), the hidden sequence ``z ∈ R^{T×d}`` is the fixed point
of one weight-tied, causally masked transformer layer in post-LayerNorm form:

.. math::
    [q, k, v] &= W_{qkv}\\, z + U_{qkv}\\, (e + p)  \\qquad \\text{(input injection)}\\\\
    h &= \\mathrm{LN}_1\\big(z + W_o\\, \\mathrm{Attn}_{\\text{causal}}(q, k, v)\\big)\\\\
    f_\\theta(z, x) &= \\mathrm{LN}_2\\big(h + W_2\\, \\mathrm{ReLU}(W_1 h)\\big)

(the injection of the DEQ-Transformer into the query/key/value projections; its relative positional
attention is replaced by learned absolute positions). The next-character logits are
``W_{out} z*``. The state is handled flat, shape ``(batch, T·d)``, so solvers know nothing of it.

Optional weight normalisation (``w = g · v/‖v‖`` per output row) of every matrix inside
``f_θ``, as in the authors' code, and an estimate of ``‖∂f/∂z‖_F²`` for the Jacobian
regularisation of Bai et al. (2021) (:func:`jacobian_frobenius`).

Every matrix product (the linear layers and attention's two batched products) goes through
:mod:`i2o.models.portable_products`: in portable numerics on CPU, OpenBLAS's AVX2 kernel through
NumPy, forward and backward; otherwise torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrizations

from i2o.models.portable_products import PortableLinear, matmul


@dataclass(frozen=True)
class TransformerConfig:
    """Architecture of :class:`DEQTransformerLM`."""

    vocab_size: int = 65
    context: int = 64           # T, characters per window
    width: int = 64             # d, model width
    heads: int = 4
    ffn_width: int = 128        # hidden width of the feed-forward block
    weight_norm: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context", "width", "heads", "ffn_width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TransformerConfig.{name} must be an integer ≥ 1; got {value!r}")
        if self.width % self.heads:
            raise ValueError(f"width {self.width} must be divisible by heads {self.heads}")

    def state_size(self) -> int:
        return self.context * self.width

    def as_dict(self) -> dict:
        return asdict(self)


def _linear(fan_in: int, fan_out: int, weight_norm: bool, bias: bool = True) -> nn.Module:
    layer = PortableLinear(fan_in, fan_out, bias=bias)
    return parametrizations.weight_norm(layer, dim=0) if weight_norm else layer


class DEQTransformerLM(nn.Module):
    """Embedding → equilibrium of one transformer layer → linear decoder (module docstring).

    The equilibrium is found by the caller; this module provides :meth:`inject` (once per batch),
    :meth:`f` (flat state), :meth:`initial_state` and :meth:`logits`.
    """

    def __init__(self, cfg: TransformerConfig = TransformerConfig()):
        super().__init__()
        self.cfg = cfg
        d = cfg.width
        self.embed = nn.Embedding(cfg.vocab_size, d)
        self.position = nn.Parameter(torch.zeros(cfg.context, d))
        self.inject_qkv = PortableLinear(d, 3 * d, bias=False)
        self.qkv = _linear(d, 3 * d, cfg.weight_norm, bias=False)
        self.out = _linear(d, d, cfg.weight_norm)
        self.ffn_in = _linear(d, cfg.ffn_width, cfg.weight_norm)
        self.ffn_out = _linear(cfg.ffn_width, d, cfg.weight_norm)
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)
        self.decoder = PortableLinear(d, cfg.vocab_size)
        nn.init.normal_(self.embed.weight, 0.0, 0.5)
        nn.init.normal_(self.position, 0.0, 0.1)
        mask = torch.full((cfg.context, cfg.context), float("-inf")).triu(1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def inject(self, tokens: torch.Tensor) -> torch.Tensor:
        """The injection ``U_qkv(e + p)``, shape ``(B, T, 3d)``, for tokens ``(B, T)``."""
        if tokens.dim() != 2 or tokens.shape[1] > self.cfg.context:
            raise ValueError(f"tokens must have shape (batch, T ≤ {self.cfg.context}); "
                             f"got {tuple(tokens.shape)}")
        length = tokens.shape[1]
        return self.inject_qkv(self.embed(tokens) + self.position[:length])

    def f(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The fixed-point map ``f_θ(z, x)`` on flat states ``(B, T·d)``; ``x`` from
        :meth:`inject`."""
        batch, length = x.shape[0], x.shape[1]
        d, heads = self.cfg.width, self.cfg.heads
        seq = z.reshape(batch, length, d)
        q, k, v = (self.qkv(seq) + x).chunk(3, dim=-1)

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(batch, length, heads, d // heads).transpose(1, 2)

        # explicit attention (not F.scaled_dot_product_attention): the Jacobian regulariser
        # differentiates twice, which the fused CPU kernel does not support
        scores = matmul(split(q), split(k).transpose(-1, -2)) / math.sqrt(d // heads)
        weights = torch.softmax(scores + self.causal_mask[:length, :length], dim=-1)
        attended = matmul(weights, split(v)).transpose(1, 2).reshape(batch, length, d)
        h = self.norm1(seq + self.out(attended))
        out = self.norm2(h + self.ffn_out(F.relu(self.ffn_in(h))))
        return out.reshape(batch, length * d)

    def initial_state(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape[0], x.shape[1] * self.cfg.width)

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        """Next-character logits ``(B, T, vocab)`` from a flat state."""
        return self.decoder(z.reshape(z.shape[0], -1, self.cfg.width))

    def token_nll(self, z: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Negative log-likelihood (nats) of every target character, shape ``(B, T)``."""
        logits = self.logits(z)
        return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")


def jacobian_frobenius(fz: torch.Tensor, z: torch.Tensor, samples: int = 1) -> torch.Tensor:
    """Hutchinson estimate of ``‖∂f/∂z‖_F² / dim`` (Bai et al. 2021, Jacobian regularisation).

    ``fz = f(z, x)`` must have been computed from ``z`` with autograd; ``E‖εᵀ J‖² = ‖J‖_F²`` for
    ``ε ~ N(0, I)``. The estimate is differentiable (``create_graph``), so adding it to the loss
    penalises the Jacobian's size, which keeps the fixed point well conditioned.
    """
    total = fz.new_zeros(())
    for _ in range(samples):
        noise = torch.randn_like(fz)
        (vjp,) = torch.autograd.grad(fz, z, noise, create_graph=True, retain_graph=True)
        total = total + vjp.pow(2).sum() / fz.numel()
    return total / samples
