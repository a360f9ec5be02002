r"""Trivial baselines, fitted on each task's own training data in the same run: what a test-data
row's models must beat to be read at all (``READING.md``, principle 4,
:func:`i2o.verdicts.readings.generalises`). A model whose test metric does not beat them has not
generalised: its test curve is a memoriser's, outside the paper's regime ("DEQs, which are
overparametrized (e.g. reaching 90% training accuracy on ImageNet compared to 80% test
accuracy)", Section 4).

- **Classifier** (:class:`PixelClassifierJob`): multinomial logistic regression on the
  standardised pixels of the classifier's own class-balanced training subset (the same seed),
  ``min_W mean_i CE(W x_i + b, y_i) + λ/2 ‖W‖²``, fitted by L-BFGS in float64, ``λ`` chosen by
  ``folds``-fold cross-validated accuracy on that training subset over ``penalties`` (ties to the
  larger λ), then refitted on the whole subset; scored on the classifier's test images.
- **Language model** (:class:`BigramJob`): the character bigram model of the model's training
  text with add-α smoothing, ``p(b | a) = (c(a, b) + α) / (c(a) + α V)``, ``α`` chosen over
  ``smoothings`` by the NLL of the last ``held_out`` fraction of the text when fitted on the rest,
  then refitted on the whole text; scored per window on the windows the model is scored on. The
  unigram model of the same text is stored beside it, for reference.
- **Reconstruction**: the initial guess ``A⁺y`` (stored by :class:`.inverse.InverseJob` itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from i2o.base import replicates
from i2o.chapters.deq_gaps import FIGURE
from i2o.compute.job import Job
from i2o.data.cifar10 import balanced_subset, load_cifar10, to_tensor
from i2o.data.shakespeare import load_shakespeare, tiled_windows

#: the L2 penalties λ the linear classifier's cross-validation chooses from
PENALTIES = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
#: the add-α smoothings the bigram model's held-out text chooses from
SMOOTHINGS = (0.01, 0.03, 0.1, 0.3, 1.0)


def fit_linear_classifier(x: torch.Tensor, y: torch.Tensor, penalty: float, classes: int,
                          max_iter: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W, b)`` minimising the mean cross-entropy of ``x W + b`` plus ``penalty / 2 · ‖W‖²``
    (float64 L-BFGS with a strong-Wolfe line search, from zero)."""
    x = x.to(torch.float64)
    weight = torch.zeros(x.shape[1], classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.LBFGS([weight, bias], max_iter=max_iter, tolerance_grad=1e-9,
                                  tolerance_change=1e-12, history_size=20,
                                  line_search_fn="strong_wolfe")

    def objective() -> torch.Tensor:
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(x @ weight + bias, y) \
            + 0.5 * penalty * weight.pow(2).sum()
        loss.backward()
        return loss

    optimiser.step(objective)
    return weight.detach(), bias.detach()


def linear_errors(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor,
                  bias: torch.Tensor) -> np.ndarray:
    """Per-example 0/1 errors of the linear classifier ``(W, b)``."""
    predicted = (x.to(torch.float64) @ weight + bias).argmax(dim=1)
    return (predicted != y).to(torch.float64).numpy()


def cross_validated_errors(x: torch.Tensor, y: torch.Tensor, penalties: tuple[float, ...],
                           folds: int, seed: int, classes: int) -> np.ndarray:
    """``(len(penalties),)`` the ``folds``-fold cross-validated error of each penalty (the folds
    a fixed permutation of the examples drawn with ``seed``)."""
    order = np.random.default_rng(seed).permutation(len(y))
    parts = np.array_split(order, folds)
    errors = np.zeros(len(penalties))
    for k, held in enumerate(parts):
        kept = np.concatenate([p for j, p in enumerate(parts) if j != k])
        for i, penalty in enumerate(penalties):
            weight, bias = fit_linear_classifier(x[kept], y[kept], penalty, classes)
            errors[i] += linear_errors(x[held], y[held], weight, bias).sum()
    return errors / len(y)


@dataclass(frozen=True, kw_only=True)
class PixelClassifierJob(Job):
    """The classifier's baseline (module docstring): a linear classifier on the pixels of the
    training subset of the classifier of seed ``seed``, scored on its ``eval_size`` test images
    and on as many of its training images (the job ``baseline-pixels``)."""

    figure: ClassVar[str] = FIGURE

    train_size: int
    seed: int
    eval_size: int
    replicate: int = 0
    penalties: tuple[float, ...] = PENALTIES
    folds: int = 5

    def __post_init__(self) -> None:
        if self.train_size < 10:
            raise ValueError(f"train_size must be ≥ 10; got {self.train_size}")
        if not self.penalties or any(not p > 0 for p in self.penalties):
            raise ValueError(f"penalties must be positive; got {self.penalties!r}")
        if self.folds < 2:
            raise ValueError(f"folds must be ≥ 2; got {self.folds}")

    @property
    def name(self) -> str:
        return "baseline-pixels"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        """Choose λ by cross-validation on the training subset, refit, score (module docstring);
        the subsets are :class:`.classification.ClassificationJob`'s."""
        train, test = load_cifar10("train"), load_cifar10("test")
        chosen = balanced_subset(train.labels, self.train_size, seed=self.seed)
        x = to_tensor(train.images[chosen]).flatten(1)
        y = torch.from_numpy(train.labels[chosen]).long()
        classes = int(train.labels.max()) + 1
        cv = cross_validated_errors(x, y, self.penalties, self.folds, self.seed, classes)
        best = max(i for i in range(len(cv)) if cv[i] == cv.min())
        weight, bias = fit_linear_classifier(x, y, self.penalties[best], classes)
        shown = balanced_subset(test.labels, self.eval_size,
                                seed=replicates.seed(0, self.replicate))
        test_x = to_tensor(test.images[shown]).flatten(1)
        test_y = torch.from_numpy(test.labels[shown]).long()
        on_train = balanced_subset(y.numpy(), min(self.eval_size, len(y)),
                                   seed=replicates.seed(1, self.replicate))
        return {"test_error": linear_errors(test_x, test_y, weight, bias),
                "train_error": linear_errors(x[on_train], y[on_train], weight, bias),
                "penalty": float(self.penalties[best]), "cv_error": cv}


def bigram_counts(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """``(V, V)`` counts ``c(a, b)`` of each character ``b`` following ``a`` in ``ids``."""
    counts = np.zeros((vocab_size, vocab_size))
    np.add.at(counts, (ids[:-1], ids[1:]), 1.0)
    return counts


def bigram_log_probs(counts: np.ndarray, smoothing: float) -> np.ndarray:
    """``(V, V)`` ``log p(b | a)`` of add-α smoothing (module docstring)."""
    smoothed = counts + smoothing
    return np.log(smoothed) - np.log(smoothed.sum(axis=1, keepdims=True))


def window_nll(log_probs: np.ndarray, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per window, the mean NLL (nats per character) of each target given its input."""
    return -log_probs[inputs, targets].mean(axis=1)


@dataclass(frozen=True, kw_only=True)
class BigramJob(Job):
    """The language model's baseline (module docstring): the bigram model of the first
    ``train_chars`` characters of the training split (``0``: all of it), scored on the first
    ``eval_windows`` windows of ``context`` characters of the test split and of that text (the
    windows of :func:`.language.language_probes`; the job ``baseline-bigram``). It draws nothing,
    so it has no replicate: one entry serves every replicate."""

    figure: ClassVar[str] = FIGURE

    train_chars: int
    context: int
    eval_windows: int
    smoothings: tuple[float, ...] = SMOOTHINGS
    held_out: float = 0.1

    def __post_init__(self) -> None:
        if not self.smoothings or any(not a > 0 for a in self.smoothings):
            raise ValueError(f"smoothings must be positive; got {self.smoothings!r}")
        if not 0 < self.held_out < 1:
            raise ValueError(f"held_out must be in (0, 1); got {self.held_out}")

    @property
    def name(self) -> str:
        return "baseline-bigram"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        corpus = load_shakespeare()
        text = corpus.train[:self.train_chars] if self.train_chars else corpus.train
        vocab = corpus.vocab_size
        cut = int(round(len(text) * (1 - self.held_out)))
        fitted, held = bigram_counts(text[:cut], vocab), text[cut:]
        held_nll = [float(-bigram_log_probs(fitted, a)[held[:-1], held[1:]].mean())
                    for a in self.smoothings]
        best = int(np.argmin(held_nll))
        log_probs = bigram_log_probs(bigram_counts(text, vocab), self.smoothings[best])
        unigram = np.bincount(text, minlength=vocab) + 1.0
        unigram_log = np.log(unigram / unigram.sum())
        out: dict[str, Any] = {"smoothing": float(self.smoothings[best]),
                               "held_out_nll": np.asarray(held_nll)}
        for split, ids in (("test", corpus.test), ("train", text)):
            inputs, targets = tiled_windows(ids, self.context, self.eval_windows)
            out[f"{split}_nll"] = window_nll(log_probs, inputs, targets)
            out[f"{split}_unigram_nll"] = -unigram_log[targets].mean(axis=1)
        return out
