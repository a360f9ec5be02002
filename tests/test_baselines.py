"""The trivial baselines of principle 4 (:mod:`i2o.chapters.deq_gaps.baselines`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from i2o.chapters.deq_gaps import baselines


def test_bigram_log_probs_are_normalised_and_learn_a_deterministic_text():
    ids = np.tile(np.arange(4), 50)  # 0 1 2 3 0 1 2 3 …: each character fixes the next
    counts = baselines.bigram_counts(ids, 5)
    assert counts.sum() == len(ids) - 1 and counts[0, 1] == 50 and counts[0, 2] == 0
    log_probs = baselines.bigram_log_probs(counts, 0.01)
    assert np.allclose(np.exp(log_probs).sum(axis=1), 1.0)
    inputs, targets = ids[:-1].reshape(1, -1), ids[1:].reshape(1, -1)
    nll = baselines.window_nll(log_probs, inputs, targets)
    assert nll.shape == (1,) and nll[0] < 0.01  # near-certain predictions
    shuffled = np.random.default_rng(0).permutation(ids)
    assert baselines.window_nll(log_probs, shuffled[:-1][None], shuffled[1:][None])[0] > 1.0


def test_linear_classifier_separates_what_is_linearly_separable_and_not_more():
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.normal(size=(200, 5)))
    y = torch.from_numpy((x[:, 0].numpy() > 0).astype(np.int64))
    weight, bias = baselines.fit_linear_classifier(x, y, 1e-3, 2)
    assert baselines.linear_errors(x, y, weight, bias).mean() < 0.02
    xor = torch.from_numpy(((x[:, 0] > 0) ^ (x[:, 1] > 0)).numpy().astype(np.int64))
    weight, bias = baselines.fit_linear_classifier(x, xor, 1e-3, 2)
    assert baselines.linear_errors(x, xor, weight, bias).mean() > 0.3  # a linear rule cannot


def test_cross_validation_prefers_a_penalty_that_generalises():
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.normal(size=(60, 200)))  # more features than examples
    y = torch.from_numpy((x[:, 0].numpy() + 0.3 * rng.normal(size=60) > 0).astype(np.int64))
    errors = baselines.cross_validated_errors(x, y, (1e-4, 1e-1, 1e3), 5, 0, 2)
    assert errors.shape == (3,) and np.all((errors >= 0) & (errors <= 1))
    assert errors[2] >= 0.3  # a huge penalty predicts one class


def test_baseline_jobs_refuse_bad_settings():
    with pytest.raises(ValueError, match="penalties"):
        baselines.PixelClassifierJob(train_size=100, seed=0, eval_size=10, penalties=(0.0,))
    with pytest.raises(ValueError, match="folds"):
        baselines.PixelClassifierJob(train_size=100, seed=0, eval_size=10, folds=1)
    with pytest.raises(ValueError, match="held_out"):
        baselines.BigramJob(train_chars=1000, context=8, eval_windows=4, held_out=1.0)
    with pytest.raises(ValueError, match="smoothings"):
        baselines.BigramJob(train_chars=1000, context=8, eval_windows=4, smoothings=())


def test_bigram_of_tiny_shakespeare_beats_its_unigram(data_dir, monkeypatch):
    monkeypatch.setenv("I2O_DATA_DIR", str(data_dir))
    found = baselines.BigramJob(train_chars=20_000, context=64, eval_windows=32).compute()
    assert found["test_nll"].shape == (32,) and found["train_nll"].shape == (32,)
    assert found["smoothing"] in baselines.SMOOTHINGS
    test, unigram = float(found["test_nll"].mean()), float(found["test_unigram_nll"].mean())
    assert 2.0 < test < unigram < 4.0, (test, unigram)
