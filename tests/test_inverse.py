"""DEQ and ELDER reconstruction networks and their training (budget: ~10 s, no data needed)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from i2o.chapters.deq_gaps.inverse import (
    InverseJob,
    inverse_probes,
    noisy_measurements,
    train_reconstruction,
)
from i2o.deq import SolverSpec, solve, sweep_iterations
from i2o.models.inverse import InverseConfig, Operator, ReconstructionDEQ, psnr

torch.set_num_threads(1)


@pytest.mark.parametrize("name", ["sr2", "denoise"])
def test_operator_adjoint_and_right_inverse(name):
    op = Operator(name)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 8, 8, generator=generator, dtype=torch.float64)
    y = op.forward(torch.randn(2, 3, 8, 8, generator=generator, dtype=torch.float64))
    # <A x, y> = <x, Aᵀ y>
    assert (op.forward(x) * y).sum().item() == pytest.approx((x * op.adjoint(y)).sum().item())
    torch.testing.assert_close(op.forward(op.pseudo_inverse(y)), y)
    assert op.measure(x, 0.0).shape == y.shape


def _model(variant: str, **changes) -> ReconstructionDEQ:
    torch.manual_seed(0)
    return ReconstructionDEQ(InverseConfig(variant=variant, width=8, **changes)).double()


def test_elder_step_is_a_gradient_step_on_its_energy():
    """ELDER: f(z) = z − γ ∇E(z) with E = ½‖Az − y‖² + τ h_θ(z)."""
    model = _model("elder")
    y = torch.rand(2, 3, 4, 4, dtype=torch.float64)
    z = torch.rand(2, 3 * 8 * 8, dtype=torch.float64, requires_grad=True)
    (gradient,) = torch.autograd.grad(model.energy(z, y).sum(), z)
    with torch.no_grad():
        step = model.f(z, y)
    torch.testing.assert_close(step, z.detach() - model.step.detach() * gradient)


def test_direct_form_uses_the_denoiser_residual():
    model = _model("deq")
    y = torch.rand(2, 3, 4, 4, dtype=torch.float64)
    z = torch.rand(2, 3 * 8 * 8, dtype=torch.float64)
    img = model.image(z, y)
    expected = img - model.step * (model.operator.adjoint(model.operator.forward(img) - y)
                                   + model.weight * (img - model.denoiser(img)))
    torch.testing.assert_close(model.f(z, y), expected.flatten(1))


def test_elder_fixed_point_is_stationary():
    model = _model("elder", step=0.5)
    y = torch.rand(2, 3, 4, 4, dtype=torch.float64)
    result = solve(lambda z: model.f(z, y), model.initial_state(y),
                   SolverSpec(method="anderson", max_iter=100, tol=1e-11))
    assert result.converged
    z = result.z.detach().requires_grad_()
    (gradient,) = torch.autograd.grad(model.energy(z, y).sum(), z)
    assert gradient.abs().max().item() < 1e-8


@pytest.mark.parametrize("variant", ["deq", "elder"])
def test_ift_gradient_of_elder_and_deq_matches_finite_differences(variant):
    """The implicit gradient through f (ELDER: a gradient of a gradient) is the true one."""
    from i2o.deq import DEQ

    model = _model(variant, step=0.5)
    y = torch.rand(1, 3, 4, 4, dtype=torch.float64)
    target = torch.rand(1, 3 * 64, dtype=torch.float64)
    spec = SolverSpec(method="anderson", max_iter=200, tol=1e-12)
    deq = DEQ(forward=spec, backward="ift", backward_spec=spec, output="z")

    def loss() -> torch.Tensor:
        z, _ = deq(model.f, y, model.initial_state(y))
        return (z - target).pow(2).sum()

    parameter = model.denoiser.convs[0].bias
    (analytic,) = torch.autograd.grad(loss(), parameter)
    direction = torch.randn_like(parameter)
    eps = 1e-6
    with torch.no_grad():
        parameter += eps * direction
        plus = loss()
        parameter -= 2 * eps * direction
        minus = loss()
        parameter += eps * direction
    numeric = (plus - minus) / (2 * eps)
    assert (analytic * direction).sum().item() == pytest.approx(numeric.item(), rel=1e-4)


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="variant"):
        InverseConfig(variant="red")
    with pytest.raises(ValueError, match="operator"):
        InverseConfig(operator="deblur")
    with pytest.raises(ValueError, match="crop"):
        InverseJob(crop=5, grid=(1, 2), train_size=16, eval_size=4)


def test_psnr_of_a_perfect_and_a_constant_estimate():
    target = torch.full((1, 3, 4, 4), 0.5)
    assert psnr(target + 0.1, target).item() == pytest.approx(20.0)
    assert psnr(target, target).item() == pytest.approx(120.0)  # MSE clamped at 1e-12


@pytest.mark.parametrize("variant", ["deq", "elder"])
def test_short_training_improves_and_sweeps(variant):
    generator = torch.Generator().manual_seed(0)
    # smooth random images: upsampled noise, so that ×2 super-resolution is learnable
    images = torch.nn.functional.interpolate(torch.rand(16, 3, 8, 8, generator=generator),
                                             scale_factor=4, mode="bilinear").clamp(0, 1)
    forward = SolverSpec(method="fixed_point", max_iter=3, tol=0.0)
    job = InverseJob(variant=variant, width=8, forward_spec=forward,
                     backward_spec=replace(forward, max_iter=5), steps=12, batch_size=8, crop=8,
                     lr=1e-2, grid=(0, 3, 6), train_size=16, eval_size=4)
    model, history = train_reconstruction(job, images)
    assert len(history["loss"]) == 12
    assert sum(history["loss"][-3:]) < sum(history["loss"][:3])
    y = noisy_measurements(model, images[:4], job.noise)
    result = sweep_iterations(inverse_probes(model, images[:4], y, batch_size=2), job.grid,
                              job.deq().forward_spec)
    assert result["metrics"]["neg_psnr"].shape == (4, 3)
    assert result["residual_rel"].shape == (4, 3)
