r"""Float matrix products that are fast and portable: in portable numerics, on CPU, every product
(forward and backward) runs in OpenBLAS's AVX2 kernel through NumPy; otherwise in torch.

The products, for ``x`` of shape ``(..., n)``, ``W`` of shape ``(m, n)``, ``b`` of shape ``(m,)``
and, after the leading positions of ``x`` and of the incoming gradient are flattened into rows,
``X ∈ R^{M×n}`` and ``G ∈ R^{M×m}``:

.. math::
    \mathrm{linear}(x, W, b) = x W^\top + b, \qquad
    \frac{\partial}{\partial X} = G W, \quad \frac{\partial}{\partial W} = G^\top X, \quad
    \frac{\partial}{\partial b} = \textstyle\sum_{\text{rows}} G

(the weight's gradient sums over every leading position in one product), and, for operands of at
least two dimensions whose leading (batch) dimensions broadcast as in :func:`torch.matmul`,

.. math::
    \mathrm{matmul}(A, B) = A B \text{ per matrix}, \qquad
    \frac{\partial}{\partial A} = G B^\top, \quad \frac{\partial}{\partial B} = A^\top G,

each gradient summed over the batch dimensions its operand was broadcast along.

Why. Portable mode (:mod:`i2o.base.runtime`) pins MKL, torch's BLAS, to its compatible branch, the
only one MKL keeps identical across CPU vendors, and that branch runs in SSE2: the DEQ transformer's
training step costs about twice its native time. NumPy's OpenBLAS is pinned to its Haswell kernel
(``OPENBLAS_CORETYPE``: AVX2 and FMA), whose micro-kernels and blocking sizes are constants of its
code rather than read from the CPU, and to a fixed thread count (``OPENBLAS_NUM_THREADS``,
:func:`i2o.base.runtime.thread_env`). So in portable mode, on an x86-64 CPU, for CPU tensors of one
float dtype (float32 or float64), :func:`linear` and :func:`matmul` compute through
:func:`numpy.matmul` on views of the tensors' memory (no copy: a transposed operand is passed to
BLAS with its transpose flag; only an operand no BLAS call can read in place, with no unit stride
in its last two dimensions or a stride smaller than its extent, is copied first), writing into a
new tensor's memory. In native mode, for CUDA tensors and other dtypes they are
:func:`torch.nn.functional.linear` and :func:`torch.matmul`.

What the bits depend on: the operands' shapes (OpenBLAS computes the tiles at a matrix's edges with
other code, so one row's bits can change with the number of rows) and OpenBLAS's thread count (its
threads split the output, which moves those edges); not the CPU, as long as it has AVX2 and FMA
(checked across vendors with the ``numpy_products`` probe of :mod:`i2o.provenance.probes`). The bias
is added after the product, one rounding per element (and, where the weight needs a gradient, the
weight gradient's node adds an exact zero).

Each backward is written with :func:`matmul` itself, so a gradient can be differentiated again
(``create_graph=True``: the Jacobian regulariser
:func:`i2o.models.deq_transformer.jacobian_frobenius`) through the same path. A linear layer's
weight gradient is a node of its own, computed only when autograd asks for it (torch's own
``addmm`` backward skips it likewise): the IFT adjoint solve of :mod:`i2o.deq` differentiates
``f`` with respect to the state alone, at every step.

:class:`PortableLinear` is :class:`torch.nn.Linear` computing with :func:`linear` (so weight-norm
parametrisations of its ``weight`` still apply). :func:`use_numpy_products` is a switch for
benchmarks only (timing torch's own products in the same run); it is no numerics parameter and
no computation of the book calls it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from i2o.base import runtime

#: The dtypes the NumPy path computes (torch's others go to torch).
NUMPY_DTYPES = (torch.float32, torch.float64)

_numpy_products_allowed = True


def use_numpy_products(enabled: bool) -> None:
    """Benchmarks only: ``False`` sends every product to torch even in portable mode (MKL's
    compatible branch under the portable pins); ``True`` (the default) restores the rule of
    :func:`numpy_path`."""
    global _numpy_products_allowed
    _numpy_products_allowed = bool(enabled)


def numpy_path(*tensors: torch.Tensor) -> bool:
    """Whether products of ``tensors`` go through NumPy: portable mode on x86-64 (where OpenBLAS
    is pinned), every tensor on the CPU, all of one dtype among :data:`NUMPY_DTYPES`."""
    if not (_numpy_products_allowed and runtime.numerics_mode() == "portable"
            and runtime.is_x86_64()):
        return False
    dtype = tensors[0].dtype
    return dtype in NUMPY_DTYPES and all(t.device.type == "cpu" and t.dtype == dtype
                                         for t in tensors)


def _blas_readable(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when BLAS can read each of its matrices (last two dimensions) in place: one
    of their strides 1 and the other at least the extent it steps over; else a contiguous copy."""
    rows, cols = t.shape[-2:]
    row_stride, col_stride = t.stride()[-2:]
    if (col_stride == 1 and row_stride >= max(cols, 1)) or \
            (row_stride == 1 and col_stride >= max(rows, 1)):
        return t
    return t.contiguous()


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    """A NumPy view of ``t``'s memory (no copy)."""
    return t.detach().resolve_neg().numpy()


