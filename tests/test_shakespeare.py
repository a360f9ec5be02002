"""Tiny Shakespeare loading and the character-level DEQ transformer (budget: ~5 s)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from i2o.data.shakespeare import (
    DataNotFoundError,
    load_shakespeare,
    random_windows,
    tiled_windows,
)
from i2o.models.deq_transformer import DEQTransformerLM, TransformerConfig, jacobian_frobenius

torch.set_num_threads(1)


def test_missing_copy_names_the_path_looked_for(tmp_path):
    with pytest.raises(DataNotFoundError) as error:
        load_shakespeare(tmp_path, download=False)
    message = str(error.value)
    assert str(tmp_path / "tinyshakespeare" / "input.txt") in message
    assert "I2O_DATA_DIR" in message


def test_a_different_file_is_refused_unless_asked(tmp_path):
    folder = tmp_path / "tinyshakespeare"
    folder.mkdir()
    text = "To be, or not to be: that is the question.\n" * 10
    (folder / "input.txt").write_text(text)
    with pytest.raises(ValueError, match="SHA-256"):
        load_shakespeare(tmp_path, download=False)
    corpus = load_shakespeare(tmp_path, download=False, verify=False)
    assert len(corpus.train) == int(0.9 * len(text))
    assert len(corpus.train) + len(corpus.test) == len(text)
    assert corpus.decode(corpus.train[:6]) == "To be,"
    np.testing.assert_array_equal(corpus.encode("To be,"), corpus.train[:6])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        corpus.encode("Z")


def test_real_corpus_split_and_vocabulary(data_dir):
    corpus = load_shakespeare(data_dir, download=False)
    assert corpus.vocab_size == 65
    assert len(corpus.train) == 1_003_854 and len(corpus.test) == 111_540
    assert corpus.decode(corpus.train[:14]) == "First Citizen:"
    assert corpus.train.dtype == np.int64 and corpus.train.max() < 65


def test_windows_shift_targets_by_one():
    ids = np.arange(100)
    inputs, targets = random_windows(ids, 10, 7, np.random.default_rng(0))
    assert inputs.shape == targets.shape == (7, 10)
    np.testing.assert_array_equal(targets, inputs + 1)
    inputs, targets = tiled_windows(ids, 10)
    assert inputs.shape == (9, 10)  # (100 − 1) // 10 windows, no overlap
    np.testing.assert_array_equal(inputs[:, 0], np.arange(0, 90, 10))
    np.testing.assert_array_equal(targets, inputs + 1)
    assert tiled_windows(ids, 10, limit=3)[0].shape == (3, 10)
    with pytest.raises(ValueError, match="context"):
        tiled_windows(ids, 0)


def _model(**changes):
    torch.manual_seed(0)
    return DEQTransformerLM(TransformerConfig(vocab_size=11, context=8, width=16, heads=2,
                                              ffn_width=24, **changes))


@pytest.mark.parametrize("weight_norm", [True, False])
def test_fixed_point_map_is_causal(weight_norm):
    """Position t of f(z, x) depends on tokens and states at positions ≤ t only."""
    model = _model(weight_norm=weight_norm)
    tokens = torch.randint(0, 11, (2, 8), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 11
    z = torch.randn(2, 8 * 16, generator=torch.Generator().manual_seed(2))
    z_changed = z.clone().reshape(2, 8, 16)
    z_changed[:, 6:] += 1.0
    out = model.f(z, model.inject(tokens)).reshape(2, 8, 16)
    out_changed = model.f(z_changed.reshape(2, -1), model.inject(changed)).reshape(2, 8, 16)
    torch.testing.assert_close(out[:, :5], out_changed[:, :5])
    assert not torch.allclose(out[:, 5], out_changed[:, 5])


def test_shapes_and_nll():
    model = _model()
    tokens = torch.randint(0, 11, (3, 8))
    x = model.inject(tokens)
    z = model.initial_state(x)
    assert x.shape == (3, 8, 48) and z.shape == (3, 128)
    nll = model.token_nll(model.f(z, x), tokens)
    assert nll.shape == (3, 8) and torch.all(nll > 0)
    with pytest.raises(ValueError, match="tokens"):
        model.inject(torch.zeros(3, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(width=10, heads=3)


def test_jacobian_estimate_is_exact_in_expectation():
    """For f(z) = a·z, ‖J‖²_F / dim = a²; Hutchinson with many probes gets close."""
    z = torch.randn(4, 500, requires_grad=True)
    scale = torch.tensor(3.0, requires_grad=True)
    estimate = jacobian_frobenius(scale * z, z, samples=8)
    assert estimate.item() == pytest.approx(9.0, rel=0.05)
    (gradient,) = torch.autograd.grad(estimate, scale)  # a penalty: d(a²)/da = 2a
    assert gradient.item() == pytest.approx(6.0, rel=0.05)
