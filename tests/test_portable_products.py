"""The DEQ transformer's matrix products through NumPy's OpenBLAS in portable numerics
(:mod:`i2o.models.portable_products`): the same values, gradients and second derivatives as
torch's products, torch's own path elsewhere (budget: a few seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parametrizations

from i2o.base import runtime
from i2o.models import portable_products
from i2o.models.deq_transformer import DEQTransformerLM, TransformerConfig, jacobian_frobenius
from i2o.models.portable_products import PortableLinear, linear, matmul

torch.set_num_threads(1)
FLOAT32 = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture
def portable(monkeypatch):
    """Portable numerics on an x86-64 CPU, where products go through NumPy."""
    if not runtime.is_x86_64():
        pytest.skip("the NumPy path is taken only on x86-64, where OpenBLAS is pinned")
    monkeypatch.setenv("I2O_NUMERICS", "portable")


@contextmanager
def torch_products() -> Iterator[None]:
    """Every product in torch for the duration of the block."""
    portable_products.use_numpy_products(False)
    try:
        yield
    finally:
        portable_products.use_numpy_products(True)


def _normal(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _leaves(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.clone().requires_grad_() for t in tensors]


class ProductCount:
    """How many products NumPy computed (a spy on the module's one NumPy call)."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0
        product = portable_products._numpy_product

        def counted(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return product(a, b)

        monkeypatch.setattr(portable_products, "_numpy_product", counted)

    def since(self, before: int) -> int:
        return self.calls - before


@pytest.fixture
def products(monkeypatch) -> ProductCount:
    return ProductCount(monkeypatch)


def _assert_same_structure(ours: torch.Tensor, theirs: torch.Tensor, layout: bool = False) -> None:
    """Same shape, dtype and device; with ``layout``, the same strides too (a product's result:
    gradients' layouts are torch's choice)."""
    assert (ours.shape, ours.dtype, ours.device) == (theirs.shape, theirs.dtype, theirs.device)
    assert not layout or ours.stride() == theirs.stride()


@pytest.mark.parametrize("rows, bias", [((2048,), True), ((32, 64), True), ((5, 3), False)])
def test_linear_equals_torch_in_value_structure_and_gradients(portable, products, rows, bias):
    x, weight, b = _leaves(_normal(*rows, 64, seed=0), _normal(192, 64, seed=1),
                           _normal(192, seed=2))
    b = b if bias else None
    ours = linear(x, weight, b)
    assert products.calls == 1
    theirs = F.linear(x, weight, b)
    _assert_same_structure(ours, theirs, layout=True)
    torch.testing.assert_close(ours, theirs, **FLOAT32)
    grad = _normal(*ours.shape, seed=3)
    inputs = [x, weight] + ([b] if bias else [])
    for mine, reference in zip(torch.autograd.grad(ours, inputs, grad),
                               torch.autograd.grad(theirs, inputs, grad), strict=True):
        _assert_same_structure(mine, reference)
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-4)
    assert products.calls == 3  # G W and Gᵀ X


def test_the_weights_gradient_is_computed_only_when_asked_for(portable, products):
    x, weight, bias = _leaves(_normal(6, 4, seed=26), _normal(3, 4, seed=27), _normal(3, seed=28))
    out = linear(x, weight, bias)
    torch.autograd.grad(out, x, torch.ones_like(out), retain_graph=True)
    assert products.calls == 2  # the product and G W, not Gᵀ X
    torch.autograd.grad(out, weight, torch.ones_like(out), retain_graph=True)
    assert products.calls == 3  # Gᵀ X alone
    out.sum().backward()
    assert products.calls == 5
    with torch.no_grad():
        linear(x, weight, bias)
    assert products.calls == 6


@pytest.mark.parametrize("a_shape, b_shape, transpose_b", [
    ((32, 4, 64, 16), (32, 4, 64, 16), True),    # attention's q kᵀ, k a transposed view
    ((32, 4, 64, 64), (32, 4, 64, 16), False),   # attention's weights v
    ((7, 5), (3, 5, 6), False),                  # a broadcast along the batch
    ((2, 1, 4, 5), (1, 3, 5, 6), False)])        # both broadcast
def test_matmul_equals_torch_in_value_structure_and_gradients(portable, products, a_shape,
                                                              b_shape, transpose_b):
    a, b = _leaves(_normal(*a_shape, seed=4), _normal(*b_shape, seed=5))
    right = b.transpose(-1, -2) if transpose_b else b
    ours, theirs = matmul(a, right), torch.matmul(a, right)
    assert products.calls == 1
    _assert_same_structure(ours, theirs, layout=True)
    torch.testing.assert_close(ours, theirs, **FLOAT32)
    grad = _normal(*ours.shape, seed=6)
    for mine, reference in zip(torch.autograd.grad(ours, (a, b), grad),
                               torch.autograd.grad(theirs, (a, b), grad), strict=True):
        _assert_same_structure(mine, reference)
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-4)
    assert products.calls == 3


