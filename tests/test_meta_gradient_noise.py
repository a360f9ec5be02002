"""Signal and noise of a meta-gradient (i2o.chapters.meta.gradient_noise) and the book's check
of iMAML's λ built on it."""

import math

import jax
import numpy as np
import pytest

from i2o.chapters.meta import claims, gradient_noise, imaml, maml
from i2o.chapters.meta.mlp import init_mlp
from i2o.chapters.meta.tasks import sample_tasks


def test_pure_noise_sits_at_the_noise_level_and_a_shared_direction_above_it():
    rng = np.random.default_rng(0)
    k, d = 400, 50
    noise = gradient_noise.summarize(rng.normal(size=(k, d)))
    assert noise.ratio == pytest.approx(gradient_noise.noise_level(k), rel=0.3)
    shared = gradient_noise.summarize(rng.normal(size=(k, d)) * 0.1 + np.ones(d))
    assert shared.ratio > 10 * gradient_noise.noise_level(k)
    assert shared.signal == pytest.approx(math.sqrt(d), rel=0.05)
    assert shared.noise == pytest.approx(0.1 * math.sqrt(d), rel=0.1)


@pytest.mark.parametrize("shape", [(1, 3), (5,)])
def test_summarize_needs_two_gradients_as_rows(shape):
    with pytest.raises(ValueError, match="gradients"):
        gradient_noise.summarize(np.ones(shape))


def test_noise_level_needs_two_batches():
    with pytest.raises(ValueError, match="n_batches"):
        gradient_noise.noise_level(1)


def test_measure_restricts_to_the_named_group():
    params = init_mlp(jax.random.PRNGKey(0))
    batches = [sample_tasks(jax.random.PRNGKey(k), 5) for k in range(3)]
    full = gradient_noise.measure(gradient_noise.first_order_loss, params, batches,
                                  group=tuple(params))
    hidden = gradient_noise.measure(gradient_noise.first_order_loss, params, batches)
    assert hidden.n_batches == 3
    assert hidden.signal < full.signal  # the output bias carries most of the first-order gradient
    with pytest.raises(ValueError, match="w9"):
        gradient_noise.measure(gradient_noise.first_order_loss, params, batches, group=("w9",))


def test_small_lambda_makes_imaml_meta_gradient_noise_at_finn_initialization():
    """The mechanism of the module docstring on 8 meta-batches of 25 tasks (N = 16): at λ = 1
    the hidden layers' iMAML meta-gradient is many times noisier than MAML's (measured 16 and 19
    times at two initializations); at λ = 16 it is not (0.92 and 0.90)."""
    params = init_mlp(jax.random.PRNGKey(1))
    batches = [sample_tasks(jax.random.PRNGKey(100 + k), 25) for k in range(8)]
    reference = gradient_noise.measure(
        lambda p, t: maml.meta_loss(p, t, maml.MAMLConfig(1, 0.01)), params, batches)

    def imaml_noise(lam):
        config = imaml.IMAMLConfig(regularization=lam)
        return gradient_noise.measure(lambda p, t: imaml.meta_loss(p, t, config), params, batches)

    assert imaml_noise(1.0).noise > 5 * reference.noise
    assert imaml_noise(16.0).noise < 2 * reference.noise


def _noise(imaml_noise, maml_noise=0.01, lam=8.0):
    row = {"signal": 0.02, "ratio": 1.5, "n_batches": 20}
    return {"first-order": {**row, "noise": 0.01}, "maml-N1": {**row, "noise": maml_noise},
            f"imaml-lam{lam:g}": {**row, "noise": imaml_noise}}


def test_usable_meta_gradient_holds_fails_and_needs_its_rows():
    assert claims.usable_meta_gradient(_noise(0.015), 8.0, 2.0).holds is True
    holds, value = pair(claims.usable_meta_gradient(_noise(0.25), 8.0, 2.0))
    assert holds is False and "25.00×" in value
    holds, value = pair(claims.usable_meta_gradient(_noise(0.015), 2.0, 2.0))
    assert holds is None and "not measured" in value


def test_noise_table_lists_every_row_against_maml():
    table = claims.noise_table(_noise(0.02))
    assert table.count("\n") == 4 and "| imaml-lam8 |" in table and "| 2.00 |" in table


def pair(decision):
    """A decision's verdict and reason."""
    return decision.holds, decision.reason
