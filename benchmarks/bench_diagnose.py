"""``i2o.diagnose``: one forward solve per batch reading every iterate, against one solve per N'.

The issue's setting: the TINY MDEQ (``cls_mdeq_TINY``, ≈159K parameters) on 1,000 CIFAR-10 test
images, N' = 1 … 36, Broyden with the book's evaluation rule (lowest-residual iterate), batch 100,
one thread. Both ways run in this process, one after the other, on the same model and images; the
ratio is (one solve per N') / (one sweep), and the two must give the same per-example accuracies
(checked). The network is freshly initialised, not trained: the cost of a Broyden step does not
depend on the weights' values, and training TINY is a GPU job. Sizes can be reduced for a loaded
machine (the number reported says what ran):

- ``I2O_BENCH_DIAGNOSE_MODEL`` (default ``tiny``), ``I2O_BENCH_DIAGNOSE_IMAGES`` (1000),
  ``I2O_BENCH_DIAGNOSE_MAX`` (36), ``I2O_BENCH_DIAGNOSE_BATCH`` (100).

Goal of the issue: the one-sweep diagnosis of TINY on 1,000 images over N' = 1 … 36 within 2 min.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from i2o.diagnose import BookMDEQ, diagnose


def _setting() -> tuple[str, int, int, int]:
    env = os.environ.get
    return (env("I2O_BENCH_DIAGNOSE_MODEL", "tiny"), int(env("I2O_BENCH_DIAGNOSE_IMAGES", "1000")),
            int(env("I2O_BENCH_DIAGNOSE_MAX", "36")), int(env("I2O_BENCH_DIAGNOSE_BATCH", "100")))


def _images(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    from i2o.data import balanced_subset, load_cifar10, to_tensor

    data = load_cifar10("test")
    chosen = data.subset(balanced_subset(data.labels, size, 0))
    return to_tensor(chosen.images), torch.from_numpy(chosen.labels)


def run() -> list[dict]:
    from i2o.models import MDEQClassifier, config

    name, size, top, batch = _setting()
    torch.manual_seed(0)
    model = MDEQClassifier(config(name))
    images, labels = _images(size)
    grid = list(range(1, top + 1))
    timed = {}
    swept = {}
    for shared in (True, False):
        start = time.perf_counter()
        d = diagnose(BookMDEQ(model), (images, labels), train_iters=min(18, top), grid=grid,
                     metric="accuracy", batch_size=batch, shared=shared, progress=False)
        timed[shared] = time.perf_counter() - start
        swept[shared] = d.test.values
    same = bool(np.array_equal(swept[True], swept[False]))
    setting = (f"{name.upper() if name == 'tiny' else name} MDEQ (untrained), {size} CIFAR-10 "
               f"test images, N' = 1…{top}, batch {batch}, {torch.get_num_threads()} thread(s)")
    return [
        {"name": f"diagnosis, one sweep: {setting}", "value": round(timed[True], 2),
         "unit": "s", "peer": "one solve per N'", "peer_value": round(timed[False], 2),
         "ratio": timed[True] / timed[False], "goal": "≤ 120 s for TINY, 1,000 images, N' ≤ 36",
         "note": f"same per-example accuracies both ways: {same}"},
        {"name": "diagnosis speed-up of one sweep over one solve per N'",
         "value": round(timed[False] / timed[True], 2), "unit": "×",
         "note": f"{setting}; Broyden steps: {top} per batch against {top * (top + 1) // 2}"},
    ]
