"""i2o.models.mdeq: the TINY configuration, the flat multiscale state, dropout, weight norm.
Budget: ~3 s."""

from __future__ import annotations

import pytest
import torch

from i2o.models import CONFIGS, MICRO, TINY, MDEQClassifier, MDEQConfig, config, count_parameters


def test_tiny_has_the_size_of_the_public_config():
    model = MDEQClassifier(TINY)
    assert count_parameters(model) == 158_890  # the original cls_mdeq_TINY: about 159K
    assert TINY.resolutions() == [32, 16]
    assert TINY.state_size() == 24 * 32 * 32 + 24 * 16 * 16


def test_every_config_is_smaller_than_tiny_except_tiny():
    for name, cfg in CONFIGS.items():
        size = count_parameters(MDEQClassifier(cfg))
        assert size <= 158_890 and (name == "tiny") == (size == 158_890)


def _micro(seed=0):
    torch.manual_seed(seed)
    return MDEQClassifier(MICRO)


def test_split_and_join_are_inverse():
    model = _micro()
    z = torch.randn(3, MICRO.state_size())
    parts = model.split(z)
    assert [p.shape[1:] for p in parts] == [(8, 8, 8), (8, 4, 4)]
    torch.testing.assert_close(model.join(parts), z)


def test_dropout_mask_is_fixed_within_a_batch_and_redrawn_by_reset():
    model = _micro().train()
    images = torch.randn(4, 3, 32, 32)
    f, x, z0 = model.prepare(images)
    z = torch.randn_like(z0)
    first = f(z, x)
    torch.testing.assert_close(f(z, x), first)  # same mask at every solver iteration
    model.reset(4, x)
    assert not torch.allclose(f(z, x), first)  # a new batch, a new mask
    model.eval()
    model.reset(4, x)
    out = f(z, x)
    model.reset(4, x)
    torch.testing.assert_close(f(z, x), out)  # no dropout in evaluation


def test_weight_norm_makes_f_invariant_to_the_scale_of_v():
    model = _micro().eval()
    images = torch.randn(2, 3, 32, 32)
    f, x, z0 = model.prepare(images)
    z = torch.randn_like(z0)
    before = f(z, x)
    with torch.no_grad():
        model.layer.blocks[0].conv1.v.mul_(7.0)
    model.reset(2, x)
    torch.testing.assert_close(f(z, x), before, rtol=1e-5, atol=1e-5)


def test_unrolled_warm_up_trains_every_parameter():
    model = _micro().train()
    f, x, z0 = model.prepare(torch.randn(4, 3, 32, 32))
    model.classify(model.unrolled_state(x, layers=3)).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing


def test_bad_configurations_are_rejected_with_the_reason():
    with pytest.raises(ValueError, match="one entry per branch"):
        MDEQConfig(channels=(8, 8), head_channels=(2,))
    with pytest.raises(ValueError, match="divisible"):
        MDEQConfig(channels=(12, 12), num_groups=8)
    with pytest.raises(ValueError, match="allowed: tiny"):
        config("huge")
