"""The chapter's cached jobs: train one DEQ with ``N`` iterations, then sweep ``N + ΔN``.

A job is a ``(name, params)`` pair (:func:`describe`): ``name`` is ``classification``,
``language``, ``inverse-deq`` or ``inverse-elder``; ``params`` (plain JSON values) holds every
field of the task's job dataclass plus the sweep grid, evaluation sizes and the replicate. The
job's ``seed`` is already the replicate's (:func:`i2o.replicates.seed`); the replicate also redraws
the fixed seeds of the evaluation subsets and of the measurement noise. It is one entry of the
results cache (:func:`i2o.results.cached`, figure ``deq_gaps``), keyed by ``params`` and by the
source of the modules it depends on (:data:`SOURCES`); training checkpoints go to the entry's
:func:`i2o.results.checkpoint_dir`, so an interrupted job resumes and a finished one costs a file
read. :func:`compute` runs one job wherever it is called: in the notebook, or in a submitit worker
(:mod:`i2o.sweep`). Every job returns plain arrays: the sweeps on test and training data
(:func:`i2o.deq.sweep_iterations`), the training history and the model's size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import torch

from i2o import replicates, results
from i2o.chapters.deq_gaps import FIGURE
from i2o.chapters.deq_gaps.classification import ClassificationJob
from i2o.chapters.deq_gaps.inverse import NOISE_SEED, InverseJob
from i2o.chapters.deq_gaps.language import LanguageJob
from i2o.deq import sweep_iterations

_COMMON = ("chapters.deq_gaps.jobs", "deq", "train.loop", "train.checkpoint", "train.schedule",
           "train.seeding")
#: The modules each job's numbers depend on: edits elsewhere (plots, other chapters) do not
#: invalidate its cache entry.
SOURCES = {
    "classification": _COMMON + ("chapters.deq_gaps.classification", "train.classifier",
                                 "train.allocator", "train.evaluate", "models.mdeq",
                                 "data.cifar10"),
    "language": _COMMON + ("chapters.deq_gaps.language", "models.deq_transformer",
                           "data.shakespeare"),
    "inverse-deq": _COMMON + ("chapters.deq_gaps.inverse", "models.inverse", "data.cifar10"),
    "inverse-elder": _COMMON + ("chapters.deq_gaps.inverse", "models.inverse",
                                "data.cifar10"),
}
JOB_TYPES = {"classification": ClassificationJob, "language": LanguageJob,
             "inverse-deq": InverseJob, "inverse-elder": InverseJob}
#: evaluation-size fields each kind of job takes besides its dataclass
SIZES = {"classification": ("eval_size",), "language": ("eval_windows",),
         "inverse-deq": ("train_size", "eval_size"), "inverse-elder": ("train_size", "eval_size")}


def describe(job, grid: Sequence[int], replicate: int = 0, **sizes: int
             ) -> tuple[str, dict[str, Any]]:
    """The ``(name, params)`` of a job dataclass swept over ``grid`` with evaluation ``sizes``
    at ``replicate``."""
    if isinstance(job, ClassificationJob):
        name = "classification"
    elif isinstance(job, LanguageJob):
        name = "language"
    elif isinstance(job, InverseJob):
        name = f"inverse-{job.variant}"
    else:
        raise TypeError(f"not a job of the DEQ chapter: {type(job).__name__}")
    if set(sizes) != set(SIZES[name]):
        raise ValueError(f"a {name} job takes the sizes {SIZES[name]}; got {sorted(sizes)}")
    return name, {"task": name, **job.as_dict(), "grid": [int(n) for n in grid], **sizes,
                  "replicate": int(replicate)}


def job_of(name: str, params: dict[str, Any]):
    """The job dataclass a ``(name, params)`` pair describes."""
    if name not in JOB_TYPES:
        raise ValueError(f"job name must be one of {', '.join(JOB_TYPES)}; got {name!r}")
    kind = JOB_TYPES[name]
    return kind(**{f.name: params[f.name] for f in fields(kind)})


def is_cached(name: str, params: dict[str, Any]) -> bool:
    return results.lookup(FIGURE, name, params, SOURCES[name]) is not None


def compute(name: str, params: dict[str, Any], progress: bool | None = None) -> dict[str, Any]:
    """The result of one job: read from the cache, or trained, swept and stored."""
    job = job_of(name, params)
    runner = {"classification": _classification, "language": _language}.get(name, _inverse)

    def run() -> dict[str, Any]:
        checkpoints = results.checkpoint_dir(FIGURE, name, params, SOURCES[name])
        return runner(job, params, checkpoints, progress)

    return results.cached(FIGURE, name, params, run, SOURCES[name])


def _history_arrays(history: dict[str, list]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=float) for k, v in history.items()
            if isinstance(v, list) and v and all(isinstance(x, int | float) for x in v)}


def _parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _classification(job: ClassificationJob, params, checkpoints, progress) -> dict[str, Any]:
    """MDEQ on a class-balanced CIFAR-10 subset; sweeps on ``eval_size`` test images and up to
    ``eval_size`` of its own training images."""
    from i2o.chapters.deq_gaps.classification import train_mdeq
    from i2o.data.cifar10 import balanced_subset, load_cifar10, to_tensor
    from i2o.train.evaluate import classification_probes

    grid, eval_size = params["grid"], params["eval_size"]
    train, test = load_cifar10("train"), load_cifar10("test")
    chosen = balanced_subset(train.labels, job.train_size, seed=job.seed)
    images, labels = to_tensor(train.images[chosen]), torch.from_numpy(train.labels[chosen])
    model, history = train_mdeq(job, images, labels, checkpoints, progress)
    replicate = params["replicate"]
    shown = balanced_subset(test.labels, eval_size, seed=replicates.seed(0, replicate))
    test_images, test_labels = to_tensor(test.images[shown]), torch.from_numpy(test.labels[shown])
    on_train = balanced_subset(labels.numpy(), min(eval_size, len(labels)),
                               seed=replicates.seed(1, replicate))
    spec = job.sweep_spec()
    return {
        "test": sweep_iterations(classification_probes(model, test_images, test_labels), grid,
                                 spec),
        "train": sweep_iterations(classification_probes(model, images[on_train],
                                                        labels[on_train]), grid, spec),
        "history": _history_arrays(history),
        "n_parameters": _parameters(model),
    }


def _language(job: LanguageJob, params, checkpoints, progress) -> dict[str, Any]:
    """DEQ transformer on its training text (the first ``train_chars`` characters of the first
    90 % of Tiny Shakespeare); sweeps on ``eval_windows`` windows of the test split and of the
    training text."""
    from i2o.chapters.deq_gaps.language import language_probes, train_language_model
    from i2o.data.shakespeare import load_shakespeare

    grid, windows = params["grid"], params["eval_windows"]
    corpus = load_shakespeare()
    model, history = train_language_model(job, corpus, checkpoints, progress)
    spec, text = job.sweep_spec(), job.training_text(corpus)
    return {
        "test": sweep_iterations(language_probes(model, corpus.test, windows), grid, spec),
        "train": sweep_iterations(language_probes(model, text, windows), grid, spec),
        "history": _history_arrays(history),
        "n_parameters": _parameters(model),
        "n_characters": np.asarray([len(text), len(corpus.test)]),
    }


def _inverse(job: InverseJob, params, checkpoints, progress) -> dict[str, Any]:
    """Reconstruction network trained on patches of ``train_size`` CIFAR-10 training images;
    sweeps on ``eval_size`` whole test images and ``eval_size`` whole training images."""
    from i2o.chapters.deq_gaps.inverse import (
        baseline_neg_psnr,
        inverse_probes,
        noisy_measurements,
        to_unit,
        train_reconstruction,
    )
    from i2o.data.cifar10 import load_cifar10

    grid, train_size, eval_size = params["grid"], params["train_size"], params["eval_size"]
    train, test = load_cifar10("train"), load_cifar10("test")
    images = to_unit(train.images[:train_size])
    model, history = train_reconstruction(job, images, checkpoints, progress)
    spec = job.sweep_spec()
    out: dict[str, Any] = {"history": _history_arrays(history),
                           "n_parameters": _parameters(model)}
    for split, clean in (("test", to_unit(test.images[:eval_size])),
                         ("train", images[:eval_size])):
        y = noisy_measurements(model, clean, job.noise,
                               seed=replicates.seed(NOISE_SEED, params["replicate"]))
        out[split] = sweep_iterations(inverse_probes(model, clean, y), grid, spec)
        out[f"{split}_baseline_neg_psnr"] = baseline_neg_psnr(model, clean, y)
    return out


def epochs_for_steps(steps: int, train_size: int, batch_size: int) -> int:
    """Epochs giving at least ``steps`` optimiser steps on ``train_size`` examples."""
    return max(1, math.ceil(steps / math.ceil(train_size / batch_size)))
