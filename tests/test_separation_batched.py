"""Stacked training: R models trained together follow the paths they follow alone."""

import pytest
import torch

from i2o.chapters.separation import batched
from i2o.chapters.separation.sawtooth import sawtooth_data


def test_stacked_models_train_as_if_alone():
    x, y, _, _ = sawtooth_data(2, 64, 16, seed=0)
    seeds = [3, 4, 5]
    together = batched.fit_stack(batched.init_stack(1, 8, 2, seeds), x, y, steps=50, lr=1e-2)
    alone = torch.cat([batched.fit_stack(batched.init_stack(1, 8, 2, [s]), x, y, 50, 1e-2)
                       for s in seeds])
    torch.testing.assert_close(together, alone, rtol=1e-4, atol=1e-6)


def test_stacked_training_lowers_the_loss():
    x, y, _, _ = sawtooth_data(1, 64, 16, seed=0)
    weights = batched.init_stack(1, 8, 2, [0, 1])
    before = batched.per_model_mse(weights, x, y).detach()
    after = batched.fit_stack(weights, x, y, steps=200, lr=1e-2)
    assert torch.all(after < before)


def test_stacked_modules_compute_what_the_modules_compute():
    from i2o.chapters.separation import nets, steep

    x = torch.rand(2, 40, 5)
    for kind, stack, forward in (("fnn", batched.stack_fnn, batched.forward),
                                 ("deq_lower", batched.stack_lower_deq,
                                  batched.forward_lower_deq)):
        models = [nets.make_model(kind, 5, 6, 2, seed) for seed in (0, 1)]
        weights = stack(models)
        with torch.no_grad():
            alone = torch.stack([model(x[r]) for r, model in enumerate(models)])
        torch.testing.assert_close(forward(weights, x), alone, rtol=1e-5, atol=1e-6)
        expected = torch.tensor([steep.max_abs_weight(model) for model in models])
        torch.testing.assert_close(batched.max_abs_weight(weights, kind == "deq_lower"), expected)


def test_the_masked_entries_of_a_lower_deq_are_not_weights():
    from i2o.chapters.separation import nets

    model = nets.make_model("deq_lower", 3, 4, 1, 0)
    with torch.no_grad():
        model.V[0, 3] = 100.0  # above the diagonal: masked out of W
    assert float(batched.max_abs_weight(batched.stack_lower_deq([model]), lower_deq=True)) < 100
    assert float(batched.max_abs_weight(batched.stack_lower_deq([model]))) == 100


def test_stacked_steep_runs_match_the_runs_alone():
    from i2o.chapters.separation import steep

    seeds = [0, 3]
    for kind in steep.KINDS:
        together = steep.train_stack(kind, 4, 2.0 ** -4, 6, 2, 64, 150, 1e-2, 0.1, seeds)
        for r, seed in enumerate(seeds):
            alone = steep.train_model(kind, 4, 2.0 ** -4, 6, 2, 64, 150, 1e-2, 0.1, seed)
            assert together["reached"][r] == alone["reached"]
            assert abs(int(together["step"][r]) - alone["step"]) <= 2
            for key in ("max_weight", "final_max_weight", "final_mse", "variance"):
                assert together[key][r] == pytest.approx(alone[key], rel=1e-3), (kind, key)


def test_a_stacked_steep_run_refuses_an_unknown_kind():
    from i2o.chapters.separation import steep

    with pytest.raises(ValueError, match="kind must be one of"):
        steep.train_stack("dln", 4, 0.1, 6, 2, 64, 2, 1e-2, 0.1, [0])


def test_the_stacked_lower_deq_needs_its_structure():
    from i2o.chapters.separation import nets

    with pytest.raises(ValueError, match="lower-triangular"):
        batched.stack_lower_deq([nets.make_model("deq_contractive", 3, 4, 1, 0)])


def test_the_stacked_contractive_deq_needs_its_structure():
    from i2o.chapters.separation import nets

    with pytest.raises(ValueError, match="contractive"):
        batched.stack_contractive_deq([nets.make_model("deq_lower", 3, 4, 1, 0)])


def test_the_stacked_contractive_deq_gives_the_ift_gradient_of_the_modules():
    from i2o.chapters.separation import nets

    torch.manual_seed(0)
    x, y = torch.rand(2, 11, 5, dtype=torch.float64), torch.rand(2, 11, dtype=torch.float64)
    models = [nets.make_model("deq_contractive", 5, 7, 1, seed, gamma=0.9).double()
              for seed in (0, 1)]
    with torch.no_grad():
        models[1].V.mul_(5.0)  # ‖V‖_F > 1: the rescaled branch of W
    weights = batched.stack_contractive_deq(models)
    out, z = batched.forward_contractive_deq(weights, x, 0.9, tol=1e-13, max_iter=500)
    torch.mean((out - y) ** 2, dim=1).sum().backward()
    for r, model in enumerate(models):
        model.deq = nets.ReluDEQ(5, 7, "contractive", gamma=0.9, tol=1e-13, max_iter=500).deq
        torch.mean((model(x[r]) - y[r]) ** 2).backward()
        torch.testing.assert_close(out[r].detach(), model(x[r]).detach(), rtol=0, atol=1e-11)
        torch.testing.assert_close(z[r].detach(), model.features(x[r]).detach(), rtol=0,
                                   atol=1e-11)
        for stacked, grad in ((weights[0], model.V.grad), (weights[1], model.U.grad.T),
                              (weights[2], model.b.grad[None]),
                              (weights[3], model.head.weight.grad.T),
                              (weights[4], model.head.bias.grad[None])):
            torch.testing.assert_close(stacked.grad[r], grad, rtol=1e-9, atol=1e-11)


def test_stacked_gotu_deqs_match_the_deqs_alone():
    from i2o.chapters.separation import gotu

    seeds = [0, 2]
    together = gotu.train_deq_stack("f2", 4, 16, 6, 60, 1e-2, seeds, 0.9, 4)
    for r, seed in enumerate(seeds):
        alone = gotu.train_model("deq_contractive", "f2", 4, 16, 6, 1, 60, 1e-2, seed, 0.01,
                                 0.9, 4)
        for key in ("train_mse", "seen_mse", "unseen_mse", "final_loss", "feature_density",
                    "seen_variance"):
            assert together[key][r] == pytest.approx(alone[key], rel=1e-3), key
        assert together["parameters"][r] == alone["parameters"]
        np_features = together["features"][r]
        assert np_features.shape == alone["features"].shape
        assert abs(np_features - alone["features"]).max() < 1e-3