def test_gradients_and_second_derivatives_pass_gradcheck_in_float64(portable, products):
    double = torch.float64
    x, weight, bias = _leaves(_normal(2, 3, 4, seed=7, dtype=double),
                              _normal(5, 4, seed=8, dtype=double), _normal(5, seed=9, dtype=double))
    a, b = _leaves(_normal(2, 1, 3, 4, seed=10, dtype=double),
                   _normal(3, 4, 2, seed=11, dtype=double))
    linear(x, weight, bias), matmul(a, b)
    assert products.calls == 2
    for function, inputs in ((linear, (x, weight, bias)), (linear, (x, weight)),
                             (matmul, (a, b)), (matmul, (a, b.transpose(-1, -2).mT))):
        assert torch.autograd.gradcheck(function, inputs)
        assert torch.autograd.gradgradcheck(function, inputs)


def _small_model(dtype: torch.dtype = torch.float32) -> DEQTransformerLM:
    torch.manual_seed(0)
    model = DEQTransformerLM(TransformerConfig(vocab_size=11, context=8, width=16, heads=2,
                                               ffn_width=24))
    return model.to(dtype)


def _tokens() -> torch.Tensor:
    return torch.randint(0, 11, (3, 9), generator=torch.Generator().manual_seed(1))


def _jacobian_penalty_and_gradients(model: DEQTransformerLM) -> list[torch.Tensor]:
    tokens = _tokens()
    x = model.inject(tokens[:, :-1])
    z = _normal(3, 8 * 16, seed=12, dtype=x.dtype).requires_grad_()
    torch.manual_seed(3)  # the Hutchinson probe
    penalty = jacobian_frobenius(model.f(z, x), z, samples=2)
    return [penalty, *torch.autograd.grad(penalty, list(model.parameters()), allow_unused=True,
                                          materialize_grads=True)]


def test_double_backward_through_the_jacobian_penalty_matches_torch(portable):
    model = _small_model(torch.float64)
    ours = _jacobian_penalty_and_gradients(model)
    with torch_products():
        theirs = _jacobian_penalty_and_gradients(model)
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-10, atol=1e-12)


def _loss_and_gradients(model: DEQTransformerLM) -> list[torch.Tensor]:
    tokens = _tokens()
    x = model.inject(tokens[:, :-1])
    z = model.initial_state(x)
    for _ in range(3):
        z = model.f(z, x)
    loss = model.token_nll(z, tokens[:, 1:]).mean()
    return [loss, *torch.autograd.grad(loss, list(model.parameters()))]


def test_the_transformers_loss_and_gradients_are_torchs(portable, products):
    model = _small_model()
    ours = _loss_and_gradients(model)
    # forward: 4 linear layers and 2 attention products per f, 3 times, the injection and the
    # decoder; backward: 2 products per product but 1 for the first f's qkv (its state is 0)
    assert products.calls == (6 * 3 + 2) * 3 - 1
    before = products.calls
    with torch_products():
        theirs = _loss_and_gradients(model)
    assert products.since(before) == 0
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-5)