def _numpy_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` (batch dimensions broadcast) by :func:`numpy.matmul`, into a new tensor."""
    a, b = _blas_readable(a), _blas_readable(b)
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = torch.empty((*batch, a.shape[-2], b.shape[-1]), dtype=a.dtype)
    np.matmul(_as_numpy(a), _as_numpy(b), out=out.numpy())
    return out


class _NumpyMatmul(torch.autograd.Function):
    """``A B`` by NumPy; backward ``G Bᵀ`` and ``Aᵀ G`` by :func:`matmul`, summed over the
    batch dimensions each operand was broadcast along."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return _numpy_product(a, b)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = matmul(grad, b.mT).sum_to_size(a.shape)
        if ctx.needs_input_grad[1]:
            grad_b = matmul(a.mT, grad).sum_to_size(b.shape)
        return grad_a, grad_b


class _NumpyLinear(torch.autograd.Function):
    """``X Wᵀ + b`` on the flattened rows ``X`` of ``x`` by NumPy; backward ``G W`` by
    :func:`matmul` and ``Σ_rows G``.

    Its inputs are ``x`` and ``b``; the weight is handed over in a tuple, which autograd does not
    track, so that autograd runs this node only when the gradient of ``x`` or ``b`` is asked for
    (the weight's is :class:`_WeightGradient`'s). ``G W`` still uses the weight autograd knows, so
    that it can be differentiated again.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, bias: torch.Tensor | None,
                weight: tuple[torch.Tensor]) -> torch.Tensor:
        (ctx.weight,) = weight
        ctx.input_shape = x.shape
        out = _numpy_product(x.reshape(-1, x.shape[-1]), ctx.weight.mT)
        if bias is not None:
            out.add_(bias)
        return out.reshape(*x.shape[:-1], ctx.weight.shape[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        rows = grad.reshape(-1, grad.shape[-1])
        grad_x = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = matmul(rows, ctx.weight).reshape(ctx.input_shape)
        if ctx.needs_input_grad[1]:
            grad_bias = rows.sum(dim=0)
        return grad_x, grad_bias, None


class _WeightGradient(torch.autograd.Function):
    """Zero in forward (added to :class:`_NumpyLinear`'s output); backward the weight's gradient
    ``Gᵀ X`` by :func:`matmul`, every row in one product.

    A node of its own, whose only input is the weight (the rows ``X`` are handed over in a tuple,
    which autograd does not track), so that autograd computes ``Gᵀ X`` only when the weight's
    gradient is asked for: an IFT adjoint solve asks for the state's alone, at every step. ``X``
    is the tensor autograd knows, so that ``Gᵀ X`` can be differentiated again.
    """

    @staticmethod
    def forward(ctx, weight: torch.Tensor, rows: tuple[torch.Tensor],
                shape: torch.Size) -> torch.Tensor:
        (ctx.rows,) = rows
        return weight.new_zeros(()).expand(shape)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return matmul(grad.reshape(-1, grad.shape[-1]).mT, ctx.rows), None, None


def linear(x: torch.Tensor, weight: torch.Tensor,
           bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x Wᵀ + b`` as :func:`torch.nn.functional.linear`, through NumPy where
    :func:`numpy_path` says so (module docstring)."""
    operands = (x, weight) if bias is None else (x, weight, bias)
    if not numpy_path(*operands):
        return F.linear(x, weight, bias)
    out = _NumpyLinear.apply(x, bias, (weight,))
    if torch.is_grad_enabled() and weight.requires_grad:
        out = out + _WeightGradient.apply(weight, (x.reshape(-1, x.shape[-1]),), out.shape)
    return out


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` as :func:`torch.matmul` for operands of at least two dimensions (batch
    dimensions broadcast), through NumPy where :func:`numpy_path` says so (module docstring).

    Raises ``ValueError`` for a one-dimensional operand, in every mode.
    """
    if a.dim() < 2 or b.dim() < 2:
        raise ValueError(f"matmul needs operands of at least two dimensions; got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if numpy_path(a, b):
        return _NumpyMatmul.apply(a, b)
    return torch.matmul(a, b)


class PortableLinear(nn.Linear):
    """:class:`torch.nn.Linear` computing ``x Wᵀ + b`` with :func:`linear`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return linear(input, self.weight, self.bias)
