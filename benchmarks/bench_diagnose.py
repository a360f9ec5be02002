"""``i2o.diagnose``: one forward solve per batch reading every iterate, against one solve per N'.

The issue's setting: the TINY MDEQ (``cls_mdeq_TINY``, ≈159K parameters) on 1,000 CIFAR-10 test
images, N' = 1 … 36, Broyden with the book's evaluation rule (lowest-residual iterate), batch 100,
one thread. Reported:

1. the time of the one-sweep diagnosis on all the images (the issue's goal: ≤ 2 min);
2. on the first ``RATIO_IMAGES`` of them, both ways in this process, one after the other, on the
   same model: the ratio (one sweep) / (one solve per N'), checking that both give the same
   per-example accuracies.

The network is freshly initialised, not trained: the cost of a Broyden step does not depend on the
weights' values, and training TINY is a GPU job. Sizes can be reduced for a loaded machine (the
names of the entries say what ran): ``I2O_BENCH_DIAGNOSE_MODEL`` (default ``tiny``),
``I2O_BENCH_DIAGNOSE_IMAGES`` (1000), ``I2O_BENCH_DIAGNOSE_RATIO_IMAGES`` (100, as the
ratio was first measured: one solve per N' on 1,000 images kept ``make bench`` past 23 minutes),
``I2O_BENCH_DIAGNOSE_MAX`` (36), ``I2O_BENCH_DIAGNOSE_BATCH`` (100).
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from i2o.diagnose import BookMDEQ, diagnose

#: The data sets this benchmark reads (checked by ``benchmarks/run.py`` before any runs).
DATA_SETS = ("cifar10",)


def _setting() -> dict[str, object]:
    env = os.environ.get
    images = int(env("I2O_BENCH_DIAGNOSE_IMAGES", "1000"))
    return {"model": env("I2O_BENCH_DIAGNOSE_MODEL", "tiny"), "images": images,
            "ratio_images": min(images, int(env("I2O_BENCH_DIAGNOSE_RATIO_IMAGES", "100"))),
            "top": int(env("I2O_BENCH_DIAGNOSE_MAX", "36")),
            "batch": int(env("I2O_BENCH_DIAGNOSE_BATCH", "100"))}


def _images(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    from i2o.data import balanced_subset, load_cifar10, to_tensor

    data = load_cifar10("test")
    chosen = data.subset(balanced_subset(data.labels, size, 0))
    return to_tensor(chosen.images), torch.from_numpy(chosen.labels)


def _timed(model, images, labels, grid, batch, shared):
    start = time.perf_counter()
    d = diagnose(BookMDEQ(model), (images, labels), train_iters=min(18, max(grid)), grid=grid,
                 metric="accuracy", batch_size=batch, shared=shared, progress=False)
    return time.perf_counter() - start, d.test.values


def run() -> list[dict]:
    from i2o.models import MDEQClassifier, config

    s = _setting()
    torch.manual_seed(0)
    model = MDEQClassifier(config(s["model"]))
    images, labels = _images(s["images"])
    grid = list(range(1, s["top"] + 1))
    label = (f"{str(s['model']).upper() if s['model'] == 'tiny' else s['model']} MDEQ "
             f"(untrained), N' = 1…{s['top']}, batch {s['batch']}, "
             f"{torch.get_num_threads()} thread(s)")
    full, _ = _timed(model, images, labels, grid, s["batch"], True)
    k = s["ratio_images"]
    shared, a = _timed(model, images[:k], labels[:k], grid, s["batch"], True)
    single, b = _timed(model, images[:k], labels[:k], grid, s["batch"], False)
    steps = s["top"] * (s["top"] + 1) // 2
    return [
        {"name": f"diagnosis in one sweep, {s['images']} CIFAR-10 test images, {label}",
         "value": round(full, 2), "unit": "s",
         "goal": "≤ 120 s (TINY, 1,000 images, N' = 1…36)"},
        {"name": f"diagnosis in one sweep, {k} images, {label}", "value": round(shared, 2),
         "unit": "s", "peer": "one solve per N'", "peer_value": round(single, 2),
         "ratio": shared / single,
         "note": f"same per-example accuracies both ways: {bool(np.array_equal(a, b))}; Broyden "
                 f"steps per batch: {s['top']} against {steps}"},
    ]