def test_native_mode_other_dtypes_and_the_switch_call_torch(monkeypatch, products):
    x, weight = _normal(4, 3, seed=13), _normal(2, 3, seed=14)
    monkeypatch.setenv("I2O_NUMERICS", "native")
    assert not portable_products.numpy_path(x, weight)
    assert type(linear(x.requires_grad_(), weight).grad_fn).__name__ == "MmBackward0"
    matmul(x, weight.mT).sum().backward()
    assert products.calls == 0
    monkeypatch.setenv("I2O_NUMERICS", "portable")
    assert portable_products.numpy_path(x, weight) == runtime.is_x86_64()
    assert not portable_products.numpy_path(x.bfloat16(), weight.bfloat16())
    assert not portable_products.numpy_path(x, weight.double())
    linear(x.bfloat16(), weight.bfloat16())
    assert products.calls == 0
    with torch_products():
        assert not portable_products.numpy_path(x, weight)
        linear(x, weight).sum().backward()
    assert products.calls == 0


def test_a_one_dimensional_operand_is_refused_in_every_mode(monkeypatch):
    for mode in runtime.NUMERICS_MODES:
        monkeypatch.setenv("I2O_NUMERICS", mode)
        with pytest.raises(ValueError, match="at least two dimensions"):
            matmul(_normal(3, seed=15), _normal(3, 2, seed=16))


def test_operands_are_read_in_place_unless_no_blas_call_can(portable):
    matrix = _normal(6, 5, seed=17)
    assert portable_products._blas_readable(matrix.mT).data_ptr() == matrix.data_ptr()
    sliced = _normal(4, 6, 9, seed=18)[..., 2:7]  # rows stride 9 ≥ 5 columns
    assert portable_products._blas_readable(sliced).data_ptr() == sliced.data_ptr()
    expanded = _normal(1, 5, seed=19).expand(6, 5)  # rows stride 0: copied
    readable = portable_products._blas_readable(expanded)
    assert readable.is_contiguous() and readable.data_ptr() != expanded.data_ptr()
    torch.testing.assert_close(matmul(expanded, matrix.mT), expanded @ matrix.mT, **FLOAT32)


def test_bits_do_not_depend_on_layout_batching_or_leading_shape(portable):
    """Same bits whether an operand is a transposed view or a copy, whether matrices are
    multiplied as one batch or one by one, and whether a linear layer's input is (B, T, n) or
    its rows (B·T, n)."""
    a, b = _normal(8, 64, 16, seed=20), _normal(8, 64, 16, seed=21)
    batched = matmul(a, b.mT)
    assert torch.equal(batched, matmul(a, b.mT.contiguous()))
    assert torch.equal(batched, torch.stack([matmul(a[i], b[i].mT) for i in range(8)]))
    x, weight, bias = _normal(4, 32, 64, seed=22), _normal(192, 64, seed=23), _normal(192, seed=24)
    assert torch.equal(linear(x, weight, bias).reshape(-1, 192),
                       linear(x.reshape(-1, 64), weight, bias))


def test_the_layer_is_a_linear_layer_and_weight_norm_applies(portable, products):
    torch.manual_seed(5)
    plain = torch.nn.Linear(6, 4)
    torch.manual_seed(5)
    layer = PortableLinear(6, 4)
    assert torch.equal(plain.weight, layer.weight) and torch.equal(plain.bias, layer.bias)
    normed = parametrizations.weight_norm(layer, dim=0)
    assert set(normed.state_dict()) == set(parametrizations.weight_norm(plain, dim=0)
                                           .state_dict())
    normed.parametrizations.weight.original0.data.mul_(3.0)  # the row norms g
    x = _normal(5, 6, seed=25)
    out = normed(x)
    assert products.calls == 1
    torch.testing.assert_close(out, F.linear(x, normed.weight, normed.bias), **FLOAT32)
