"""``i2o.diagnose``: one forward solve per batch reading every iterate, against one solve per N'.

The issue's setting: the TINY MDEQ (``cls_mdeq_TINY``, ≈159K parameters) on CIFAR-10 test images,
N' = 1 … 36, Broyden with the book's evaluation rule (lowest-residual iterate), batch 100, one
thread. Reported:

1. the time of the one-sweep diagnosis of 1,000 images, the issue's goal (≤ 2 min). It is
   measured on ``IMAGES`` (200) class-balanced test images and reported per 1,000 images,
   labelled as an extrapolation: the sweep runs the same 36 Broyden steps on every batch of 100,
   so its cost is linear in the number of batches (the first batch, which also pays the
   process's warm-up, weighs more in 2 batches than in 10: the extrapolation errs on the slow
   side). With
   ``I2O_BENCH_DIAGNOSE_IMAGES=1000`` it is measured, and named as before;
2. on the first ``RATIO_IMAGES`` (25) of them, both ways in this process, one after the other, on
   the same model and the same batch (of 25): the ratio (one sweep) / (one solve per N'), checking
   that both give the same per-example accuracies. Both arms make Broyden steps on the same batch
   (36 against 1 + 2 + … + 36 = 666 per batch), so the ratio does not depend on the number of
   images; one batch of 25 takes the peer about a quarter of its 3.5 minutes on a batch of 100.

The network is freshly initialised, not trained: the cost of a Broyden step does not depend on the
weights' values, and training TINY is a GPU job. Sizes can be changed (the names of the entries say
what ran): ``I2O_BENCH_DIAGNOSE_MODEL`` (default ``tiny``), ``I2O_BENCH_DIAGNOSE_IMAGES`` (200),
``I2O_BENCH_DIAGNOSE_RATIO_IMAGES`` (25), ``I2O_BENCH_DIAGNOSE_MAX`` (36),
``I2O_BENCH_DIAGNOSE_BATCH`` (100; the ratio's batch is at most its images).
"""

from __future__ import annotations

import time

import knobs
import numpy as np
import torch

from i2o.diagnose import BookMDEQ, diagnose

#: The data sets this benchmark reads (checked by ``benchmarks/run.py`` before any runs).
DATA_SETS = ("cifar10",)
#: The issue's goal: the one-sweep diagnosis of this many images within ``GOAL_SECONDS``.
GOAL_IMAGES, GOAL_SECONDS = 1000, 120


def _setting() -> dict[str, object]:
    images = knobs.integer("I2O_BENCH_DIAGNOSE_IMAGES", 200)
    return {"model": knobs.text("I2O_BENCH_DIAGNOSE_MODEL", "tiny"), "images": images,
            "ratio_images": min(images, knobs.integer("I2O_BENCH_DIAGNOSE_RATIO_IMAGES", 25)),
            "top": knobs.integer("I2O_BENCH_DIAGNOSE_MAX", 36),
            "batch": knobs.integer("I2O_BENCH_DIAGNOSE_BATCH", 100)}


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


def _goal_entry(seconds: float, images: int, label: str) -> dict:
    """The one-sweep time of ``GOAL_IMAGES`` images: measured when ``images`` is that many, else
    extrapolated linearly from ``images`` and named so."""
    goal = f"≤ {GOAL_SECONDS} s (TINY, 1,000 images, N' = 1…36)"
    if images == GOAL_IMAGES:
        return {"name": f"diagnosis in one sweep, {images} CIFAR-10 test images, {label}",
                "value": round(seconds, 2), "unit": "s", "goal": goal}
    return {"name": f"diagnosis in one sweep, per {GOAL_IMAGES} CIFAR-10 test images "
                    f"(extrapolated from {images}), {label}",
            "value": round(seconds * GOAL_IMAGES / images, 2), "unit": "s", "goal": goal,
            "note": f"measured: {seconds:.2f} s on {images} images, scaled by "
                    f"{GOAL_IMAGES}/{images} (the cost is linear in the batches)"}


def run() -> list[dict]:
    from i2o.models import MDEQClassifier, config

    s = _setting()
    torch.manual_seed(0)
    model = MDEQClassifier(config(s["model"]))
    images, labels = _images(s["images"])
    grid = list(range(1, s["top"] + 1))
    name = str(s["model"]).upper() if s["model"] == "tiny" else s["model"]

    def label(batch: int) -> str:
        return (f"{name} MDEQ (untrained), N' = 1…{s['top']}, batch {batch}, "
                f"{torch.get_num_threads()} thread(s)")

    full, _ = _timed(model, images, labels, grid, s["batch"], True)
    k = s["ratio_images"]
    batch = min(s["batch"], k)
    shared, a = _timed(model, images[:k], labels[:k], grid, batch, True)
    single, b = _timed(model, images[:k], labels[:k], grid, batch, False)
    steps = s["top"] * (s["top"] + 1) // 2
    return [
        _goal_entry(full, s["images"], label(s["batch"])),
        {"name": f"diagnosis in one sweep, {k} images, {label(batch)}", "value": round(shared, 2),
         "unit": "s", "peer": "one solve per N'", "peer_value": round(single, 2),
         "ratio": shared / single,
         "note": f"same per-example accuracies both ways: {bool(np.array_equal(a, b))}; Broyden "
                 f"steps per batch: {s['top']} against {steps}"},
    ]
