"""Stacked training: R models trained together follow the paths they follow alone."""

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
